"""The looped design of DQN and discrete SAC, a frozen yardstick of `benchmarks.bench_deep`.

This is ``rl.agents.deep._torch_agent`` (with the MLP, Adam and replay buffer of
``rl.agents.deep._torch_utils``) as it was before the agents were batched over
replicas: each replica owns its networks, optimizers, replay buffer and two
numpy streams, and the agent loops over replicas in Python. It is not part of
the package, and it is frozen: not built from the agents' training steps
(`rl.agents.deep.dqn.DQNStep`, `rl.agents.deep.sac.SACStep`) and not changed with
them, so that the benchmark and the learning comparison
(`benchmarks.deep_learning`) measure the batched agents against a fixed design.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from rl.agents._restore import check_values, saved_array, saved_count
from rl.agents.base import Agent, Transitions
from rl.agents.deep import _torch_utils as tu
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import check_memory


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
    target = copy.deepcopy(network)
    target.requires_grad_(False)
    return target


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


class Replica(Protocol):
    """The attributes the shared code uses on a replica."""

    buffer: ReplayBuffer
    steps: int
    episodes: int

    def state_dict(self) -> dict[str, Any]: ...  # noqa: D102

    def load_state_dict(self, state: dict[str, Any]) -> None: ...  # noqa: D102


class ReplicatedTorchAgent(Agent):
    """Base class of the PyTorch agents: one `Replica` per stream, looped over in Python.

    Parameters
    ----------
    problem : rl.problems.Problem
        Supplies ``state_dims`` (network inputs) and ``action_dims`` (outputs:
        one per joint action).
    config : dataclass
        An instance of the subclass's ``config_type``.
    streams : sequence of rl.seeding.AgentRandom
        One per replica.
    """

    config_type: ClassVar[type]
    name: ClassVar[str]

    def __init__(self, problem: Problem, config: Any, streams: Sequence[AgentRandom]) -> None:
        expected = self.config_type.__name__
        if not isinstance(config, self.config_type):
            raise TypeError(f"config must be a {expected}. Got {type(config).__name__} instead.")
        if len(streams) < 1:
            raise ValueError("The 'streams' parameter must hold at least one AgentRandom.")
        self.problem = problem
        self.config = config
        self.codec = tu.IndexCodec(
            problem.state_dims, problem.action_dims, config.input_scaling, config.max_joint_actions
        )
        self.replicas = len(streams)
        self._check_memory(config)
        self._replicas = [self._make_replica(s) for s in streams]

    def _check_memory(self, config: Any) -> None:
        """Refuse sizes whose networks or replay buffers cannot fit in memory, before allocating."""
        inputs, outputs = len(self.codec.state_dims), self.codec.n_actions
        params = (inputs + 1) * config.hidden + (config.hidden + 1) * outputs
        # float32 parameters of up to five networks, their gradients and Adam's two moments
        check_memory("hidden", 4.0 * 20 * params * self.replicas, "the networks and optimizers")
        transition = 2 * 8 * inputs + 16  # states, next states, action, reward, termination
        buffers = float(config.buffer_size) * transition * self.replicas
        check_memory("buffer_size", buffers, "the replay buffers")

    def _make_replica(self, streams: AgentRandom) -> Replica:
        raise NotImplementedError

    def _greedy_network(self, replica: Any) -> nn.Module:
        """Return the network whose argmax is the greedy action."""
        raise NotImplementedError

    @staticmethod
    def _forward(network: nn.Module, features: NDArray[np.float32]) -> torch.Tensor:
        """Return the outputs of ``network`` for one feature row, without gradients."""
        with torch.inference_mode():
            return network(torch.from_numpy(features[None]))[0]

    def _argmax(self, replica: Any, features: NDArray[np.float32]) -> int:
        return int(self._forward(self._greedy_network(replica), features).argmax())

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Argmax of each replica's greedy network, shape (B, D_A); first index wins ties."""
        features = self.codec.features(states)
        joint = [self._argmax(replica, features[i]) for i, replica in enumerate(self._replicas)]
        return self.codec.unravel(np.asarray(joint, dtype=np.int64))

    def _store(self, batch: Transitions) -> Iterator[Any]:
        """Add each active replica's transition to its buffer, count it, and yield the replica."""
        joint = self.codec.ravel(batch.actions)
        for i in np.flatnonzero(batch.active):
            replica = self._replicas[i]
            replica.buffer.add(
                batch.states[i],
                joint[i],
                batch.rewards[i],
                batch.next_states[i],
                batch.terminated[i],
            )
            replica.steps += 1
            yield replica

    def _ready(self, replica: Any) -> bool:
        """Whether the replica is past warm-up and its buffer holds a mini-batch."""
        config = self.config
        return replica.steps >= config.learning_starts and replica.buffer.size >= config.batch_size

    def end_episode(self, active: NDArray[np.bool_]) -> None:
        """Count the episode of each active replica."""
        for i in np.flatnonzero(active):
            self._replicas[i].episodes += 1

    def state_dict(self) -> dict[str, Any]:
        """Return every replica's networks, optimizers, replay, counters and RNG states."""
        return {"agent": self.name, "replicas": [r.state_dict() for r in self._replicas]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (same number of replicas and config)."""
        saved = state["replicas"]
        if len(saved) != self.replicas:
            raise ValueError(f"State holds {len(saved)} replicas; this agent has {self.replicas}.")
        for replica, replica_state in zip(self._replicas, saved, strict=True):
            replica.load_state_dict(replica_state)


def optimizer_step(optimizer: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    """Zero the gradients, backpropagate ``loss`` and take one optimizer step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
