"""Compiled (Numba) hot path of the tensor agents: action choice, update, visit tables.

Every kernel loops over the B replicas inside, so B = 1 and B = 100 run the
same code, and replica b touches only its own factors, visit rows and random
generator (a replica's numbers never depend on the others). The kernels are
small functions composed by two entry points:

- `act_kernel`: the action values of the current state over the action fibre
  (the product of the state modes' rows, then one (|A| x R) product), then EUGE
  (eq. (euge)), EUGE under an epsilon-greedy layer, or epsilon-greedy on Q;
  replicas in the ``greedy`` mask take the first maximizer of Q and draw nothing.
- `observe_kernel`: the TD target, the visit count, one update rule on the
  gathered rows (`rl.agents._update_kernels`: Algorithm 1, the authors'
  normalized Jacobi sweeps, TLR's step, the stable reading's normalized-LMS
  steps), Delta Q (eq. (decomp_error)) and the counts, the step counter and
  epsilon.

Random draws are those of the reference path (`rl.agents._explore`): per
active replica, ``random()`` for the epsilon test, ``integers(0, |A|)`` for a
random action, and ``integers(0, k)`` to break a k-way tie, drawn from a
``numba.typed.List`` of the replicas' ``numpy.random.Generator`` objects, which
shares their state with Python.

Visit tables are passed as one tuple ``(keys, slot_rows, row_keys, counts,
delta, used)``: an open-addressing hash table (linear probing, keys
``replica * |S| + flat state``, -1 for an empty slot) mapping a key to a row of
``counts`` and ``delta``; a dense table passes empty ``keys`` and uses the key
itself as the row. No fastmath: the arithmetic is the reference's, term by term.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.typed import List

from rl.agents import _update_kernels
from rl.agents._update_kernels import apply_rule, cp_entry
from rl.numba_cache import drop_stale

drop_stale(__file__, [_update_kernels.__file__])

EMPTY = -1

# Exploration rules of `act_kernel`.
EPSILON_GREEDY = 0  # epsilon-greedy on Q (TLR)
EUGE = 1  # argmax of eq. (euge), random ties (TEQL)
EUGE_EPSILON = 2  # epsilon-greedy layer over EUGE (TEQL as released)


# Slots of the float settings array of `observe_kernel`.
GAMMA, ALPHA0, KAPPA, LAM, EPS, TOL, F_MAX, EPS_DECAY, EPS_MIN = range(9)
# Slots of the int settings array.
RULE, MAX_INNER, BOUNDED, COUNT_BEFORE, SIGNED_DELTA, VISITS = range(6)
# Rows of the record array filled by `observe_kernel`.
TARGET, BEFORE, AFTER, COUNT, STEP_SIZE = range(5)


# ---------------------------------------------------------------- generators


@njit(cache=True)
def generator_list(first):
    """Return a typed list holding ``first`` (built compiled, so the build is cached)."""
    out = List()
    out.append(first)
    return out


@njit(cache=True)
def generator_append(generators, generator):
    """Append one more generator to a list made by `generator_list`."""
    generators.append(generator)


# ---------------------------------------------------------------- hash table


@njit(cache=True)
def _slot(key, mask):
    """Home slot of ``key``: the splitmix64 finalizer, masked to the capacity."""
    z = np.uint64(key)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z & np.uint64(mask))


@njit(cache=True)
def _probe(keys, key):
    """Slot holding ``key``, or the empty slot where linear probing would insert it."""
    mask = keys.shape[0] - 1
    i = _slot(key, mask)
    while keys[i] != key and keys[i] != EMPTY:
        i = (i + 1) & mask
    return i


@njit(cache=True)
def table_find(keys, slot_rows, key):
    """Row of ``key``, or -1 when it is not in the table."""
    i = _probe(keys, key)
    return slot_rows[i] if keys[i] == key else -1


@njit(cache=True)
def table_insert(keys, slot_rows, row_keys, used, key):
    """Row of ``key``, appending a new row when absent (the caller ensures room)."""
    i = _probe(keys, key)
    if keys[i] == key:
        return slot_rows[i]
    row = used[0]
    used[0] = row + 1
    keys[i] = key
    slot_rows[i] = row
    row_keys[row] = key
    return row


@njit(cache=True)
def table_rebuild(row_keys, used, capacity):
    """Hash arrays of ``capacity`` (a power of two) slots for rows 0..used-1."""
    keys = np.full(capacity, EMPTY, dtype=np.int64)
    slot_rows = np.full(capacity, EMPTY, dtype=np.int64)
    mask = capacity - 1
    for row in range(used):
        i = _slot(row_keys[row], mask)
        while keys[i] != EMPTY:
            i = (i + 1) & mask
        keys[i] = row_keys[row]
        slot_rows[i] = row
    return keys, slot_rows


@njit(cache=True)
def visit_row(table, key, create):
    """Row of ``key`` in a visit table tuple (dense: the key itself); -1 if absent."""
    keys, slot_rows, row_keys, _, _, used = table
    if keys.shape[0] == 0:
        return key
    if create:
        return table_insert(keys, slot_rows, row_keys, used, key)
    return table_find(keys, slot_rows, key)


@njit(cache=True)
def table_rows(table, keys_in, active, create):
    """Rows of many keys (-1 where absent or inactive), inserting when ``create``."""
    out = np.full(keys_in.shape[0], EMPTY, dtype=np.int64)
    for b in range(keys_in.shape[0]):
        if active[b]:
            out[b] = visit_row(table, keys_in[b], create)
    return out


# ---------------------------------------------------------------- reading the tensor


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

    ``weights`` (R,) receives the product of the state modes' rows; each value
    is then sum_r weights[r] prod_k F_k[b, a_k, r] over the action modes k.
    """
    rank = factors.shape[2]
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


@njit(cache=True)
def first_argmax(values):
    """np.argmax: the first maximizer, the first NaN if any."""
    best = 0
    for i in range(values.shape[0]):
        if np.isnan(values[i]):
            return i
        if values[i] > values[best]:
            best = i
    return best


@njit(cache=True)
def argmax_random_ties(values, generator):
    """Return the maximizer of ``values``, a k-way tie broken by ``integers(0, k)``."""
    best = first_argmax(values)
    top = values[best]
    ties = 0
    for i in range(values.shape[0]):
        if values[i] == top:
            ties += 1
    if ties <= 1:
        return best
    pick = generator.integers(0, ties)
    for i in range(values.shape[0]):
        if values[i] == top:
            if pick == 0:
                return i
            pick -= 1
    return best


@njit(cache=True)
def epsilon_greedy(values, epsilon, generator):
    """Random action with probability epsilon, else a maximizer with random ties."""
    if generator.random() < epsilon:
        return generator.integers(0, values.shape[0])
    return argmax_random_ties(values, generator)


@njit(cache=True)
def epsilon_continuous(values, epsilon, generator, dims, n_state, low, high, drawn):
    """Epsilon-greedy whose random action is drawn from the continuous action interval.

    With probability epsilon each action component k is drawn as
    ``low[k] + (high[k] - low[k]) * random()`` into ``drawn[k]`` and credited to
    the grid index ``rint((a - low) / (high - low) (d - 1))`` (the released code's
    endpoint rounding); returns (flat joint index, True). Otherwise a maximizer
    with random ties and False. The reference is
    `rl.agents._explore.epsilon_greedy_continuous`.
    """
    if generator.random() < epsilon:
        flat = 0
        for n in range(n_state, dims.shape[0]):
            k = n - n_state
            value = low[k] + (high[k] - low[k]) * generator.random()
            drawn[k] = value
            index = np.rint((value - low[k]) / (high[k] - low[k]) * (dims[n] - 1))
            index = min(max(index, 0.0), dims[n] - 1.0)
            flat = flat * dims[n] + np.int64(index)
        return flat, True
    return argmax_random_ties(values, generator), False


@njit(cache=True)
def euge_scores(values, table, key, c, out):
    """EU(s, a) = Q(s, a) + c (Delta Q(s, a) + sqrt(log N_total(s) / (N(s, a) + 1))), eq. (euge)."""
    row = visit_row(table, key, False)
    if row < 0:  # unvisited: no counts, no errors, no log term
        for a in range(values.shape[0]):
            out[a] = values[a] + c * 0.0
        return
    counts, delta = table[3], table[4]
    total = 0
    for a in range(values.shape[0]):
        total += counts[row, a]
    log_total = np.log(max(total, 1))
    for a in range(values.shape[0]):
        out[a] = values[a] + c * (delta[row, a] + np.sqrt(log_total / (counts[row, a] + 1)))


@njit(cache=True)
def act_kernel(
    factors, offsets, dims, n_state, n_states, states, active, greedy, epsilon, rule, c,
    keys, slot_rows, row_keys, counts, delta, used, generators, actions,
    continuous, low, high, drawn, drawn_mask,
):  # fmt: skip
    """Write each active replica's action (index vector) into ``actions`` (B, D_A).

    Inactive rows are set to 0; ``greedy`` replicas take the first maximizer of
    Q and draw nothing; the others explore by ``rule`` (EPSILON_GREEDY, EUGE,
    EUGE_EPSILON). The visit table comes as its six arrays (see the module
    docstring; passing them one by one is faster to call than a tuple). With
    ``continuous`` the epsilon layer's random actions are drawn from
    [low, high) per action component (`epsilon_continuous`): replica b's draw
    goes to ``drawn[b]`` and ``drawn_mask[b]`` is set (False for everyone else).
    """
    table = (keys, slot_rows, row_keys, counts, delta, used)
    n_actions = 1
    for n in range(n_state, dims.shape[0]):
        n_actions *= dims[n]
    weights = np.empty(factors.shape[2])
    values = np.empty(n_actions)
    scores = np.empty(n_actions)
    for b in range(states.shape[0]):
        drawn_mask[b] = False
        if not active[b]:
            actions[b, :] = 0
            continue
        action_values(factors, offsets, dims, n_state, b, states[b], weights, values)
        if greedy[b]:
            flat = first_argmax(values)
        elif rule == EPSILON_GREEDY:
            if continuous:
                flat, drawn_mask[b] = epsilon_continuous(
                    values, epsilon[b], generators[b], dims, n_state, low, high, drawn[b]
                )
            else:
                flat = epsilon_greedy(values, epsilon[b], generators[b])
        else:
            key = b * n_states + _ravel(states[b], dims, 0, n_state)
            euge_scores(values, table, key, c, scores)
            if rule == EUGE:
                flat = argmax_random_ties(scores, generators[b])
            elif continuous:
                flat, drawn_mask[b] = epsilon_continuous(
                    scores, epsilon[b], generators[b], dims, n_state, low, high, drawn[b]
                )
            else:
                flat = epsilon_greedy(scores, epsilon[b], generators[b])
        for n in range(dims.shape[0] - 1, n_state - 1, -1):
            actions[b, n - n_state] = flat % dims[n]
            flat //= dims[n]


# ---------------------------------------------------------------- one observed transition


@njit(cache=True)
def td_targets(factors, offsets, dims, n_state, rewards, next_states, terminated, active, gamma,
               out):  # fmt: skip
    """Compute TD targets r + gamma max_a' Q(s', a') (r + gamma 0 at termination), active only.

    Returns the first active replica whose target is not finite, or -1.
    """
    n_actions = 1
    for n in range(n_state, dims.shape[0]):
        n_actions *= dims[n]
    weights = np.empty(factors.shape[2])
    values = np.empty(n_actions)
    for b in range(rewards.shape[0]):
        if not active[b]:
            continue
        bootstrap = 0.0
        if not terminated[b]:
            action_values(factors, offsets, dims, n_state, b, next_states[b], weights, values)
            bootstrap = values[0]
            for a in range(n_actions):
                if np.isnan(values[a]) or values[a] > bootstrap:
                    bootstrap = values[a]
                    if np.isnan(bootstrap):
                        break
        out[b] = rewards[b] + gamma * bootstrap
    for b in range(rewards.shape[0]):
        if active[b] and not np.isfinite(out[b]):
            return b
    return -1


@njit(cache=True)
def observe_kernel(
    factors, offsets, dims, n_state, n_states, states, actions, rewards, next_states, terminated,
    active, floats, ints, keys, slot_rows, row_keys, counts, delta, used, steps, epsilon, record,
):  # fmt: skip
    """Learn from one transition per active replica; fill ``record`` (5, B).

    For each active replica: the TD target; N(s, a) (incremented first when
    ``ints[COUNT_BEFORE]``); alpha_t = alpha_0 / (1 + kappa t); the rule's
    update of the entry's rows; Delta Q (signed or absolute) and the count
    (when ``ints[VISITS]``); then t += 1 and, after a non-terminal step,
    epsilon = max(epsilon * decay, epsilon_min). Returns -1, or the first
    active replica whose target is not finite (then nothing has changed).
    """
    bad = td_targets(
        factors, offsets, dims, n_state, rewards, next_states, terminated, active,
        floats[GAMMA], record[TARGET],
    )  # fmt: skip
    if bad >= 0:
        return bad
    table = (keys, slot_rows, row_keys, counts, delta, used)
    n_modes, rank = dims.shape[0], factors.shape[2]
    rows = np.empty((n_modes, rank))
    scratch = np.empty((2 * n_modes + 2, rank))  # see paper_rule and _normalized_jacobi
    index = np.empty(n_modes, dtype=np.int64)
    rule, visits_on, count_before = ints[RULE], ints[VISITS] != 0, ints[COUNT_BEFORE] != 0
    for b in range(states.shape[0]):
        if not active[b]:
            continue
        for n in range(n_state):
            index[n] = states[b, n]
        for n in range(n_state, n_modes):
            index[n] = actions[b, n - n_state]
        key = b * n_states + _ravel(index, dims, 0, n_state)
        action = _ravel(index[n_state:], dims, n_state, n_modes)
        count = 0
        if visits_on:
            row = visit_row(table, key, count_before)
            if count_before:
                counts[row, action] += 1
            if row >= 0:
                count = counts[row, action]
        step = floats[ALPHA0] / (1.0 + floats[KAPPA] * (steps[b] + 1))
        weight = floats[LAM] / (count + floats[EPS])
        for n in range(n_modes):
            for r in range(rank):
                rows[n, r] = factors[b, offsets[n] + index[n], r]
        before = cp_entry(rows)
        apply_rule(
            rule, rows, before, record[TARGET, b], weight, step, floats[TOL], ints[MAX_INNER],
            floats[F_MAX], ints[BOUNDED] != 0, scratch,
        )  # fmt: skip
        for n in range(n_modes):
            for r in range(rank):
                factors[b, offsets[n] + index[n], r] = rows[n, r]
        after = cp_entry(rows)
        if visits_on:
            row = visit_row(table, key, True)
            change = before - after
            delta[row, action] = change if ints[SIGNED_DELTA] else abs(change)
            if not count_before:
                counts[row, action] += 1
        steps[b] += 1
        if not terminated[b]:
            epsilon[b] = max(epsilon[b] * floats[EPS_DECAY], floats[EPS_MIN])
        record[BEFORE, b] = before
        record[AFTER, b] = after
        record[COUNT, b] = count
        record[STEP_SIZE, b] = step
    return -1
