"""The compiled engine of DQN and discrete SAC (`rl.agents.deep.engine`): the CPU's.

`CompiledEngine` acts with `rl.agents.deep._step_compiled.outputs` and hands each
training step a `rl.agents.deep.engine.CompiledBatch`: the replay's records, the
drawn indices and the input scale as numpy views, which the step's compiled
twin reads. The mini-batch indices are those the stacked engine draws
(`rl.agents.deep._stacked.StackedReplay.draw`), from the same streams.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray

from rl.agents.deep import _stacked as st
from rl.agents.deep import _step_compiled as compiled
from rl.agents.deep.engine import CompiledBatch, EngineState, TrainingStep


class CompiledEngine:
    """Acting and training with the compiled CPU kernels, one replica after another.

    Parameters
    ----------
    state : rl.agents.deep.engine.EngineState
        What the engine reads (its tensors on the CPU).
    """

    name = "compiled"

    def __init__(self, state: EngineState) -> None:
        self.state = state
        self._scale = state.scale.numpy()

    def outputs(
        self, network: torch.Tensor, states: NDArray[np.int64], rows: st.Rows
    ) -> torch.Tensor:
        """Return the outputs (R, |A|) of ``network``'s rows ``rows`` at their ``states``."""
        values = np.empty((len(rows.host), self.state.n_actions), dtype=np.float32)
        states = np.ascontiguousarray(states, dtype=np.int64)
        compiled.outputs(network.numpy(), rows.host, states, self._scale, self.state.hidden, values)
        return torch.from_numpy(values)

    def train(
        self, step: TrainingStep, rows: st.Rows, q_means: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """Draw a mini-batch per replica of ``rows`` and run ``step.compiled`` on it."""
        replay = self.state.replay
        drawn = replay.draw(self.state.generators, rows, self.state.batch_size)
        batch = CompiledBatch(replay.records.numpy(), replay.starts, drawn, rows.host, self._scale)
        return step.compiled(batch, rows, q_means)
