"""Deep Q-network baseline, parameter-matched to the tensor agents.

An MLP with one hidden ReLU layer maps a state's bucket-index vector to the Q
values of every (joint) discrete action. Experience replay, a hard-copied
target network, epsilon-greedy exploration with per-step decay, Huber loss and
Adam, one gradient step per environment step (CleanRL's ``dqn.py`` loop).

The B replicas are computed together: every network, Adam moment and replay
field is one tensor with the replicas on axis 0 (`rl.agents.deep._stacked`), on the
config's ``device``. The training step is defined once, `DQNStep`, on stacked
PyTorch tensors, with its compiled twin (`rl.agents.deep._step_compiled.dqn_steps`);
the agent's engine (`rl.agents.deep.engine`) runs one or the other: on a GPU one
stacked PyTorch computation trains all replicas, on the CPU a compiled loop
does each replica's whole update in turn. Each replica keeps its own random streams and
counters and its gradient is its own, so B replicas run together give the
same numbers as each run alone (bitwise on the CPU: acting computes on one
torch thread, `rl.agents.deep._torch_utils.one_cpu_thread`). See
``docs/baselines-deep.md`` for every choice.

References
----------
V. Mnih et al., "Human-level control through deep reinforcement learning",
Nature 518, 2015.
The paper's appendix "Parameter Matching Methodology" (P_DQN).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray

from rl.agents._restore import saved_fraction
from rl.agents.base import DEFAULT_GAMMA, Transitions
from rl.agents.deep import _stacked as st
from rl.agents.deep import _step_compiled as compiled
from rl.agents.deep import _torch_utils as tu
from rl.agents.deep._replica_draws import epsilon_draws
from rl.agents.deep._torch_agent import BatchedTorchAgent, td_loss
from rl.agents.deep.engine import ENGINES, CompiledBatch, StackedBatch
from rl.agents.registry import AgentSpec
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import MAX_JOINT_ACTIONS, check_choice, check_int, check_real

LOSSES = ("huber", "mse")
SCHEDULES = ("step", "episode")


@dataclass(frozen=True)
class DQNConfig:
    """Hyperparameters of `DQN`; defaults are the CartPole budget and CleanRL-like settings."""

    hidden: int = 46
    """Width of the single hidden layer (46 matches CartPole's 700-parameter budget)."""
    gamma: float = DEFAULT_GAMMA
    """Discount factor."""
    learning_rate: float = 1e-3
    """Adam step size."""
    buffer_size: int = 100_000
    """Replay capacity in transitions (per replica)."""
    batch_size: int = 32
    """Transitions per gradient step."""
    learning_starts: int = 500
    """Environment steps (per replica) before the first gradient step."""
    target_update_every: int = 100
    """Copy the online network into the target network every this many steps."""
    epsilon_start: float = 1.0
    """Initial exploration rate."""
    epsilon_decay: float = 0.9995
    """Multiplicative decay of epsilon per step (or per episode, see ``epsilon_schedule``)."""
    epsilon_min: float = 0.05
    """Floor of epsilon."""
    epsilon_schedule: str = "step"
    """``"step"``: decay after every environment step; ``"episode"``: after every
    episode (the released code, with ``epsilon_decay=0.999999``)."""
    loss: str = "huber"
    """TD loss: ``"huber"`` (smooth L1, delta 1) or ``"mse"`` (the released code)."""
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
        for name in ("hidden", "buffer_size", "batch_size", "target_update_every"):
            check_int(name, getattr(self, name), 1)
        check_int("learning_starts", self.learning_starts, 0)
        check_int("max_joint_actions", self.max_joint_actions, 1)
        check_real("gamma", self.gamma, 0.0, 1.0)
        check_real("learning_rate", self.learning_rate, 0.0, np.inf, low_open=True)
        check_real("epsilon_start", self.epsilon_start, 0.0, 1.0)
        check_real("epsilon_decay", self.epsilon_decay, 0.0, 1.0, low_open=True)
        check_real("epsilon_min", self.epsilon_min, 0.0, 1.0)
        check_choice("epsilon_schedule", self.epsilon_schedule, SCHEDULES)
        check_choice("loss", self.loss, LOSSES)
        check_choice("input_scaling", self.input_scaling, tu.INPUT_SCALINGS)


@dataclass(frozen=True)
class DQNStep:
    """One DQN gradient step of the training replicas (`rl.agents.deep.engine.TrainingStep`).

    Per replica, on its mini-batch: the TD targets
    y = r + gamma (1 - terminated) max_a' Q_target(s', a') with the replica's
    gamma, the TD loss
    ``loss`` of Q(s, a) against them (`rl.agents.deep._torch_agent.td_loss`),
    its gradient written out (`rl.agents.deep._stacked.backward_chosen`) and one
    Adam step of the online network. `stacked` is the definition, `compiled`
    runs its twin `rl.agents.deep._step_compiled.dqn_steps` on the same tensors.

    Attributes
    ----------
    q, target : torch.Tensor
        The stacked online and target networks (B, P), updated in place.
    optimizer : rl.agents.deep._stacked.StackedAdam
        Adam of ``q``.
    layout : rl.agents.deep._stacked.Layout
        One network's tensors in its row.
    gamma : torch.Tensor
        float32 (B, 1): each replica's discount factor (written in place to change it).
    loss : {"huber", "mse"}
        The TD loss.
    hidden, n_actions : int
        Hidden width and outputs of a network.

    References
    ----------
    V. Mnih et al., "Human-level control through deep reinforcement learning",
    Nature 518, 2015.
    """

    q: torch.Tensor
    target: torch.Tensor
    optimizer: st.StackedAdam
    layout: st.Layout
    gamma: torch.Tensor
    loss: str
    hidden: int
    n_actions: int

    @functools.cached_property
    def _adam(self) -> NDArray[np.float32]:
        """Beta1, beta2 and eps of the compiled step, float32."""
        return self.optimizer.hyperparameters()

    def stacked(
        self, batch: StackedBatch, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Run the step on stacked PyTorch tensors; the losses (1, R)."""
        sample = batch.sample
        with torch.no_grad():
            target = self.layout.views(st.take(self.target, rows))
            next_values = st.forward_pass(target, batch.next_states).outputs.amax(dim=1)
            not_done = 1.0 - sample.terminated
            targets = sample.rewards + st.take(self.gamma, rows) * not_done * next_values
            params = self.layout.views(st.take(self.q, rows))
            done = st.forward_pass(params, batch.states)
            chosen = sample.actions[:, None, :]
            values = st.chosen_outputs(done, chosen)
            losses, d_values = td_loss(values, targets, self.loss)
            if q_means is not None:
                q_means[:] = values.mean(dim=1).cpu().numpy()
            self.optimizer.step(st.backward_chosen(params, done, chosen, d_values), rows)
        return losses.cpu().numpy().astype(np.float64)[None]

    def compiled(
        self, batch: CompiledBatch, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Run the step by `rl.agents.deep._step_compiled.dqn_steps`; the losses (1, R)."""
        optimizer = self.optimizer
        losses = np.empty((1, len(rows.host)))
        compiled.dqn_steps(
            *batch,
            self.q.numpy(),
            self.target.numpy(),
            optimizer.exp_avg.numpy(),
            optimizer.exp_avg_sq.numpy(),
            optimizer.advance(rows),
            self._adam,
            self.gamma.numpy()[:, 0],
            self.hidden,
            self.n_actions,
            compiled.HUBER if self.loss == "huber" else compiled.MSE,
            losses[0],
            q_means is not None,
            compiled.NO_Q if q_means is None else q_means,
        )
        return losses


class DQNAgent(BatchedTorchAgent):
    """Deep Q-learning with experience replay and a target network, B replicas computed together.

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
    replica_settings : mapping of str to sequence of float, optional
        B values of some fields of `per_replica` (`rl.agents.replica_settings`).

    Attributes
    ----------
    per_replica : frozenset of str
        The numeric settings of learning and exploration, which each replica
        may have its own of: gamma, learning_rate, learning_starts,
        target_update_every, epsilon_start, epsilon_decay and epsilon_min
        (not the widths, the replay's capacity or the batch size, which shape the tensors).
    replicas : int
        B, the number of replicas.
    epsilon : ndarray of float64, shape (B,)
        Each replica's exploration rate.
    step : DQNStep
        The gradient step of the replicas that learn, which the engine runs.

    Notes
    -----
    The online and target networks of all replicas are stacked tensors
    (`rl.agents.deep._stacked`); one gradient step of the replicas that are ready
    minimises the sum over them of each one's mean TD loss, so each replica's
    gradient is its own, and one `rl.agents.deep._stacked.StackedAdam` steps them.

    References
    ----------
    V. Mnih et al., "Human-level control through deep reinforcement learning",
    Nature 518, 2015.
    """

    config_type = DQNConfig
    name = "dqn"
    config: DQNConfig
    per_replica: ClassVar[frozenset[str]] = frozenset(
        {
            "gamma",
            "learning_rate",
            "learning_starts",
            "target_update_every",
            "epsilon_start",
            "epsilon_decay",
            "epsilon_min",
        }
    )

    def __init__(
        self,
        problem: Problem,
        config: DQNConfig,
        streams: Sequence[AgentRandom],
        *,
        replica_settings: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        super().__init__(problem, config, streams, replica_settings=replica_settings)
        shape = (self.codec.n_inputs, config.hidden, self.codec.n_actions)
        rows = np.stack([st.init_mlp(*shape, rng) for rng in self._init])
        self.q = torch.from_numpy(rows).to(self.device)
        self.target = self.q.clone()
        self.optimizer = st.StackedAdam(self.q, self.settings_["learning_rate"], self.layout)
        self.step = DQNStep(
            self.q,
            self.target,
            self.optimizer,
            self.layout,
            torch.empty((self.replicas, 1), dtype=torch.float32, device=self.device),
            config.loss,
            config.hidden,
            self.codec.n_actions,
        )
        self._use_settings()
        self.epsilon = self.settings_["epsilon_start"].astype(np.float64)
        self.loss = np.full(self.replicas, np.nan)

    def _use_settings(self) -> None:
        settings = self.settings_
        self.optimizer.lr[:] = settings["learning_rate"]
        gamma = torch.from_numpy(settings["gamma"].astype(np.float32)[:, None])
        self.step.gamma.copy_(gamma)

    def _greedy_network(self) -> torch.Tensor:
        return self.q

    # ------------------------------------------------------------------ acting

    def _exploring(
        self, states: NDArray[np.int64], active: NDArray[np.bool_], outputs: torch.Tensor | None
    ) -> NDArray[np.int64]:
        """Epsilon-greedy joint actions of the active replicas, shape (B, D_A)."""
        joint = np.zeros(self.replicas, dtype=np.int64)
        taking_part = np.flatnonzero(active)
        explored = np.zeros(len(taking_part), dtype=bool)
        # each replica's own stream, in its own order: random() < epsilon, then integers(|A|)
        epsilon_draws(
            self._generators, taking_part, self.epsilon, self.codec.n_actions, joint, explored
        )
        greedy = taking_part[~explored]
        if len(greedy):
            rows = self._rows(greedy)
            if outputs is None:
                values = self.engine.outputs(self.q, states, rows)
            else:
                values = st.take(outputs, rows)
            joint[rows.host] = values.argmax(dim=1).cpu().numpy()
        return self.codec.unravel(joint)

    # ------------------------------------------------------------------ learning

    @tu.one_cpu_thread
    def observe(self, batch: Transitions) -> None:
        """Store each active replica's transition, then one gradient step after warm-up."""
        rows = self._store(batch)
        r = rows.host
        if self.config.epsilon_schedule == "step":
            self._decay_epsilon(r)
        ready = self._ready(rows)
        if len(ready.host):
            self.loss[ready.host] = self._train(self.step, ready)[0]
        sync = self._rows(r[self.steps[r] % self.settings_["target_update_every"][r] == 0])
        if len(sync.host):
            st.put(self.target, sync, st.take(self.q, sync))

    def end_episode(self, active: NDArray[np.bool_]) -> None:
        """Count the episode; decay epsilon here when ``epsilon_schedule == "episode"``."""
        super().end_episode(active)
        if self.config.epsilon_schedule == "episode":
            self._decay_epsilon(np.flatnonzero(active))

    def _decay_epsilon(self, r: NDArray[np.int64]) -> None:
        """Multiply the epsilon of replicas ``r`` by their decay, not below their floor."""
        settings = self.settings_
        decayed = self.epsilon[r] * settings["epsilon_decay"][r]
        self.epsilon[r] = np.maximum(settings["epsilon_min"][r], decayed)

    # ------------------------------------------------------------------ checkpoints

    def _replica_states(self) -> list[dict[str, Any]]:
        q, target = st.host_copy(self.q), st.host_copy(self.target)
        moments = self.optimizer.host_moments()
        return [
            {
                "q": st.network_state(self.layout, q[i]),
                "target": st.network_state(self.layout, target[i]),
                "optimizer": self.optimizer.replica_state(i, moments),
                "epsilon": float(self.epsilon[i]),
                "loss": float(self.loss[i]),
            }
            for i in range(self.replicas)
        ]

    def _parse_replica(self, state: dict[str, Any]) -> Any:
        saved_fraction(state, "epsilon")
        return (
            st.parse_network(self.layout, state["q"], "q"),
            st.parse_network(self.layout, state["target"], "target"),
            self.optimizer.parse(state["optimizer"], "optimizer"),
            float(state["epsilon"]),
            float(state["loss"]),
        )

    def _write_replica(self, i: int, parsed: Any) -> None:
        q, target, optimizer, self.epsilon[i], self.loss[i] = parsed
        st.write_row(self.q, i, q)
        st.write_row(self.target, i, target)
        self.optimizer.write(i, optimizer)

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
        return {"loss": self.loss.copy(), "epsilon": self.epsilon.copy()}


SPEC = AgentSpec("dqn", DQNAgent, DQNConfig)
"""What the runner needs of DQN; its readings are `rl.agents.readings.READINGS["dqn"]`."""
