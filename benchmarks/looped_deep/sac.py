"""Discrete SAC as it was before batching (networks per replica, looped): a frozen yardstick."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from benchmarks.looped_deep import agent as lt
from rl.agents._restore import saved_count
from rl.agents.base import Transitions
from rl.agents.deep import _torch_utils as tu
from rl.agents.deep.sac import (
    DiscreteSACConfig,
    policy_loss,
    soft_bellman_targets,
    temperature_loss,
)
from rl.problems import Problem
from rl.seeding import AgentRandom


class _Replica:
    """Actor, critics, targets, temperature, optimizers, buffer, streams of one replica."""

    def __init__(
        self, codec: tu.IndexCodec, config: DiscreteSACConfig, streams: AgentRandom
    ) -> None:
        self.init, self.explore = streams.init, streams.explore
        shape = (codec.n_inputs, config.hidden, codec.n_actions)
        self.actor = lt.mlp(*shape, self.init)
        self.q1 = lt.mlp(*shape, self.init)
        self.q2 = lt.mlp(*shape, self.init)
        self.q1_target = lt.frozen_copy(self.q1)
        self.q2_target = lt.frozen_copy(self.q2)
        self.log_alpha = torch.tensor([math.log(config.alpha)], requires_grad=config.autotune)
        lr = config.learning_rate
        self.actor_optimizer = lt.adam(list(self.actor.parameters()), lr)
        critic_params = [*self.q1.parameters(), *self.q2.parameters()]
        self.critic_optimizer = lt.adam(critic_params, lr)
        self.alpha_optimizer = lt.adam([self.log_alpha], lr)
        self.buffer = lt.ReplayBuffer(config.buffer_size, codec.state_dims)
        self.pairs = [
            (target, online)
            for net, net_target in ((self.q1, self.q1_target), (self.q2, self.q2_target))
            for target, online in zip(net_target.parameters(), net.parameters(), strict=True)
        ]
        self.steps = 0
        self.episodes = 0
        self.losses = {"critic_loss": math.nan, "actor_loss": math.nan, "alpha_loss": math.nan}

    _MODULES = ("actor", "q1", "q2", "q1_target", "q2_target")
    _OPTIMIZERS = ("actor_optimizer", "critic_optimizer", "alpha_optimizer")

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            name: tu.to_numpy_tree(getattr(self, name).state_dict())
            for name in self._MODULES + self._OPTIMIZERS
        }
        state.update(
            log_alpha=tu.to_numpy_tree(self.log_alpha),
            buffer=self.buffer.state_dict(),
            steps=self.steps,
            episodes=self.episodes,
            losses=dict(self.losses),
            init_rng=tu.rng_state(self.init),
            explore_rng=tu.rng_state(self.explore),
        )
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned; ValueError if a counter is out of range."""
        saved_count(state, "steps")
        saved_count(state, "episodes")
        for name in self._MODULES + self._OPTIMIZERS:
            getattr(self, name).load_state_dict(tu.to_torch_tree(state[name]))
        with torch.no_grad():
            self.log_alpha.copy_(torch.from_numpy(state["log_alpha"]))
        self.buffer.load_state_dict(state["buffer"])
        self.steps = int(state["steps"])
        self.episodes = int(state["episodes"])
        self.losses = dict(state["losses"])
        tu.set_rng_state(self.init, state["init_rng"])
        tu.set_rng_state(self.explore, state["explore_rng"])


class LoopedDiscreteSAC(lt.ReplicatedTorchAgent):
    """Discrete soft actor-critic with twin critics and learned temperature, B replicas.

    Parameters
    ----------
    problem : rl.problems.Problem
        Supplies ``state_dims`` (network inputs) and ``action_dims`` (outputs:
        one per joint action).
    config : DiscreteSACConfig
        Hyperparameters.
    streams : sequence of rl.seeding.AgentRandom
        One per replica: ``init`` draws the weights of actor, Q1 and Q2 (in that
        order), ``explore`` the training actions and the replay mini-batches.

    Attributes
    ----------
    replicas : int
        B, the number of replicas.

    Notes
    -----
    Per gradient step, with pi(.|s) the actor's softmax, Q' = min(Q1', Q2') of
    the target critics and alpha = exp(log_alpha):

    - critics: MSE of Q_i(s, a) against
      r + gamma (1 - terminated) sum_a' pi(a'|s') (Q'(s', a') - alpha log pi(a'|s'));
    - actor: mean over the batch of sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a));
    - temperature: mean of sum_a pi(a|s) (-log_alpha (log pi(a|s) + H_target)),
      H_target = target_entropy_scale * log |A|;
    - Polyak update of both target critics with ``tau``.

    References
    ----------
    P. Christodoulou, "Soft Actor-Critic for Discrete Action Settings",
    arXiv:1910.07207, 2019.
    """

    config_type = DiscreteSACConfig
    name = "sac"
    config: DiscreteSACConfig

    def __init__(
        self, problem: Problem, config: DiscreteSACConfig, streams: Sequence[AgentRandom]
    ) -> None:
        super().__init__(problem, config, streams)
        self.target_entropy = config.target_entropy_scale * math.log(self.codec.n_actions)

    def _make_replica(self, streams: AgentRandom) -> _Replica:
        return _Replica(self.codec, self.config, streams)

    def _greedy_network(self, replica: _Replica) -> torch.nn.Module:
        return replica.actor

    # ------------------------------------------------------------------ acting

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Joint actions sampled from each active replica's policy, shape (B, D_A)."""
        features = self.codec.features(states)
        joint = np.zeros(self.replicas, dtype=np.int64)
        for i in np.flatnonzero(active):
            replica = self._replicas[i]
            logits = self._forward(replica.actor, features[i])
            probs = torch.softmax(logits.double(), dim=0).numpy()
            cumulative = np.cumsum(probs)
            u = replica.explore.random() * cumulative[-1]
            joint[i] = min(int(np.searchsorted(cumulative, u, side="right")), len(probs) - 1)
        return self.codec.unravel(joint)

    # ------------------------------------------------------------------ learning

    def observe(self, batch: Transitions) -> None:
        """Store each active replica's transition, then one SAC update after warm-up."""
        for replica in self._store(batch):
            if self._ready(replica):
                self._train_step(replica)

    def _train_step(self, replica: _Replica) -> None:
        """Critic, actor and temperature steps on one replay mini-batch, then Polyak update."""
        sample = replica.buffer.sample(replica.explore, self.config.batch_size)
        states = torch.from_numpy(self.codec.features(sample.states))
        next_states = torch.from_numpy(self.codec.features(sample.next_states))
        actions = torch.from_numpy(sample.actions)[:, None]
        alpha = float(replica.log_alpha.detach().exp())

        with torch.no_grad():
            next_log_pi = F.log_softmax(replica.actor(next_states), dim=1)
            next_q = torch.min(replica.q1_target(next_states), replica.q2_target(next_states))
            not_done = torch.from_numpy(1.0 - sample.terminated)
            targets = soft_bellman_targets(
                torch.from_numpy(sample.rewards),
                not_done,
                next_log_pi,
                next_q,
                alpha,
                self.config.gamma,
            )
        critic_loss = F.mse_loss(replica.q1(states).gather(1, actions).squeeze(1), targets)
        critic_loss = critic_loss + F.mse_loss(
            replica.q2(states).gather(1, actions).squeeze(1), targets
        )
        lt.optimizer_step(replica.critic_optimizer, critic_loss)

        log_pi = F.log_softmax(replica.actor(states), dim=1)
        with torch.no_grad():
            min_q = torch.min(replica.q1(states), replica.q2(states))
        actor_loss = policy_loss(log_pi, min_q, alpha)
        lt.optimizer_step(replica.actor_optimizer, actor_loss)

        replica.losses["critic_loss"] = critic_loss.item()
        replica.losses["actor_loss"] = actor_loss.item()
        if self.config.autotune:
            alpha_loss = temperature_loss(replica.log_alpha, log_pi.detach(), self.target_entropy)
            lt.optimizer_step(replica.alpha_optimizer, alpha_loss)
            replica.losses["alpha_loss"] = alpha_loss.item()

        with torch.no_grad():
            for target, online in replica.pairs:
                target.lerp_(online, self.config.tau)

    # ------------------------------------------------------------------ introspection

    @property
    def n_params(self) -> int:
        """3 P_network + 1: actor, two critics and the temperature (targets not counted).

        References
        ----------
        The paper's appendix "Parameter Matching Methodology", P_SAC.
        """
        network = tu.mlp_params(self.codec.n_inputs, self.config.hidden, self.codec.n_actions)
        return 3 * network + 1

    def metrics(self) -> dict[str, NDArray[np.float64]]:
        """Per-replica diagnostics, shape (B,): last losses (NaN before training) and alpha."""
        out = {
            key: np.array([r.losses[key] for r in self._replicas])
            for key in ("critic_loss", "actor_loss", "alpha_loss")
        }
        out["alpha"] = np.array([float(r.log_alpha.detach().exp()) for r in self._replicas])
        return out
