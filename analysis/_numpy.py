"""Run an analysis entry point under TensorLy's NumPy backend, whatever the global one is.

The analyses compute in float64 NumPy (SVDs, ALS, value iteration) and return
NumPy arrays. Their inputs are converted at the boundary (`tensorq`'s
``as_numpy`` takes NumPy, PyTorch and JAX arrays), and TensorLy calls made
inside, including the input checks of ``CPTensor``, must then use the NumPy
backend: a global ``tl.set_backend("pytorch")`` would otherwise hand NumPy
arrays to PyTorch functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import tensorly as tl

P = ParamSpec("P")
T = TypeVar("T")


def numpy_backend(function: Callable[P, T]) -> Callable[P, T]:
    """Return ``function`` run inside ``tensorly.backend_context("numpy")``."""

    @functools.wraps(function)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with tl.backend_context("numpy"):
            return function(*args, **kwargs)

    return wrapper
