"""What DQN and discrete SAC share: B replicas computed together behind one `Agent`.

Every network, optimizer state and replay field is stacked along a leading
replica axis (`rl.agents.deep._stacked`), so one call acts, stores or trains all
the replicas that take part; Python loops over replicas only to draw from each
replica's own random streams. Subclasses build their networks and define
their training step (`rl.agents.deep.engine.TrainingStep`); the engine chosen
here at construction (`rl.agents.deep.engine`) runs it and acting's forward
pass. The constructor checks, the greedy action, storing transitions,
counters, the mean Q of the taken actions and the per-replica checkpoint
layout are written once here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

from rl.agents._explore_compiled import typed_generators
from rl.agents._restore import saved_count
from rl.agents.base import Agent, Transitions
from rl.agents.deep import _stacked as st
from rl.agents.deep import _torch_utils as tu
from rl.agents.deep._compiled_engine import CompiledEngine
from rl.agents.deep.engine import Engine, EngineState, StackedEngine, TrainingStep, resolve_engine
from rl.agents.replica_settings import SETTINGS_KEY, replica_values, saved_replica_values
from rl.problems import Problem
from rl.seeding import AgentRandom
from rl.validation import check_memory


class BatchedTorchAgent(Agent):
    """Base class of the PyTorch agents: B replicas stacked along axis 0 of every tensor.

    Parameters
    ----------
    problem : rl.problems.Problem
        Supplies ``state_dims`` (network inputs) and ``action_dims`` (outputs:
        one per joint action).
    config : dataclass
        An instance of the subclass's ``config_type`` (with ``device`` and ``engine`` fields).
    streams : sequence of rl.seeding.AgentRandom
        One per replica.
    replica_settings : mapping of str to sequence of float, optional
        B values of some fields of the subclass's ``per_replica``
        (`rl.agents.replica_settings`): replica b runs ``replica_settings[field][b]``,
        the config's value for the others.

    Attributes
    ----------
    replicas : int
        B.
    settings_ : dict of str to ndarray, shape (B,)
        Each replica's value of every field of ``per_replica``.
    device : torch.device
        Where every tensor lives.
    buffer : rl.agents.deep._stacked.StackedReplay
        The replicas' replay memories.
    layout : rl.agents.deep._stacked.Layout
        The tensors of one network in its row of a stacked (B, P) network.
    steps, episodes : ndarray of int64, shape (B,)
        Environment steps and training episodes of each replica.
    engine : rl.agents.deep.engine.Engine
        Runs the training steps and acting's forward pass (``engine.name``:
        ``"compiled"``, the CPU kernels, or ``"stacked"``, the PyTorch computations).
    """

    config_type: ClassVar[type]
    name: ClassVar[str]

    def __init__(
        self,
        problem: Problem,
        config: Any,
        streams: Sequence[AgentRandom],
        *,
        replica_settings: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
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
        self.settings_ = replica_values(
            type(self).__name__, self.per_replica, config, replica_settings, self.replicas
        )
        self.device = tu.torch_device(config.device)
        engine = resolve_engine(config.engine, self.device)
        self._check_memory(config)
        self._init = [s.init for s in streams]
        self._explore = [s.explore for s in streams]
        # the same generators for the compiled draws (`rl.agents.deep._replica_draws`)
        self._generators = typed_generators(self._explore)
        self.buffer = st.StackedReplay(
            self.replicas, config.buffer_size, self.codec.state_dims, self.device
        )
        self.steps = np.zeros(self.replicas, dtype=np.int64)
        self.episodes = np.zeros(self.replicas, dtype=np.int64)
        self.layout = st.mlp_layout(self.codec.n_inputs, config.hidden, self.codec.n_actions)
        scale = torch.from_numpy(self.codec.scale).to(self.device)
        self.engine: Engine = make_engine(
            engine,
            EngineState(
                self.layout,
                config.hidden,
                self.codec.n_actions,
                scale,
                self.buffer,
                self._generators,
                config.batch_size,
            ),
        )
        self._q_sums: NDArray[np.float64] | None = None
        self._q_steps = np.zeros(self.replicas, dtype=np.int64)

    def _check_memory(self, config: Any) -> None:
        """Refuse networks or replay buffers that cannot fit on the device, before allocating."""
        inputs, outputs = len(self.codec.state_dims), self.codec.n_actions
        params = tu.mlp_params(inputs, config.hidden, outputs)
        # float32 parameters of up to five networks, their gradients and Adam's two moments
        networks = 4.0 * 20 * params * self.replicas
        check_memory("hidden", networks, "the networks and optimizers", config.device)
        buffers = float(config.buffer_size) * st.record_bytes(inputs) * self.replicas
        check_memory("buffer_size", buffers, "the replay buffers", config.device)

    def _greedy_network(self) -> torch.Tensor:
        """Return the stacked network (B, P) whose argmax is the greedy action."""
        raise NotImplementedError

    def _rows(self, host: NDArray[np.integer]) -> st.Rows:
        return st.rows_of(host, self.replicas, self.device)

    def _all_outputs(self, states: NDArray[np.int64]) -> torch.Tensor:
        """Return the greedy network's outputs (B, |A|) at every replica's row of ``states``."""
        rows = self._rows(np.arange(self.replicas))
        return self.engine.outputs(self._greedy_network(), states, rows)

    def _greedy_actions(self, outputs: torch.Tensor) -> NDArray[np.int64]:
        """Return the argmax index vectors (B, D_A) of ``outputs``; first index wins ties."""
        return self.codec.unravel(outputs.argmax(dim=1).cpu().numpy())

    @tu.one_cpu_thread
    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Argmax of each replica's greedy network, shape (B, D_A); first index wins ties."""
        return self._greedy_actions(self._all_outputs(states))

    @tu.one_cpu_thread
    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Exploratory joint actions of the active replicas, shape (B, D_A) (`_exploring`)."""
        return self._exploring(states, active, None)

    def _exploring(
        self, states: NDArray[np.int64], active: NDArray[np.bool_], outputs: torch.Tensor | None
    ) -> NDArray[np.int64]:
        """Exploratory joint actions of the active replicas, shape (B, D_A).

        ``outputs`` are the greedy network's outputs (B, |A|) at every row of
        ``states``, which exploration reads too, or None to compute those it needs.
        """
        raise NotImplementedError

    @tu.one_cpu_thread
    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """`rl.agents.base.Agent.act` with one pass of the network for both kinds of replica.

        When some replica is on a greedy evaluation episode, the network's
        outputs at every row give the greedy replicas' argmax and what the
        exploring replicas read (DQN's exploiting rows, SAC's policies). A
        replica's outputs do not depend on the rows computed with it (one CPU
        thread, `rl.agents.deep._torch_utils.one_cpu_thread`), so the actions are
        those of `explore` and `greedy` called apart, with one forward pass
        fewer and no weights gathered.
        """
        if greedy is None or not greedy.any():
            return self._exploring(states, active, None)
        outputs = self._all_outputs(states)
        actions = self._exploring(states, active & ~greedy, outputs)
        return np.where(greedy[:, None], self._greedy_actions(outputs), actions)

    def _store(self, batch: Transitions) -> st.Rows:
        """Add each active replica's transition to its buffer, count it; return the active rows."""
        rows = self._rows(np.flatnonzero(batch.active))
        r = rows.host
        self.buffer.add(
            rows,
            {
                "states": batch.states[r],
                "actions": self.codec.ravel(batch.actions[r]),
                "rewards": batch.rewards[r],
                "next_states": batch.next_states[r],
                "terminated": batch.terminated[r],
            },
        )
        self.steps[r] += 1
        return rows

    def _ready(self, rows: st.Rows) -> st.Rows:
        """Return the replicas of ``rows`` past warm-up whose buffer holds a mini-batch."""
        r = rows.host
        ready = (self.steps[r] >= self.settings_["learning_starts"][r]) & (
            self.buffer.size[r] >= self.config.batch_size
        )
        return self._rows(r[ready])

    def _train(self, step: TrainingStep, rows: st.Rows) -> NDArray[np.float64]:
        """Run ``step`` on one mini-batch per replica of ``rows`` (the engine's); its losses (K, R).

        While the mean Q is watched (`watch_q`), each replica's mean over its
        mini-batch of Q(s, a) at the taken actions is summed for `watched_q`.
        """
        if self._q_sums is None:
            return self.engine.train(step, rows, None)
        q_means = np.empty(len(rows.host))
        losses = self.engine.train(step, rows, q_means)
        self._q_sums[rows.host] += q_means
        self._q_steps[rows.host] += 1
        return losses

    def watch_q(self) -> None:
        """Start (or restart) summing the mean Q of the taken actions of each training step.

        The steps compute it only from here on (`watched_q` reads it); it is a
        diagnostic, not part of the agent's state, and changes no other number.
        """
        self._q_sums = np.zeros(self.replicas)
        self._q_steps[:] = 0

    def watched_q(self) -> NDArray[np.float64]:
        """Return each replica's mean Q of the taken actions since `watch_q`, then restart, (B,).

        The mean over the replica's training steps of its mini-batch mean of
        Q(s, a) at the stored actions, before the step's update (DQN: the online
        network; SAC: both critics); NaN for a replica that has not trained
        since, and for all before `watch_q`.
        """
        if self._q_sums is None:
            return np.full(self.replicas, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(self._q_steps > 0, self._q_sums / self._q_steps, np.nan)
        self.watch_q()
        return means

    def end_episode(self, active: NDArray[np.bool_]) -> None:
        """Count the episode of each active replica."""
        self.episodes[np.flatnonzero(active)] += 1

    # ------------------------------------------------------------------ checkpoints

    def _replica_states(self) -> list[dict[str, Any]]:
        """Each replica's entries other than buffer, counters and streams."""
        raise NotImplementedError

    def _parse_replica(self, state: dict[str, Any]) -> Any:
        """Check one replica's saved entries (those of `_replica_states`); ValueError if wrong."""
        raise NotImplementedError

    def _write_replica(self, i: int, parsed: Any) -> None:
        """Restore replica i from what `_parse_replica` returned."""
        raise NotImplementedError

    def _use_settings(self) -> None:
        """Put `settings_` where the steps read them (the optimizers' step sizes, the steps')."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """Return every replica's networks, optimizers, replay, counters and RNG states.

        One dict per replica, laid out as a replica trained alone would save
        it (``nn.Module`` and ``torch.optim.Adam`` state dicts as numpy trees),
        and the per-replica settings (`settings_`) beside them.
        """
        replicas = self._replica_states()
        for i, state in enumerate(replicas):
            state.update(
                buffer=self.buffer.replica_state(i),
                steps=int(self.steps[i]),
                episodes=int(self.episodes[i]),
                init_rng=tu.rng_state(self._init[i]),
                explore_rng=tu.rng_state(self._explore[i]),
            )
        settings = {field: values.copy() for field, values in self.settings_.items()}
        return {"agent": self.name, "replicas": replicas, SETTINGS_KEY: settings}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what `state_dict` returned (same number of replicas and config).

        Every replica's entries are checked before anything changes. The
        per-replica settings are the saved ones (a state without them keeps
        the agent's own).
        """
        saved = state["replicas"]
        if len(saved) != self.replicas:
            raise ValueError(f"State holds {len(saved)} replicas; this agent has {self.replicas}.")
        settings = saved_replica_values(
            type(self).__name__, self.per_replica, self.config, state, self.settings_
        )
        parsed = []
        for replica in saved:
            counts = (saved_count(replica, "steps"), saved_count(replica, "episodes"))
            buffer = self.buffer.parse(replica["buffer"])
            parsed.append((counts, buffer, self._parse_replica(replica)))
        for i, ((steps, episodes), buffer, own) in enumerate(parsed):
            self.steps[i], self.episodes[i] = steps, episodes
            self.buffer.write(i, buffer)
            self._write_replica(i, own)
            tu.set_rng_state(self._init[i], saved[i]["init_rng"])
            tu.set_rng_state(self._explore[i], saved[i]["explore_rng"])
        self.settings_ = settings
        self._use_settings()


def make_engine(name: str, state: EngineState) -> Engine:
    """Build the engine ``name`` (``"stacked"`` or ``"compiled"``) over ``state``."""
    return CompiledEngine(state) if name == "compiled" else StackedEngine(state)


def td_loss(
    values: torch.Tensor, targets: torch.Tensor, loss: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return each replica's mean TD loss and its gradient with respect to ``values``.

    ``values`` and ``targets`` are (R, N): Q(s, a) of the mini-batch and its
    targets y (DQN's r + gamma (1 - terminated) max_a' Q_target(s', a'), or the
    soft Bellman targets of SAC's critics). ``loss`` is
    ``"huber"`` (smooth L1 with delta 1, whose gradient is the difference
    clipped to [-1, 1]) or ``"mse"`` (gradient twice the difference); both
    divided by N, the mean's count. The losses are PyTorch's
    ``F.smooth_l1_loss`` and ``F.mse_loss``; the gradients are tested against
    autograd.
    """
    difference = values - targets
    count = values.shape[-1]
    if loss == "huber":
        losses = F.smooth_l1_loss(values, targets, reduction="none")
        d_values = difference.clamp(-1.0, 1.0)
    else:
        losses = F.mse_loss(values, targets, reduction="none")
        d_values = 2.0 * difference
    return losses.mean(dim=-1), d_values / count
