"""Algorithm 1's update as a pure function of the factors, for callers that compile around it.

`tensorq.bcd_update` and `tensorq.normalized_step` take an `OnlineCP`, check
and convert their inputs and write the result back into it. A caller that holds
the factors itself and compiles a whole training step (``jax.jit``) calls the
same update through `pure_update`, with a hashable setting from
`update_setting`: same numbers, no checks, no conversions, no host round trip.
"""

from __future__ import annotations

from typing import Any

from tensorq._backend import ArrayOps
from tensorq.cp import _subtensor
from tensorq.update import _runner, _update_all, update_setting

__all__ = ["pure_subtensor", "pure_update", "update_setting"]

Array = Any


def pure_update(
    ops: ArrayOps,
    setting: tuple[Any, ...],
    factors: tuple[Array, ...],
    replica_ids: Array,
    index: Array,
    keep: Array | None,
    vectors: tuple[Array, ...],
) -> tuple[list[Array], Array, Array, Array]:
    """Run :func:`bcd_update` or :func:`normalized_step` as a function of the factors.

    For callers that hold the factors themselves and compile a larger step
    around the update (``jax.jit``): no checks, no conversion, no host
    round trip. PyTorch and NumPy factors are written in place, JAX factors
    returned new.

    Parameters
    ----------
    ops : ArrayOps
        The factors' backend (`tensorq._backend.ops_for_backend`).
    setting : tuple
        From :func:`update_setting`.
    factors : tuple of N arrays of shape (B, d_n, R)
    replica_ids : int array of shape (B,)
        ``arange(B)`` on the factors' device.
    index : int array of shape (B, N)
    keep : bool array of shape (B,) or None
        Replicas to update (None: all).
    vectors : tuple of arrays of shape (B,)
        Targets, visit counts and step sizes (``bcd``), or targets and step
        sizes (``normalized``), of the factors' dtype and device.

    Returns
    -------
    factors, before, after, iterations
        As in :class:`UpdateResult`, with the new factors first.

    References
    ----------
    Algorithm 1 (see :func:`bcd_update`).
    """
    return _update_all(ops, _runner(setting, ops), factors, replica_ids, index, keep, vectors)


def pure_subtensor(
    factors: tuple[Array, ...],
    replica_ids: Array,
    leading: Array,
    trailing_shape: tuple[int, ...],
) -> Array:
    """Return `OnlineCP.subtensor` of the factors: ``out[b] = Q_b[leading[b], ...]``.

    Parameters
    ----------
    factors : tuple of N arrays of shape (B, d_n, R)
    replica_ids : int array of shape (B,)
    leading : int array of shape (B, k)
        Indices of the first k modes, on the factors' device (not checked).
    trailing_shape : tuple of int
        ``(d_{k+1}, ..., d_N)``.

    Returns
    -------
    array of shape (B, d_{k+1}, ..., d_N)
    """
    return _subtensor(factors, replica_ids, leading, trailing_shape)
