"""The CP-tensor agents: TEQL and TLR, their engines, visit tables and EUGE."""
