"""The engine seam of the tensor agents: what an engine reads (`TensorState`) and does (`Engine`).

A `rl.agents.tensor.agent.TensorAgent` builds its `TensorState` completely
(factors, step counters, epsilon, exploration generators, visit table, the
continuous draws' record, the resolved `StepRule` and its numbers per replica,
`ReplicaRule`), then one `Engine` on
it, picked once from ``config.engine`` by `resolve_engine`, and routes
``act``, ``greedy`` and ``observe`` through it. An engine reads only the
bundle, never the agent; the agent's own attributes (``q_.factors``,
``steps_``, ``epsilon_``) are the bundle's arrays, shared, not copied.

- ``"reference"``: `rl.agents.tensor._array_engine.ArrayEngine` on NumPy with each
  replica's own generator draws, the step of `rl.agents.tensor.step` as written;
- ``"array"``: the same engine with buffered draws on the config's ``backend``
  (NumPy, PyTorch, JAX) and ``device``;
- ``"compiled"``: `rl.agents.tensor._compiled_engine.CompiledEngine`, the step's
  Numba twin (imported only when chosen). It gives the reference's numbers to
  1e-12 (``tests/rl/test_compiled_engine.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import ContinuousActions, Transitions
from rl.agents.tensor.visits import VisitTable
from tensorq._backend import BACKEND_TRAITS

Array = Any


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

    The choices (exploration, update, counting, action interval) hold for
    every replica; the numbers are the config's, and the engines read each
    replica's own from `ReplicaRule` (`TensorState.values`).

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
        The reward unit u of EUGE's count bonus (`rl.agents.tensor.step.euge_scores`; 1 as printed).
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
    gamma : float
        The discount of the TD target.
    epsilon_decay, epsilon_min : float
        Epsilon's factor after every non-terminal training step, and its floor.
    action_interval : tuple of two tuples of float, or None
        ``(low, high)`` per action component: the epsilon layer's random actions
        are continuous draws from it (`rl.agents.base.ContinuousActions`); None:
        a random grid index.
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
    gamma: float = 0.99
    epsilon_decay: float = 1.0
    epsilon_min: float = 0.0
    action_interval: tuple[tuple[float, ...], tuple[float, ...]] | None = None


class ReplicaRule(NamedTuple):
    """The numbers of the step, one value per replica: what a batch of settings varies.

    Every field is a float64 array of shape (B,), a row of one packed array
    (`replica_rule`; the compiled kernels read that array, the rows in this
    order). Replica b runs the step of a lone agent whose config has these
    values (`rl.agents.replica_settings`).

    Attributes
    ----------
    alpha0, kappa, lam, eps, c, bonus_unit, tol, max_inner : ndarray
        As in `StepRule` (TLR: ``alpha0`` is its constant step size alpha).
    f_max : ndarray
        The factor bound F_max of Assumption 2, from the replica's gamma and
        rank (read only where ``StepRule.f_max`` is not None: bounded).
    gamma, epsilon_decay, epsilon_min : ndarray
        As in `StepRule`.
    rank : ndarray
        r_b <= R: replica b's components r_b, ..., R - 1 are 0 and stay 0; it
        runs as a rank-r_b agent.
    """

    alpha0: NDArray[np.float64]
    kappa: NDArray[np.float64]
    lam: NDArray[np.float64]
    eps: NDArray[np.float64]
    c: NDArray[np.float64]
    bonus_unit: NDArray[np.float64]
    tol: NDArray[np.float64]
    max_inner: NDArray[np.float64]
    f_max: NDArray[np.float64]
    gamma: NDArray[np.float64]
    epsilon_decay: NDArray[np.float64]
    epsilon_min: NDArray[np.float64]
    rank: NDArray[np.float64]

    @property
    def packed(self) -> NDArray[np.float64]:
        """The array (13, B) whose rows the fields are."""
        return self.alpha0.base

    def uniform(self, field: str) -> float | None:
        """Return the value of ``field`` if every replica has it, else None."""
        values = getattr(self, field)
        first = float(values[0])
        return first if bool(np.all(values == first)) else None


def replica_rule(rule: StepRule, rank: int, replicas: int, values: dict[str, Any]) -> ReplicaRule:
    """Return the `ReplicaRule` of B replicas: ``values[field]`` (B,) where given, else ``rule``'s.

    ``rank`` is the config's rank R; ``f_max`` falls back to ``rule.f_max``
    (infinity where it is None: unbounded).
    """
    packed = np.empty((len(ReplicaRule._fields), replicas))
    for row, field in zip(packed, ReplicaRule._fields, strict=True):
        if field in values:
            row[:] = values[field]
        elif field == "rank":
            row[:] = rank
        elif field == "f_max":
            row[:] = math.inf if rule.f_max is None else rule.f_max
        else:
            row[:] = getattr(rule, field)
    return ReplicaRule(*packed)


@dataclass(frozen=True)
class TensorState:
    """Everything an engine of a tensor agent reads, built before the engine.

    Attributes
    ----------
    rule : StepRule
        The step, resolved.
    values : ReplicaRule
        The step's numbers per replica (what the engines read).
    factors : list of arrays of shape (B, d_n, R)
        The Q-tensor's factors (the agent's ``q_.factors`` list itself); on NumPy
        views of one packed array (B, sum_n d_n, R), see `pack_factors`.
    steps : ndarray of int64, shape (B,)
        Training transitions observed per replica.
    epsilon : ndarray of float64, shape (B,)
        The epsilon layer's probability per replica.
    generators : list of numpy.random.Generator
        The replicas' exploration generators (shared).
    visits : rl.agents.tensor.visits.VisitTable or None
        N(s, a) and Delta Q(s, a) (None: the agent keeps none).
    drawn : rl.agents.base.ContinuousActions or None
        The record of the last continuous random actions (with ``rule.action_interval``).
    state_dims, action_dims : tuple of int
        The mode sizes of states and actions.
    backend, device : str
        Where the array engine runs.
    label : str
        The agent's name, for the divergence error.
    remedies : tuple of str
        The settings that can keep the agent's Q-values finite.
    """

    rule: StepRule
    values: ReplicaRule
    factors: list[Array]
    steps: NDArray[np.int64]
    epsilon: NDArray[np.float64]
    generators: list[np.random.Generator]
    visits: VisitTable | None
    drawn: ContinuousActions | None
    state_dims: tuple[int, ...]
    action_dims: tuple[int, ...]
    backend: str = "numpy"
    device: str = "cpu"
    label: str = "TensorAgent"
    remedies: tuple[str, ...] = ()

    @property
    def replicas(self) -> int:
        """B."""
        return len(self.steps)

    @property
    def n_states(self) -> int:
        """|S|, the number of flat states."""
        return math.prod(self.state_dims)

    @property
    def n_actions(self) -> int:
        """|A|, the number of joint actions."""
        return math.prod(self.action_dims)

    def action_vectors(self, flat: NDArray[np.int64]) -> NDArray[np.int64]:
        """Convert flat joint actions (B,) to action index vectors (B, D_A)."""
        return np.stack(np.unravel_index(flat, self.action_dims), axis=-1)

    def divergence(self, replica: int, target: float) -> ValueError:
        """Return the error raised when replica ``replica``'s TD target ``target`` is not finite."""
        return ValueError(
            f"{self.label} diverged: the TD target of replica {replica} is "
            f"{target} (its Q-values overflowed); the run stops. Try "
            f"{', or '.join(self.remedies)}."
        )

    def reload(self, factors: Sequence[NDArray[np.float64]]) -> None:
        """Copy ``factors`` into the NumPy factors in place (after a checkpoint load)."""
        for factor, values in zip(self.factors, factors, strict=True):
            factor[...] = values


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


class BonusShareMean:
    """Each replica's running mean of the EUGE bonus share of its chosen actions, read and reset.

    The share is `rl.agents.tensor.step.bonus_share`; an engine adds it for
    every replica that acted by EUGE, once asked to (`Engine.track_bonus_share`).

    Parameters
    ----------
    replicas : int
        B.

    Attributes
    ----------
    sums : ndarray of float64, shape (2, B)
        Row 0: the sum of the shares added since the last `pop`; row 1: their
        number (the compiled step adds to both in place).
    """

    def __init__(self, replicas: int) -> None:
        self.sums = np.zeros((2, replicas))

    def add(self, shares: NDArray[np.float64], mask: NDArray[np.bool_]) -> None:
        """Add ``shares`` (B,) of the replicas in ``mask`` (B,)."""
        self.sums[0, mask] += shares[mask]
        self.sums[1, mask] += 1.0

    def pop(self) -> NDArray[np.float64]:
        """Return the mean share of every replica (NaN where none was added) and start anew."""
        total, acts = self.sums
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(acts > 0, total / acts, np.nan)
        self.sums[:] = 0.0
        return mean


EngineName = Literal["auto", "compiled", "reference", "array", "scan"]


class Engine(Protocol):
    """What a tensor agent asks of its engine (see `Agent.act`, `Agent.greedy`, `Agent.observe`)."""

    name: str
    """``"reference"``, ``"compiled"`` or ``"array"``."""

    tracks_bonus_share: bool
    """Whether acting adds the EUGE bonus shares (`track_bonus_share`)."""

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

    def track_bonus_share(self) -> None:
        """Make every later EUGE action add its bonus share (`BonusShareMean`)."""

    def bonus_share(self) -> NDArray[np.float64]:
        """Return each replica's mean EUGE bonus share since the last call, and start anew."""


def resolve_engine(engine: EngineName, factors: Sequence[Any], backend: str = "numpy") -> str:
    """Return the engine to use.

    ``"scan"`` when asked for (the array engine on JAX, whose runs the scan loop
    `rl.loop.scan` plays); ``"array"`` when asked for or for a ``backend`` other than
    NumPy; otherwise
    ``"compiled"`` wherever it applies (NumPy float64 factors), else ``"reference"``.

    Raises
    ------
    ValueError
        If ``engine="compiled"`` is asked for factors it does not support.
    """
    if engine == "scan":
        return "scan"
    if engine == "array" or not BACKEND_TRAITS[backend].host:
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
