"""The array namespace of the tensor step (`rl.agents.tensor.step`): one backend, one device.

`ArrayNamespace` holds, once per backend and device, the few functions the
step needs beyond `tensorq._backend.ArrayOps` (argmax, max, log, floor,
cumulative sums, gathers along an axis, zeros on a device, and a scatter that
writes in place on NumPy and PyTorch and is a donated ``jax.jit`` function on
JAX, whose arrays are immutable). `check_backend` checks a tensor agent's
backend, device and engine together.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import numpy as np

from tensorq._backend import SUPPORTED_BACKENDS, ArrayOps, ops_for_backend

Array = Any
Backend = Literal["numpy", "pytorch", "jax"]

_MODULES = {"pytorch": ("torch", "PyTorch", "torch"), "jax": ("jax", "JAX", "jax")}


def check_backend(backend: object, device: object, engine: str = "auto") -> None:
    """Check a tensor agent's ``backend``, ``device`` and ``engine`` together; one-line errors.

    Raises
    ------
    ValueError
        For an unknown backend or device string, a backend whose package is not
        installed or fails to import, a CUDA device where the backend sees none, a device other than
        the CPU for NumPy, or the compiled or reference engine with another backend.
    """
    if backend not in SUPPORTED_BACKENDS:
        raise ValueError(
            f"The 'backend' parameter must be one of {list(SUPPORTED_BACKENDS)}. "
            f"Got {backend!r} instead."
        )
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(
            f"The 'device' parameter must be cpu, cuda or cuda:N. Got {device!r} instead."
        )
    if backend == "numpy":
        if device != "cpu":
            raise ValueError(
                f"The 'device' parameter {device!r} needs backend pytorch or jax; "
                "numpy runs on the cpu."
            )
        return
    if engine in ("compiled", "reference"):
        raise ValueError(
            f"The 'engine' parameter {engine!r} runs on NumPy only; backend {backend!r} needs "
            "engine 'array' or 'auto'."
        )
    module, label, extra = _MODULES[str(backend)]
    if importlib.util.find_spec(module) is None:
        raise ValueError(
            f"The 'backend' parameter {backend!r} needs {label}, which is not installed here: "
            f"pip install 'teql[{extra}]' (docs/tutorials/backends.md)."
        )
    try:
        importlib.import_module(module)
    except Exception as error:  # an installed build that cannot load (a missing library, ...)
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(
            f"The 'backend' parameter {backend!r} needs {label}, which is installed here but "
            f"fails to import ({reason}); reinstall it: pip install 'teql[{extra}]'."
        ) from None
    if device != "cpu":
        _check_cuda(str(backend), device)


def _check_cuda(backend: str, device: str) -> None:
    """Raise ValueError unless ``backend`` has the CUDA device ``device``."""
    if backend == "jax":
        ops_for_backend("jax").device(device)  # a one-line ValueError naming JAX's devices
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        raise ValueError(
            f"The 'device' parameter {device!r} needs a CUDA GPU that PyTorch sees; "
            f"it sees {count} here."
        )


@dataclass(frozen=True)
class ArrayNamespace:
    """Array functions of one backend and device (see the module docstring).

    Attributes
    ----------
    ops : tensorq._backend.ArrayOps
        TensorLy's handles for the backend (``where``, ``sqrt``, ``asarray``, ...).
    device : Any
        The backend's device (None for NumPy).
    xp : module
        ``numpy``, ``torch`` or ``jax.numpy``: argmax, max, log, floor,
        cumsum, isfinite, maximum and minimum take ``axis`` on all three.
    """

    ops: ArrayOps
    device: Any
    xp: Any

    def put(self, data: Any, dtype: Any = None) -> Array:
        """Return ``data`` (NumPy or the backend's) as a backend array on the device."""
        if self.ops.functional and isinstance(data, np.ndarray):  # jnp.asarray is slower
            import jax

            return jax.device_put(data if dtype is None else data.astype(dtype), self.device)
        return self.ops.asarray(data, dtype, self.device)

    def host(self, array: Array) -> np.ndarray:
        """Return a NumPy copy (or view, for NumPy) of a backend array."""
        return self.ops.to_numpy(array)

    def astype(self, array: Array, dtype: Any) -> Array:
        """``array`` converted to ``dtype``."""
        return array.to(dtype) if self.ops.name == "pytorch" else array.astype(dtype)

    @property
    def on_host(self) -> bool:
        """Whether the arrays are the host's own (NumPy): written in place, never copied back."""
        return self.xp is np

    def take_along(self, array: Array, index: Array) -> Array:
        """``take_along_axis(array, index, axis=1)`` on the backend."""
        if self.ops.name == "pytorch":
            return self.xp.take_along_dim(array, index, dim=1)
        return self.xp.take_along_axis(array, index, axis=1)

    def zeros(self, shape: tuple[int, ...], dtype: Any) -> Array:
        """Zeros of ``shape`` and ``dtype`` on the device."""
        return self.put(np.zeros(shape, dtype=dtype))

    def scatter(self, array: Array, index: tuple[Array, ...], values: Array) -> Array:
        """``array[index] = values``: in place and returned (NumPy, PyTorch), or a new JAX array.

        On JAX this is meant to run inside ``jax.jit``, where XLA writes in place.
        """
        if self.ops.functional:
            return array.at[index].set(values)
        array[index] = values
        return array

    def compile(self, function: Callable[..., Any], donate: tuple[int, ...] = ()) -> Any:
        """Return ``function`` compiled by ``jax.jit`` (donating ``donate``) on JAX, else itself."""
        if not self.ops.functional:
            return function
        import jax

        return jax.jit(function, donate_argnums=donate)


@cache
def array_namespace(backend: str, device: str = "cpu") -> ArrayNamespace:
    """Return the `ArrayNamespace` of ``backend`` on ``device`` ("cpu", "cuda", "cuda:N")."""
    ops = ops_for_backend(backend)
    if backend == "pytorch":
        import torch

        xp = torch
    elif backend == "jax":
        import jax.numpy as xp
    else:
        xp = np
    return ArrayNamespace(ops, ops.device(None if backend == "numpy" else device), xp)
