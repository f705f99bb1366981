"""The engine seam of the CP-tensor agents: who runs a training step, chosen once.

A `rl.agents.tensor.agent.TensorAgent` builds its `rl.agents.tensor.state.TensorState`,
then one `Engine` on it (``agent.engine_``, `make_engine`), picked from
``config.engine`` by `resolve_engine`, and routes ``act``, ``greedy`` and
``observe`` through it. An engine reads only the state:

- ``"reference"``: `rl.agents.tensor._array_engine.ArrayEngine` on NumPy with each
  replica's own generator draws, the step of `rl.agents.tensor.step` as written;
- ``"array"``: the same engine with buffered draws on the config's ``backend``
  (NumPy, PyTorch, JAX) and ``device``;
- ``"compiled"``: `rl.agents.tensor._compiled_engine.CompiledEngine`, the step's
  Numba twin (imported only when chosen).

The compiled engine gives the reference's numbers to 1e-12 (``tests/rl/test_fast_path.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Transitions
from rl.agents.tensor.state import TensorState, UpdateStats

EngineName = Literal["auto", "compiled", "reference", "array"]


class Engine(Protocol):
    """What a tensor agent asks of its engine (see `Agent.act`, `Agent.greedy`, `Agent.observe`)."""

    name: str
    """``"reference"``, ``"compiled"`` or ``"array"``."""

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Explore where ``active & ~greedy``, act greedily where ``greedy``; (B, D_A)."""

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the first maximizer of Q per replica, (B, D_A); no randomness."""

    def observe(self, batch: Transitions) -> UpdateStats:
        """Learn from one transition per active replica (some replica is active)."""

    def sync(self) -> None:
        """Bring the state's host copies (counters, visits, generators) up to date."""

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Take the factors and the state's host copies as restored from a checkpoint."""


def resolve_engine(engine: EngineName, factors: Sequence[Any], backend: str = "numpy") -> str:
    """Return the engine to use.

    ``"array"`` when asked for or for a ``backend`` other than NumPy; otherwise
    ``"compiled"`` wherever it applies (NumPy float64 factors), else ``"reference"``.

    Raises
    ------
    ValueError
        If ``engine="compiled"`` is asked for factors it does not support.
    """
    if engine == "array" or backend != "numpy":
        return "array"
    if engine == "reference":
        return "reference"
    applies = all(isinstance(f, np.ndarray) and f.dtype == np.float64 for f in factors)
    if not applies:
        if engine == "compiled":
            raise ValueError(
                "The 'engine' parameter 'compiled' needs NumPy float64 factors; use 'auto' or "
                "'reference' for other backends."
            )
        return "reference"
    return "compiled"


def make_engine(name: str, state: TensorState) -> Engine:
    """Build the engine ``name`` (``"compiled"``, ``"array"`` or ``"reference"``) on ``state``."""
    if name == "compiled":
        from rl.agents.tensor._compiled_engine import CompiledEngine

        return CompiledEngine(state)
    from rl.agents.tensor._array_engine import ArrayEngine

    return ArrayEngine(state, name)
