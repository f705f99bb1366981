"""The table agents: tabular Q-learning and LoRa-VI with its CUR completion."""
