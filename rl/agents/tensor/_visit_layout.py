"""The layout of the sparse visit table's hash arrays.

Shared by `rl.agents.tensor.visits` and its compiled twin `rl.agents.tensor._visits_compiled`.
"""

EMPTY = -1
"""Marks an empty slot of the hash arrays."""
