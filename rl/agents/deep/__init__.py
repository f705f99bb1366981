"""The PyTorch baselines: DQN and discrete SAC, their stacked networks and compiled steps."""
