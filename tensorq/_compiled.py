"""Compiled (Numba) twins of the row updates of `tensorq.update`, one small function each.

Each rule moves the N gathered factor rows ``rows`` (N x R) of one CP entry
in place and returns the row steps taken; `apply_rule` dispatches on
``settings.rule``. `paper_rule` is Algorithm 1 (eq. (gradient), modes in
sequence, inner loop with tolerance tau; `tensorq.update.bcd_update`);
`released_rule` the authors' normalized Jacobi sweeps (``variant="released"``);
`normalized_rule` one normalized Jacobi step (`tensorq.normalized_step`, Rozada
et al.); `stable_rule` Algorithm 1 with normalized-LMS row steps
(``variant="stable"``). A further rule is one more function with the signature
of `normalized_rule` plus one branch in `apply_rule`. The arithmetic is the
reference's (`tensorq.update`), term by term; no fastmath.

Importing this module imports Numba; ``import tensorq`` does not import it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

# Values of `RuleSettings.rule`.
PAPER = 0  # Algorithm 1
RELEASED = 1  # the authors' normalized Jacobi sweeps
NORMALIZED = 2  # one normalized Jacobi step (Rozada et al.)
STABLE = 3  # Algorithm 1 with normalized-LMS row steps
RULES = {"paper": PAPER, "released": RELEASED, "normalized": NORMALIZED, "stable": STABLE}
"""The rule number of each update name (the ``variant`` names of `tensorq.update`)."""


class RuleSettings(NamedTuple):
    """The constants of one update rule (`apply_rule`).

    Attributes
    ----------
    rule : int
        `PAPER`, `RELEASED`, `NORMALIZED` or `STABLE`.
    tol : float
        Inner-loop threshold tau (0: run all ``max_inner`` iterations).
    max_inner : int
        I_max, the cap on inner iterations (or sweeps).
    f_max : float
        The factor bound F_max of Assumption 2 (read only when ``bounded``).
    bounded : bool
        Clip every factor entry to [-f_max, f_max].
    mode_scale : ndarray of float64, shape (N,)
        rho_n, the share of the step that mode n's row step takes (`stable_rule`
        only; ones: the plain stable rule).
    """

    rule: int
    tol: float
    max_inner: int
    f_max: float
    bounded: bool
    mode_scale: np.ndarray


class RuleKind(NamedTuple):
    """The parts of `RuleSettings` that hold for a whole batch (`rule_settings` adds the numbers).

    Attributes
    ----------
    rule : int
        `PAPER`, `RELEASED`, `NORMALIZED` or `STABLE`.
    bounded : bool
        Clip every factor entry to [-f_max, f_max].
    mode_scale : ndarray of float64, shape (N,)
        As in `RuleSettings`.
    """

    rule: int
    bounded: bool
    mode_scale: np.ndarray


@njit(cache=True)
def rule_settings(kind, tol, max_inner, f_max):
    """Return the `RuleSettings` of ``kind`` (a `RuleKind`) with one entry's numbers."""
    return RuleSettings(kind.rule, tol, max_inner, f_max, kind.bounded, kind.mode_scale)


# ---------------------------------------------------------------- update rules


@njit(cache=True)
def cp_entry(rows):
    """sum_r prod_n rows[n, r], the entry of the gathered rows."""
    total = 0.0
    for r in range(rows.shape[1]):
        term = rows[0, r]
        for n in range(1, rows.shape[0]):
            term = term * rows[n, r]
        total += term
    return total


@njit(cache=True)
def _suffix_products(rows, suffix):
    """suffix[n] = rows[n+1] * (rows[n+2] * (...)), ones for the last mode."""
    last = rows.shape[0] - 1
    suffix[last, :] = 1.0
    for n in range(last - 1, -1, -1):
        for r in range(rows.shape[1]):
            suffix[n, r] = rows[n + 1, r] if n + 1 == last else rows[n + 1, r] * suffix[n + 1, r]


@njit(cache=True)
def _clip(value, f_max, bounded):
    if not bounded:
        return value
    if value > f_max:
        return f_max
    if value < -f_max:
        return -f_max
    return value


@njit(cache=True)
def _gauss_seidel(rows, before, target, weight, step, settings, scratch, normalized):
    """Algorithm 1's loop over modes: `paper_rule`, or `stable_rule` when ``normalized``."""
    n_modes, rank = rows.shape
    tol, max_inner = settings.tol, settings.max_inner
    f_max, bounded = settings.f_max, settings.bounded
    suffix, prefix, direction = scratch[:n_modes], scratch[-2], scratch[-1]
    _suffix_products(rows, suffix)
    prefix[:] = 1.0
    slope = step * (1.0 - 2.0 * weight)
    offset = step * target
    entry = before
    steps = 0
    for n in range(n_modes):
        for r in range(rank):
            direction[r] = prefix[r] * suffix[n, r]
        inverse = 1.0
        if normalized:  # 1 / ||g_n||^2, and no step where g_n = 0
            squares = 0.0
            for r in range(rank):
                squares += direction[r] * direction[r]
            inverse = 1.0 / squares if squares > 0 else 0.0
        entry_prev = before
        for i in range(max_inner):
            coefficient = slope * entry - offset
            if normalized:
                coefficient = coefficient * inverse
                coefficient = coefficient * settings.mode_scale[n]
            entry = 0.0
            for r in range(rank):
                value = _clip(rows[n, r] - coefficient * direction[r], f_max, bounded)
                rows[n, r] = value
                entry += value * direction[r]
            steps += 1
            if i + 1 == max_inner or tol == 0.0:
                continue
            if not abs(entry - entry_prev) >= tol:
                break
            entry_prev = entry
        for r in range(rank):
            prefix[r] = prefix[r] * rows[n, r]
    return steps


@njit(cache=True)
def paper_rule(rows, before, target, weight, step, settings, scratch):
    """Algorithm 1 on the gathered rows (N, R), in place: Gauss-Seidel modes, inner loop.

    Mode n steps row_n -= alpha (slope Q - target) g_n with the gradient of
    eq. (gradient), g_n = prod_{m<n} new rows * prod_{m>n} old rows, up to
    ``max_inner`` times, stopping once Q moves less than ``tol`` (the first
    comparison against the entry before the update, as Algorithm 1 is written).
    Returns the row steps taken.
    """
    return _gauss_seidel(rows, before, target, weight, step, settings, scratch, False)


@njit(cache=True)
def _normalized_jacobi(rows, scale, sign, f_max, bounded, scratch):
    """rows[n] += sign * scale * g_n / ||g_n|| for all n from the same old rows (in place)."""
    n_modes, rank = rows.shape
    suffix, moved = scratch[:n_modes], scratch[n_modes : 2 * n_modes]
    prefix, direction = scratch[-2], scratch[-1]
    _suffix_products(rows, suffix)
    prefix[:] = 1.0
    for n in range(n_modes):
        squares = 0.0
        for r in range(rank):
            direction[r] = prefix[r] * suffix[n, r]
            squares += direction[r] * direction[r]
        norm = np.sqrt(squares)
        if not norm > 0:  # g = 0 gives a zero step
            norm = 1.0
        for r in range(rank):
            moved[n, r] = _clip(rows[n, r] + sign * (scale / norm) * direction[r], f_max, bounded)
            prefix[r] = prefix[r] * rows[n, r]
    rows[:, :] = moved


@njit(cache=True)
def released_rule(rows, before, target, weight, step, settings, scratch):
    """Run the authors' update on the gathered rows, in place: normalized Jacobi sweeps.

    Each sweep moves every row from the pre-sweep rows by
    -alpha (-(target - Q) - w) g_n / ||g_n||, w = lambda / (N + epsilon);
    up to ``max_inner`` sweeps, stopping once Q moves less than ``tol``.
    Returns the row steps taken (N per sweep).
    """
    offset = step * (target + weight)
    tol, max_inner = settings.tol, settings.max_inner
    entry = before
    steps = 0
    for i in range(max_inner):
        scale = step * entry - offset
        _normalized_jacobi(rows, scale, -1.0, settings.f_max, settings.bounded, scratch)
        stepped = cp_entry(rows)
        moved = stepped - entry
        entry = stepped
        steps += rows.shape[0]
        if i + 1 == max_inner or tol == 0.0:
            continue
        if not abs(moved) >= tol:
            break
    return steps


@njit(cache=True)
def normalized_rule(rows, before, target, weight, step, settings, scratch):
    """One normalized step on the gathered rows, in place: rows += alpha (target - Q) g / ||g||.

    Every row moves from the same old rows (Jacobi), as `tensorq.normalized_step`.
    """
    scale = step * (target - before)
    _normalized_jacobi(rows, scale, 1.0, settings.f_max, settings.bounded, scratch)
    return rows.shape[0]


@njit(cache=True)
def stable_rule(rows, before, target, weight, step, settings, scratch):
    """Algorithm 1 with normalized-LMS row steps on the gathered rows (N, R), in place.

    Mode n (in order, Gauss-Seidel) steps
    row_n <- clip(row_n - rho_n eta ((1 - 2 w) Q - target) g_n / ||g_n||^2) up to
    ``max_inner`` times, stopping once Q moves less than ``tol``; rows with
    ||g_n|| = 0 do not move (`tensorq.update.stable_sweep`). Returns the row
    steps taken.
    """
    return _gauss_seidel(rows, before, target, weight, step, settings, scratch, True)


@njit(cache=True)
def apply_rule(settings, rows, before, target, weight, step, scratch):
    """Run the rule ``settings.rule`` (a `RuleSettings`); returns the row steps taken."""
    rule = settings.rule
    if rule == PAPER:
        return paper_rule(rows, before, target, weight, step, settings, scratch)
    if rule == RELEASED:
        return released_rule(rows, before, target, weight, step, settings, scratch)
    if rule == STABLE:
        return stable_rule(rows, before, target, weight, step, settings, scratch)
    return normalized_rule(rows, before, target, weight, step, settings, scratch)
