"""The layout of the sparse visit table's hash arrays.

Shared by `rl.agents.visits` and its compiled twin `rl.agents._visits_compiled`.
"""

EMPTY = -1
"""Marks an empty slot of the hash arrays."""
