"""The training step of the tensor agents (TEQL, TLR), written once over an array namespace.

One step of every replica (Algorithm 3, lines 9-11), as array operations on
`tensorq._backend.ArrayNamespace` (NumPy, PyTorch or JAX),
batched over the B replicas:

- acting (`act`): the action values Q_{t-1}(s_t, .), the scores (`scores`:
  Q itself, or EUGE's EU_t(s, a) = Q_{t-1}(s, a) + c (Delta Q_{t-1}(s, a) +
  u sqrt(log N_total(s) / (N(s, a) + 1))) of eq. (euge), `euge_scores`, with
  u = 1 as printed: ``bonus_unit`` of `rl.agents.tensor.teql.TEQLConfig`), an
  epsilon-greedy layer (its random actions on the grid or continuous), the
  argmax with ties broken at random (Algorithm 2);
- learning (`td_targets`, `learn`): the TD target r + gamma max_a' Q_{t-1}(s', a')
  (Algorithm 1, line 3), alpha_t = alpha_0 / (1 + kappa t)
  (`tensorq.schedule.step_size`), Algorithm 1's update (`tensorq.functional.pure_update`)
  in the order of Algorithm 3 (count before or after the update, Delta Q of
  eq. (decomp_error)), the step counters and epsilon's decay.

The step's numbers (gamma, alpha_0, c, ...) come from a
`rl.agents.tensor.state.ReplicaRule` whose fields are each a Python float
(every replica has the same value) or an array (B,) on the arrays' device:
replica b computes what a lone agent with its values computes, term by term.

The random draws come from a `rl.agents.tensor._array_backend.Draws`: on NumPy with
each replica's own generator (`GeneratorDraws`) this code *is* the reference
engine; with buffered doubles on any backend it is the array engine
(`rl.agents.tensor._array_engine`). The compiled engine's Numba kernels
(`rl.agents.tensor._step_compiled`, `tensorq._compiled`) are the one twin of
this module, pinned to it by ``tests/rl/test_compiled_engine.py``. Every function
here is pure (arrays in, arrays out; NumPy and PyTorch arrays are written in
place), so that JAX compiles a whole act or learn once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rl.agents.tensor import _visits_array as visits_ops
from rl.agents.tensor._array_backend import Draws
from rl.agents.tensor._visits_array import VisitState
from rl.agents.tensor.state import ReplicaRule, StepRule
from tensorq._backend import ArrayNamespace, array_namespace
from tensorq.functional import pure_subtensor, pure_update
from tensorq.schedule import step_size

Array = Any


def ravel(index: Array, dims: Sequence[int]) -> Array:
    """Return the flat (C-order) indices of the rows of ``index`` (B, len(dims)).

    As ``numpy.ravel_multi_index``, on any backend.
    """
    flat = index[:, 0]
    for k, size in enumerate(dims[1:], start=1):
        flat = flat * size + index[:, k]
    return flat


def unravel(space: ArrayNamespace, flat: Array, dims: Sequence[int]) -> Array:
    """Return the index vectors (B, len(dims)) of the flat indices ``flat`` (``unravel_index``)."""
    columns = []
    for size in reversed(dims):
        columns.append(flat % size)
        flat = flat // size
    return space.ops.stack(columns[::-1], axis=1)


def column(value: float | Array) -> float | Array:
    """Return a per-replica value (B,) as a column (B, 1), which broadcasts over a row."""
    return value if isinstance(value, float) else value[:, None]


def action_values(
    factors: Sequence[Array], ids: Array, states: Array, action_dims: Sequence[int]
) -> Array:
    """Q(s, a) for every joint action, (B, |A|): one (|A| x R) product per replica."""
    values = pure_subtensor(tuple(factors), ids, states, tuple(action_dims))
    return values.reshape(values.shape[0], math.prod(action_dims))


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
    c : float or array of shape (B, 1)
        Exploration coefficient.
    bonus_unit : float or array of shape (B, 1)
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


def bonus_share(action_values: Array, scores: Array, space: ArrayNamespace | None = None) -> Array:
    """|EU - Q| / (|Q| + |EU - Q|): the share of each score that is EUGE's bonus, eq. (euge).

    Parameters
    ----------
    action_values : array
        Q_{t-1}(s, a) of the chosen actions.
    scores : array, same shape
        Their EUGE scores EU_t(s, a) (`euge_scores`).
    space : ArrayNamespace, optional
        The arrays' backend (default NumPy).

    Returns
    -------
    array, same shape
        The bonus c (Delta Q + u sqrt(log N_total / (N + 1))), the score less
        the action value, as a share of the two magnitudes; 0 where both are 0.
        The compiled twin is `rl.agents.tensor._euge_compiled.euge_bonus_share`.

    References
    ----------
    Eq. (euge) of the TEQL paper.
    """
    space = array_namespace("numpy") if space is None else space
    bonus = space.xp.abs(scores - action_values)
    total = space.xp.abs(action_values) + bonus
    return bonus / (total + space.astype(total == 0, space.ops.float64))


def scores(
    space: ArrayNamespace,
    rule: StepRule,
    numbers: ReplicaRule,
    table: VisitState | None,
    ids: Array,
    values: Array,
    flat_states: Array,
) -> Array:
    """Return the scores the action maximizes: EU_t(s, a) of eq. (euge), or Q (epsilon-greedy)."""
    if rule.exploration == "epsilon":
        return values
    rows = visits_ops.visit_rows(space, table, ids, flat_states)
    counts, delta = visits_ops.state_rows(space, table, rows)
    counts = space.astype(counts, space.ops.float64)
    c, unit = column(numbers.c), column(numbers.bonus_unit)
    return euge_scores(values, delta, counts, c, unit, space)


def act(
    space: ArrayNamespace,
    rule: StepRule,
    draws: Draws,
    values: Array,
    scores: Array,
    epsilon: Array,
    exploring: Array,
    greedy: Array,
    action_dims: Sequence[int],
) -> tuple[Array, Array, tuple[Array, ...]]:
    """Algorithm 2 (EUGE) or epsilon-greedy where ``exploring``, argmax Q where ``greedy``.

    An exploring replica of the epsilon layer draws one double; below its
    epsilon it takes a random action (`random_actions`), else the maximizer
    of ``scores``, drawing once more only when several tie.

    Returns
    -------
    flat : int64 array, shape (B,)
        The flat joint actions.
    explored : bool array, shape (B,)
        The replicas that took a random action.
    drawn : tuple of float64 arrays, shape (B,) each
        The continuous random actions, one per action component (empty without them).
    """
    ops, xp, int64 = space.ops, space.xp, space.ops.int64
    first = xp.argmax(values, axis=-1)
    explored = exploring & False
    random_flat, drawn = first, ()
    if rule.exploration != "euge":
        explored = exploring & (draws.uniform(exploring) < epsilon)
        random_flat, drawn = random_actions(space, rule, draws, explored, action_dims)
    best = xp.amax(scores, axis=-1)
    is_best = scores == best[:, None]
    ties = is_best.sum(axis=-1)
    tied = exploring & ~explored & (ties > 1)
    pick = draws.integers(tied, ties)
    rank = xp.cumsum(space.astype(is_best, int64), axis=-1) - 1
    tie_choice = xp.argmax(space.astype(is_best & (rank == pick[:, None]), int64), axis=-1)
    choice = ops.where(tied, tie_choice, xp.argmax(scores, axis=-1))
    return ops.where(greedy, first, ops.where(explored, random_flat, choice)), explored, drawn


def random_actions(
    space: ArrayNamespace, rule: StepRule, draws: Draws, explored: Array, action_dims: Sequence[int]
) -> tuple[Array, tuple[Array, ...]]:
    """Return the random joint actions of the ``explored`` replicas, and their draws.

    A uniform grid index, or with ``rule.action_interval`` one continuous draw
    ``a = low + (high - low) u`` per component, credited to the grid index
    ``rint((a - low) / (high - low) (d_k - 1))`` (endpoint rounding, as the
    released code; docs/authors-code.md, "Exploratory actions").
    """
    if rule.action_interval is None:
        return draws.integers(explored, math.prod(action_dims)), ()
    low, high = rule.action_interval
    flat, drawn = None, []
    for k, size in enumerate(action_dims):  # components, not actions
        value = low[k] + (high[k] - low[k]) * draws.uniform(explored)
        index = space.xp.round((value - low[k]) / (high[k] - low[k]) * (size - 1))
        index = space.astype(space.ops.clip(index, 0.0, size - 1.0), space.ops.int64)
        flat = index if flat is None else flat * size + index
        drawn.append(value)
    return flat, tuple(drawn)


def td_targets(
    space: ArrayNamespace,
    numbers: ReplicaRule,
    factors: Sequence[Array],
    ids: Array,
    rewards: Array,
    next_states: Array,
    terminated: Array,
    action_dims: Sequence[int],
) -> Array:
    """TD targets r + gamma max_a' Q(s', a'), the reward alone at termination.

    References
    ----------
    Algorithm 1, line 3 (the target uses the factors before the update).
    """
    bootstrap = space.xp.amax(action_values(factors, ids, next_states, action_dims), axis=-1)
    return rewards + numbers.gamma * space.ops.where(terminated, 0.0, bootstrap)


def learn(
    space: ArrayNamespace,
    rule: StepRule,
    numbers: ReplicaRule,
    setting: tuple[Any, ...],
    factors: Sequence[Array],
    ids: Array,
    table: VisitState | None,
    steps: Array,
    epsilon: Array,
    index: Array,
    terminated: Array,
    active: Array,
    targets: Array,
    dims: tuple[Sequence[int], Sequence[int]],
) -> tuple[Any, ...]:
    """One update per active replica, in the order of Algorithm 3; the others do not change.

    TEQL (a `tensorq.bcd_update` variant): N(s, a) is read (incremented first
    under ``count_before_update``), alpha_t = alpha_0 / (1 + kappa t) with t
    the agent's steps or N(s, a), Algorithm 1 updates the rows of (s, a),
    Delta Q(s, a) = |after - before| (``signed_delta``: before - after) and
    then N(s, a) += 1. TLR (``update="normalized"``): one normalized step with
    the constant step size alpha_0, no visit table. Then t += 1, and epsilon
    decays after a non-terminal step.

    Parameters
    ----------
    numbers : ReplicaRule
        The step's numbers (floats, or arrays (B,) where replicas differ).
    setting : tuple
        `tensorq.functional.update_setting` of ``rule`` and ``numbers``.
    index : int64 array, shape (B, N)
        The updated entries (s_t, a_t).
    dims : tuple of two sequences of int
        The state and action mode sizes.

    Returns
    -------
    factors, table, steps, epsilon, (targets, before, after, counts, step size)

    References
    ----------
    Algorithm 1; Algorithm 3, lines 9-11; eqs. (loss_function) and (decomp_error).
    """
    ops, int64, float64 = space.ops, space.ops.int64, space.ops.float64
    if rule.update == "normalized":
        step = targets * 0.0 + numbers.alpha0
        counts = targets * 0.0
        vectors: tuple[Array, ...] = (targets, step)
    else:
        state_dims, action_dims = dims
        states = ravel(index[:, : len(state_dims)], state_dims)
        actions = ravel(index[:, len(state_dims) :], action_dims)
        rows = visits_ops.visit_rows(space, table, ids, states)
        table, rows = visits_ops.insert(
            space, table, ids, states, rows, active, math.prod(state_dims)
        )
        if rule.count_before_update:
            table = visits_ops.increment(space, table, rows, actions, active)
        counts = space.astype(table.counts[ops.where(rows >= 0, rows, 0), actions], float64)
        clock = counts if rule.step_count == "entry" else space.astype(steps + 1, float64)
        step = step_size(numbers.alpha0, numbers.kappa, clock)
        vectors = (targets, counts, step)
    factors, before, after, _ = pure_update(
        ops, setting, tuple(factors), ids, index, active, vectors
    )
    if rule.update != "normalized":
        change = before - after
        delta = change if rule.signed_delta else ops.abs(change)
        table = visits_ops.set_delta(space, table, rows, actions, delta, active)
        if not rule.count_before_update:
            table = visits_ops.increment(space, table, rows, actions, active)
    steps = steps + space.astype(active, int64)
    decayed = epsilon * numbers.epsilon_decay  # then its floor (a float or per replica)
    decayed = ops.where(decayed < numbers.epsilon_min, numbers.epsilon_min, decayed)
    epsilon = ops.where(active & ~terminated, decayed, epsilon)
    return tuple(factors), table, steps, epsilon, (targets, before, after, counts, step)
