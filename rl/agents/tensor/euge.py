"""Error-Uncertainty Guided Exploration (EUGE), eq. (euge) and Algorithm 2.

EU_t(s, a) = Q_{t-1}(s, a) + c (Delta Q_{t-1}(s, a) + u sqrt(log N_total(s) / (N(s, a) + 1)))

with u = 1 as printed (u, the reward unit of the count bonus, is ``bonus_unit`` of
`rl.agents.tensor.teql.TEQLConfig`: the stable reading sets it to the reward bound R_max off
the paper's problems, so that the bonus is in Q's units).

and the action is argmax_a EU_t(s, a), ties broken at random (`rl.agents.tensor.step`).
Everything here is vectorized over B replicas, on any array backend.
"""

from __future__ import annotations

import math
from typing import Any

from rl.agents.tensor._array_backend import ArrayNamespace, array_namespace

Array = Any


def euge_scores(
    action_values: Array,
    delta: Array,
    counts: Array,
    c: float,
    bonus_unit: float = 1.0,
    space: ArrayNamespace | None = None,
) -> Array:
    """EUGE score of every action, eq. (euge).

    Parameters
    ----------
    action_values : array, shape (B, |A|)
        Q_{t-1}(s, a) of the current state for every action.
    delta : array, shape (B, |A|)
        Delta Q_{t-1}(s, a), the last decomposition error of eq. (decomp_error).
    counts : array, shape (B, |A|)
        N_{t-1}(s, a); N_total(s) is their sum over actions.
    c : float
        Exploration coefficient.
    bonus_unit : float
        u, the reward unit of the count bonus (1: eq. (euge) as printed).
    space : ArrayNamespace, optional
        The arrays' backend (default NumPy).

    Returns
    -------
    array, shape (B, |A|)
        EU_t(s, a). The log term is taken as 0 while N_total(s) = 0 (log of an
        empty count is undefined; the authors' code takes N_total as 1 there,
        which gives the same 0).

    References
    ----------
    Eq. (euge) and Algorithm 2 (EUGE) of the TEQL paper.
    """
    space = array_namespace("numpy") if space is None else space
    totals = counts.sum(axis=-1)[:, None]
    log_total = space.xp.log(space.ops.clip(totals, 1.0, math.inf))
    bonus = delta + bonus_unit * space.ops.sqrt(log_total / (counts + 1.0))
    return action_values + c * bonus
