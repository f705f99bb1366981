"""Compiled (Numba) twin of EUGE's scores (`rl.agents.tensor.step.euge_scores`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from rl.agents.tensor import _visit_layout, _visits_compiled, visits
from rl.agents.tensor._visits_compiled import visit_row
from rl.jit import drop_stale

drop_stale(__file__, [_visits_compiled.__file__, _visit_layout.__file__, visits.__file__])


@njit(cache=True)
def euge_scores(values, table, key, c, unit, out):
    """EU(s, a) = Q(s, a) + c (Delta Q(s, a) + u sqrt(log N_total(s) / (N(s, a) + 1))), eq. (euge).

    ``unit`` is u, the reward unit of the count bonus (`rl.agents.tensor.step.euge_scores`).
    """
    row = visit_row(table, key, False)
    if row < 0:  # unvisited: no counts, no errors, no log term
        for a in range(values.shape[0]):
            out[a] = values[a] + c * 0.0
        return
    counts, delta = table.counts, table.delta
    total = 0
    for a in range(values.shape[0]):
        total += counts[row, a]
    log_total = np.log(max(total, 1))
    for a in range(values.shape[0]):
        out[a] = values[a] + c * (delta[row, a] + unit * np.sqrt(log_total / (counts[row, a] + 1)))


@njit(cache=True)
def euge_bonus_share(value, score):
    """|EU - Q| / (|Q| + |EU - Q|): the share of a score ``score`` that is EUGE's bonus, eq. (euge).

    The bonus c (Delta Q + u sqrt(log N_total / (N + 1))) is the score less the
    action value ``value``; the share is 0 where both are 0. The NumPy twin is
    `rl.agents.tensor.step.bonus_share`.
    """
    bonus = abs(score - value)
    total = abs(value) + bonus
    return bonus / total if total > 0 else 0.0
