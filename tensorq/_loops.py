"""The inner loops of `tensorq.update`, written once for NumPy, PyTorch and JAX.

An inner iteration (`masked_iteration`) tests convergence and steps the replicas still
active; `repeat` runs it as a Python loop (NumPy stops once no replica is
active) or as a ``jax.lax.fori_loop`` (JAX, inside ``jax.jit``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from tensorq._backend import ArrayOps

Array = Any


def suffix_products(rows: list[Array]) -> list[Array | None]:
    """``out[n] = prod_{m > n} rows[m]`` (None for the last mode)."""
    out: list[Array | None] = [None] * len(rows)
    for n in range(len(rows) - 2, -1, -1):
        nxt = out[n + 1]
        out[n] = rows[n + 1] if nxt is None else rows[n + 1] * nxt
    return out


def times(a: Array | None, b: Array | None, like: Array) -> Array:
    """Elementwise product where None means ones."""
    if a is None and b is None:
        return like * 0 + 1
    if a is None or b is None:
        return b if a is None else a
    return a * b


def initial_counters(ops: ArrayOps, before: Array) -> tuple[Array | int, Array | bool]:
    """Return the initial (steps, active) of the inner loops: Python values, arrays for JAX.

    Python ``0`` and ``True`` cost nothing per step on NumPy until a mask
    appears; JAX's ``lax.fori_loop`` needs arrays of fixed type from the start.
    """
    if not ops.functional:
        return 0, True
    return ops.int_full(before.shape[0], 0, before), ops.int_full(before.shape[0], 1, before) > 0


def step_counts(steps: Array | int, like: Array, ops: ArrayOps) -> Array:
    """Per-replica step counts as a backend int64 array shaped like ``like``."""
    if isinstance(steps, int):
        return ops.int_full(like.shape[0], steps, like)
    return ops.int_full(like.shape[0], 0, like) + steps


class InnerState(NamedTuple):
    """What an inner iteration changes: the rows, the entry, and the convergence test's state."""

    rows: list[Array]
    entry: Array
    previous: Array  # the entry the next convergence test compares with
    active: Array  # bool (B,): replicas still stepping (False: none, NumPy only)
    steps: Array  # int (B,): row steps taken


def masked_iteration(
    step: Callable[..., tuple[Any, Array]],
    tol: float | Array,
    ops: ArrayOps,
    width: int = 1,
    limits: Array | None = None,
) -> Callable[[int, InnerState], InnerState]:
    """Return one inner iteration: test convergence, then step the replicas still active.

    ``step(rows, entry)`` returns the stepped rows (a list: one row for a
    Gauss-Seidel step, all N for a released sweep) and entry; a replica stops
    for good once its entry moved by less than ``tol`` in its last iteration
    (never when ``tol`` is 0). Each replica's iteration counts ``width`` row steps.
    ``tol`` may be one value per replica (B,); ``limits`` (B,), where given,
    are the replicas' own I_max: iteration k (1, 2, ...; the first step comes
    before) steps replica b only while k < ``limits[b]``.
    """
    per_replica = not isinstance(tol, float)

    def iteration(k: int, state: InnerState) -> InnerState:
        rows, entry, active = state.rows, state.entry, state.active
        if not per_replica and tol == 0.0 and limits is None:  # no test: every replica steps
            stepped, stepped_entry = step(rows, entry)
            return InnerState(stepped, stepped_entry, entry, active, state.steps + width)
        if per_replica:  # a replica with tau = 0 runs all its iterations
            active = active & ((ops.abs(entry - state.previous) >= tol) | (tol == 0.0))
        elif tol != 0.0:
            active = active & (ops.abs(entry - state.previous) >= tol)
        if limits is not None:
            active = active & (k < limits)
        if ops.host and not active.any():  # host arrays may ask the data: no needless masking
            return state._replace(active=False)  # `repeat` stops
        stepped, stepped_entry = step(rows, entry)
        if ops.host and active.all():
            return InnerState(stepped, stepped_entry, entry, active, state.steps + width)
        rows = [ops.where(active[:, None], s, r) for s, r in zip(stepped, rows, strict=True)]
        new_entry = ops.where(active, stepped_entry, entry)
        return InnerState(rows, new_entry, entry, active, state.steps + width * active)

    return iteration


def repeat(
    ops: ArrayOps,
    count: int,
    iteration: Callable[[int, InnerState], InnerState],
    state: InnerState,
) -> InnerState:
    """Run ``iteration(k, state)`` for k = 1..``count``: ``lax.fori_loop`` for JAX, else a loop.

    NumPy stops early once no replica is active (``iteration`` then sets
    ``active`` to False; the remaining iterations would change nothing);
    PyTorch runs them all rather than ask the device.
    """
    if count <= 0:
        return state
    if ops.functional:
        from jax import lax

        return lax.fori_loop(1, count + 1, iteration, state)
    for k in range(1, count + 1):
        state = iteration(k, state)
        if state.active is False:
            break
    return state
