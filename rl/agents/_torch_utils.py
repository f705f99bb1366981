"""Shared pieces of the PyTorch baselines (DQN, discrete SAC).

An MLP whose weights are drawn from a numpy stream, the width matcher (the
formulas live in `rl.agents.param_formulas`), a replay buffer with numpy storage, the map
between index vectors and network inputs / joint actions, conversion of torch
state to numpy trees for checkpoints.

Nothing here touches torch's global random state: weights come from the
replica's ``init`` generator and replay samples from its ``explore`` generator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from rl.agents._restore import check_values, saved_array, saved_count
from rl.agents.param_formulas import match_width, mlp_params
from rl.validation import check_joint_actions

INPUT_SCALINGS = ("unit", "raw")

# ----------------------------------------------------------------------------- networks


def matched_hidden(n_in: int, n_out: int, budget: int, networks: int = 1, extra: int = 0) -> int:
    """Return the hidden width h whose parameter count is nearest ``budget``.

    The count is ``networks * mlp_params(n_in, h, n_out) + extra``; ties go to
    the smaller width (`rl.agents.param_formulas.match_width`). ``networks=3, extra=1``
    is the SAC formula P_SAC = 3 P_network + 1 of the paper's appendix.
    """
    return match_width(budget, lambda h: networks * mlp_params(n_in, h, n_out) + extra)


def mlp(n_in: int, hidden: int, n_out: int, rng: np.random.Generator) -> nn.Sequential:
    """One-hidden-layer ReLU MLP, float32, weights drawn from ``rng``.

    Every weight and bias is uniform on [-1/sqrt(fan_in), 1/sqrt(fan_in)], the
    distribution of PyTorch's default ``nn.Linear`` initialisation, but drawn
    from the replica's numpy ``init`` stream (layer by layer, weight then bias)
    so that torch's global generator is never used.
    """
    layers = []
    for fan_in, fan_out in ((n_in, hidden), (hidden, n_out)):
        layer = torch.nn.utils.skip_init(nn.Linear, fan_in, fan_out)
        bound = 1.0 / math.sqrt(fan_in)
        with torch.no_grad():
            weight = rng.uniform(-bound, bound, size=(fan_out, fan_in))
            layer.weight.copy_(torch.from_numpy(weight))
            layer.bias.copy_(torch.from_numpy(rng.uniform(-bound, bound, size=fan_out)))
        layers.append(layer)
    return nn.Sequential(layers[0], nn.ReLU(), layers[1])


def adam(params: list[torch.Tensor], lr: float) -> torch.optim.Adam:
    """Adam with PyTorch's defaults, using the fused CPU kernel where available.

    The fused kernel (PyTorch >= 2.4) is about 3 times faster than the
    per-parameter loop on networks this small; numbers differ from the loop in
    the last bits, but each is deterministic.
    """
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except (RuntimeError, ValueError):
        return torch.optim.Adam(params, lr=lr)


def frozen_copy(network: nn.Module) -> nn.Module:
    """Deep copy of ``network`` without gradients (a target network)."""
    import copy

    target = copy.deepcopy(network)
    target.requires_grad_(False)
    return target


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


# ----------------------------------------------------------------------------- replay


class ReplayBatch(NamedTuple):
    """A sampled mini-batch, numpy arrays of length ``batch_size``."""

    states: NDArray[np.integer]
    actions: NDArray[np.int64]
    rewards: NDArray[np.float32]
    next_states: NDArray[np.integer]
    terminated: NDArray[np.float32]


class ReplayBuffer:
    """Ring buffer of transitions stored as index vectors in the smallest int dtype.

    Parameters
    ----------
    capacity : int
        Number of transitions kept; the oldest is overwritten first.
    state_dims : tuple of int
        Mode sizes, used to choose the storage dtype.
    """

    def __init__(self, capacity: int, state_dims: Sequence[int]) -> None:
        self.capacity = int(capacity)
        self.state_dims = tuple(int(d) for d in state_dims)
        dtype = np.min_scalar_type(max(state_dims) - 1)
        dtype = np.promote_types(dtype, np.int16)  # signed, at least 16 bits
        self.states = np.zeros((self.capacity, len(state_dims)), dtype=dtype)
        self.next_states = np.zeros_like(self.states)
        self.actions = np.zeros(self.capacity, dtype=np.int64)
        self.rewards = np.zeros(self.capacity, dtype=np.float32)
        self.terminated = np.zeros(self.capacity, dtype=np.float32)
        self.position = 0
        self.size = 0

    def add(
        self, state: NDArray, action: int, reward: float, next_state: NDArray, terminated: bool
    ) -> None:
        """Store one transition."""
        i = self.position
        self.states[i] = state
        self.actions[i] = action
        self.rewards[i] = reward
        self.next_states[i] = next_state
        self.terminated[i] = terminated
        self.position = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, batch_size: int) -> ReplayBatch:
        """Draw ``batch_size`` stored transitions uniformly, with replacement, from ``rng``."""
        idx = rng.integers(0, self.size, size=batch_size)
        return ReplayBatch(
            self.states[idx],
            self.actions[idx],
            self.rewards[idx],
            self.next_states[idx],
            self.terminated[idx],
        )

    def state_dict(self) -> dict[str, Any]:
        """Return the stored transitions (filled part only), position and size."""
        n = self.size
        return {
            "states": self.states[:n].copy(),
            "actions": self.actions[:n].copy(),
            "rewards": self.rewards[:n].copy(),
            "next_states": self.next_states[:n].copy(),
            "terminated": self.terminated[:n].copy(),
            "position": self.position,
            "size": n,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned.

        Raises
        ------
        ValueError
            If the size or position is out of range, an array has another
            shape or dtype than this buffer's, or a state index is outside its
            mode; nothing is changed.
        """
        n = saved_count(state, "size", self.capacity)
        position = saved_count(state, "position", self.capacity - 1)
        saved = {
            key: saved_array(state, key, getattr(self, key)[:n], where="buffer")
            for key in ("states", "actions", "rewards", "next_states", "terminated")
        }
        for key in ("states", "next_states"):
            check_values(f"buffer/{key}", saved[key], 0, None)
            if n and np.any(saved[key] >= np.asarray(self.state_dims)):
                raise ValueError(f"the entry buffer/{key} holds an index outside its mode.")
        for key, values in saved.items():
            getattr(self, key)[:n] = values
        self.position = position
        self.size = n


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
