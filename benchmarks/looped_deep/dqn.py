"""DQN as it was before batching (one network per replica, looped): a frozen yardstick."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from benchmarks.looped_deep import agent as lt
from rl.agents._restore import saved_count, saved_fraction
from rl.agents.base import Transitions
from rl.agents.deep import _torch_utils as tu
from rl.agents.deep.dqn import DQNConfig
from rl.problems import Problem
from rl.seeding import AgentRandom


class _Replica:
    """Networks, optimizer, buffer, streams and counters of one DQN replica."""

    def __init__(self, codec: tu.IndexCodec, config: DQNConfig, streams: AgentRandom) -> None:
        self.init, self.explore = streams.init, streams.explore
        self.q = lt.mlp(codec.n_inputs, config.hidden, codec.n_actions, self.init)
        self.target = lt.frozen_copy(self.q)
        self.optimizer = lt.adam(list(self.q.parameters()), config.learning_rate)
        self.buffer = lt.ReplayBuffer(config.buffer_size, codec.state_dims)
        self.epsilon = float(config.epsilon_start)
        self.steps = 0
        self.episodes = 0
        self.loss = float("nan")

    def sync_target(self) -> None:
        with torch.no_grad():
            for target, online in zip(self.target.parameters(), self.q.parameters(), strict=True):
                target.copy_(online)

    def state_dict(self) -> dict[str, Any]:
        return {
            "q": tu.to_numpy_tree(self.q.state_dict()),
            "target": tu.to_numpy_tree(self.target.state_dict()),
            "optimizer": tu.to_numpy_tree(self.optimizer.state_dict()),
            "buffer": self.buffer.state_dict(),
            "epsilon": self.epsilon,
            "steps": self.steps,
            "episodes": self.episodes,
            "loss": self.loss,
            "init_rng": tu.rng_state(self.init),
            "explore_rng": tu.rng_state(self.explore),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; ValueError if a counter is out of range."""
        saved_fraction(state, "epsilon")
        saved_count(state, "steps")
        saved_count(state, "episodes")
        self.q.load_state_dict(tu.to_torch_tree(state["q"]))
        self.target.load_state_dict(tu.to_torch_tree(state["target"]))
        self.optimizer.load_state_dict(tu.to_torch_tree(state["optimizer"]))
        self.buffer.load_state_dict(state["buffer"])
        self.epsilon = float(state["epsilon"])
        self.steps = int(state["steps"])
        self.episodes = int(state["episodes"])
        self.loss = float(state["loss"])
        tu.set_rng_state(self.init, state["init_rng"])
        tu.set_rng_state(self.explore, state["explore_rng"])


class LoopedDQN(lt.ReplicatedTorchAgent):
    """Deep Q-learning with experience replay and a target network, B independent replicas.

    Parameters
    ----------
    problem : rl.problems.Problem
        Supplies ``state_dims`` (network inputs, one per component) and
        ``action_dims`` (outputs: one per joint action).
    config : DQNConfig
        Hyperparameters.
    streams : sequence of rl.seeding.AgentRandom
        One per replica: ``init`` draws the weights, ``explore`` the epsilon
        coin flips, random actions and replay mini-batches.

    Attributes
    ----------
    replicas : int
        B, the number of replicas.

    References
    ----------
    V. Mnih et al., "Human-level control through deep reinforcement learning",
    Nature 518, 2015.
    """

    config_type = DQNConfig
    name = "dqn"
    config: DQNConfig

    def __init__(self, problem: Problem, config: DQNConfig, streams: Sequence[AgentRandom]) -> None:
        super().__init__(problem, config, streams)
        self._loss_fn = F.smooth_l1_loss if config.loss == "huber" else F.mse_loss

    def _make_replica(self, streams: AgentRandom) -> _Replica:
        return _Replica(self.codec, self.config, streams)

    def _greedy_network(self, replica: _Replica) -> torch.nn.Module:
        return replica.q

    # ------------------------------------------------------------------ acting

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Epsilon-greedy joint actions of the active replicas, shape (B, D_A)."""
        features = self.codec.features(states)
        joint = np.zeros(self.replicas, dtype=np.int64)
        for i in np.flatnonzero(active):
            replica = self._replicas[i]
            if replica.explore.random() < replica.epsilon:
                joint[i] = replica.explore.integers(self.codec.n_actions)
            else:
                joint[i] = self._argmax(replica, features[i])
        return self.codec.unravel(joint)

    # ------------------------------------------------------------------ learning

    def observe(self, batch: Transitions) -> None:
        """Store each active replica's transition, then one gradient step after warm-up."""
        config = self.config
        for replica in self._store(batch):
            if config.epsilon_schedule == "step":
                replica.epsilon = max(config.epsilon_min, replica.epsilon * config.epsilon_decay)
            if self._ready(replica):
                replica.loss = self._train_step(replica)
            if replica.steps % config.target_update_every == 0:
                replica.sync_target()

    def _train_step(self, replica: _Replica) -> float:
        """One Adam step on the TD loss of a replay mini-batch; returns the loss."""
        sample = replica.buffer.sample(replica.explore, self.config.batch_size)
        states = torch.from_numpy(self.codec.features(sample.states))
        next_states = torch.from_numpy(self.codec.features(sample.next_states))
        actions = torch.from_numpy(sample.actions)
        with torch.no_grad():
            next_values = replica.target(next_states).max(dim=1).values
            not_done = torch.from_numpy(1.0 - sample.terminated)
            targets = torch.from_numpy(sample.rewards) + self.config.gamma * not_done * next_values
        values = replica.q(states).gather(1, actions[:, None]).squeeze(1)
        loss = self._loss_fn(values, targets)
        lt.optimizer_step(replica.optimizer, loss)
        return float(loss.item())

    def end_episode(self, active: NDArray[np.bool_]) -> None:
        """Count the episode; decay epsilon here when ``epsilon_schedule == "episode"``."""
        super().end_episode(active)
        if self.config.epsilon_schedule != "episode":
            return
        for i in np.flatnonzero(active):
            replica = self._replicas[i]
            replica.epsilon = max(
                self.config.epsilon_min, replica.epsilon * self.config.epsilon_decay
            )

    # ------------------------------------------------------------------ introspection

    @property
    def n_params(self) -> int:
        """Parameters of one online network, d_in h + h + h |A| + |A| (target not counted).

        References
        ----------
        The paper's appendix "Parameter Matching Methodology", P_DQN.
        """
        return tu.mlp_params(self.codec.n_inputs, self.config.hidden, self.codec.n_actions)

    def metrics(self) -> dict[str, NDArray[np.float64]]:
        """Per-replica diagnostics, shape (B,): last TD loss (NaN before training) and epsilon."""
        return {
            "loss": np.array([r.loss for r in self._replicas]),
            "epsilon": np.array([r.epsilon for r in self._replicas]),
        }
