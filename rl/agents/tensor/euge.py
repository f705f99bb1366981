"""Error-Uncertainty Guided Exploration (EUGE), eq. (euge) and Algorithm 2.

EU_t(s, a) = Q_{t-1}(s, a) + c (Delta Q_{t-1}(s, a) + u sqrt(log N_total(s) / (N(s, a) + 1)))

with u = 1 as printed (u, the reward unit of the count bonus, is ``bonus_unit`` of
`rl.agents.tensor.teql.TEQLConfig`: the stable reading sets it to the reward bound R_max off
the paper's problems, so that the bonus is in Q's units).

and the action is argmax_a EU_t(s, a), ties broken at random by
`rl.agents._explore.argmax_random_ties`. Everything here is vectorized over B
replicas.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def euge_scores(
    action_values: NDArray[np.float64],
    delta: NDArray[np.float64],
    counts: NDArray[np.int64],
    c: float,
    bonus_unit: float = 1.0,
) -> NDArray[np.float64]:
    """EUGE score of every action, eq. (euge).

    Parameters
    ----------
    action_values : ndarray, shape (B, |A|)
        Q_{t-1}(s, a) of the current state for every action.
    delta : ndarray, shape (B, |A|)
        Delta Q_{t-1}(s, a), the last decomposition error of eq. (decomp_error).
    counts : ndarray of int, shape (B, |A|)
        N_{t-1}(s, a); N_total(s) is their sum over actions.
    c : float
        Exploration coefficient.
    bonus_unit : float
        u, the reward unit of the count bonus (1: eq. (euge) as printed).

    Returns
    -------
    ndarray, shape (B, |A|)
        EU_t(s, a). The log term is taken as 0 while N_total(s) = 0 (log of an
        empty count is undefined; the authors' code takes N_total as 1 there,
        which gives the same 0).

    References
    ----------
    Eq. (euge) and Algorithm 2 (EUGE) of the TEQL paper.
    """
    totals = counts.sum(axis=-1, keepdims=True)
    log_total = np.log(np.maximum(totals, 1))
    bonus = delta + bonus_unit * np.sqrt(log_total / (counts + 1))
    return action_values + c * bonus


def bonus_share(
    action_values: NDArray[np.float64], scores: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Share of each EUGE score that is the exploration bonus, |EU - Q| / (|Q| + |EU - Q|).

    Parameters
    ----------
    action_values, scores : ndarray, same shape
        Q_{t-1}(s, a) and EU_t(s, a) of the chosen actions (`euge_scores`).

    Returns
    -------
    ndarray of float64, same shape
        In [0, 1]; 0 where Q and the bonus are both 0.

    References
    ----------
    Eq. (euge) of the TEQL paper: the bonus is c (Delta Q + u sqrt(log N_total / (N + 1))).
    """
    bonus = np.abs(np.asarray(scores, dtype=np.float64) - action_values)
    total = np.abs(action_values) + bonus
    return np.divide(bonus, total, out=np.zeros_like(total), where=total > 0)


class BonusShareMean:
    """Each replica's running mean of `bonus_share` over its EUGE actions, read and reset.

    Parameters
    ----------
    replicas : int
        B.

    Attributes
    ----------
    sums : ndarray of float64, shape (2, B)
        Row 0: the sum of the shares added since the last `pop`; row 1: their
        number (the compiled step adds to both in place).
    """

    def __init__(self, replicas: int) -> None:
        self.sums = np.zeros((2, replicas))

    def add(self, shares: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        """Add ``shares`` (B,) of the replicas in ``mask`` (B,)."""
        self.sums[0, mask] += shares[mask]
        self.sums[1, mask] += 1.0

    def pop(self) -> NDArray[np.float64]:
        """Return the mean share of every replica (NaN where none was added) and start anew."""
        total, acts = self.sums
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(acts > 0, total / acts, np.nan)
        self.sums[:] = 0.0
        return mean
