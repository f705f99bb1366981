"""Numba kernels: compiled on first use, and cached honestly.

`kernel` declares a compiled function without importing Numba: the module
that defines it imports in microseconds, and Numba is loaded and the function
compiled (or read from Numba's on-disk cache) the first time it runs, whether
from Python or from inside another kernel. A run on the reference engine,
which never calls a kernel, does not import Numba at all (the architecture
issue's "the reference engine imports no Numba").

Numba (``cache=True``) stores a module's compiled functions in its
``__pycache__`` and reuses them while that module's own source file is
unchanged; it does not look at the modules whose functions were compiled into
them. A kernel that calls another module's kernels (the fused runner compiles
in the agent kernels, the physics and the seeding) would then keep running
the old code after an edit of one of those modules. `drop_stale` removes such
a module's cache files when a dependency is newer, so that Numba compiles it
again. Fresh clones and CI start without a cache and are not affected.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Kernel:
    """A function compiled by ``numba.njit`` the first time it is needed.

    Calling it from Python compiles and calls the Numba dispatcher; another
    kernel that calls it sees the dispatcher's Numba type (``_numba_type_``,
    Numba's hook for objects it should treat as a known type), so kernels
    call each other as ``@njit`` functions do. Other attributes
    (``signatures``, ``py_func``) are the dispatcher's.
    """

    def __init__(self, function: Callable[..., Any], options: dict[str, Any]) -> None:
        functools.update_wrapper(self, function)
        self._function = function
        self._options = options
        self._dispatcher: Any = None

    @property
    def dispatcher(self) -> Any:
        """The ``numba.njit`` dispatcher, created (and Numba imported) on first access."""
        if self._dispatcher is None:
            from numba import njit

            self._dispatcher = njit(**self._options)(self._function)
        return self._dispatcher

    @property
    def _numba_type_(self) -> Any:
        from numba.core import types

        return types.Dispatcher(self.dispatcher)

    def __call__(self, *args: Any) -> Any:
        """Run the compiled function (compiling it on the first call)."""
        return self.dispatcher(*args)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends probe dunders: not the dispatcher's
            raise AttributeError(name)
        return getattr(self.dispatcher, name)


def kernel(function: Callable[..., Any]) -> Kernel:
    """Declare ``function`` a Numba kernel (``njit(cache=True)``), compiled on first use.

    Parameters
    ----------
    function : callable
        Written in the subset of Python that Numba compiles in nopython mode.

    Returns
    -------
    Kernel
        Callable from Python and from other kernels.
    """
    return Kernel(function, {"cache": True})


def arithmetic_kernel(function: Callable[..., Any]) -> Kernel:
    """`kernel` with NumPy's floating-point error model: x / 0 is inf or nan, never an exception.

    Numba's default model checks every division for a zero divisor, which
    keeps loops that divide from being vectorised; these kernels' divisors are
    never zero.
    """
    return Kernel(function, {"cache": True, "error_model": "numpy"})


def drop_stale(module_file: str, dependencies: list[str]) -> None:
    """Delete ``module_file``'s Numba cache files if any dependency was modified after them.

    Parameters
    ----------
    module_file : str
        ``__file__`` of the module whose kernels call into ``dependencies``.
    dependencies : list of str
        Source files of the modules whose ``@njit`` functions it compiles in.
    """
    source = Path(module_file)
    cached = list((source.parent / "__pycache__").glob(f"{source.stem}.*.nb[ic]"))
    if not cached:
        return
    newest = max(Path(path).stat().st_mtime for path in dependencies)
    if min(path.stat().st_mtime for path in cached) >= newest:
        return
    for path in cached:
        path.unlink(missing_ok=True)
