"""Array operations resolved once per object from a TensorLy backend.

TensorLy's module-level functions (``tl.sum``, ``tl.where``, ...) look the
current backend up on every call, which costs two to three times a plain NumPy
call on the tiny arrays of an online update. :class:`ArrayOps` holds the
handful of functions ``tensorq`` needs, taken once from the TensorLy backend
instance that matches an array's type, so hot paths call them directly.
Everything else (``+``, ``*``, indexing, ``@``, ``.sum(axis=...)``,
``.reshape``) is written with operators and methods that NumPy arrays,
PyTorch tensors and JAX arrays share.

Each backend also knows its devices: :meth:`ArrayOps.asarray` puts data on a
device ("cpu", "cuda", "cuda:N"; NumPy has only "cpu") once, at the boundary,
and arrays already there pass through without a copy. JAX arrays are
immutable: ``ArrayOps.functional`` is True for JAX, and the update code
replaces factors (``.at[].set()``) where NumPy and PyTorch write in place.
Choosing the JAX backend enables ``jax_enable_x64`` (TensorLy's JAX backend
does so when it loads), so JAX holds float64 as the other backends do.

:class:`ArrayNamespace` binds one backend's :class:`ArrayOps` to a device and
adds what code compiled around the update needs (the array module ``xp``,
dtype casts, gathers and scatters, ``jax.jit``): every backend-specific
branch of the project's array code lives in this module.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import tensorly as tl
from tensorly.backend import BackendManager

SUPPORTED_BACKENDS = ("numpy", "pytorch", "jax")

Array = Any


class BackendTraits(NamedTuple):
    """What a backend is, known without importing its package.

    Attributes
    ----------
    module : str
        The package it needs (``numpy``, ``torch``, ``jax``).
    label : str
        Its name in messages.
    extra : str
        The ``teql`` extra that installs it (empty: always installed).
    host : bool
        Its arrays are NumPy arrays in host memory (only the CPU).
    functional : bool
        Its arrays are immutable and its code traces under ``jit`` (JAX).
    """

    module: str
    label: str
    extra: str
    host: bool
    functional: bool


BACKEND_TRAITS = {
    "numpy": BackendTraits("numpy", "NumPy", "", host=True, functional=False),
    "pytorch": BackendTraits("torch", "PyTorch", "torch", host=False, functional=False),
    "jax": BackendTraits("jax", "JAX", "jax", host=False, functional=True),
}
"""`BackendTraits` of each name of `SUPPORTED_BACKENDS`."""


def check_available(name: str, device: str) -> None:
    """Raise a one-line ValueError unless backend ``name`` imports and has ``device``.

    ``device`` is "cpu", "cuda" or "cuda:N"; a CUDA device must be one the
    backend sees.
    """
    traits = BACKEND_TRAITS[name]
    fix = f"pip install 'teql[{traits.extra}]'"
    if importlib.util.find_spec(traits.module) is None:
        raise ValueError(
            f"The 'backend' parameter {name!r} needs {traits.label}, which is not installed "
            f"here: {fix} (docs/tutorials/backends.md)."
        )
    try:
        importlib.import_module(traits.module)
    except Exception as error:  # an installed build that cannot load (a missing library, ...)
        reason = " ".join(str(error).split()) or type(error).__name__
        raise ValueError(
            f"The 'backend' parameter {name!r} needs {traits.label}, which is installed here "
            f"but fails to import ({reason}); reinstall it: {fix}."
        ) from None
    if device != "cpu":
        ops_for_backend(name).device(device)


def _numpy_clip(x: Any, low: float, high: float) -> Any:
    # np.clip goes through several Python wrappers; two ufuncs are twice as fast.
    return np.minimum(np.maximum(x, low), high)


def _sum_of_products(a: Any, b: Any) -> Any:
    return (a * b).sum(axis=-1)


def component_sum(terms: Any) -> Any:
    """Sum ``terms`` over the last axis, the CP components; on NumPy one after another, in order.

    NumPy's sums (``sum``, ``vecdot``, ``matmul``) group R terms in an order
    that depends on R; a running sum (``cumsum``) adds them one by one, so
    that components held at 0 beyond a replica's rank r change nothing: its
    sums are those of a rank-r tensor (`rl.agents.tensor.state.ReplicaRule`).
    PyTorch and JAX sum as they do.
    """
    if isinstance(terms, np.ndarray):
        return terms.cumsum(axis=-1)[..., -1]
    return terms.sum(axis=-1)


def divide(numerator: Any, denominator: Any) -> Any:
    """Return ``numerator / denominator``, a per-replica numerator divided as a number is.

    PyTorch divides a Python number by a tensor as ``reciprocal(tensor) * number``;
    a numerator that is a tensor (one value per replica) takes the same path, so
    that each replica's quotient is the one its own number gives. Elsewhere a
    plain division.
    """
    if type(numerator).__module__.startswith("torch"):
        return denominator.reciprocal() * numerator
    return numerator / denominator


def _ordered_sum_of_products(a: Any, b: Any) -> Any:
    return component_sum(a * b)


def _torch_rowdot() -> Callable[[Any, Any], Any]:
    import torch

    return torch.linalg.vecdot


def _bad_device(backend: str, device: Any, allowed: str) -> ValueError:
    return ValueError(
        f"The 'device' parameter must be {allowed} for the {backend} backend. "
        f"Got {device!r} instead."
    )


def _numpy_device(device: Any) -> None:
    if device not in (None, "cpu"):
        raise _bad_device("numpy", device, "None or 'cpu'")


def _numpy_asarray(data: Any, dtype: Any = None, device: Any = None) -> Any:
    if hasattr(data, "detach"):  # a CPU PyTorch tensor
        data = data.detach().cpu().numpy()
    return np.asarray(data, dtype=dtype)


def _torch_device(device: Any) -> Any:
    import torch

    try:
        where = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as error:
        raise _bad_device("pytorch", device, "'cpu', 'cuda' or 'cuda:N'") from error
    if where.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (where.index or 0) >= count:
            raise ValueError(
                f"The 'device' parameter {device!r} needs a CUDA GPU that PyTorch sees; "
                f"it sees {count} here."
            )
    return where


def _torch_asarray(data: Any, dtype: Any = None, device: Any = None) -> Any:
    import torch

    return torch.as_tensor(data, dtype=dtype, device=device)


def _numpy_int_full(n: int, value: int, like: Any) -> Any:
    return np.full(n, value, dtype=np.int64)


def _torch_int_full(n: int, value: int, like: Any) -> Any:
    import torch

    return torch.full((n,), value, dtype=torch.int64, device=like.device)


def _jax_int_full(n: int, value: int, like: Any) -> Any:
    import jax.numpy as jnp

    return jnp.full(n, value, dtype=jnp.int64)


def _jax_device(device: Any) -> Any:
    import jax

    if device is None or not isinstance(device, str):
        return device if device is not None else jax.devices()[0]
    kind, _, number = device.partition(":")
    platform = {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu"}.get(kind)
    if platform is None or (number and not number.isdigit()):
        raise _bad_device("jax", device, "'cpu', 'cuda' or 'cuda:N'")
    try:
        devices = jax.devices(platform)
    except RuntimeError as error:
        raise _bad_device("jax", device, f"a device JAX has (it has {jax.devices()})") from error
    index = int(number or 0)
    if index >= len(devices):
        raise _bad_device("jax", device, f"one of {platform}:0..{len(devices) - 1}")
    return devices[index]


def _jax_asarray(data: Any, dtype: Any = None, device: Any = None) -> Any:
    import jax
    import jax.numpy as jnp

    if hasattr(data, "detach"):  # a PyTorch tensor
        data = data.detach().cpu().numpy()
    array = jnp.asarray(data, dtype=dtype)
    if device is None or device in array.devices():
        return array
    return jax.device_put(array, device)


@dataclass(frozen=True)
class ArrayOps:
    """Direct handles to the array functions of one TensorLy backend.

    Attributes
    ----------
    name : str
        TensorLy backend name, ``"numpy"``, ``"pytorch"`` or ``"jax"``.
    functional : bool
        True where arrays are immutable (JAX): updates return new arrays.
    host : bool
        True where the arrays are NumPy arrays in host memory (NumPy): reading
        their data costs no device copy, and NumPy input needs no conversion.
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
    asarray : callable
        ``asarray(data, dtype=None, device=None)``: a backend array on a
        device, without a copy where ``data`` already is one there.
    device : callable
        ``device(spec)``: the backend's device for "cpu", "cuda" or "cuda:N"
        (None: the backend's default); a clear ValueError for others.
    int_full : callable
        ``int_full(n, value, like)``: an int64 array of n copies of ``value``
        on the device of the array ``like``.
    """

    name: str
    functional: bool
    host: bool
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
    asarray: Callable[..., Any]
    device: Callable[[Any], Any]
    int_full: Callable[[int, int, Any], Any]


@cache
def ops_for_backend(name: str) -> ArrayOps:
    """Return the :class:`ArrayOps` of a TensorLy backend.

    Parameters
    ----------
    name : {"numpy", "pytorch", "jax"}
        TensorLy backend name. "jax" enables ``jax_enable_x64``.

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
    traits = BACKEND_TRAITS[name]
    numpy = traits.host
    if traits.functional:
        import jax

        jax.config.update("jax_enable_x64", True)
    rowdot = _ordered_sum_of_products if numpy else _sum_of_products
    asarray, device, int_full = {
        "numpy": (_numpy_asarray, _numpy_device, _numpy_int_full),
        "pytorch": (_torch_asarray, _torch_device, _torch_int_full),
        "jax": (_jax_asarray, _jax_device, _jax_int_full),
    }[name]
    return ArrayOps(
        name=name,
        functional=traits.functional,
        host=traits.host,
        tensor=backend.tensor,
        to_numpy=backend.to_numpy,
        where=backend.where,
        abs=backend.abs,
        sqrt=backend.sqrt,
        copy=backend.copy,
        clip=_numpy_clip if numpy else backend.clip,
        rowdot=_torch_rowdot() if name == "pytorch" else rowdot,
        arange=backend.arange,
        ones=backend.ones,
        stack=backend.stack,
        float64=backend.float64,
        int64=backend.int64,
        asarray=asarray,
        device=device,
        int_full=int_full,
    )


def array_backend(value: Any) -> str | None:
    """Name the backend of an array, or None for anything else (lists, scalars, ...)."""
    if isinstance(value, np.ndarray):
        return "numpy"
    package = type(value).__module__.split(".")[0]
    return {"torch": "pytorch", "jax": "jax", "jaxlib": "jax"}.get(package)


def backend_name_of(array: Any) -> str:
    """Name the TensorLy backend an array belongs to.

    Parameters
    ----------
    array : array
        A NumPy array, a PyTorch tensor or a JAX array.

    Returns
    -------
    str
        ``"numpy"``, ``"pytorch"`` or ``"jax"``.
    """
    name = array_backend(array)
    if name is not None:
        return name
    raise ValueError(
        "The 'factors' parameter must hold NumPy arrays, PyTorch tensors or JAX arrays. "
        f"Got {type(array).__name__} instead."
    )


def current_ops() -> ArrayOps:
    """Return the :class:`ArrayOps` of TensorLy's current backend."""
    return ops_for_backend(tl.get_backend())


def device_of(array: Any) -> Any:
    """Return the device an array lives on (None for a NumPy array).

    Parameters
    ----------
    array : array
        A NumPy array, a PyTorch tensor or a JAX array.

    Returns
    -------
    torch.device, jax.Device or None
    """
    if isinstance(array, np.ndarray):
        return None
    device = getattr(array, "device", None)  # torch.device; jax: a Device (jax >= 0.4.27)
    return device() if callable(device) else device


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

    def while_loop(
        self, condition: Callable[[Any], Any], body: Callable[[Any], Any], init: Any
    ) -> Any:
        """Apply ``body`` to ``init`` while ``condition`` holds; return the last value.

        ``jax.lax.while_loop`` on JAX (traceable by ``jax.jit``); a Python loop on
        NumPy and PyTorch, which reads ``condition`` on the host at each turn.
        """
        if self.ops.functional:
            import jax

            return jax.lax.while_loop(condition, body, init)
        while bool(condition(init)):
            init = body(init)
        return init

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
    return ArrayNamespace(ops, ops.device(None if ops.host else device), xp)
