"""The compiled row kernels of the physical systems, behind one compiled call.

Each `rl.envs.physics.PhysicsEnv` declares its one-copy step as ``row_kernel``;
`ROW_KERNELS` lists them and `physics_row` calls the one of a given kind, so that
compiled loops (`rl.loop.fused`) step any of them without knowing which. Numba's
on-disk cache cannot key a function on a compiled function passed as an argument,
hence this explicit dispatch: a new physical system adds its kernel here.
"""

from __future__ import annotations

from typing import Any

from numba import njit

from rl.envs import cartpole, pendulum
from rl.envs.cartpole import cartpole_row
from rl.envs.pendulum import pendulum_row
from rl.jit import drop_stale

drop_stale(__file__, [cartpole.__file__, pendulum.__file__])

ROW_KERNELS = (cartpole_row, pendulum_row)
"""The row kernels `physics_row` dispatches to; a kernel's kind is its position here."""


def row_kind(env_class: Any) -> int | None:
    """Return the kind (`ROW_KERNELS` position) of ``env_class.row_kernel``, or None."""
    kernel = getattr(env_class, "row_kernel", None)
    return next((kind for kind, k in enumerate(ROW_KERNELS) if k is kernel), None)


@njit(cache=True)
def physics_row(kind, state, action, out):
    """``ROW_KERNELS[kind](state, action, out)``: one copy's (reward, terminated)."""
    if kind == 0:
        return cartpole_row(state, action, out)
    return pendulum_row(state, action, out)
