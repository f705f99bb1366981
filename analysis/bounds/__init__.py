"""The paper's bounds (Theorem 1, Propositions 2 and 3) and their checks on runs.

`analysis.bounds.theory` holds the functions; ``python -m analysis.bounds`` runs
`analysis.bounds.cli`.
"""

from analysis.bounds.theory import (
    prop2_bound,
    prop3_bound,
    theorem1_bound,
    theorem1_limit,
    v_max,
)

__all__ = [
    "prop2_bound",
    "prop3_bound",
    "theorem1_bound",
    "theorem1_limit",
    "v_max",
]
