"""Checks of configuration values, shared by the agents, the environments and the runner.

One wording everywhere, in the scikit-learn style that `tensorq` uses too
(`tensorq` keeps its own copy of the few checks it needs because it must not
import `rl`)::

    The 'rank' parameter must be an int >= 1. Got 0 instead.
    The 'gamma' parameter must be a finite float in (0, 1). Got 1.5 instead.

Every function takes the parameter's name first, then the value, and raises
ValueError. A value is checked once, where it enters: a config dataclass's
``__post_init__``, an environment's constructor, or `tensorq.StepSchedule` and
`tensorq.FactorBound` for the values they own; nothing is re-checked per step.

Size limits. Sizes are checked up front, so that a huge value is a
configuration error instead of an out-of-memory crash: `MAX_RANK`, `MAX_BINS`
(per dimension or mode), `check_memory` for the memory that a dense table or
tensor would need, against `memory_budget` (half of the machine's physical
memory, or of a CUDA device's), and `check_replicas` for the number of
replicas B: no constant caps it, the replicas' state must fit that budget.

Nothing here imports torch, so the tensor and tabular agents stay importable
without it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

MAX_RANK = 4096
"""Largest CP rank of a tensor agent."""

MAX_BINS = 10_000
"""Largest number of bins of one discretized dimension, and largest size of one mode."""

MAX_JOINT_ACTIONS = 4096
"""Default limit of every agent's exact search over joint actions, |A| = prod(action modes).

Every agent that searches the joint action sub-tensor (TEQL, TLR, LoRa-VI,
tabular Q-learning; DQN and SAC have one output per joint action) refuses a
larger problem through `check_joint_actions`, naming the size and the limit;
its ``max_joint_actions`` parameter raises it. The random agent samples each
action component on its own and searches nothing.
"""

MEMORY_FRACTION = 0.5
"""Share of the machine's physical memory that one dense table or tensor may take."""

REPLICA_OVERHEAD_BYTES = 4096
"""Bytes per replica outside its agent's arrays: random streams, environment, bookkeeping.

About 2.3 KiB on CartPole with the random agent (peak RSS growth of a
20,000-replica build), rounded up.
"""


def _fail(name: str, requirement: str, value: object) -> ValueError:
    return ValueError(f"The {name!r} parameter must be {requirement}. Got {value!r} instead.")


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    """Return ``value`` as an int, checking that it lies in ``[minimum, maximum]``.

    Parameters
    ----------
    name : str
        The parameter's name, quoted in the message.
    value : object
        The value to check; a bool is not an int here.
    minimum, maximum : int
        Inclusive bounds; ``maximum=None`` means no upper bound.

    Returns
    -------
    int
    """
    if not _is_int(value) or value < minimum or (maximum is not None and value > maximum):
        bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise _fail(name, f"an int {bound}", value)
    return int(value)  # type: ignore[call-overload]


def check_ints(name: str, values: object, minimum: int, maximum: int | None = None) -> tuple:
    """Return a non-empty sequence of ints, each in ``[minimum, maximum]``, as a tuple."""
    bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise _fail(name, f"a non-empty sequence of ints {bound}", values)
    items = tuple(values)
    ok = bool(items) and all(_is_int(v) for v in items)
    if not ok or any(v < minimum or (maximum is not None and v > maximum) for v in items):
        raise _fail(name, f"a non-empty sequence of ints {bound}", values)
    return tuple(int(v) for v in items)


def requirement(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> str:
    """Return the wording of a real interval, for example "a finite float in (0, 1)"."""
    if math.isinf(high) and math.isinf(low):
        return "a finite float"
    if math.isinf(high):
        return f"a finite float {'>' if low_open else '>='} {low:g}"
    if math.isinf(low):
        return f"a finite float {'<' if high_open else '<='} {high:g}"
    left, right = "(" if low_open else "[", ")" if high_open else "]"
    return f"a finite float in {left}{low:g}, {high:g}{right}"


def check_real(
    name: str,
    value: object,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """Return ``value`` as a float, checking that it is finite and in the given interval.

    Parameters
    ----------
    name : str
        The parameter's name, quoted in the message.
    value : object
        The value to check; a bool is not a real number here.
    low, high : float
        Bounds of the interval (may be infinite; the value itself must be finite).
    low_open, high_open : bool
        Exclude the lower or upper bound.

    Returns
    -------
    float
    """
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if ok:
        try:
            value_f = float(value)  # type: ignore[arg-type]
        except OverflowError:  # an int beyond the float range
            value_f = math.inf
        ok = math.isfinite(value_f)
        ok = ok and (value_f > low if low_open else value_f >= low)
        ok = ok and (value_f < high if high_open else value_f <= high)
    if not ok:
        raise _fail(name, requirement(low, high, low_open=low_open, high_open=high_open), value)
    return value_f


def check_choice(name: str, value: object, choices: Sequence[str]) -> str:
    """Return ``value``, checking that it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise _fail(name, f"one of {options}", value)
    return value


def check_counts(options: object, *names: str) -> None:
    """Refuse in one line a command-line count ``options.NAME`` below 1 (None: not given).

    ``options`` is an ``argparse.Namespace``; each name is an attribute of it,
    named in the message as its flag (``deep_seeds``: ``--deep-seeds``).
    """
    for name in names:
        value = getattr(options, name)
        if value is not None and value < 1:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"The {flag!r} value must be an int >= 1. Got {value} instead.")


def check_directories(name: str, values: Sequence[str]) -> None:
    """Check that each of ``values`` (a command-line flag ``name``'s) names a directory."""
    for value in values:
        if not Path(value).is_dir():
            raise ValueError(f"The '{name}' value {value!r} is not a directory.")


def check_epsilon_schedule(epsilon_start: float, epsilon_decay: float, epsilon_min: float) -> None:
    """Validate an epsilon schedule: start and minimum in [0, 1], decay in (0, 1], min <= start."""
    check_real("epsilon_start", epsilon_start, 0.0, 1.0)
    check_real("epsilon_decay", epsilon_decay, 0.0, 1.0, low_open=True)
    check_real("epsilon_min", epsilon_min, 0.0, 1.0)
    if epsilon_min > epsilon_start:
        raise _fail("epsilon_min", f"<= epsilon_start = {epsilon_start}", epsilon_min)


def check_joint_actions(agent: str, action_dims: Sequence[int], limit: int) -> int:
    """Return |A| = prod(action_dims), refusing more than ``limit`` joint actions.

    Raises
    ------
    ValueError
        One line naming the agent, the joint action count, the action modes and the limit.
    """
    joint = math.prod(int(d) for d in action_dims)
    if joint > limit:
        raise ValueError(
            f"{agent} searches the joint actions exactly, but the action modes "
            f"{tuple(int(d) for d in action_dims)} give {joint} joint actions, more than "
            f"max_joint_actions={limit}; use fewer action bins or raise 'max_joint_actions'."
        )
    return joint


def device_memory(device: str | None = None) -> int:
    """Return the bytes of memory of this machine, or of a CUDA device.

    Parameters
    ----------
    device : str, optional
        None or "cpu": the machine's physical memory. "cuda" or "cuda:N": the
        device's total memory, read through PyTorch, or JAX where PyTorch is
        not installed.

    Returns
    -------
    int
    """
    if device is None or device == "cpu":
        try:
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (AttributeError, OSError, ValueError):  # not POSIX: assume 16 GiB
            return 16 * 2**30
    kind, _, number = device.partition(":")
    if kind != "cuda" or not (number == "" or number.isdigit()):
        raise _fail("device", "'cpu', 'cuda' or 'cuda:N'", device)
    index = int(number or 0)
    try:
        import torch

        if torch.cuda.is_available() and index < torch.cuda.device_count():
            return int(torch.cuda.get_device_properties(index).total_memory)
    except ImportError:
        pass
    try:
        import jax

        stats = jax.devices("gpu")[index].memory_stats() or {}
        return int(stats["bytes_limit"])
    except (ImportError, RuntimeError, IndexError, KeyError):
        pass
    raise _fail("device", "a CUDA device that PyTorch or JAX sees", device)


def memory_budget(device: str | None = None) -> int:
    """Bytes one run's tables or tensors may take: `MEMORY_FRACTION` of `device_memory`."""
    return int(MEMORY_FRACTION * device_memory(device))


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB"


def state_bytes(state: object) -> int:
    """Return the bytes of the arrays in a (nested) state dict: NumPy arrays, tensors.

    Parameters
    ----------
    state : object
        For example an agent's ``state_dict()``: dicts, lists and tuples are
        walked; anything with an ``nbytes`` attribute counts that many bytes.

    Returns
    -------
    int
    """
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    if isinstance(state, (list, tuple)):
        return sum(state_bytes(v) for v in state)
    n_bytes = getattr(state, "nbytes", 0)
    return n_bytes if isinstance(n_bytes, int) else 0


def max_replicas(per_replica_bytes: float, device: str | None = None) -> int:
    """Return the largest number of replicas whose state fits `memory_budget`.

    Parameters
    ----------
    per_replica_bytes : float
        Bytes of one replica's state (> 0), for example its agent's tables.
    device : str, optional
        Where the state lives (see `device_memory`).

    Returns
    -------
    int
        ``memory_budget(device) // per_replica_bytes``, at least 1.
    """
    return max(1, int(memory_budget(device) // max(per_replica_bytes, 1.0)))


def check_replicas(
    replicas: int, per_replica_bytes: float, what: str, device: str | None = None
) -> int:
    """Return ``replicas``, refusing more than `max_replicas` in one line.

    Parameters
    ----------
    replicas : int
        Number of replicas B (seeds trained in lockstep).
    per_replica_bytes : float
        Bytes of one replica's state.
    what : str
        The replicated object, for the message (for example "teql on cartpole").
    device : str, optional
        Where the state lives (see `device_memory`).

    Returns
    -------
    int
    """
    limit = max_replicas(per_replica_bytes, device)
    if replicas > limit:
        raise ValueError(
            f"The 'seeds' parameter asks for {replicas} replicas of {what}, "
            f"{_gib(per_replica_bytes)} each; at most {limit} fit in "
            f"{_gib(memory_budget(device))} ({MEMORY_FRACTION:.0%} of {_memory_of(device)})."
        )
    return replicas


def _memory_of(device: str | None) -> str:
    return "this machine's memory" if device in (None, "cpu") else f"{device}'s memory"


def check_memory(name: str, n_bytes: float, what: str, device: str | None = None) -> None:
    """Raise ValueError naming ``name`` if ``what`` would need more than `memory_budget` bytes.

    Parameters
    ----------
    name : str
        The parameter whose value makes the object this large.
    n_bytes : float
        Bytes the object would need (a float, so that huge products do not overflow).
    what : str
        The object, for example "the Q-table (B x |S| x |A| float64)".
    device : str, optional
        Where the object lives (`device_memory`): the machine's memory by default.
    """
    budget = memory_budget(device)
    if n_bytes > budget:
        raise ValueError(
            f"The {name!r} parameter makes {what} need {_gib(n_bytes)}, more than the "
            f"{_gib(budget)} allowed ({MEMORY_FRACTION:.0%} of {_memory_of(device)})."
        )
