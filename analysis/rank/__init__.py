"""Rank diagnostics: the rank profile (B_R versus rank) of a Q-tensor and its plot.

`analysis.rank.profile` holds the functions; ``python -m analysis.rank`` runs
`analysis.rank.cli`.
"""

from analysis.rank.profile import (
    COLUMNS,
    LINESEARCH,
    N_ITER_MAX,
    POLISH_BELOW,
    POLISH_ITER,
    TOL,
    RankProfile,
    plot_rank_profile,
    rank_profile,
)

__all__ = [
    "COLUMNS",
    "LINESEARCH",
    "N_ITER_MAX",
    "POLISH_BELOW",
    "POLISH_ITER",
    "RankProfile",
    "TOL",
    "plot_rank_profile",
    "rank_profile",
]
