"""The compiled engine of the tensor agents: what the kernels need, built once per agent.

`CompiledStep` holds the settings arrays, the typed list of the replicas'
exploration generators (sharing their state with the Python objects, so
checkpoints and the reference path see the same streams) and the record of the
last update; `act` and `observe` call `rl.agents._kernels`. The factors are
read from one packed array (B, sum_n d_n, R) of which the agent's
``q_.factors`` are views (`packed_factors`), so one compiled kernel serves any
number of modes.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

Engine = Literal["auto", "compiled", "reference"]


def resolve_engine(engine: Engine, factors: Sequence[Any]) -> str:
    """Return the engine to use: ``"compiled"`` wherever it applies (NumPy float64 factors).

    Raises
    ------
    ValueError
        If ``engine="compiled"`` is asked for factors it does not support.
    """
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


def _typed_generators(generators: Sequence[np.random.Generator]) -> Any:
    from numba.core.errors import NumbaPendingDeprecationWarning

    from rl.agents import _kernels

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        typed = _kernels.generator_list(generators[0])
        for generator in generators[1:]:
            _kernels.generator_append(typed, generator)
    return typed


class CompiledStep:
    """The compiled act and observe of one tensor agent.

    Parameters
    ----------
    agent : rl.agents.tensor_agent.TensorAgent
        Supplies the factors (``q_``), ``problem``, ``steps_``, ``epsilon_``
        and the exploration generators.
    explore_rule : int
        `rl.agents._kernels.EPSILON_GREEDY`, ``EUGE`` or ``EUGE_EPSILON``.
    update_rule : int
        `rl.agents._update_kernels.PAPER`, ``RELEASED``, ``TLR`` or ``STABLE``.
    visits : VisitTable or None
        TEQL's visit table (None: no counts, no Delta Q).
    c, alpha0, kappa, lam, eps, tol, max_inner, f_max : float or int
        The rule's settings (f_max None: no bound).
    count_before_update, signed_delta : bool
        The released reading's counting and sign of Delta Q.
    """

    def __init__(
        self,
        agent: Any,
        *,
        explore_rule: int,
        update_rule: int,
        visits: Any = None,
        c: float = 0.0,
        alpha0: float,
        kappa: float = 0.0,
        lam: float = 0.0,
        eps: float = 1.0,
        tol: float = 0.0,
        max_inner: int = 1,
        f_max: float | None = None,
        count_before_update: bool = False,
        signed_delta: bool = False,
    ) -> None:
        from rl.agents import _kernels

        self._kernels = _kernels
        config, problem = agent.config, agent.problem
        self.agent = agent
        self.visits = visits
        self.explore_rule = explore_rule
        self.c = float(c)
        self.n_state = len(problem.state_dims)
        self.n_states = int(agent.n_states)
        self.dims = np.array(problem.shape, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.dims)[:-1]]).astype(np.int64)
        self.floats = np.zeros(9)
        k = _kernels
        self.floats[[k.GAMMA, k.ALPHA0, k.KAPPA, k.LAM, k.EPS, k.TOL]] = (
            config.gamma, alpha0, kappa, lam, eps, tol,
        )  # fmt: skip
        self.floats[k.F_MAX] = 0.0 if f_max is None else f_max
        self.floats[k.EPS_DECAY] = config.epsilon_decay
        self.floats[k.EPS_MIN] = config.epsilon_min
        self.ints = np.zeros(6, dtype=np.int64)
        self.ints[[k.RULE, k.MAX_INNER, k.BOUNDED, k.COUNT_BEFORE, k.SIGNED_DELTA, k.VISITS]] = (
            update_rule, max_inner, f_max is not None, count_before_update, signed_delta,
            visits is not None,
        )  # fmt: skip
        self.generators = _typed_generators(agent._rngs)
        replicas = agent.replicas
        none = np.zeros(0, dtype=np.int64)
        self._no_table = (none, none, none, np.zeros((0, 0), np.int64), np.zeros((0, 0)), none)
        self._no_greedy = np.zeros(replicas, dtype=bool)
        self._all = np.ones(replicas, dtype=bool)
        self.record = np.zeros((5, replicas))
        self._action_modes = len(problem.action_dims)
        self.continuous = bool(getattr(config, "continuous_random_actions", False))
        interval = getattr(agent, "action_interval_", None)
        self.low, self.high = interval if interval is not None else (np.zeros(1), np.ones(1))
        drawn = getattr(agent, "continuous_actions_", None)
        if drawn is None:
            drawn = (np.zeros(replicas, dtype=bool), np.zeros((replicas, self._action_modes)))
        self.drawn_mask, self.drawn = drawn
        self._views: list[NDArray[np.float64]] = []
        self._packed = np.zeros((0, 0, 0))

    def _factors(self) -> NDArray[np.float64]:
        """Return the packed factors, checking only that ``q_.factors`` are still its views."""
        factors = self.agent.q_.factors
        if len(factors) != len(self._views) or not all(map(operator.is_, factors, self._views)):
            self._packed = packed_factors(factors)
            self._views = list(factors)
        return self._packed

    def _table(self) -> tuple[NDArray[Any], ...]:
        return self._no_table if self.visits is None else self.visits.kernel_table()

    def act(
        self,
        states: NDArray[np.int64],
        active: NDArray[np.bool_],
        greedy: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.int64]:
        """Return actions (B, D_A): explore where ``active & ~greedy``, argmax Q where greedy."""
        agent = self.agent
        actions = np.zeros((agent.replicas, self._action_modes), dtype=np.int64)
        self._kernels.act_kernel(
            self._factors(), self.offsets, self.dims, self.n_state,
            self.n_states, np.ascontiguousarray(states, dtype=np.int64),
            np.ascontiguousarray(active, dtype=bool),
            self._no_greedy if greedy is None else np.ascontiguousarray(greedy, dtype=bool),
            agent.epsilon_, self.explore_rule, self.c, *self._table(), self.generators, actions,
            self.continuous, self.low, self.high, self.drawn, self.drawn_mask,
        )  # fmt: skip
        return actions

    def greedy(self, states: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the first maximizer of Q per replica; no randomness."""
        return self.act(states, self._all, self._all)

    def observe(self, batch: Any) -> NDArray[np.float64]:
        """Learn from ``batch``; return the record (5, B): target, before, after, N, alpha.

        Raises
        ------
        ValueError
            If an active replica's TD target is not finite (nothing has changed then).
        """
        agent = self.agent
        if self.visits is not None:
            self.visits.reserve(agent.replicas)
        bad = self._kernels.observe_kernel(
            self._factors(), self.offsets, self.dims, self.n_state,
            self.n_states, np.ascontiguousarray(batch.states, dtype=np.int64),
            np.ascontiguousarray(batch.actions, dtype=np.int64),
            np.ascontiguousarray(batch.rewards, dtype=np.float64),
            np.ascontiguousarray(batch.next_states, dtype=np.int64),
            np.ascontiguousarray(batch.terminated, dtype=bool),
            np.ascontiguousarray(batch.active, dtype=bool), self.floats, self.ints,
            *self._table(), agent.steps_, agent.epsilon_, self.record,
        )  # fmt: skip
        if bad >= 0:
            agent._diverged(int(bad), float(self.record[self._kernels.TARGET, bad]))
        return self.record


def warm() -> None:
    """Compile (or load from Numba's on-disk cache) every kernel, on a tiny problem.

    The argument types are those `CompiledStep` passes, so later calls in this
    process, and in processes started after it, find the compiled code.
    """
    from rl.agents import _kernels

    replicas, dims, rank = 2, np.array([2, 3, 2], dtype=np.int64), 2
    offsets = np.array([0, 2, 5], dtype=np.int64)
    factors = np.random.default_rng(0).random((replicas, int(dims.sum()), rank))
    generators = _typed_generators([np.random.default_rng(b) for b in range(replicas)])
    row_keys = np.full(4, _kernels.EMPTY, dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    keys, slot_rows = _kernels.table_rebuild(row_keys, 0, 8)
    table = (keys, slot_rows, row_keys, np.zeros((4, 2), np.int64), np.zeros((4, 2)), used)
    states = np.zeros((replicas, 2), dtype=np.int64)
    on = np.ones(replicas, dtype=bool)
    _kernels.table_rows(table, np.arange(replicas, dtype=np.int64), on, True)
    actions = np.zeros((replicas, 1), dtype=np.int64)
    for continuous in (False, True):
        _kernels.act_kernel(
            factors, offsets, dims, 2, 6, states, on, ~on, np.zeros(replicas), _kernels.EUGE, 1.0,
            *table, generators, actions, continuous, np.zeros(1), np.ones(1),
            np.zeros((replicas, 1)), np.zeros(replicas, dtype=bool),
        )  # fmt: skip
    floats, ints = np.full(9, 0.5), np.zeros(6, dtype=np.int64)
    ints[_kernels.MAX_INNER] = 1
    _kernels.observe_kernel(
        factors, offsets, dims, 2, 6, states, actions, np.zeros(replicas), states, ~on, on,
        floats, ints, *table, np.zeros(replicas, np.int64), np.zeros(replicas),
        np.zeros((5, replicas)),
    )  # fmt: skip
