"""Shared pieces of the PyTorch baselines (DQN, discrete SAC).

The width matcher (the formulas live in `rl.agents.param_formulas`), the device
check, the map between index vectors and network inputs / joint actions, and
conversion of torch state to numpy trees for checkpoints. The stacked
networks, Adam and replay memory are in `rl.agents.deep._stacked`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import torch
from numpy.typing import NDArray

from rl.agents.param_formulas import match_width, mlp_params
from rl.validation import check_joint_actions

INPUT_SCALINGS = ("unit", "raw")

# ----------------------------------------------------------------------------- widths and devices


def matched_hidden(n_in: int, n_out: int, budget: int, networks: int = 1, extra: int = 0) -> int:
    """Return the hidden width h whose parameter count is nearest ``budget``.

    The count is ``networks * mlp_params(n_in, h, n_out) + extra``; ties go to
    the smaller width (`rl.agents.param_formulas.match_width`). ``networks=3, extra=1``
    is the SAC formula P_SAC = 3 P_network + 1 of the paper's appendix.
    """
    return match_width(budget, lambda h: networks * mlp_params(n_in, h, n_out) + extra)


DEFAULT_DEVICE = "cpu"
"""Torch device of the deep agents unless their config's ``device`` says otherwise."""


def check_device_name(name: object) -> torch.device:
    """Return the torch device ``name`` names: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

    Raises
    ------
    ValueError
        If ``name`` is not such a string (whether the device exists is checked
        by `torch_device`, when an agent is built).
    """
    problem = ValueError(
        f"The 'device' parameter must be cpu, cuda or cuda:N. Got {name!r} instead."
    )
    if not isinstance(name, str):
        raise problem
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise problem from None
    if device.type not in ("cpu", "cuda") or (device.type == "cpu" and device.index):
        raise problem
    return device


def torch_device(name: str) -> torch.device:
    """Return the torch device ``name`` once checked to exist on this machine.

    Raises
    ------
    ValueError
        If ``name`` is not a device name, or names a CUDA device this machine lacks.
    """
    device = check_device_name(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            raise ValueError(
                f"The 'device' parameter is {name!r}, but this machine has {count} CUDA device(s)."
            )
    return device


Method = TypeVar("Method", bound=Callable[..., Any])


def one_cpu_thread(method: Method) -> Method:
    """Run an agent's ``method`` with one PyTorch intra-op thread when its device is the CPU.

    A replica's numbers must not depend on the others (bitwise alone vs among
    seven, `tests/rl/test_deep_replicas.py`). With several intra-op threads
    PyTorch's CPU batched product of one replica and of several take
    different kernels, whose sums differ in the last bits (measured at the
    output layer of DQN on CartPole: 46 hidden units, 10 joint actions,
    mini-batches of 32); on one thread they are the same. The thread count
    is restored on return; setting it costs well under a microsecond. The
    agent's ``device`` attribute says where it computes.
    """

    @functools.wraps(method)
    def on_one_thread(agent: Any, *args: Any, **kwargs: Any) -> Any:
        threads = torch.get_num_threads()
        if agent.device.type != "cpu" or threads == 1:
            return method(agent, *args, **kwargs)
        torch.set_num_threads(1)
        try:
            return method(agent, *args, **kwargs)
        finally:
            torch.set_num_threads(threads)

    return on_one_thread  # type: ignore[return-value]


# ----------------------------------------------------------------------------- inputs and actions


class IndexCodec:
    """Maps index vectors to network inputs and joint actions back and forth.

    Parameters
    ----------
    state_dims, action_dims : tuple of int
        The problem's mode sizes.
    input_scaling : {"unit", "raw"}
        ``"unit"`` divides index n by (d_n - 1) so each input lies in [0, 1]
        (a mode with one bin gives 0); ``"raw"`` feeds the indices as floats,
        as the authors' released code does.
    max_joint_actions : int
        Refuse action spaces whose product of sizes exceeds this.
    """

    def __init__(
        self,
        state_dims: Sequence[int],
        action_dims: Sequence[int],
        input_scaling: str,
        max_joint_actions: int,
    ) -> None:
        self.state_dims = tuple(int(d) for d in state_dims)
        self.action_dims = tuple(int(d) for d in action_dims)
        # One network output per joint action, and an exact argmax over them.
        self.n_actions = check_joint_actions(
            "The network (one output per joint action)", self.action_dims, max_joint_actions
        )
        if input_scaling == "unit":
            scale = [1.0 / (d - 1) if d > 1 else 0.0 for d in self.state_dims]
        else:
            scale = [1.0] * len(self.state_dims)
        self.scale = np.asarray(scale, dtype=np.float32)

    @property
    def n_inputs(self) -> int:
        """Network input width: one float per state component."""
        return len(self.state_dims)

    def features(self, states: NDArray[np.integer]) -> NDArray[np.float32]:
        """Network inputs of index vectors, shape (..., D_S) -> float32 (..., D_S)."""
        return np.asarray(states).astype(np.float32) * self.scale

    def ravel(self, actions: NDArray[np.integer]) -> NDArray[np.int64]:
        """Joint action index of each row of ``actions`` (B, D_A) -> (B,)."""
        actions = np.asarray(actions)
        if len(self.action_dims) == 1:
            return actions[:, 0].astype(np.int64)
        return np.ravel_multi_index(tuple(actions.T), self.action_dims).astype(np.int64)

    def unravel(self, joint: NDArray[np.integer]) -> NDArray[np.int64]:
        """Index vectors (B, D_A) of joint action indices (B,)."""
        if len(self.action_dims) == 1:
            return np.asarray(joint, dtype=np.int64)[:, None]
        return np.stack(np.unravel_index(joint, self.action_dims), axis=1).astype(np.int64)


# ----------------------------------------------------------------------------- checkpoints


def to_numpy_tree(obj: Any) -> Any:
    """Copy of a nested dict/list/tuple with every tensor turned into a numpy array."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().numpy().copy()
    if isinstance(obj, dict):
        return {key: to_numpy_tree(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_numpy_tree(value) for value in obj)
    return obj


def to_torch_tree(obj: Any) -> Any:
    """Inverse of `to_numpy_tree`: every numpy array becomes a tensor (a copy)."""
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, dict):
        return {key: to_torch_tree(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_torch_tree(value) for value in obj)
    return obj


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """Return the bit generator state of ``rng`` (a plain dict)."""
    return rng.bit_generator.state


def set_rng_state(rng: np.random.Generator, state: dict[str, Any]) -> None:
    """Restore a state saved by `rng_state`."""
    rng.bit_generator.state = state
