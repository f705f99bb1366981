"""Borrowed arrays for compiled kernels: the same data without a reference count.

Numba counts the references to every array it handles: each array argument of
a compiled function, each view (``a[b]``, a slice, a reshape) and each field
read from a named tuple of arrays adds one atomic increment and one atomic
decrement, which Numba's reference-count pruning removes only in simple
functions. In the tensor agents' step, called once per replica and lockstep
step, these were about 60 pairs per agent-step, each about 5 ns: a quarter of
a TEQL step on CartPole. `borrowed` returns an array, or a tuple of arrays,
whose data pointer, shape and strides are the original's but whose reference
count (meminfo) is null, so every reference-count update on it and on its
views is a null test instead of an atomic operation.

A kernel borrows the arrays it is given at its entry (`rl.loop.fused.run_steps`,
`rl.agents.tensor._step_compiled.act` and ``observe``). It is safe because the
caller holds the originals for the whole call: a borrowed array must never
outlive the call that borrowed it (never returned to Python, stored in a list
or kept in a structure that outlives the call). Arrays allocated inside a
kernel keep their own count.
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


def _borrow(context: Any, builder: Any, value_type: types.Type, value: Any) -> Any:
    """Return ``value`` with the meminfo of every array in it set to null."""
    if isinstance(value_type, types.Array):
        array = context.make_array(value_type)(context, builder, value=value)
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        return array._getvalue()
    if isinstance(value_type, types.BaseTuple):
        for i, member in enumerate(value_type):
            borrowed_member = _borrow(context, builder, member, builder.extract_value(value, i))
            value = builder.insert_value(value, borrowed_member, i)
    return value


@intrinsic
def borrowed(typingctx: Any, value: types.Type) -> Any:
    """Return ``value`` (an array, or a tuple of arrays) without reference counts.

    Compiled code only. Members that are not arrays are returned as they are,
    with the reference the result owns (a typed list in a tuple keeps its count).
    """

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        result = _borrow(context, builder, signature.args[0], args[0])
        context.nrt.incref(builder, signature.return_type, result)
        return result

    return value(value), codegen
