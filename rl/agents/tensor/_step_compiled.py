"""Compiled (Numba) step of the tensor agents: action choice and update, all replicas at once.

Every kernel loops over the B replicas inside, so B = 1 and B = 100 run the
same code, and replica b touches only its own factors, visit rows and random
generator (a replica's numbers never depend on the others). Two kernels
compose the smaller ones:

- `act`: the action values of the current state over the action fibre (the
  product of the state modes' rows, then one (|A| x R) product), then EUGE
  (eq. (euge)), EUGE under an epsilon-greedy layer, or epsilon-greedy on Q
  (`rl.agents._explore_compiled`); replicas in the ``greedy`` mask take the
  first maximizer of Q and draw nothing.
- `observe`: the TD target, the visit count, one update rule on the gathered
  rows (`tensorq._compiled`: Algorithm 1, the authors' normalized Jacobi
  sweeps, the normalized step of TLR, the stable reading's normalized-LMS
  steps), Delta Q (eq. (decomp_error)) and the counts
  (`rl.agents.tensor._visits_compiled`), the step counter and epsilon.

Their arguments are named tuples: `AgentArrays` (the agent's arrays),
`Settings` (its constants), `tensorq._compiled.RuleSettings`,
`rl.agents.tensor.visits.VisitArrays`, `rl.agents.base.Transitions` and
`Scratch`, the working arrays of one call, allocated once per engine
(`new_scratch`) so that a lockstep step allocates nothing (at B = 1 eight
small allocations were a tenth of a step's instructions). Python calls them through
`act_entry` and `observe_entry`, which take the same tuples as plain tuples
(`as_plain`; Numba types those three times faster). No fastmath: the
arithmetic is the reference's, term by term.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numpy.typing import NDArray

import rl.agents.borrowed
import tensorq._compiled
from rl.agents import _explore_compiled, base
from rl.agents._explore_compiled import (
    argmax_random_ties,
    epsilon_continuous,
    epsilon_greedy,
    first_argmax,
    tie_count,
)
from rl.agents.base import Transitions
from rl.agents.borrowed import borrowed
from rl.agents.tensor import _euge_compiled, _visit_layout, _visits_compiled, visits
from rl.agents.tensor._euge_compiled import euge_bonus_share, euge_scores
from rl.agents.tensor._visits_compiled import visit_row
from rl.agents.tensor.visits import VisitArrays
from rl.jit import drop_stale
from tensorq._compiled import RuleKind, apply_rule, cp_entry, rule_settings

DEPENDENCIES = [
    m.__file__
    for m in (
        tensorq._compiled,
        _explore_compiled,
        _euge_compiled,
        _visits_compiled,
        _visit_layout,
        visits,
        base,
        rl.agents.borrowed,
    )
]
"""Source files whose compiled code or types these kernels compile in (`rl.jit`)."""
drop_stale(__file__, DEPENDENCIES)

# Values of `Settings.explore`.
EPSILON_GREEDY = 0  # epsilon-greedy on Q (TLR)
EUGE = 1  # argmax of eq. (euge), random ties (TEQL)
EUGE_EPSILON = 2  # epsilon-greedy layer over EUGE (TEQL as released)
EXPLORATION = {"epsilon": EPSILON_GREEDY, "euge": EUGE, "euge-epsilon": EUGE_EPSILON}
"""The `Settings.explore` number of each `rl.agents.tensor.state.StepRule.exploration`."""


class AgentArrays(NamedTuple):
    """The arrays of one tensor agent that the kernels read and write.

    Attributes
    ----------
    factors : ndarray of float64, shape (B, sum_n d_n, R)
        Every mode's factor, packed along axis 1 (mode n from ``offsets[n]``).
    steps : ndarray of int64, shape (B,)
        Training transitions observed per replica (t - 1 of Algorithm 3).
    epsilon : ndarray of float64, shape (B,)
        Each replica's exploration probability.
    drawn : ndarray of float64, shape (B, D_A)
        Continuous random actions (`rl.agents.base.ContinuousActions`).
    drawn_mask : ndarray of bool, shape (B,)
        Replicas whose last action is in ``drawn``.
    record : ndarray of float64, shape (5, B)
        The last update, rows `TARGET`, `BEFORE`, `AFTER`, `COUNT`, `STEP_SIZE`
        (`rl.agents.tensor.state.UpdateStats` holds them as views).
    bonus : ndarray of float64, shape (2, B)
        With `Settings.bonus_share`: row 0 the sum, over the replica's EUGE
        actions since it was last reset, of the chosen action's
        `euge_bonus_share`, row 1 their number
        (`rl.agents.tensor.state.BonusShareMean.sums`).

    Every bundle of arrays passed to a kernel costs a reference-count update
    per array and call: arrays of one length share one array here.
    """

    factors: NDArray[np.float64]
    steps: NDArray[np.int64]
    epsilon: NDArray[np.float64]
    drawn: NDArray[np.float64]
    drawn_mask: NDArray[np.bool_]
    record: NDArray[np.float64]
    bonus: NDArray[np.float64]


# Rows of `AgentArrays.record`, in `rl.agents.tensor.state.UpdateStats`'s order.
TARGET, BEFORE, AFTER, COUNT, STEP_SIZE = range(5)

# Rows of `Settings.values`, in `rl.agents.tensor.state.ReplicaRule`'s order.
(ALPHA0, KAPPA, LAM, EPS, C, BONUS_UNIT, TOL, MAX_INNER, F_MAX, GAMMA, EPSILON_DECAY, EPSILON_MIN,
 RANK) = range(13)  # fmt: skip


class Scratch(NamedTuple):
    """Working arrays of `act` and `observe`, overwritten by every call (`new_scratch`).

    Attributes
    ----------
    by_rank : ndarray of float64, shape (3 N + 3, R)
        Row 0: the product of a state's rows (`action_values`); rows 1 to N:
        the gathered rows of the updated entry; the last 2 N + 2: the update
        rule's scratch (`tensorq._compiled`). A replica of rank r_b < R works
        on its first (3 N + 3) r_b values as a (3 N + 3, r_b) array (`rank_view`).
    by_action : ndarray of float64, shape (2, |A|)
        A state's action values and its EUGE scores.
    index : ndarray of int64, shape (N,)
        The updated entry's index vector.
    """

    by_rank: NDArray[np.float64]
    by_action: NDArray[np.float64]
    index: NDArray[np.int64]


def new_scratch(dims: NDArray[np.int64], n_state: int, rank: int) -> Scratch:
    """Return the `Scratch` of a tensor of mode sizes ``dims`` (state modes first) and rank R."""
    n_modes = len(dims)
    n_actions = int(np.prod(dims[n_state:]))
    return Scratch(
        by_rank=np.empty((3 * n_modes + 3, rank)),
        by_action=np.empty((2, n_actions)),
        index=np.empty(n_modes, dtype=np.int64),
    )


class Settings(NamedTuple):
    """The constants of one tensor agent's step (`.state.StepRule` and its problem).

    Attributes
    ----------
    offsets, dims : ndarray of int64, shape (N,)
        First packed row and size of every mode (state modes first).
    n_state : int
        Number of state modes D_S.
    n_states : int
        Number of flat states |S| (the visit keys are ``replica * |S| + state``).
    explore : int
        `EPSILON_GREEDY`, `EUGE` or `EUGE_EPSILON`.
    values : ndarray of float64, shape (13, B)
        The step's numbers per replica, rows `ALPHA0` to `RANK`
        (`rl.agents.tensor.state.ReplicaRule`: alpha_0 = alpha0 / (1 + kappa t),
        lambda and epsilon of eq. (loss_function), EUGE's c and the reward unit u
        of its count bonus, tau, I_max, F_max, the discount gamma, epsilon's decay
        after a non-terminal step and its floor, and the rank r_b: replica b reads
        and writes only its first r_b components).
    continuous : bool
        Draw the epsilon layer's random actions from [low, high) (`epsilon_continuous`).
    low, high : ndarray of float64, shape (D_A,)
        The action interval.
    count_before_update, signed_delta : bool
        Increment N before the update; store Delta Q signed.
    visits : bool
        Whether the agent keeps a visit table.
    entry_steps : bool
        Count t of alpha_t = alpha0 / (1 + kappa t) in visits of the entry, N(s, a),
        instead of agent steps.
    bonus_share : bool
        Add every EUGE action's `euge_bonus_share` to `AgentArrays.bonus`
        (off by default: the step then pays nothing for it).
    """

    offsets: NDArray[np.int64]
    dims: NDArray[np.int64]
    n_state: int
    n_states: int
    explore: int
    values: NDArray[np.float64]
    continuous: bool
    low: NDArray[np.float64]
    high: NDArray[np.float64]
    count_before_update: bool
    signed_delta: bool
    visits: bool
    entry_steps: bool
    bonus_share: bool


# ---------------------------------------------------------------- reading the tensor


@njit(cache=True)
def rank_view(buffer, rank):
    """Return the first K * ``rank`` values of ``buffer`` (K, R) as a (K, ``rank``) view.

    A replica of rank r_b works on such views of `Scratch.by_rank`, so that its
    sums over components run over r_b terms in order, as a rank-r_b agent's.
    """
    if rank == buffer.shape[1]:
        return buffer
    rows = buffer.shape[0]
    return buffer.reshape(buffer.size)[: rows * rank].reshape((rows, rank))


@njit(cache=True)
def _ravel(index, dims, first, last):
    """Flat C-order index of ``index[first:last]`` over ``dims[first:last]``."""
    flat = 0
    for n in range(first, last):
        flat = flat * dims[n] + index[n - first]
    return flat


@njit(cache=True)
def action_values(factors, offsets, dims, n_state, b, state, weights, out):
    """Q_b(s, a) for every joint action a (C order), written to ``out``.

    ``offsets``, ``dims`` and ``n_state`` are the `Settings` fields of those
    names, passed one by one: a named tuple of arrays passed to a function called
    once per replica costs a reference-count update per array and call.
    ``weights`` (r,) receives the product of the state modes' rows; each value
    is then sum_{r' < r} weights[r'] prod_k F_k[b, a_k, r'] over the action modes
    k: r = ``weights.shape[0]`` components, the replica's rank.
    """
    rank = weights.shape[0]
    n_modes = dims.shape[0]
    for r in range(rank):
        weights[r] = 1.0 if n_state == 0 else factors[b, offsets[0] + state[0], r]
    for n in range(1, n_state):
        for r in range(rank):
            weights[r] = weights[r] * factors[b, offsets[n] + state[n], r]
    last = n_modes - 1
    if last == n_state:  # one action mode: one (|A| x R) product, summed over r in order
        base = offsets[last]
        out[:] = 0.0
        for r in range(rank):
            weight = weights[r]
            for a in range(out.shape[0]):
                out[a] += weight * factors[b, base + a, r]
        return
    for a in range(out.shape[0]):  # joint actions: the Khatri-Rao product of the action rows
        total = 0.0
        for r in range(rank):
            term = weights[r]
            rest = a
            stride = out.shape[0]
            for n in range(n_state, last):
                stride //= dims[n]
                term = term * factors[b, offsets[n] + rest // stride, r]
                rest = rest % stride
            total += term * factors[b, offsets[last] + rest, r]
        out[a] = total


# ---------------------------------------------------------------- choosing actions


@njit(cache=True)
def act(agent, generators, settings, table, states, active, greedy, actions, scratch):
    """Write each active replica's action (index vector) into ``actions`` (B, D_A).

    Inactive rows are set to 0; ``greedy`` replicas take the first maximizer
    of Q and draw nothing; the others explore by ``settings.explore``. With
    ``settings.continuous`` the epsilon layer's random actions are drawn from
    [low, high) per action component (`epsilon_continuous`): replica b's draw
    goes to ``agent.drawn[b]`` and ``agent.drawn_mask[b]`` is set (False for
    everyone else). Replica b draws from ``generators[b]``, a
    ``numba.typed.List`` of the replicas' exploration generators
    (`rl.agents._explore_compiled.typed_generators`), kept out of `AgentArrays`:
    a typed list inside a tuple makes every call from Python a thousand times
    slower. The named tuples' fields are read once, before the loop over the
    replicas (see `action_values`). With ``settings.bonus_share`` every replica
    that acts by EUGE adds its chosen action's `euge_bonus_share` to
    ``agent.bonus[0, b]`` and counts it in ``agent.bonus[1, b]``.
    """
    # This call's arrays, without reference counts (`rl.agents.borrowed`).
    agent, settings, table, scratch = borrowed((agent, settings, table, scratch))
    states, active, greedy, actions = borrowed((states, active, greedy, actions))
    factors, epsilon, drawn, drawn_mask = (
        agent.factors,
        agent.epsilon,
        agent.drawn,
        agent.drawn_mask,
    )
    offsets, dims, n_state, n_states = (
        settings.offsets,
        settings.dims,
        settings.n_state,
        settings.n_states,
    )
    explore, continuous, low, high = (
        settings.explore,
        settings.continuous,
        settings.low,
        settings.high,
    )
    numbers, by_rank = settings.values, scratch.by_rank
    values, scores = scratch.by_action[0], scratch.by_action[1]
    weights, rank = by_rank[0], by_rank.shape[1]
    for b in range(states.shape[0]):
        drawn_mask[b] = False
        if not active[b]:
            actions[b, :] = 0
            continue
        if numbers[RANK, b] != rank:  # another rank than the last replica's: its view
            rank = int(numbers[RANK, b])
            weights = rank_view(by_rank, rank)[0]
        action_values(factors, offsets, dims, n_state, b, states[b], weights, values)
        if greedy[b]:
            flat = first_argmax(values)
        elif explore == EPSILON_GREEDY:
            if continuous:
                flat, drawn_mask[b] = epsilon_continuous(
                    values, epsilon[b], generators[b], dims, n_state, low, high, drawn[b]
                )
            else:
                flat = epsilon_greedy(values, epsilon[b], generators[b])
        else:
            key = b * n_states + _ravel(states[b], dims, 0, n_state)
            euge_scores(values, table, key, numbers[C, b], numbers[BONUS_UNIT, b], scores)
            if explore == EUGE:  # the generator is read for a tie only, the only draw
                flat = first_argmax(scores)
                if tie_count(scores, scores[flat]) > 1:
                    flat = argmax_random_ties(scores, generators[b])
            elif continuous:
                flat, drawn_mask[b] = epsilon_continuous(
                    scores, epsilon[b], generators[b], dims, n_state, low, high, drawn[b]
                )
            else:
                flat = epsilon_greedy(scores, epsilon[b], generators[b])
            if settings.bonus_share:
                agent.bonus[0, b] += euge_bonus_share(values[flat], scores[flat])
                agent.bonus[1, b] += 1.0
        for n in range(dims.shape[0] - 1, n_state - 1, -1):
            actions[b, n - n_state] = flat % dims[n]
            flat //= dims[n]


@njit(cache=True)
def act_entry(agent, generators, settings, table, states, active, greedy, actions, scratch):
    """Call `act` from Python, its named tuples passed as plain tuples (`as_plain`)."""
    act(
        AgentArrays(*agent), generators, Settings(*settings), VisitArrays(*table), states, active,
        greedy, actions, Scratch(*scratch),
    )  # fmt: skip


# ---------------------------------------------------------------- one observed transition


@njit(cache=True)
def td_targets(factors, offsets, dims, n_state, numbers, rewards, next_states, terminated, active,
               out, by_rank, values):  # fmt: skip
    """Write TD targets r + gamma max_a' Q(s', a') (r at termination) to ``out`` (B,).

    ``factors`` is `AgentArrays.factors`, ``offsets`` to ``numbers`` the `Settings`
    fields (``numbers``: ``values``) and ``rewards`` to ``active`` the
    `rl.agents.base.Transitions` fields of those names (passed one by one, see
    `action_values`); ``by_rank`` and ``values`` are `Scratch` arrays. Active
    replicas only. Returns the first active replica whose target is not finite, or -1.
    """
    weights, rank = by_rank[0], by_rank.shape[1]
    for b in range(rewards.shape[0]):
        if not active[b]:
            continue
        bootstrap = 0.0
        if not terminated[b]:
            if numbers[RANK, b] != rank:  # another rank than the last replica's: its view
                rank = int(numbers[RANK, b])
                weights = rank_view(by_rank, rank)[0]
            action_values(factors, offsets, dims, n_state, b, next_states[b], weights, values)
            bootstrap = values[0]
            for a in range(values.shape[0]):
                if np.isnan(values[a]) or values[a] > bootstrap:
                    bootstrap = values[a]
                    if np.isnan(bootstrap):
                        break
        out[b] = rewards[b] + numbers[GAMMA, b] * bootstrap
    for b in range(rewards.shape[0]):
        if active[b] and not np.isfinite(out[b]):
            return b
    return -1


@njit(cache=True)
def observe(agent, settings, rule, table, batch, scratch):
    """Learn from one transition per active replica of ``batch``; fill the record of ``agent``.

    For each active replica: the TD target; N(s, a) (incremented first when
    ``settings.count_before_update``); alpha_t = alpha_0 / (1 + kappa t), t the
    agent's steps or, with ``settings.entry_steps``, that count; the
    rule's update of the entry's rows; Delta Q (signed or absolute) and the
    count (when ``settings.visits``); then t += 1 and, after a non-terminal
    step, epsilon = max(epsilon * decay, epsilon_min). Every number is the
    replica's own (`Settings.values`), ``rule`` a `tensorq._compiled.RuleKind`
    that `tensorq._compiled.rule_settings` completes with them; replica b reads
    and writes only its first r_b components. Returns -1, or the first
    active replica whose target is not finite (then nothing has changed).
    """
    # This call's arrays, without reference counts (`rl.agents.borrowed`).
    agent, settings, rule = borrowed((agent, settings, rule))
    table, batch, scratch = borrowed((table, batch, scratch))
    factors, offsets, dims, n_state = (
        agent.factors,
        settings.offsets,
        settings.dims,
        settings.n_state,
    )
    states, actions, terminated, active = (
        batch.states,
        batch.actions,
        batch.terminated,
        batch.active,
    )
    record, by_rank, numbers = agent.record, scratch.by_rank, settings.values
    bad = td_targets(
        factors, offsets, dims, n_state, numbers, batch.rewards, batch.next_states,
        terminated, active, record[TARGET], by_rank, scratch.by_action[0],
    )  # fmt: skip
    if bad >= 0:
        return bad
    n_modes, index = dims.shape[0], scratch.index
    steps, epsilon = agent.steps, agent.epsilon
    counts, delta = table.counts, table.delta  # the arrays the loop reads, read once
    count_before = settings.count_before_update
    rank = by_rank.shape[1]  # the replica's components: the first r_b (`rank_view`)
    rows, update = by_rank[1 : n_modes + 1], by_rank[n_modes + 1 :]
    tol, max_inner, f_max = numbers[TOL, 0], numbers[MAX_INNER, 0], numbers[F_MAX, 0]
    replica_rule = rule_settings(rule, tol, int(max_inner), f_max)
    for b in range(states.shape[0]):
        if not active[b]:
            continue
        if numbers[RANK, b] != rank:  # views and rule made again only where they change
            rank = int(numbers[RANK, b])
            view = rank_view(by_rank, rank)
            rows, update = view[1 : n_modes + 1], view[n_modes + 1 :]
        if (
            numbers[TOL, b] != tol
            or numbers[MAX_INNER, b] != max_inner
            or (numbers[F_MAX, b] != f_max)
        ):
            tol, max_inner, f_max = numbers[TOL, b], numbers[MAX_INNER, b], numbers[F_MAX, b]
            replica_rule = rule_settings(rule, tol, int(max_inner), f_max)
        state = 0  # the entry's index vector (state, action) and its flat state and action
        for n in range(n_state):
            index[n] = states[b, n]
            state = state * dims[n] + index[n]
        action = 0
        for n in range(n_state, n_modes):
            index[n] = actions[b, n - n_state]
            action = action * dims[n] + index[n]
        key = b * settings.n_states + state
        count, row = 0, -1
        if settings.visits:
            row = visit_row(table, key, count_before)
            if count_before:
                counts[row, action] += 1
            if row >= 0:
                count = counts[row, action]
        clock = count if settings.entry_steps else steps[b] + 1
        step = numbers[ALPHA0, b] / (1.0 + numbers[KAPPA, b] * clock)
        weight = numbers[LAM, b] / (count + numbers[EPS, b])
        for n in range(n_modes):
            for r in range(rank):
                rows[n, r] = factors[b, offsets[n] + index[n], r]
        before = cp_entry(rows)
        apply_rule(replica_rule, rows, before, record[TARGET, b], weight, step, update)
        for n in range(n_modes):
            for r in range(rank):
                factors[b, offsets[n] + index[n], r] = rows[n, r]
        after = cp_entry(rows)
        if settings.visits:
            if row < 0:  # absent before the update: its row now
                row = visit_row(table, key, True)
            change = before - after
            delta[row, action] = change if settings.signed_delta else abs(change)
            if not count_before:
                counts[row, action] += 1
        steps[b] += 1
        if not terminated[b]:
            decayed = epsilon[b] * numbers[EPSILON_DECAY, b]
            epsilon[b] = max(decayed, numbers[EPSILON_MIN, b])
        record[BEFORE, b] = before
        record[AFTER, b] = after
        record[COUNT, b] = count
        record[STEP_SIZE, b] = step
    return -1


@njit(cache=True)
def observe_entry(agent, settings, rule, table, batch, scratch):
    """Call `observe` from Python, its named tuples passed as plain tuples (`as_plain`)."""
    return observe(
        AgentArrays(*agent), Settings(*settings), RuleKind(*rule), VisitArrays(*table),
        Transitions(*batch), Scratch(*scratch),
    )  # fmt: skip


def as_plain(named: tuple) -> tuple:
    """Return ``named`` as a plain tuple, the form `act_entry` and `observe_entry` take.

    Numba types a plain tuple argument in its compiled dispatcher, a named
    tuple in Python: a call with named tuples costs about three times as much.
    """
    return tuple.__new__(tuple, named)
