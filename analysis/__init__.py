"""Offline diagnostics for Q-tensors and calculators for the TEQL paper's theory.

Spectral-energy rank diagnostics, the approximation error B_R versus rank,
the bounds of Theorem 1 and Propositions 2-3, and parameter matching across
agent architectures.
"""
