"""What DQN and discrete SAC share: B independent PyTorch replicas behind one `Agent`.

Each replica owns its networks, optimizers, replay buffer and two numpy
streams; the agent loops over replicas in Python. Subclasses say how to build
a replica, which network gives the greedy action, and what one training step
does; the constructor checks, the greedy action, storing transitions, episode
counting and checkpoints are written once here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from rl.agents import _torch_utils as tu
from rl.agents.base import Agent, Transitions
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import check_memory


class Replica(Protocol):
    """The attributes the shared code uses on a replica."""

    buffer: tu.ReplayBuffer
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
