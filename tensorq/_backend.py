"""Array operations resolved once per object from a TensorLy backend.

TensorLy's module-level functions (``tl.sum``, ``tl.where``, ...) look the
current backend up on every call, which costs two to three times a plain NumPy
call on the tiny arrays of an online update. :class:`ArrayOps` holds the
handful of functions ``tensorq`` needs, taken once from the TensorLy backend
instance that matches an array's type, so hot paths call them directly.
Everything else (``+``, ``*``, indexing, ``@``, ``.sum(axis=...)``,
``.reshape``) is written with operators and methods that NumPy arrays and
PyTorch tensors share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import tensorly as tl
from tensorly.backend import BackendManager

SUPPORTED_BACKENDS = ("numpy", "pytorch")


def _numpy_clip(x: Any, low: float, high: float) -> Any:
    # np.clip goes through several Python wrappers; two ufuncs are twice as fast.
    return np.minimum(np.maximum(x, low), high)


def _sum_of_products(a: Any, b: Any) -> Any:
    return (a * b).sum(axis=-1)


def _torch_rowdot() -> Callable[[Any, Any], Any]:
    import torch

    return torch.linalg.vecdot


@dataclass(frozen=True)
class ArrayOps:
    """Direct handles to the array functions of one TensorLy backend.

    Attributes
    ----------
    name : str
        TensorLy backend name, ``"numpy"`` or ``"pytorch"``.
    tensor : callable
        ``tensor(data, dtype=None)``: a backend array from array-like data.
    to_numpy : callable
        Backend array to :class:`numpy.ndarray`.
    where, abs, sqrt, copy, arange, ones, stack : callable
        The backend's functions of those names.
    clip : callable
        ``clip(x, low, high)``, elementwise.
    rowdot : callable
        ``rowdot(a, b)``: the dot products of matching rows, ``(a * b).sum(-1)``.
    float64, int64 : dtype
        The backend's dtypes.
    """

    name: str
    tensor: Callable[..., Any]
    to_numpy: Callable[[Any], np.ndarray]
    where: Callable[..., Any]
    abs: Callable[[Any], Any]
    sqrt: Callable[[Any], Any]
    copy: Callable[[Any], Any]
    clip: Callable[[Any, float, float], Any]
    rowdot: Callable[[Any, Any], Any]
    arange: Callable[..., Any]
    ones: Callable[..., Any]
    stack: Callable[..., Any]
    float64: Any
    int64: Any


@cache
def ops_for_backend(name: str) -> ArrayOps:
    """Return the :class:`ArrayOps` of a TensorLy backend.

    Parameters
    ----------
    name : {"numpy", "pytorch"}
        TensorLy backend name.

    Returns
    -------
    ArrayOps
        Function handles of that backend; cached, so resolved once per name.
    """
    if name not in SUPPORTED_BACKENDS:
        raise ValueError(
            f"The 'backend' parameter must be one of {SUPPORTED_BACKENDS}. Got {name!r} instead."
        )
    backend = BackendManager.load_backend(name)
    numpy = name == "numpy"
    return ArrayOps(
        name=name,
        tensor=backend.tensor,
        to_numpy=backend.to_numpy,
        where=backend.where,
        abs=backend.abs,
        sqrt=backend.sqrt,
        copy=backend.copy,
        clip=_numpy_clip if numpy else backend.clip,
        # np.vecdot (NumPy >= 2.0) is one gufunc call instead of a product and a sum.
        rowdot=getattr(np, "vecdot", _sum_of_products) if numpy else _torch_rowdot(),
        arange=backend.arange,
        ones=backend.ones,
        stack=backend.stack,
        float64=backend.float64,
        int64=backend.int64,
    )


def backend_name_of(array: Any) -> str:
    """Name the TensorLy backend an array belongs to.

    Parameters
    ----------
    array : array
        A NumPy array or a PyTorch tensor.

    Returns
    -------
    str
        ``"numpy"`` or ``"pytorch"``.
    """
    if isinstance(array, np.ndarray):
        return "numpy"
    if type(array).__module__.split(".")[0] == "torch":
        return "pytorch"
    raise ValueError(
        "The 'factors' parameter must hold NumPy arrays or PyTorch tensors. "
        f"Got {type(array).__name__} instead."
    )


def current_ops() -> ArrayOps:
    """Return the :class:`ArrayOps` of TensorLy's current backend."""
    return ops_for_backend(tl.get_backend())
