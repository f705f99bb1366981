"""Per-call inputs of `tensorq.update`, put on the tensor's backend and device once."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorq._validation import as_numpy, as_vector, check_vector
from tensorq.cp import OnlineCP

Array = Any


def index_array(q: OnlineCP, index: Any) -> Array:
    """Return the (B, N) index as an int array of the tensor's backend (not range-checked)."""
    if q._owns(index):
        return q._asarray(index, q._ops.int64)
    idx = as_numpy(index)
    return idx if q._ops.host else q._asarray(idx, q._ops.int64)


def per_replica(q: OnlineCP, name: str, value: Any, check: bool = False) -> Array | float:
    """Return a per-replica value as a Python float or an array of the tensor's backend.

    NumPy input (and scalars) with ``check`` is checked for shape and
    finiteness on the host, then converted once; an array of the tensor's own
    backend is checked for its shape only (finiteness would need a copy to the
    host), so a non-finite target given that way reaches the factors.
    """
    replicas, dtype = q.replicas, q.factors[0].dtype
    if q._owns(value):
        if tuple(value.shape) not in ((), (replicas,)):
            raise ValueError(
                f"The {name!r} parameter must be a float or an array of shape ({replicas},). "
                f"Got shape {tuple(value.shape)} instead."
            )
        return q._asarray(value, dtype)
    vector = check_vector(name, value, replicas) if check else as_vector(value, replicas)
    if isinstance(vector, float) or (q._ops.host and dtype == np.float64):
        return vector
    return q._asarray(vector, dtype)


def keep_mask(q: OnlineCP, mask: Any) -> Array | None:
    """Replicas to update: the complement of ``mask`` (None when every replica updates)."""
    if mask is None:
        return None
    if q._owns(mask):
        return q._asarray(mask, None) == 0
    keep = ~as_numpy(mask).astype(bool, copy=False)
    return keep if q._ops.host else q._asarray(keep, None)
