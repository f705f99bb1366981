"""The engine seam of the CP-tensor agents: who runs a training step, chosen once.

A `rl.agents.tensor.agent.TensorAgent` holds one `Engine` (``agent.engine_``),
picked at construction from ``config.engine``, and routes ``act``, ``greedy``
and ``observe`` through it:

- `ReferenceEngine` runs the agent's own reference mathematics (NumPy and
  TensorLy, any TensorLy backend): ``agent.choose_actions`` (Algorithm 2 or
  epsilon-greedy) and ``agent.learn`` (Algorithm 1 with its bookkeeping). It
  imports no Numba.
- `rl.agents.tensor._compiled_engine.CompiledEngine` runs the same step in compiled kernels,
  from what the agent declares in its `StepRule`; it is imported only when chosen.
- `rl.agents.tensor._array_engine.ArrayEngine` runs the same step as array operations
  on the config's ``backend`` (NumPy, PyTorch, JAX) and ``device``; chosen by
  ``engine="array"`` or any backend but NumPy, imported only then.

Both give the same numbers to 1e-12 (``tests/rl/test_fast_path.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Transitions
from rl.agents.tensor.euge import BonusShareMean, bonus_share

if TYPE_CHECKING:
    from rl.agents.tensor.agent import TensorAgent

EngineName = Literal["auto", "compiled", "reference", "array"]


class UpdateStats(NamedTuple):
    """What one update did, one value per replica (rows of inactive replicas are meaningless).

    Attributes
    ----------
    targets : ndarray of float64, shape (B,)
        TD targets r + gamma max_a' Q_{t-1}(s', a').
    before, after : ndarray of float64, shape (B,)
        The updated entry before and after the update.
    visits : ndarray, shape (B,)
        The count N passed to the loss of eq. (loss_function) (0 without visit table).
    step_size : ndarray of float64, shape (B,)
        The step size in force.
    """

    targets: NDArray[np.float64]
    before: NDArray[np.float64]
    after: NDArray[np.float64]
    visits: NDArray[Any]
    step_size: NDArray[np.float64]


class StepRule(NamedTuple):
    """One training step of a tensor agent in numbers an engine can run.

    Attributes
    ----------
    exploration : {"epsilon", "euge", "euge-epsilon"}
        Epsilon-greedy on Q, EUGE (eq. (euge)), or an epsilon-greedy layer over EUGE.
    update : {"paper", "released", "stable", "normalized"}
        The row update (`tensorq.bcd_update` variants, or `tensorq.normalized_step`).
    alpha0 : float
        Initial step size alpha_0 of alpha_t = alpha_0 / (1 + kappa t).
    kappa, lam, eps, c, tol : float
        Step-size decay, lambda and epsilon of eq. (loss_function), EUGE's c, tau.
    bonus_unit : float
        The reward unit u of EUGE's count bonus (`rl.agents.tensor.euge`; 1 as printed).
    max_inner : int
        I_max.
    f_max : float or None
        The factor bound F_max of Assumption 2 (None: unbounded).
    count_before_update, signed_delta : bool
        The released reading's counting and sign of Delta Q.
    step_count : {"agent", "entry"}
        t of alpha_t: the agent's steps, or the visit count N(s, a) of the updated entry.
    mode_scale : tuple of float or None
        rho_n of the stable rule's row steps (`tensorq.update.stable_sweep`); None: ones.
    """

    exploration: Literal["epsilon", "euge", "euge-epsilon"]
    update: Literal["paper", "released", "stable", "normalized"]
    alpha0: float
    kappa: float = 0.0
    lam: float = 0.0
    eps: float = 1.0
    c: float = 0.0
    bonus_unit: float = 1.0
    tol: float = 0.0
    max_inner: int = 1
    f_max: float | None = None
    count_before_update: bool = False
    signed_delta: bool = False
    step_count: Literal["agent", "entry"] = "agent"
    mode_scale: tuple[float, ...] | None = None


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
        """Bring the agent's host copies (counters, visits, generators) up to date."""

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Take the factors and the agent's host copies as restored from a checkpoint."""


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


def pack_factors(factors: Sequence[NDArray[np.float64]]) -> list[NDArray[np.float64]]:
    """Copy factors (B, d_n, R) into one array (B, sum d_n, R); return views of it, one per mode."""
    packed = np.ascontiguousarray(np.concatenate(factors, axis=1), dtype=np.float64)
    ends = np.cumsum([f.shape[1] for f in factors])
    return [packed[:, end - f.shape[1] : end] for f, end in zip(factors, ends, strict=True)]


def packed_factors(factors: list[NDArray[np.float64]]) -> NDArray[np.float64]:
    """Return the packed array behind ``factors``, repacking them into a new one if they left it."""
    packed = factors[0].base
    if (
        packed is None
        or packed.ndim != 3
        or not packed.flags.c_contiguous
        or packed.shape[1] != sum(f.shape[1] for f in factors)
        or any(f.base is not packed for f in factors)
    ):
        factors[:] = pack_factors(factors)
        packed = factors[0].base
    return packed


class ReferenceEngine:
    """The agent's reference mathematics (NumPy/TensorLy), step by step.

    Parameters
    ----------
    agent : rl.agents.tensor.agent.TensorAgent
    """

    name = "reference"

    def __init__(self, agent: TensorAgent) -> None:
        self.agent = agent
        self.bonus_shares = BonusShareMean(agent.replicas)
        """The chosen EUGE actions' bonus shares (added only after `track_bonus_share`)."""
        self.tracks_bonus_share = False
        """Whether `explore` adds the bonus shares (`track_bonus_share`)."""

    def track_bonus_share(self) -> None:
        """Make every later EUGE action add its bonus share to `bonus_shares`."""
        self.tracks_bonus_share = True

    def bonus_share(self) -> NDArray[np.float64]:
        """Return each replica's mean EUGE bonus share since the last call, and start anew."""
        return self.bonus_shares.pop()

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """`Agent.act` on the reference: `explore`, and `greedy` where some replica is greedy."""
        drawn = self.agent.continuous_actions_
        if drawn is not None:
            drawn.mask[:] = False  # `choose_actions` sets the replicas that draw
        if greedy is None or not greedy.any():
            return self.explore(states, active)
        actions = self.explore(states, active & ~greedy)
        return np.where(greedy[:, None], self.greedy(states), actions)

    def explore(self, states: NDArray[np.int64], active: NDArray[np.bool_]) -> NDArray[np.int64]:
        """Return the exploratory actions (`TensorAgent.choose_actions`) as index vectors."""
        agent = self.agent
        flat = agent.choose_actions(states, active)
        if self.tracks_bonus_share:  # the chosen actions' share (no draws)
            chosen = flat[:, None]
            values = np.take_along_axis(agent.action_values(states), chosen, axis=-1)[:, 0]
            scores = np.take_along_axis(agent.exploration_scores(states), chosen, axis=-1)[:, 0]
            self.bonus_shares.add(bonus_share(values, scores), active)
        return agent.action_vectors(flat)

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Argmax_a Q(s, a) per replica (first maximum on ties)."""
        agent = self.agent
        return agent.action_vectors(agent.action_values(states).argmax(axis=-1))

    def observe(self, batch: Transitions) -> UpdateStats:
        """Run the agent's reference update (`TensorAgent.learn`)."""
        return self.agent.learn(batch)

    def sync(self) -> None:
        """Nothing to do: the agent's arrays are the engine's."""

    def reload(self, factors: list[NDArray[np.float64]]) -> None:
        """Copy ``factors`` into the agent's factors (in place)."""
        copy_factors(self.agent, factors)


def copy_factors(agent: TensorAgent, factors: list[NDArray[np.float64]]) -> None:
    """Copy ``factors`` into ``agent.q_.factors`` in place (NumPy factors)."""
    for factor, values in zip(agent.q_.factors, factors, strict=True):
        factor[...] = values
