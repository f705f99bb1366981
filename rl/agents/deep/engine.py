"""The engine seam of DQN and discrete SAC: who runs a training step, chosen once.

A `rl.agents.deep._torch_agent.BatchedTorchAgent` holds one engine (``agent.engine``),
picked at construction from ``config.engine`` (`resolve_engine`,
`rl.agents.deep._torch_agent.make_engine`):

- `StackedEngine` runs the stacked PyTorch computations of `rl.agents.deep._stacked`
  on the agent's device: the GPU's engine, and the reference.
- `rl.agents.deep._compiled_engine.CompiledEngine` runs the Numba kernels of
  `rl.agents.deep._step_compiled`, one replica after another, on numpy views of the
  same tensors: the CPU's engine unless the config says otherwise.

The agents define what a training step is (`TrainingStep`: its PyTorch
definition, and the call of its compiled twin with the same state); an engine
draws each replica's mini-batch in the form its step reads (`StackedBatch`,
`CompiledBatch`), runs the step, and computes acting's forward pass. An engine
reads only the `EngineState` built for it before it, never the agent. Both
engines draw the same mini-batches from the same streams, and their numbers
agree to float32 rounding (``tests/rl/test_compiled_steps.py``).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
import torch
from numpy.typing import NDArray

from rl.agents.deep import _stacked as st

EngineName = Literal["auto", "stacked", "compiled"]
ENGINES = ("auto", "stacked", "compiled")
"""Values of the configs' ``engine`` field."""


class EngineState(NamedTuple):
    """What an engine reads: the networks' shape, the input scale, the replay and the streams.

    Attributes
    ----------
    layout : rl.agents.deep._stacked.Layout
        The tensors of one network in its row of a stacked (B, P) network.
    hidden, n_actions : int
        The hidden width and the number of outputs (joint actions).
    scale : torch.Tensor
        float32 (D_S,) on the device: network inputs are index vectors times it.
    replay : rl.agents.deep._stacked.StackedReplay
        The replicas' replay memories.
    generators : numba.typed.List
        The replicas' exploration generators (`rl.agents._explore_compiled.typed_generators`).
    batch_size : int
        Transitions per replica and training step.
    """

    layout: st.Layout
    hidden: int
    n_actions: int
    scale: torch.Tensor
    replay: st.StackedReplay
    generators: Any
    batch_size: int


class StackedBatch(NamedTuple):
    """One mini-batch per training replica, for a step on stacked PyTorch tensors.

    Attributes
    ----------
    sample : rl.agents.deep._stacked.Sample
        The drawn transitions, (R, batch_size, ...).
    states, next_states : torch.Tensor
        Their (next) states' network inputs in the column layout of
        `rl.agents.deep._stacked.forward_pass`, (R, D_S, batch_size), contiguous.
    """

    sample: st.Sample
    states: torch.Tensor
    next_states: torch.Tensor


class CompiledBatch(NamedTuple):
    """One mini-batch per training replica, as `rl.agents.deep._step_compiled` reads it.

    Attributes
    ----------
    records : ndarray of float32, shape (B, capacity, W)
        The replay's records (a view).
    columns : ndarray of int64, shape (5,)
        Their first columns of states, action, reward, next states and termination.
    drawn : ndarray of int64, shape (R, batch_size)
        The drawn indices into each training replica's records.
    rows : ndarray of int64, shape (R,)
        The training replicas.
    scale : ndarray of float32, shape (D_S,)
        The input scale.
    """

    records: NDArray[np.float32]
    columns: NDArray[np.int64]
    drawn: NDArray[np.int64]
    rows: NDArray[np.int64]
    scale: NDArray[np.float32]


class TrainingStep(Protocol):
    """One training step of an agent, defined on stacked tensors and twinned by a kernel.

    Both methods update the agent's tensors in place from the same state and
    return the step's losses, float64 (K, R): one row per loss the agent
    reports, one column per training replica (NaN where a loss is not trained).
    ``q_means``, when not None, is filled with each training replica's mean
    over its mini-batch of Q(s, a) at the taken actions, before the update
    (SAC: of both critics); the step computes it only when asked.
    """

    def stacked(
        self, batch: StackedBatch, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Run the step on stacked PyTorch tensors (the definition)."""

    def compiled(
        self, batch: CompiledBatch, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Run the step's compiled twin (`rl.agents.deep._step_compiled`)."""


class Engine(Protocol):
    """What a deep agent asks of its engine."""

    name: str
    """``"stacked"`` or ``"compiled"``."""

    def outputs(
        self, network: torch.Tensor, states: NDArray[np.int64], rows: st.Rows
    ) -> torch.Tensor:
        """Return the outputs (R, |A|) of ``network``'s rows ``rows`` at their ``states``."""

    def train(
        self, step: TrainingStep, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Draw a mini-batch per replica of ``rows`` and run ``step`` on it; its losses."""


class StackedEngine:
    """Acting and training with the stacked PyTorch computations, on any device.

    Parameters
    ----------
    state : EngineState
        What the engine reads.
    """

    name = "stacked"

    def __init__(self, state: EngineState) -> None:
        self.state = state

    def _features(self, states: torch.Tensor) -> torch.Tensor:
        """Return the network inputs of index vectors on the device, float32 (..., D_S)."""
        return states.to(torch.float32) * self.state.scale

    def outputs(
        self, network: torch.Tensor, states: NDArray[np.int64], rows: st.Rows
    ) -> torch.Tensor:
        """Return the outputs (R, |A|) of ``network``'s rows ``rows`` at their ``states``."""
        index = torch.from_numpy(np.asarray(states)[rows.host]).to(self.state.scale.device)
        with torch.inference_mode():
            params = self.state.layout.views(st.take(network, rows))
            return st.forward(params, self._features(index)[:, None, :])[:, 0, :]

    def train(
        self, step: TrainingStep, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Draw a mini-batch per replica of ``rows`` and run ``step.stacked`` on it."""
        state = self.state
        sample = state.replay.sample(state.generators, rows, state.batch_size)
        inputs = [
            self._features(states).transpose(1, 2).contiguous()
            for states in (sample.states, sample.next_states)
        ]
        return step.stacked(StackedBatch(sample, *inputs), rows, q_means)


def resolve_engine(name: str, device: torch.device) -> str:
    """Return the engine ``name`` names on ``device``: ``"auto"`` is compiled on the CPU.

    Raises
    ------
    ValueError
        If ``name`` is ``"compiled"`` and ``device`` is not the CPU.
    """
    if name == "auto":
        return "compiled" if device.type == "cpu" else "stacked"
    if name == "compiled" and device.type != "cpu":
        raise ValueError(
            f"The 'engine' parameter 'compiled' runs on the CPU; the device is {device}. "
            "Use engine='stacked' (or 'auto') there."
        )
    return name
