"""The single-entry block-coordinate-descent update of Algorithm 1.

:func:`bcd_update` updates one entry per replica of an :class:`OnlineCP` in
place. It gathers the N factor rows of each entry, runs the inner loops on
those (B, R) rows with vectorized masks (no Python loop over replicas), and
writes the rows back. Two variants:

``"paper"`` (default)
    Algorithm 1 with the loss of eq. (loss_function) and the gradient of eq.
    (gradient): modes n = 1..N in order (Gauss-Seidel: mode n sees the rows
    already updated for modes < n), up to I_max gradient steps per mode.
``"released"``
    The authors' released code: up to I_max sweeps, each moving every row at
    once from the same pre-sweep rows (Jacobi) along g / ||g||, with the
    regularizer entering as lambda / (N + epsilon). See ``docs/tensorq.md``.
``"stable"``
    Algorithm 1's Gauss-Seidel loop over modes on the loss of eq.
    (loss_function), each row step a normalized-LMS step that is a descent step
    on that loss for any step size in (0, 2); see :func:`stable_sweep` and
    ``docs/readings.md`` ("The stable reading").

On every backend the update gathers, steps and scatters rows on the factors'
device. NumPy writes in place, stops the inner loops as soon as every replica
has converged, and updates only the unmasked replicas. PyTorch and JAX run
every replica through all ``max_inner`` steps with converged or masked
replicas held by ``where`` (the same numbers, and no copy to the host to ask
whether all have stopped); PyTorch writes in place, and JAX runs the whole
update as one ``jax.jit``-compiled function of the factors (compiled once per
setting, factors donated and returned, so `OnlineCP.factors` holds the new
arrays afterwards).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

import numpy as np

from tensorq._backend import ArrayOps, ops_for_backend
from tensorq._inputs import index_array, keep_mask, per_replica
from tensorq._loops import (
    InnerState,
    initial_counters,
    masked_iteration,
    repeat,
    step_counts,
    suffix_products,
    times,
)
from tensorq.bound import FactorBound
from tensorq.cp import OnlineCP
from tensorq.loss import cp_entry, frequency_weight

Array = Any
Clip = Callable[[Array], Array] | None

VARIANTS = ("paper", "released", "stable")
SWEEPS = ("jacobi", "gauss-seidel")


class UpdateResult(NamedTuple):
    """Outcome of :func:`bcd_update`, one value per replica.

    Attributes
    ----------
    before : array of shape (B,)
        The entry Q_{t-1}(s_t, a_t) before the update.
    after : array of shape (B,)
        The entry Q_t(s_t, a_t) after the update; ``abs(after - before)`` is
        the decomposition error Delta Q_t of eq. (decomp_error).
    iterations : int array of shape (B,)
        Inner row steps taken, summed over the N modes (at most N * I_max);
        0 for masked replicas.
    """

    before: Array
    after: Array
    iterations: Array


def _gauss_seidel(
    rows: list[Array],
    before: Array,
    target: Array,
    weight: Array,
    step_size: Array,
    tol: float,
    max_inner: int,
    clip: Clip,
    ops: ArrayOps,
    normalized: bool,
    mode_scale: tuple[float, ...] | None = None,
    limits: Array | None = None,
) -> tuple[list[Array], Array]:
    """Algorithm 1's loop over modes: `paper_sweep`, or `stable_sweep` when ``normalized``."""
    suffix = suffix_products(rows)
    prefix = None
    new_rows = list(rows)
    # step * dL/dQ = step * ((1 - 2 w) Q - y), eq. (gradient), as an affine map of Q.
    slope = step_size * (1.0 - 2.0 * weight)
    offset = step_size * target
    entry = before
    steps, active = initial_counters(ops, before)
    for n in range(len(rows)):
        direction = times(prefix, suffix[n], rows[n])  # dQ / dF_n(i_n, :)
        inverse = None
        if normalized:  # 1 / ||g_n||^2, and no step where g_n = 0
            squares = ops.rowdot(direction, direction)
            inverse = ops.where(squares > 0, 1.0 / ops.where(squares > 0, squares, 1.0), 0.0)
        share = None if mode_scale is None else mode_scale[n]

        def step(
            rows: list[Array],
            entry: Array,
            direction: Array = direction,
            inverse: Any = inverse,
            share: float | None = share,
        ) -> tuple[list[Array], Array]:
            scale = slope * entry - offset
            if inverse is not None:
                scale = scale * inverse
            if share is not None:
                scale = scale * share
            stepped = rows[0] - scale[:, None] * direction
            if clip is not None:
                stepped = clip(stepped)
            return [stepped], ops.rowdot(stepped, direction)

        row, entry = step([rows[n]], entry)
        # Algorithm 1: "Set Q_prev = Q_{t-1}(s_t, a_t)": the first test of every mode
        # compares with the entry before the whole update.
        state = InnerState(row, entry, before, active, steps + 1)
        state = repeat(ops, max_inner - 1, masked_iteration(step, tol, ops, 1, limits), state)
        new_rows[n], entry, steps = state.rows[0], state.entry, state.steps
        prefix = new_rows[n] if prefix is None else prefix * new_rows[n]
    return new_rows, step_counts(steps, before, ops)


def paper_sweep(
    rows: list[Array],
    before: Array,
    target: Array,
    weight: Array,
    step_size: Array,
    tol: float,
    max_inner: int,
    clip: Clip,
    ops: ArrayOps,
    limits: Array | None = None,
) -> tuple[list[Array], Array]:
    """Run Algorithm 1's loop over modes on gathered rows (the paper variant).

    Parameters
    ----------
    rows : list of N arrays of shape (B, R)
        Rows F_n(i_n, :) of the entries, one per replica; not modified.
    before : array of shape (B,)
        ``cp_entry(rows)``, the entries before the update.
    target : array of shape (B,)
        Targets q^target_t.
    weight : array of shape (B,)
        ``frequency_weight(visits, lam, eps)``.
    step_size : array of shape (B,)
        Step sizes alpha_t.
    tol : float or array of shape (B,)
        Threshold tau on the change of the entry (one per replica: 0 runs
        that replica's every iteration).
    max_inner : int
        Maximum inner iterations I_max per mode (the largest of ``limits``).
    clip : callable or None
        Applied to a row after every step on it.
    ops : ArrayOps
        Backend functions.
    limits : int array of shape (B,), optional
        Each replica's own I_max (<= ``max_inner``); None: ``max_inner`` for all.

    Returns
    -------
    new_rows : list of N arrays of shape (B, R)
    iterations : int array of shape (B,)
        Steps taken, summed over modes.

    References
    ----------
    Algorithm 1; eq. (gradient); eq. (factor_update).
    """
    return _gauss_seidel(
        rows, before, target, weight, step_size, tol, max_inner, clip, ops, False, None, limits
    )


def released_sweep(
    rows: list[Array],
    before: Array,
    target: Array,
    weight: Array,
    step_size: Array,
    tol: float,
    max_inner: int,
    clip: Clip,
    ops: ArrayOps,
    limits: Array | None = None,
) -> tuple[list[Array], Array]:
    """Run the authors' released update on gathered rows (the released variant).

    Each sweep moves every row at once from the same pre-sweep rows:
    ``row_n -= alpha * (-(target - Q) - w) * g_n / ||g_n||`` with g_n the
    product of the other modes' rows and w = lambda / (N + epsilon); rows with
    ||g_n|| = 0 do not move. Up to ``max_inner`` sweeps, stopping once the
    entry moves less than ``tol`` in a sweep.

    Parameters
    ----------
    rows, before, target, weight, step_size, tol, max_inner, clip, ops, limits
        As in :func:`paper_sweep` (I_max counts sweeps).

    Returns
    -------
    new_rows : list of N arrays of shape (B, R)
    iterations : int array of shape (B,)
        N per sweep taken (one row step per mode and sweep).

    References
    ----------
    Algorithm 1 as implemented in the authors' released code; see the table of
    differences in ``docs/tensorq.md``.
    """
    n_modes = len(rows)
    # alpha * (-(target - Q) - w), an affine map of Q.
    offset = step_size * (target + weight)

    def sweep(rows: list[Array], entry: Array) -> tuple[list[Array], Array]:
        scale = step_size * entry - offset
        suffix = suffix_products(rows)
        prefix = None
        stepped_rows = []
        for n in range(n_modes):
            direction = times(prefix, suffix[n], rows[n])
            norm = ops.sqrt(ops.rowdot(direction, direction))
            norm = ops.where(norm > 0, norm, 1.0)  # g = 0 gives a zero step
            stepped = rows[n] - (scale / norm)[:, None] * direction
            stepped_rows.append(stepped if clip is None else clip(stepped))
            prefix = rows[n] if prefix is None else prefix * rows[n]
        return stepped_rows, cp_entry(stepped_rows)

    # The test after a sweep is on that sweep's move: (previous, entry) of the
    # state are the entries before and after the last sweep of each replica.
    new_rows, entry = sweep(list(rows), before)
    steps, active = initial_counters(ops, before)
    state = InnerState(new_rows, entry, before, active, steps + n_modes)
    iteration = masked_iteration(sweep, tol, ops, n_modes, limits)
    state = repeat(ops, max_inner - 1, iteration, state)
    return state.rows, step_counts(state.steps, before, ops)


def stable_sweep(
    rows: list[Array],
    before: Array,
    target: Array,
    weight: Array,
    step_size: Array,
    tol: float,
    max_inner: int,
    clip: Clip,
    ops: ArrayOps,
    mode_scale: tuple[float, ...] | None = None,
    limits: Array | None = None,
) -> tuple[list[Array], Array]:
    """Run Algorithm 1's loop over modes with normalized-LMS row steps (the stable variant).

    The loss of eq. (loss_function) at the entry, L(Q) = 1/2 (y - Q)^2 - w Q^2
    with w = lambda / (N + epsilon), is a convex quadratic in Q whenever
    2 w < 1, minimized at Q* = y / (1 - 2 w). For n = 1..N in order
    (Gauss-Seidel), up to ``max_inner`` times::

        g_n = prod_{m != n} F_m(i_m, :)             (eq. (gradient)'s direction)
        F_n(i_n, :) <- clip(F_n(i_n, :) - rho_n eta_t / ||g_n||^2 * dL/dQ * g_n)

    with rho_n = ``mode_scale[n]`` (1 when None) and dL/dQ = (1 - 2 w) Q - y.
    Without clipping (rho_n = 1) the entry moves to
    Q - eta_t dL/dQ, so Q - Q* shrinks by the factor 1 - eta_t (1 - 2 w): the
    loss decreases for every eta_t in (0, 2 / (1 - 2 w)), which contains (0, 2).
    With clipping the step is a projected gradient step of step size
    eta_t / ||g_n||^2 on a function whose gradient is (1 - 2 w) ||g_n||^2
    Lipschitz, so it is a descent step for the same eta_t. Rows with
    ||g_n|| = 0 do not move. The loop of mode n stops once the entry moves by
    less than ``tol`` in a step.

    Parameters
    ----------
    rows, before, target, weight, tol, max_inner, clip, ops, limits
        As in :func:`paper_sweep`; ``weight`` must satisfy 2 w < 1 for the
        descent property (the stable TEQL reading passes the post-visit count,
        N >= 1, and lambda < 1/2).
    step_size : array of shape (B,)
        Dimensionless step eta_t in (0, 2): the fraction of the distance to
        Q* closed by one row step.
    mode_scale : tuple of N floats in (0, 1], optional
        rho_n, the share of eta_t that mode n's row step takes (footprint
        steps, docs/discrete-problems.md); rho_n eta_t
        stays in (0, 2), so every row step is still a descent step.

    Returns
    -------
    new_rows : list of N arrays of shape (B, R)
    iterations : int array of shape (B,)
        Steps taken, summed over modes.

    References
    ----------
    Algorithm 1; eq. (loss_function); eq. (gradient) (the direction g_n);
    Assumption 2 (``clip``); Proposition 2 (with the normalized step the
    proof's ||g_n||^2 <= R F_max^(2(N-1)) is replaced by 1).
    """
    return _gauss_seidel(
        rows,
        before,
        target,
        weight,
        step_size,
        tol,
        max_inner,
        clip,
        ops,
        True,
        mode_scale,
        limits,
    )


def bcd_update(
    q: OnlineCP,
    index: Any,
    target: Any,
    visits: Any,
    *,
    step_size: float | Any,
    lam: float,
    eps: float,
    tol: float,
    max_inner: int,
    bound: FactorBound | None = None,
    mask: Any = None,
    variant: str = "paper",
    mode_scale: tuple[float, ...] | None = None,
) -> UpdateResult:
    """Update one entry per replica in place by block coordinate descent.

    For each replica b, moves the rows F_n[b, index[b, n], :] (and nothing
    else) to decrease the loss of eq. (loss_function) at that entry.
    ``variant="paper"``: for n = 1..N in order, up to ``max_inner`` steps
    F_n(i_n, :) -= alpha grad of eq. (gradient), each seeing the rows already
    updated for earlier modes; the loop of mode n stops for a replica once the
    entry moves by less than ``tol`` in a step, where, as Algorithm 1 is
    written, the first comparison of every mode is against the entry before
    the whole update. ``variant="released"``: see :func:`released_sweep`.
    ``variant="stable"``: the same loop with normalized-LMS row steps, a
    descent step on the loss for ``step_size`` in (0, 2) when
    2 lambda / (visits + eps) < 1; see :func:`stable_sweep`.

    Only the targets are checked here (they must be finite; nothing is
    touched otherwise): this is the hot path. The settings are checked once
    where they enter, by `StepSchedule` (the step sizes), `FactorBound` (the
    bound) and the caller's configuration (``lam``, ``eps``, ``tol``,
    ``max_inner``, for example `rl.agents.tensor.teql.TEQLConfig`); indices, visit
    counts and the mask must satisfy the shapes and ranges documented below.

    Parameters
    ----------
    q : OnlineCP
        The tensor, updated in place.
    index : int array of shape (B, N)
        The entry (s_t, a_t) of each replica.
    target : float or array of shape (B,)
        Targets q^target_t(s_t, a_t), finite.
    visits : float or array of shape (B,)
        Visit counts N_{t-1}(s_t, a_t) *before* this visit (the caller
        increments its counts after the update), finite and >= 0. The released
        agent passes counts that already include the current visit.
    step_size : float or array of shape (B,)
        Step size alpha_t > 0, for example ``StepSchedule(alpha0, kappa)(t)``.
    lam : float
        Regularization strength lambda >= 0.
    eps : float
        Smoothing constant epsilon > 0.
    tol : float
        Threshold tau >= 0; 0 always takes ``max_inner`` steps per mode.
    max_inner : int
        Maximum inner iterations I_max >= 1 (per mode; sweeps for "released").
    bound : FactorBound, optional
        Clip each updated row to [-f_max, f_max] after every step.
    mask : bool array of shape (B,), optional
        True marks replicas to leave untouched (their ``before == after`` and
        ``iterations == 0``).
    variant : {"paper", "released", "stable"}, default="paper"
        Algorithm 1 as written, the authors' released update, or Algorithm 1
        with normalized-LMS row steps.
    mode_scale : tuple of N floats, optional
        ``variant="stable"`` only: mode n's row step is scaled by
        ``mode_scale[n]`` (footprint steps; see :func:`stable_sweep`).

    Returns
    -------
    UpdateResult
        ``before``, ``after`` (shape (B,)) and ``iterations`` (int, shape (B,):
        row steps taken summed over modes, ``k * N`` when ``tol=0`` and
        ``max_inner=k``; for "released", N per sweep).

    References
    ----------
    Algorithm 1; eq. (loss_function); eq. (gradient); eq. (factor_update);
    Assumption 2 (``bound``).

    Examples
    --------
    Two replicas, one entry each; the stable rule with step 0.5 and one step
    per mode closes 1 - 0.5**3 of the distance to the loss's minimum:

    >>> import numpy as np
    >>> from tensorq import OnlineCP
    >>> q = OnlineCP.random((3, 4, 2), rank=2, replicas=2, scale=0.5, rng=np.random.default_rng(0))
    >>> index = np.array([[0, 1, 1], [2, 3, 0]])
    >>> result = bcd_update(q, index, target=np.array([1.0, -1.0]), visits=np.array([1.0, 5.0]),
    ...                     step_size=0.5, lam=1e-3, eps=1e-4, tol=1e-3, max_inner=1,
    ...                     variant="stable")
    >>> result.before.round(4), result.after.round(4), result.iterations
    (array([0.0423, 0.014 ]), array([ 0.8813, -0.8735]), array([3, 3]))
    >>> bool(np.allclose(q.entries(index), result.after))  # the tensor changed in place
    True
    """
    setting = update_setting(  # checks the variant
        variant, lam=lam, eps=eps, tol=tol, max_inner=max_inner, bound=bound, mode_scale=mode_scale
    )
    if mode_scale is not None and (variant != "stable" or len(mode_scale) != len(q.factors)):
        raise ValueError(
            f"The 'mode_scale' parameter needs variant 'stable' and {len(q.factors)} values. "
            f"Got {mode_scale!r} with variant {variant!r} instead."
        )
    target = per_replica(q, "target", target, check=True)
    idx, keep = index_array(q, index), keep_mask(q, mask)
    vectors = (target, per_replica(q, "visits", visits), per_replica(q, "step_size", step_size))
    return _update_rows(q, idx, keep, vectors, setting)


def normalized_step(
    q: OnlineCP,
    index: Any,
    target: Any,
    *,
    step_size: float | Any,
    mask: Any = None,
    sweep: str = "jacobi",
) -> UpdateResult:
    """Take one normalized-gradient step per replica in place (TLR, Rozada et al.).

    The error ``target - Q`` is computed once; then every touched row moves by
    F_n(i_n, :) += alpha (target - Q) g_n / ||g_n||, with g_n the product of
    the other modes' rows; rows with ||g_n|| = 0 do not move. No
    regularization, no inner loop. With ``sweep="jacobi"`` (the default, the
    released TLR code) every g_n is taken from the pre-update rows, so all
    rows move at once; with ``sweep="gauss-seidel"`` the modes move in order
    and g_n uses the rows already moved for modes < n.

    Parameters
    ----------
    q : OnlineCP
        The tensor, updated in place.
    index : int array of shape (B, N)
        The entry of each replica.
    target : float or array of shape (B,)
        Targets, finite.
    step_size : float or array of shape (B,)
        Step size alpha > 0.
    mask : bool array of shape (B,), optional
        True marks replicas to leave untouched.
    sweep : {"jacobi", "gauss-seidel"}, default="jacobi"
        Move every row from the pre-update rows (as released), or in mode order.

    Returns
    -------
    UpdateResult
        ``before``, ``after`` and ``iterations`` (N, or 0 for masked replicas).

    References
    ----------
    The baseline objective eq. (baseline_objective), optimized as in the TLR
    code of Rozada et al. (2024) that TEQL extends (``docs/tensorq.md``).
    """
    if sweep not in SWEEPS:
        raise ValueError(f"The 'sweep' parameter must be one of {SWEEPS}. Got {sweep!r} instead.")
    target = per_replica(q, "target", target, check=True)
    idx, keep = index_array(q, index), keep_mask(q, mask)
    vectors = (target, per_replica(q, "step_size", step_size))
    return _update_rows(q, idx, keep, vectors, ("normalized", sweep == "jacobi", None))


def update_setting(
    variant: str,
    *,
    lam: float | Array = 0.0,
    eps: float | Array = 1.0,
    tol: float | Array = 0.0,
    max_inner: int = 1,
    bound: FactorBound | None = None,
    mode_scale: tuple[float, ...] | None = None,
    f_max: Array | None = None,
    limits: Array | None = None,
    components: Array | None = None,
) -> tuple[Any, ...]:
    """Return the setting of `pure_update`: a `bcd_update` variant, or ``"normalized"``.

    ``variant="normalized"`` is :func:`normalized_step` (Jacobi; of the others
    only ``components`` is read); the others are those of :func:`bcd_update`
    (``mode_scale``: ``variant="stable"`` only, not checked here). With Python
    numbers the setting is hashable (JAX compiles once per setting). For a batch
    whose replicas run different settings (`pure_update` only), ``lam``,
    ``eps`` and ``tol`` may be arrays (B,) of the factors' backend, ``f_max``
    (B,) replaces ``bound``, ``limits`` (B,) are the replicas' own I_max (at
    most ``max_inner``, the loop's length) and ``components`` (B, R) bool marks
    each replica's live components: the others are held at exactly 0.
    """
    if variant == "normalized":
        return ("normalized", True, components)
    if variant not in _VARIANT_SWEEPS:
        raise ValueError(
            f"The 'variant' parameter must be one of {VARIANTS}. Got {variant!r} instead."
        )
    if f_max is None and bound is not None:
        f_max = bound.f_max
    shares = None if mode_scale is None else tuple(float(share) for share in mode_scale)
    lam, eps, tol = (_number(value) for value in (lam, eps, tol))
    return ("bcd", variant, lam, eps, tol, int(max_inner), f_max, shares, limits, components)


def _number(value: float | Array) -> float | Array:
    """Return a number as a Python float, per-replica values (an array) as they are."""
    return float(value) if isinstance(value, int | float) else value


def _held(run: Callable[..., Any], components: Array | None, ops: ArrayOps) -> Callable[..., Any]:
    """Return ``run`` with the new rows held at 0 outside ``components`` (B, R), if given."""
    if components is None:
        return run

    def held(rows: list[Array], before: Array, *vectors: Array) -> Any:
        new_rows, iterations = run(rows, before, *vectors)
        return [ops.where(components, row, 0.0) for row in new_rows], iterations

    return held


def _runner(setting: tuple[Any, ...], ops: ArrayOps) -> Callable[..., tuple[list[Array], Array]]:
    """Return ``run(rows, before, *vectors) -> (new_rows, iterations)`` for an update setting.

    ``setting`` is ``("bcd", variant, lam, eps, tol, max_inner, f_max, mode_scale, limits,
    components)`` for :func:`bcd_update` (vectors: target, visits, step size) or
    ``("normalized", jacobi, components)`` for :func:`normalized_step` (vectors: target,
    step size); see :func:`update_setting`.
    """
    if setting[0] == "normalized":
        _, jacobi, components = setting

        def normalized(rows: list[Array], before: Array, target: Array, step: Array) -> Any:
            scale = step * (target - before)
            suffix = suffix_products(rows)
            prefix = None
            new_rows = []
            for n, row in enumerate(rows):
                direction = times(prefix, suffix[n], row)
                norm = ops.sqrt(ops.rowdot(direction, direction))
                norm = ops.where(norm > 0, norm, 1.0)  # g = 0 gives a zero step
                moved = row + (scale / norm)[:, None] * direction
                new_rows.append(moved)
                seen = row if jacobi else moved  # the rows g_{n+1}, ... are taken from
                prefix = seen if prefix is None else prefix * seen
            return new_rows, ops.int_full(before.shape[0], len(rows), before)

        return _held(normalized, components, ops)

    _, variant, lam, eps, tol, max_inner, f_max, mode_scale, limits, components = setting
    sweep = _VARIANT_SWEEPS[variant]
    clip = None
    if f_max is not None:
        bound = f_max if isinstance(f_max, float) else f_max[:, None]
        clip = lambda x: ops.clip(x, -bound, bound)  # noqa: E731

    def run(rows: list[Array], before: Array, target: Array, visits: Array, step: Array) -> Any:
        weight = frequency_weight(visits, lam, eps)
        if mode_scale is not None:
            return stable_sweep(rows, before, target, weight, step, tol, max_inner, clip, ops,
                                mode_scale, limits)  # fmt: skip
        return sweep(rows, before, target, weight, step, tol, max_inner, clip, ops, limits=limits)

    return _held(run, components, ops)


def _update_rows(
    q: OnlineCP,
    idx: Array,
    keep: Array | None,
    vectors: tuple[Array | float, ...],
    setting: tuple[Any, ...],
) -> UpdateResult:
    """Gather the indexed rows, run the update of ``setting`` on them, scatter the new rows.

    Every input has been checked by the caller: nothing here raises before the
    factors change. ``keep`` (a bool array, or None for all) selects the
    replicas to update; ``vectors`` are per-replica arrays of the tensor's
    backend and dtype, or Python floats.
    """
    ops = q._ops
    if ops.host:
        return _update_numpy(q, idx, keep, vectors, _runner(setting, ops))
    if ops.functional:
        update = _jax_update(setting)
    else:
        run = _runner(setting, ops)

        def update(*args: Any) -> Any:
            return _update_all(ops, run, *args)

    factors, before, after, iterations = update(
        tuple(q.factors), q._replica_ids, idx, keep, vectors
    )
    q.factors[:] = factors
    return UpdateResult(before, after, iterations)


def _update_all(
    ops: ArrayOps,
    run: Callable[..., tuple[list[Array], Array]],
    factors: tuple[Array, ...],
    ids: Array,
    idx: Array,
    keep: Array | None,
    vectors: tuple[Array | float, ...],
) -> tuple[list[Array], Array, Array, Array]:
    """Update every replica, then keep the old rows of masked ones (PyTorch, JAX).

    No boolean indexing (its result's size is known only on the host): masked
    replicas are computed and discarded with ``where``. Returns the factors
    (written in place, or new JAX arrays), before, after and iterations.
    """
    rows = [f[ids, idx[:, n]] for n, f in enumerate(factors)]
    before = cp_entry(rows)
    new_rows, iterations = run(rows, before, *vectors)
    if keep is not None:
        new_rows = [
            ops.where(keep[:, None], new, old) for new, old in zip(new_rows, rows, strict=True)
        ]
        iterations = ops.where(keep, iterations, 0)
    new_factors = []
    for n, (factor, row) in enumerate(zip(factors, new_rows, strict=True)):
        if ops.functional:
            factor = factor.at[ids, idx[:, n]].set(row)
        else:
            factor[ids, idx[:, n]] = row
        new_factors.append(factor)
    return new_factors, before, cp_entry(new_rows), iterations


@cache
def _jax_update(setting: tuple[Any, ...]) -> Callable[..., Any]:
    """Return the JAX update of ``setting``, compiled by ``jax.jit`` (once per setting, shapes).

    The factors are donated: XLA writes the new rows into their buffers
    instead of copying every factor, and the old arrays become invalid.
    """
    import jax

    ops = ops_for_backend("jax")
    run = _runner(setting, ops)

    def update(factors: tuple[Array, ...], ids: Array, idx: Array, keep: Any, vectors: Any) -> Any:
        return _update_all(ops, run, factors, ids, idx, keep, vectors)

    return jax.jit(update, donate_argnums=0)


def _update_numpy(
    q: OnlineCP,
    idx: Array,
    keep: np.ndarray | None,
    vectors: tuple[Array | float, ...],
    run: Callable[..., tuple[list[Array], Array]],
) -> UpdateResult:
    """Run the NumPy update: in place, on the unmasked replicas only."""
    ops = q._ops
    ids = q._replica_ids
    all_rows = None
    if keep is not None:
        all_rows = q._rows(idx, ids)
        vectors = tuple(_subset(v, keep) for v in vectors)
        ids, idx = ids[keep], idx[keep]

    rows = q._rows(idx, ids) if all_rows is None else [r[keep] for r in all_rows]
    before = cp_entry(rows)
    new_rows, iterations = run(rows, before, *vectors)
    for n, factor in enumerate(q.factors):
        factor[ids, idx[:, n]] = new_rows[n]

    if all_rows is None:
        return UpdateResult(before, cp_entry(new_rows), iterations)
    before = cp_entry(all_rows)
    after = ops.copy(before)
    after[keep] = cp_entry(new_rows)
    all_iterations = np.zeros(q.replicas, dtype=np.int64)
    all_iterations[keep] = iterations
    return UpdateResult(before, after, all_iterations)


def _subset(value: Array | float, keep: Array) -> Array | float:
    return value if isinstance(value, float) else value[keep]


_VARIANT_SWEEPS = {"paper": paper_sweep, "released": released_sweep, "stable": stable_sweep}
