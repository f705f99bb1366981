"""Soft actor-critic for discrete actions, parameter-matched to the tensor agents.

A softmax actor and two critics Q1, Q2 (three one-hidden-layer MLPs of the same
width) map a state's bucket-index vector to a value per (joint) action; target
critics follow by Polyak averaging and the temperature alpha is learned towards
a target entropy. Because the action set is finite, every expectation over the
policy is an exact sum over actions (no reparameterisation, no sampled
actions in the losses); training actions are drawn from the policy with the
replica's ``explore`` stream. The B replicas train together as DQN's do
(`rl.agents.deep.dqn`): the update is defined once, `SACStep`, on stacked PyTorch
tensors, with its compiled twin (`rl.agents.deep._step_compiled.sac_steps`), and the
agent's engine (`rl.agents.deep.engine`) runs one or the other: one stacked
computation on a GPU, a compiled loop over the replicas on the CPU.

References
----------
P. Christodoulou, "Soft Actor-Critic for Discrete Action Settings",
arXiv:1910.07207, 2019.
The paper's appendix "Parameter Matching Methodology" (P_SAC = 3 P_network + 1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from rl.agents._restore import saved_array
from rl.agents.base import DEFAULT_GAMMA, Transitions
from rl.agents.deep import _stacked as st
from rl.agents.deep import _step_compiled as compiled
from rl.agents.deep import _torch_utils as tu
from rl.agents.deep._replica_draws import uniforms
from rl.agents.deep._torch_agent import BatchedTorchAgent, td_loss
from rl.agents.deep.engine import ENGINES, CompiledBatch, StackedBatch
from rl.agents.registry import AgentSpec
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import MAX_JOINT_ACTIONS, check_choice, check_int, check_real


@dataclass(frozen=True)
class DiscreteSACConfig:
    """Hyperparameters of `DiscreteSAC`; defaults: CartPole budget, CleanRL-like settings."""

    hidden: int = 15
    """Width of the hidden layer of the actor and of each critic (15 matches CartPole's 700)."""
    gamma: float = DEFAULT_GAMMA
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
    device: str = tu.DEFAULT_DEVICE
    """Torch device of every tensor: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``."""
    engine: str = "auto"
    """Who trains and acts (`rl.agents.deep.engine`): ``"compiled"``, the CPU kernels;
    ``"stacked"``, the stacked PyTorch computations (any device); ``"auto"``:
    compiled on the CPU, stacked elsewhere. The same numbers to float32 rounding."""

    def __post_init__(self) -> None:
        tu.check_device_name(self.device)
        check_choice("engine", self.engine, ENGINES)
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


def log_policy(logits: torch.Tensor) -> torch.Tensor:
    """Return log pi(a|s) (R, N, |A|), the log-softmax of ``logits`` (R, |A|, N) over the actions.

    ``logits`` are in the column layout of `rl.agents.deep._stacked.forward_pass`;
    the result is a view with the actions last. PyTorch's CPU log-softmax over
    the middle axis of this layout is about nine times faster than over a
    short last axis (at R = 100, N = 64, |A| = 10: 0.14 ms against 1.3 ms).
    """
    return F.log_softmax(logits, dim=1).transpose(1, 2)


def soft_bellman_targets(
    rewards: torch.Tensor,
    not_done: torch.Tensor,
    next_log_pi: torch.Tensor,
    next_q: torch.Tensor,
    alpha: float | torch.Tensor,
    gamma: float | torch.Tensor,
) -> torch.Tensor:
    """Critic targets r + gamma (1 - term) sum_a' pi(a'|s') (Q'(s', a') - alpha log pi(a'|s')).

    ``next_log_pi`` and ``next_q`` (the minimum of the two target critics) have
    shape (..., batch, |A|); the others shape (..., batch), ``alpha`` a number
    or a tensor broadcasting against (..., batch, |A|) and ``gamma`` a number or
    a tensor broadcasting against (..., batch) (one per replica).

    References
    ----------
    Christodoulou (2019), eqs. (9)-(10): the soft state value as an exact
    expectation over the discrete policy.
    """
    next_v = (next_log_pi.exp() * (next_q - alpha * next_log_pi)).sum(dim=-1)
    return rewards + gamma * not_done * next_v


def policy_loss(
    log_pi: torch.Tensor, min_q: torch.Tensor, alpha: float | torch.Tensor
) -> torch.Tensor:
    """Actor loss, batch mean of sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)).

    Inputs (..., batch, |A|); one mean per leading index (one per replica).

    References
    ----------
    Christodoulou (2019), eq. (12).
    """
    return (log_pi.exp() * (alpha * log_pi - min_q)).sum(dim=-1).mean(dim=-1)


def temperature_loss(
    log_alpha: torch.Tensor, log_pi: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """Temperature loss, batch mean of -log_alpha sum_a pi(a|s) (log pi(a|s) + H_target).

    Its gradient raises alpha while the policy's entropy is below ``target_entropy``.
    ``log_pi`` is (..., batch, |A|), ``log_alpha`` broadcasts against (..., batch).
    Parameterised by log alpha (as CleanRL and SB3 do) rather than alpha itself.

    References
    ----------
    Christodoulou (2019), eq. (11).
    """
    gap = (log_pi.exp() * (log_pi + target_entropy)).sum(dim=-1)
    return -(log_alpha * gap).mean(dim=-1)


def policy_gradient(
    log_pi: torch.Tensor, min_q: torch.Tensor, alpha: float | torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return `policy_loss` and its gradient with respect to the actor's logits.

    With pi = softmax(z), g_a = alpha log pi_a - Q_min(a) and the per-sample
    loss l = sum_a pi_a g_a, dl/dz_a = pi_a (g_a - l) (the alpha that
    d log pi contributes cancels because sum_a pi_a = 1); divided by the
    batch size for the mean. Shapes as `policy_loss`; the gradient has the
    shape of ``log_pi``. Tested against autograd through `policy_loss`.

    References
    ----------
    Christodoulou (2019), eq. (12).
    """
    pi = log_pi.exp()
    advantage = alpha * log_pi - min_q
    per_sample = (pi * advantage).sum(dim=-1, keepdim=True)
    d_logits = pi * (advantage - per_sample) / log_pi.shape[-2]
    return per_sample.squeeze(-1).mean(dim=-1), d_logits


def temperature_gradient(
    log_pi: torch.Tensor, target_entropy: float | torch.Tensor
) -> torch.Tensor:
    """Return the gradient of `temperature_loss` with respect to log alpha.

    The loss is linear in log alpha, so its gradient is minus the batch mean
    of sum_a pi(a|s) (log pi(a|s) + H_target), shape (..., 1) for ``log_pi``
    (..., batch, |A|); ``target_entropy`` is a number or a tensor broadcasting
    against ``log_pi`` (one per replica).

    References
    ----------
    Christodoulou (2019), eq. (11).
    """
    gap = (log_pi.exp() * (log_pi + target_entropy)).sum(dim=-1)
    return -gap.mean(dim=-1, keepdim=True)


LOSSES = ("critic_loss", "actor_loss", "alpha_loss")
NETWORKS = ("actor", "q1", "q2", "q1_target", "q2_target")
OPTIMIZERS = ("actor_optimizer", "critic_optimizer", "alpha_optimizer")


@dataclass(frozen=True)
class SACStep:
    """One discrete SAC update of the training replicas (`rl.agents.deep.engine.TrainingStep`).

    Per replica, on its mini-batch, with pi(.|s) the actor's softmax,
    Q' = min(Q1', Q2') of the target critics and alpha = exp(log_alpha), in
    this order:

    - critics: an Adam step of both on the MSE of Q_i(s, a) against
      r + gamma (1 - terminated) sum_a' pi(a'|s') (Q'(s', a') - alpha log pi(a'|s'));
    - actor: an Adam step on the mean over the batch of
      sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a)), against the updated critics;
    - temperature (when ``autotune``): an Adam step of log alpha on the mean of
      sum_a pi(a|s) (-log_alpha (log pi(a|s) + H_target));
    - Polyak update of both target critics with ``tau``;

    gamma, tau and H_target each the replica's own (``settings``).

    Gradients are written out (`rl.agents.deep._stacked.backward`, `policy_gradient`,
    `temperature_gradient`), each tested against autograd. `stacked` is the
    definition, `compiled` runs its twin `rl.agents.deep._step_compiled.sac_steps`
    on the same tensors. Both return the critic, actor and temperature losses (3, R).

    Attributes
    ----------
    actor : torch.Tensor
        The stacked actors (B, P).
    critics, critics_target : torch.Tensor
        Q1 and Q2 side by side in each row (B, 2P), online and target.
    log_alpha : torch.Tensor
        (B, 1).
    optimizers : tuple of rl.agents.deep._stacked.StackedAdam
        Adam of the actor, the critics and log alpha.
    layout : rl.agents.deep._stacked.Layout
        One network's tensors in its row.
    settings : torch.Tensor
        float32 (B, 3): each replica's discount factor gamma, Polyak coefficient
        tau and target entropy H_target (written in place to change them).
    autotune : bool
        Whether log alpha is learned.
    hidden, n_actions : int
        Hidden width and outputs of a network.

    References
    ----------
    Christodoulou (2019), eqs. (9)-(12).
    """

    actor: torch.Tensor
    critics: torch.Tensor
    critics_target: torch.Tensor
    log_alpha: torch.Tensor
    optimizers: tuple[st.StackedAdam, st.StackedAdam, st.StackedAdam]
    layout: st.Layout
    settings: torch.Tensor
    autotune: bool
    hidden: int
    n_actions: int

    @functools.cached_property
    def _adam(self) -> NDArray[np.float32]:
        """Beta1, beta2 and eps of the compiled step, float32."""
        return self.optimizers[1].hyperparameters()

    def _critic_pass(
        self, critics: torch.Tensor, inputs: torch.Tensor
    ) -> tuple[list[torch.Tensor], st.Pass]:
        """Return the parameter views and `rl.agents.deep._stacked.Pass` of Q1 and Q2 together.

        ``critics`` are critic rows (R, 2P), ``inputs`` (R, D_S, N) in column
        layout. Q1 and Q2 of replica r are rows 2r and 2r + 1 of one stack of 2R
        networks (views of ``critics``), so each layer is one batched product
        for both; a network's outputs do not depend on the others in the stack.
        """
        pairs = critics.view(len(critics) * 2, -1)
        twice = inputs.repeat_interleave(2, dim=0)
        params = self.layout.views(pairs)
        return params, st.forward_pass(params, twice)

    @staticmethod
    def _pairs(values: torch.Tensor) -> torch.Tensor:
        """Return ``values`` of a stack of 2R critics (2R, ...) as (R, 2, ...): Q1, Q2."""
        return values.view(-1, 2, *values.shape[1:])

    def _min_critic(self, critics: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        """Return min(Q1, Q2), (R, N, |A|), at inputs (R, D_S, N) (column layout).

        ``torch.minimum`` of the two, not ``min(dim=1)`` of their pairs: the same
        values, seven times faster on the CPU (no indices, no reduction kernel).
        """
        outputs = self._pairs(self._critic_pass(critics, inputs)[1].outputs)
        return torch.minimum(outputs[:, 0], outputs[:, 1]).transpose(1, 2)

    def stacked(
        self, batch: StackedBatch, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Run the update on stacked PyTorch tensors; the losses (3, R)."""
        sample, states, next_states = batch
        actor_optimizer, critic_optimizer, alpha_optimizer = self.optimizers
        losses = np.full((3, len(rows.host)), np.nan)
        alpha = st.take(self.log_alpha, rows).exp()[:, :, None]  # (R, 1, 1)
        settings = st.take(self.settings, rows)
        gamma, tau, target_entropy = settings[:, 0:1], settings[:, 1:2], settings[:, 2:3, None]
        with torch.no_grad():
            actor = self.layout.views(st.take(self.actor, rows))
            next_log_pi = log_policy(st.forward_pass(actor, next_states).outputs)
            next_q = self._min_critic(st.take(self.critics_target, rows), next_states)
            targets = soft_bellman_targets(
                sample.rewards, 1.0 - sample.terminated, next_log_pi, next_q, alpha, gamma
            )
            chosen = sample.actions[:, None, :].repeat_interleave(2, dim=0)
            params, done = self._critic_pass(st.take(self.critics, rows), states)
            values = st.chosen_outputs(done, chosen)
            if q_means is not None:
                q_means[:] = values.view(len(rows.host), -1).mean(dim=1).cpu().numpy()
            pair_losses, d_values = td_loss(values, targets.repeat_interleave(2, dim=0), "mse")
            pair_losses = self._pairs(pair_losses)
            critic_loss = pair_losses[:, 0] + pair_losses[:, 1]  # MSE of Q1 + MSE of Q2
            grads = st.backward_chosen(params, done, chosen, d_values)  # (2R, P): Q1, Q2 rows
            critic_optimizer.step(grads.view(len(rows.host), -1), rows)

            actor_pass = st.forward_pass(actor, states)  # the actor has not changed
            log_pi = log_policy(actor_pass.outputs)
            min_q = self._min_critic(st.take(self.critics, rows), states)
            actor_loss, d_logits = policy_gradient(log_pi, min_q, alpha)
            d_logits = d_logits.transpose(1, 2)  # to the column layout
            actor_optimizer.step(st.backward(actor, actor_pass, d_logits), rows)
            losses[0] = critic_loss.cpu().numpy()
            losses[1] = actor_loss.cpu().numpy()
            if self.autotune:
                # the loss is linear in log alpha: log alpha times its gradient
                grad = temperature_gradient(log_pi, target_entropy)
                alpha_loss = st.take(self.log_alpha, rows) * grad
                alpha_optimizer.step(grad, rows)
                losses[2] = alpha_loss[:, 0].cpu().numpy()

            target = torch.lerp(
                st.take(self.critics_target, rows), st.take(self.critics, rows), tau
            )
            st.put(self.critics_target, rows, target)
        return losses

    def compiled(
        self, batch: CompiledBatch, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Run the update by `rl.agents.deep._step_compiled.sac_steps`; the losses (3, R)."""
        trained = 3 if self.autotune else 2  # actor, critics, temperature
        factors = np.zeros((3, 2, len(rows.host)), dtype=np.float32)
        for k, optimizer in enumerate(self.optimizers[:trained]):
            factors[k] = optimizer.advance(rows)
        pairs = lambda critics: critics.numpy().reshape(len(critics), 2, -1)  # noqa: E731
        views = (torch.Tensor.numpy, pairs, torch.Tensor.numpy)
        moments = tuple(
            view(moment)
            for optimizer, view in zip(self.optimizers, views, strict=True)
            for moment in (optimizer.exp_avg, optimizer.exp_avg_sq)
        )
        losses = np.full((3, len(rows.host)), np.nan)
        compiled.sac_steps(
            *batch,
            self.actor.numpy(),
            pairs(self.critics),
            pairs(self.critics_target),
            self.log_alpha.numpy(),
            moments,
            factors,
            self._adam,
            self.settings.numpy(),
            self.hidden,
            self.n_actions,
            self.autotune,
            losses,
            q_means is not None,
            compiled.NO_Q if q_means is None else q_means,
        )
        return losses


class DiscreteSAC(BatchedTorchAgent):
    """Discrete soft actor-critic with twin critics and learned temperature, B replicas together.

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
    replica_settings : mapping of str to sequence of float, optional
        B values of some fields of `per_replica` (`rl.agents.replica_settings`).

    Attributes
    ----------
    per_replica : frozenset of str
        The numeric settings of learning, which each replica may have its own
        of: gamma, learning_rate, learning_starts, tau, alpha (the initial
        temperature) and target_entropy_scale (not ``autotune``, which
        chooses whether the temperature step runs, nor the widths, the
        replay's capacity or the batch size, which shape the tensors).
    target_entropy : ndarray of float64, shape (B,)
        Each replica's H_target = target_entropy_scale * log |A|.
    replicas : int
        B, the number of replicas.
    step : SACStep
        The update of the replicas that learn, which the engine runs.

    Notes
    -----
    One update per environment step after warm-up (`SACStep`: critics, actor,
    temperature with H_target = target_entropy_scale * log |A|, Polyak averaging).
    Each network, target and Adam state is stacked over the replicas
    (`rl.agents.deep._stacked`); each loss is summed over the replicas that train,
    so each replica's gradient is its own.

    References
    ----------
    P. Christodoulou, "Soft Actor-Critic for Discrete Action Settings",
    arXiv:1910.07207, 2019.
    """

    config_type = DiscreteSACConfig
    name = "sac"
    config: DiscreteSACConfig
    per_replica: ClassVar[frozenset[str]] = frozenset(
        {"gamma", "learning_rate", "learning_starts", "tau", "alpha", "target_entropy_scale"}
    )

    def __init__(
        self,
        problem: Problem,
        config: DiscreteSACConfig,
        streams: Sequence[AgentRandom],
        *,
        replica_settings: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        super().__init__(problem, config, streams, replica_settings=replica_settings)
        shape = (self.codec.n_inputs, config.hidden, self.codec.n_actions)
        # each replica draws actor, Q1, Q2 in this order, as a replica alone does
        drawn = np.stack([[st.init_mlp(*shape, rng) for _ in range(3)] for rng in self._init])
        self.actor = torch.from_numpy(np.ascontiguousarray(drawn[:, 0])).to(self.device)
        # Q1 and Q2 side by side in each row (`critic_layout`): one Adam, one Polyak step;
        # contiguous, so that `SACStep._critic_pass` can view the rows as 2B networks
        critics = np.ascontiguousarray(drawn[:, 1:].reshape(self.replicas, -1))
        self.critics = torch.from_numpy(critics).to(self.device)
        self.critics_target = self.critics.clone()
        self.critic_layout = self.layout + self.layout
        log_alpha = [[math.log(alpha)] for alpha in self.settings_["alpha"].tolist()]
        self.log_alpha = torch.tensor(log_alpha, dtype=torch.float32, device=self.device)
        lr = self.settings_["learning_rate"]
        self.actor_optimizer = st.StackedAdam(self.actor, lr, self.layout)
        self.critic_optimizer = st.StackedAdam(self.critics, lr, self.critic_layout)
        self.alpha_optimizer = st.StackedAdam(self.log_alpha, lr, st.Layout([(1,)]))
        self.losses = {key: np.full(self.replicas, np.nan) for key in LOSSES}
        self.step = SACStep(
            self.actor,
            self.critics,
            self.critics_target,
            self.log_alpha,
            (self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer),
            self.layout,
            torch.empty((self.replicas, 3), dtype=torch.float32, device=self.device),
            config.autotune,
            config.hidden,
            self.codec.n_actions,
        )
        self._use_settings()

    def _use_settings(self) -> None:
        settings = self.settings_
        for optimizer in (self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer):
            optimizer.lr[:] = settings["learning_rate"]
        self.target_entropy = settings["target_entropy_scale"] * math.log(self.codec.n_actions)
        columns = [settings["gamma"], settings["tau"], self.target_entropy]
        self.step.settings.copy_(torch.from_numpy(np.stack(columns, axis=1).astype(np.float32)))

    def _greedy_network(self) -> torch.Tensor:
        return self.actor

    # ------------------------------------------------------------------ acting

    def _exploring(
        self, states: NDArray[np.int64], active: NDArray[np.bool_], outputs: torch.Tensor | None
    ) -> NDArray[np.int64]:
        """Joint actions sampled from each active replica's policy, shape (B, D_A)."""
        joint = np.zeros(self.replicas, dtype=np.int64)
        rows = self._rows(np.flatnonzero(active))
        if len(rows.host):
            if outputs is None:
                logits = self.engine.outputs(self.actor, states, rows)
            else:
                logits = st.take(outputs, rows)
            cumulative = np.cumsum(torch.softmax(logits.double(), dim=1).cpu().numpy(), axis=1)
            u = np.empty((len(rows.host), 1))
            uniforms(self._generators, rows.host, u)  # one random() per replica, its own stream
            u = u[:, 0] * cumulative[:, -1]
            drawn = (cumulative <= u[:, None]).sum(axis=1)  # searchsorted(..., side="right")
            joint[rows.host] = np.minimum(drawn, self.codec.n_actions - 1)
        return self.codec.unravel(joint)

    # ------------------------------------------------------------------ learning

    @tu.one_cpu_thread
    def observe(self, batch: Transitions) -> None:
        """Store each active replica's transition, then one SAC update after warm-up."""
        ready = self._ready(self._store(batch))
        if len(ready.host):
            trained = LOSSES if self.config.autotune else LOSSES[:2]
            losses = self._train(self.step, ready)
            for key, values in zip(trained, losses, strict=False):
                self.losses[key][ready.host] = values

    # ------------------------------------------------------------------ checkpoints

    def _replica_states(self) -> list[dict[str, Any]]:
        actor, critics = st.host_copy(self.actor), st.host_copy(self.critics)
        critics_target = st.host_copy(self.critics_target)
        moments = {name: getattr(self, name).host_moments() for name in OPTIMIZERS}
        log_alpha = st.host_copy(self.log_alpha)
        states = []
        for i in range(self.replicas):
            state = {
                "actor": st.network_state(self.layout, actor[i]),
                **self._critic_states(critics[i], ("q1", "q2")),
                **self._critic_states(critics_target[i], ("q1_target", "q2_target")),
            }
            for name in OPTIMIZERS:
                state[name] = getattr(self, name).replica_state(i, moments[name])
            state["log_alpha"] = log_alpha[i].copy()
            state["losses"] = {key: float(self.losses[key][i]) for key in LOSSES}
            states.append(state)
        return states

    def _critic_states(self, row: NDArray[np.float32], names: tuple[str, str]) -> dict[str, Any]:
        tensors = self.critic_layout.split(row)
        return {
            name: dict(zip(st.MLP_KEYS, tensors[4 * k : 4 * k + 4], strict=True))
            for k, name in enumerate(names)
        }

    def _parse_replica(self, state: dict[str, Any]) -> Any:
        nets = {name: st.parse_network(self.layout, state[name], name) for name in NETWORKS}
        optimizers = {name: getattr(self, name).parse(state[name], name) for name in OPTIMIZERS}
        log_alpha = saved_array(state, "log_alpha", np.empty(1, dtype=np.float32))
        losses = {key: float(state["losses"][key]) for key in LOSSES}
        return nets, optimizers, log_alpha, losses

    def _write_replica(self, i: int, parsed: Any) -> None:
        nets, optimizers, log_alpha, losses = parsed
        st.write_row(self.actor, i, nets["actor"])
        st.write_row(self.critics, i, np.concatenate([nets["q1"], nets["q2"]]))
        st.write_row(self.critics_target, i, np.concatenate([nets["q1_target"], nets["q2_target"]]))
        for name, values in optimizers.items():
            getattr(self, name).write(i, values)
        st.write_row(self.log_alpha, i, log_alpha)
        for key in LOSSES:
            self.losses[key][i] = losses[key]

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
        out = {key: values.copy() for key, values in self.losses.items()}
        out["alpha"] = self.log_alpha[:, 0].exp().cpu().numpy().astype(np.float64)
        return out


SPEC = AgentSpec("sac", DiscreteSAC, DiscreteSACConfig)
"""What the runner needs of discrete SAC; its readings are `rl.agents.readings.READINGS["sac"]`."""
