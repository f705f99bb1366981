"""The compiled-environment protocol: how compiled loops reset and step copy ``b`` of any system.

A vector environment whose copies compiled loops (`rl.loop.copies`,
`rl.loop.fused`) can step is a `CompiledVectorEnv`: ``compiled_copies(B)``
allocates the arrays of B copies as a named tuple (`CopyArrays`) with at least
``obs`` (B, D), every copy's observation (float64, or float32 where the
environment returns float32), and ``max_steps``, the truncation horizon (-1:
none). The named tuple's class names the two kernels of one copy,
``reset_kernel(copies, b, seed)`` (reset copy ``b`` as ``reset(seed=seed)``
does, observing into ``obs[b]``) and ``step_kernel(copies, b, action) ->
(reward, terminated)``, and the ``sources`` its kernels compile in. That class,
its kernels and ``compiled_copies`` live in the environment's own module
(`rl.envs.physics.RowCopies` for the physical systems, with one subclass per
system in `rl.envs.cartpole` and `rl.envs.pendulum`;
`rl.envs.highway_twin.TwinCopies`), so a new compiled environment touches only
its module.

A compiled loop calls `reset_copy` and `step_copy`, which Numba resolves by
the named tuple's class when the loop is compiled (``numba.extending.overload``
reads the class's kernels), so a loop compiled for one environment holds that
environment's code only. The kernels are found through the class, not passed
as arguments, because Numba's on-disk cache does not keep a function that takes
a compiled function as an argument; and since that cache only watches the
loop's own source file, the loops drop their cache when one of the
environment's ``sources`` is newer (`kernel_sources`, `rl.jit.drop_stale`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from numba import types
from numba.extending import overload
from numpy.typing import NDArray


class CopyArrays(Protocol):
    """The arrays of B copies that a compiled loop steps (a named tuple, see the module doc).

    Attributes
    ----------
    obs : ndarray, shape (B, D)
        Every copy's observation.
    max_steps : int
        Truncation horizon (-1: none).
    reset_kernel, step_kernel : compiled function
        Class attributes: one copy's reset ``(copies, b, seed)`` and step
        ``(copies, b, action) -> (reward, terminated)``.
    sources : tuple of str
        Class attribute: the source files the two kernels compile in.
    """

    obs: NDArray[np.floating]
    max_steps: int
    reset_kernel: ClassVar[Any]
    step_kernel: ClassVar[Any]
    sources: ClassVar[tuple[str, ...]]


@runtime_checkable
class CompiledVectorEnv(Protocol):
    """A vector environment whose copies compiled loops can step (see the module doc)."""

    def compiled_copies(self, copies: int) -> CopyArrays:
        """Allocate the arrays of ``copies`` copies (each reset by `reset_copy` before use)."""
        ...


def kernel_sources(arrays: CopyArrays) -> list[str]:
    """Return the source files compiled into a loop that steps ``arrays`` (`rl.jit.drop_stale`)."""
    return [__file__, *type(arrays).sources]


def reset_copy(copies: CopyArrays, b: int, seed: int) -> None:
    """Reset copy ``b`` as the environment's ``reset(seed=seed)`` does, observing into ``obs[b]``.

    Compiled code only: the class of ``copies`` supplies the kernel.
    """
    raise NotImplementedError("reset_copy is called from compiled code only.")


def step_copy(copies: CopyArrays, b: int, action: float) -> tuple[float, bool]:
    """Step copy ``b`` with ``action`` (an index, as a float, for discrete actions).

    Writes the next observation into ``obs[b]`` and returns (reward, terminated);
    truncation (``max_steps``) is the caller's. Compiled code only: the class
    of ``copies`` supplies the kernel.
    """
    raise NotImplementedError("step_copy is called from compiled code only.")


def _declared(copies: Any, name: str) -> Any:
    """Return the kernel ``name`` that the named tuple type ``copies`` declares, or None."""
    if not isinstance(copies, types.BaseNamedTuple):
        return None
    return getattr(copies.instance_class, name, None)


@overload(reset_copy)
def _reset_copy(copies, b, seed):
    reset = _declared(copies, "reset_kernel")
    if reset is None:
        return None

    def declared_reset(copies, b, seed):
        reset(copies, b, seed)

    return declared_reset


@overload(step_copy)
def _step_copy(copies, b, action):
    step = _declared(copies, "step_kernel")
    if step is None:
        return None

    def declared_step(copies, b, action):
        return step(copies, b, action)

    return declared_step
