"""Soft actor-critic for discrete actions, parameter-matched to the tensor agents.

A softmax actor and two critics Q1, Q2 (three one-hidden-layer MLPs of the same
width) map a state's bucket-index vector to a value per (joint) action; target
critics follow by Polyak averaging and the temperature alpha is learned towards
a target entropy. Because the action set is finite, every expectation over the
policy is an exact sum over actions (no reparameterisation, no sampled
actions in the losses); training actions are drawn from the policy with the
replica's ``explore`` stream.

References
----------
P. Christodoulou, "Soft Actor-Critic for Discrete Action Settings",
arXiv:1910.07207, 2019.
The paper's appendix "Parameter Matching Methodology" (P_SAC = 3 P_network + 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from rl.agents import _torch_utils as tu
from rl.agents._restore import saved_count
from rl.agents._torch_agent import ReplicatedTorchAgent, optimizer_step
from rl.agents.base import Transitions
from rl.agents.readings import reading
from rl.agents.registry import AgentSpec
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import MAX_JOINT_ACTIONS, check_choice, check_int, check_real


@dataclass(frozen=True)
class DiscreteSACConfig:
    """Hyperparameters of `DiscreteSAC`; defaults: CartPole budget, CleanRL-like settings."""

    hidden: int = 15
    """Width of the hidden layer of the actor and of each critic (15 matches CartPole's 700)."""
    gamma: float = 0.99
    """Discount factor."""
    learning_rate: float = 3e-4
    """Adam step size of actor, critics and temperature."""
    buffer_size: int = 100_000
    """Replay capacity in transitions (per replica)."""
    batch_size: int = 64
    """Transitions per gradient step."""
    learning_starts: int = 500
    """Environment steps (per replica) before the first gradient step."""
    tau: float = 0.005
    """Polyak coefficient of the target critics: target <- (1 - tau) target + tau online."""
    alpha: float = 0.2
    """Initial temperature; log alpha is learned when ``autotune`` is true."""
    autotune: bool = True
    """Learn the temperature towards ``target_entropy_scale * log |A|``."""
    target_entropy_scale: float = 0.98
    """Target entropy as a fraction of the maximum entropy log |A|."""
    input_scaling: str = "unit"
    """``"unit"``: index / (d_n - 1) in [0, 1]; ``"raw"``: indices as floats (released)."""
    max_joint_actions: int = MAX_JOINT_ACTIONS
    """Refuse problems whose joint action count (product of action_dims) exceeds this."""

    def __post_init__(self) -> None:
        for name in ("hidden", "buffer_size", "batch_size"):
            check_int(name, getattr(self, name), 1)
        check_int("learning_starts", self.learning_starts, 0)
        check_int("max_joint_actions", self.max_joint_actions, 1)
        check_real("gamma", self.gamma, 0.0, 1.0)
        check_real("learning_rate", self.learning_rate, 0.0, np.inf, low_open=True)
        check_real("tau", self.tau, 0.0, 1.0, low_open=True)
        check_real("alpha", self.alpha, 0.0, np.inf, low_open=True)
        if not isinstance(self.autotune, bool):
            raise ValueError(
                f"The 'autotune' parameter must be a bool. Got {self.autotune!r} instead."
            )
        check_real("target_entropy_scale", self.target_entropy_scale, 0.0, 1.0)
        check_choice("input_scaling", self.input_scaling, tu.INPUT_SCALINGS)


def preset(problem_name: str) -> dict[str, Any]:
    """Return the paper's overrides for ``problem_name``: the formula-matched hidden width.

    With P_SAC = 3 (d_in h + h + h |A| + |A|) + 1: CartPole 15 (706 params),
    Pendulum 12 (499), Highway 82 (3,706); empty for other problems. The
    appendix table prints 38 and 31 for CartPole and Pendulum, which its own
    formula contradicts (see docs/baselines.md).

    References
    ----------
    The paper's appendix "Parameter Matching Methodology", Table tab:param_all.
    """
    return reading("sac", "paper").agent_params(problem_name)


def released_preset(problem_name: str) -> dict[str, Any]:
    """Return overrides reproducing the authors' released SAC: widths, raw index inputs."""
    return reading("sac", "released").agent_params(problem_name)


def soft_bellman_targets(
    rewards: torch.Tensor,
    not_done: torch.Tensor,
    next_log_pi: torch.Tensor,
    next_q: torch.Tensor,
    alpha: float,
    gamma: float,
) -> torch.Tensor:
    """Critic targets r + gamma (1 - term) sum_a' pi(a'|s') (Q'(s', a') - alpha log pi(a'|s')).

    ``next_log_pi`` and ``next_q`` (the minimum of the two target critics) have
    shape (batch, |A|); the others shape (batch,).

    References
    ----------
    Christodoulou (2019), eqs. (9)-(10): the soft state value as an exact
    expectation over the discrete policy.
    """
    next_v = (next_log_pi.exp() * (next_q - alpha * next_log_pi)).sum(dim=1)
    return rewards + gamma * not_done * next_v


def policy_loss(log_pi: torch.Tensor, min_q: torch.Tensor, alpha: float) -> torch.Tensor:
    """Actor loss, batch mean of sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)).

    References
    ----------
    Christodoulou (2019), eq. (12).
    """
    return (log_pi.exp() * (alpha * log_pi - min_q)).sum(dim=1).mean()


def temperature_loss(
    log_alpha: torch.Tensor, log_pi: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """Temperature loss, batch mean of -log_alpha sum_a pi(a|s) (log pi(a|s) + H_target).

    Its gradient raises alpha while the policy's entropy is below ``target_entropy``.
    Parameterised by log alpha (as CleanRL and SB3 do) rather than alpha itself.

    References
    ----------
    Christodoulou (2019), eq. (11).
    """
    gap = (log_pi.exp() * (log_pi + target_entropy)).sum(dim=1)
    return -(log_alpha * gap).mean()


class _Replica:
    """Actor, critics, targets, temperature, optimizers, buffer, streams of one replica."""

    def __init__(
        self, codec: tu.IndexCodec, config: DiscreteSACConfig, streams: AgentRandom
    ) -> None:
        self.init, self.explore = streams.init, streams.explore
        shape = (codec.n_inputs, config.hidden, codec.n_actions)
        self.actor = tu.mlp(*shape, self.init)
        self.q1 = tu.mlp(*shape, self.init)
        self.q2 = tu.mlp(*shape, self.init)
        self.q1_target = tu.frozen_copy(self.q1)
        self.q2_target = tu.frozen_copy(self.q2)
        self.log_alpha = torch.tensor([math.log(config.alpha)], requires_grad=config.autotune)
        lr = config.learning_rate
        self.actor_optimizer = tu.adam(list(self.actor.parameters()), lr)
        critic_params = [*self.q1.parameters(), *self.q2.parameters()]
        self.critic_optimizer = tu.adam(critic_params, lr)
        self.alpha_optimizer = tu.adam([self.log_alpha], lr)
        self.buffer = tu.ReplayBuffer(config.buffer_size, codec.state_dims)
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


class DiscreteSAC(ReplicatedTorchAgent):
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
        optimizer_step(replica.critic_optimizer, critic_loss)

        log_pi = F.log_softmax(replica.actor(states), dim=1)
        with torch.no_grad():
            min_q = torch.min(replica.q1(states), replica.q2(states))
        actor_loss = policy_loss(log_pi, min_q, alpha)
        optimizer_step(replica.actor_optimizer, actor_loss)

        replica.losses["critic_loss"] = critic_loss.item()
        replica.losses["actor_loss"] = actor_loss.item()
        if self.config.autotune:
            alpha_loss = temperature_loss(replica.log_alpha, log_pi.detach(), self.target_entropy)
            optimizer_step(replica.alpha_optimizer, alpha_loss)
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


SPEC = AgentSpec("sac", DiscreteSAC, DiscreteSACConfig)
"""What the runner needs of discrete SAC; its readings are `rl.agents.readings.READINGS["sac"]`."""
