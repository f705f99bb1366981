"""The paper's bounds against a TEQL run on an exact-model problem.

`record_bound_run` trains TEQL (the paper reading, bounded iterates, the
problem's own gamma 0.9, with which Q* is computed) on ``lowrank`` or
``inventory`` through `rl`'s Python API (`rl.runs.training.build` and the runner's
``episodes`` iterator) and records, through the agent's ``on_update`` hook:

* per update: Delta Q = |after - before|, the visit count N_{t-1}(s_t, a_t),
  alpha_t and F_max in force, the TD target and the exact Bellman image
  (T Q_{t-1})(s_t, a_t) (so the TD noise is measured, not guessed), and
  ||Q_t - Q*||_inf over the whole tensor;
* per (s, a): selection counts and, per margin delta, the last update at
  which the conditions of Proposition 3 failed.

What t counts. t is the replica's own update index: one Algorithm 1 update
per training transition, counted from 1 (the same t as in alpha_t =
alpha_0 / (1 + kappa t)). Eq. (A.1) is written for the abstract iteration
Q_t = Pi_R(T Q_{t-1}) + zeta_t, which applies T to every entry at once; an
update of TEQL moves one entry (and, through the shared factor rows, its
neighbours). Read literally, gamma^t e_0 is gone after a few hundred updates.
The reading under which a contraction argument holds for asynchronous updates
counts *covering phases*: a phase ends when every (s, a) has been updated
since the last one ended (Bertsekas and Tsitsiklis). `theorem1_curves` gives
the bound under both readings.

References
----------
.. [1] TEQL paper, Theorem 1 and eqs. (A.1)-(A.2); Proposition 2 and eq.
   (A.3); Proposition 3 and eq. (A.4).
.. [2] D. P. Bertsekas, J. N. Tsitsiklis, "Neuro-Dynamic Programming", Athena
   Scientific, 1996, Section 4.3 (asynchronous stochastic approximation).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from analysis._numpy import numpy_backend
from analysis.qstar import EXACT_ENVS, QTensor, exact_qstar

DEFAULT_DELTAS = (0.05, 0.1, 0.2)
"""Proposition 3 margins delta, as fractions of the range max Q* - min Q*."""
_UPDATE_BYTES = 2 * 14 * 8
"""Bytes of one recorded update: the 14 columns of `BoundRecord.updates` (8 bytes each),
held twice while they are joined."""
_TABLES_PER_REPLICA = 5
"""Dense |S| x |A| tables of 8 bytes per replica besides two per margin (`_Recorder`)."""
NOISE_WINDOW = 100
"""Updates over which |y_t - (T Q_{t-1})(s_t, a_t)| is averaged to estimate eps_t."""


@dataclass(frozen=True)
class BoundSettings:
    """The constants of a bound run (what the bounds are evaluated with).

    Attributes
    ----------
    env : str
        ``"lowrank"`` or ``"inventory"``.
    gamma : float
        Discount of the agent and of Q*.
    rank, order : int
        CP rank R and tensor order N = D_S + D_A.
    r_max, v_max, f_max : float
        R_max, V_max = R_max / (1 - gamma) and F_max = (V_max / R)^(1/N).
    lam, eps, c : float
        lambda, epsilon of eq. (loss_function); the EUGE coefficient c.
    max_inner, replicas, episodes : int
        I_max (inner steps per mode), seeds B, training episodes per seed.
    agent_params : dict
        The full agent configuration used.
    """

    env: str
    gamma: float
    rank: int
    order: int
    r_max: float
    v_max: float
    f_max: float
    lam: float
    eps: float
    c: float
    max_inner: int
    replicas: int
    episodes: int
    agent_params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class BoundRecord:
    """What `record_bound_run` measured.

    Attributes
    ----------
    settings : BoundSettings
    q_star : QTensor
        The exact Q* (gamma of the run).
    updates : dict of str to ndarray
        One row per (replica, update), in time order: ``replica``, ``t`` (the
        replica's update index from 1), ``phase`` (covering phases completed
        before this update), ``state``, ``action`` (flat indices), ``before``,
        ``after``, ``delta_q``, ``visits``, ``step_size``, ``target``,
        ``bellman`` ((T Q_{t-1})(s_t, a_t)), ``noise`` (|target - bellman|),
        ``sup_error`` (||Q_t - Q*||_inf after the update).
    initial_error : ndarray, shape (B,)
        ||Q_0 - Q*||_inf of each replica.
    selections : ndarray of int64, shape (B, |S|, |A|)
        Times each (s, a) was selected (and updated).
    deltas : tuple of float
        The Proposition 3 margins (absolute values).
    t0 : ndarray of int64, shape (len(deltas), B, |S|, |A|)
        One past the last update at which condition (i) or (ii) of
        Proposition 3 failed for (s, a) (1 if they never failed).
    selections_before_t0 : ndarray of int64, same shape as ``t0``
        Selections of (s, a) at updates before ``t0``.
    """

    settings: BoundSettings
    q_star: QTensor
    updates: dict[str, NDArray]
    initial_error: NDArray[np.float64]
    selections: NDArray[np.int64]
    deltas: tuple[float, ...]
    t0: NDArray[np.int64]
    selections_before_t0: NDArray[np.int64]

    @property
    def horizon(self) -> NDArray[np.int64]:
        """Updates T of each replica, shape (B,)."""
        return self.selections.reshape(self.selections.shape[0], -1).sum(axis=1)


class _Recorder:
    """The ``on_update`` callback: bookkeeping on the dense Q of every replica."""

    def __init__(
        self,
        agent: Any,
        q_star: NDArray[np.float64],
        transition: NDArray[np.float64],
        reward: NDArray[np.float64],
        gamma: float,
        c: float,
        deltas: Sequence[float],
    ) -> None:
        self.agent = agent
        replicas = agent.replicas
        self.n_states, self.n_actions = reward.shape
        self.q_star = q_star.reshape(self.n_states, self.n_actions)
        self.transition, self.reward, self.gamma, self.c = transition, reward, gamma, c
        self.deltas = tuple(deltas)
        table = (replicas, self.n_states, self.n_actions)
        self.q_prev = self._dense()
        self.initial_error = np.abs(self.q_prev - self.q_star).max(axis=(1, 2))
        self.delta_q = np.zeros(table)
        self.counts = np.zeros(table, dtype=np.int64)
        self.seen = np.zeros(table, dtype=bool)
        self.phase = np.zeros(replicas, dtype=np.int64)
        self.t = np.zeros(replicas, dtype=np.int64)
        self.last_bad = np.zeros((len(self.deltas), *table), dtype=np.int64)
        self.before_t0 = np.zeros((len(self.deltas), *table), dtype=np.int64)
        self.columns: dict[str, list[NDArray]] = {}

    def _dense(self) -> NDArray[np.float64]:
        dense = np.asarray(self.agent.q_.to_dense(), dtype=np.float64)
        return dense.reshape(dense.shape[0], self.n_states, self.n_actions)

    def __call__(self, record: Any) -> None:
        rows = np.flatnonzero(record.active)
        if rows.size == 0:
            return
        s, a = record.states[rows], record.actions[rows]
        q_prev = self.q_prev[rows]
        v_prev = q_prev.max(axis=2)
        bellman = self.reward[s, a] + self.gamma * np.einsum(
            "bj,bj->b", self.transition[s, a], v_prev
        )
        self.t[rows] += 1
        t = self.t[rows]
        phase = self.phase[rows].copy()
        self.counts[rows, s, a] += 1
        # Proposition 3 conditions at time t, on Q_{t-1} and Delta Q_{t-1}.
        gap = q_prev.max(axis=2, keepdims=True) - q_prev
        for k, delta in enumerate(self.deltas):
            bad = (gap < delta) | (self.c * self.delta_q[rows] > delta / 4)
            self.last_bad[k, rows] = np.where(bad, t[:, None, None], self.last_bad[k, rows])
            self.before_t0[k, rows] = np.where(bad, self.counts[rows], self.before_t0[k, rows])
        before, after = record.before[rows], record.after[rows]
        self.delta_q[rows, s, a] = np.abs(after - before)
        q_new = self._dense()
        sup_error = np.abs(q_new[rows] - self.q_star).max(axis=(1, 2))
        self.seen[rows, s, a] = True
        covered = self.seen[rows].all(axis=(1, 2))
        if covered.any():
            done = rows[covered]
            self.phase[done] += 1
            self.seen[done] = False
        self.q_prev = q_new
        step = np.broadcast_to(np.asarray(record.step_size, dtype=np.float64), record.active.shape)
        values = {
            "replica": rows,
            "t": t,
            "phase": phase,
            "state": s,
            "action": a,
            "before": before,
            "after": after,
            "delta_q": np.abs(after - before),
            "visits": np.asarray(record.visits)[rows],
            "step_size": step[rows],
            "target": record.targets[rows],
            "bellman": bellman,
            "noise": np.abs(record.targets[rows] - bellman),
            "sup_error": sup_error,
        }
        for name, value in values.items():
            self.columns.setdefault(name, []).append(np.asarray(value))


@numpy_backend
def _check_record_memory(problem: Any, episodes: int, seeds: int, margins: int) -> None:
    """Refuse, before anything runs, a bound study whose records would not fit in memory.

    Raises
    ------
    ValueError
        Naming ``seeds`` and ``episodes``, if the recorded updates (one row per
        step of every replica) and the per-replica tables exceed
        `rl.validation.memory_budget`.
    """
    from rl.problems import ENVIRONMENTS
    from rl.validation import MEMORY_FRACTION, memory_budget

    steps = ENVIRONMENTS[problem.name].max_episode_steps
    entries = math.prod(problem.state_dims) * math.prod(problem.action_dims)
    per_replica = float(episodes) * steps * _UPDATE_BYTES
    per_replica += (_TABLES_PER_REPLICA + 2 * margins) * entries * 8
    n_bytes, budget = seeds * per_replica, memory_budget()
    if n_bytes > budget:
        raise ValueError(
            f"The 'seeds' and 'episodes' parameters ({seeds} and {episodes}) make the recorded "
            f"updates need {n_bytes / 2**30:.3g} GiB, more than the {budget / 2**30:.3g} GiB "
            f"allowed ({MEMORY_FRACTION:.0%} of this machine's memory); lower either."
        )


def record_bound_run(
    env: str,
    episodes: int,
    *,
    seeds: int = 1,
    seed: int = 0,
    rank: int = 5,
    agent_params: dict | None = None,
    deltas: Sequence[float] | None = None,
    progress: Callable[[int], None] | None = None,
) -> BoundRecord:
    """Train TEQL on an exact-model problem and record what the bounds talk about.

    Parameters
    ----------
    env : {"lowrank", "inventory"}
        The problem (its default size); Q* is exact.
    episodes : int
        Training episodes (100 steps each) per replica.
    seeds : int, default 1
        Replicas B, seeds ``seed .. seed + B - 1``.
    seed : int, default 0
        First seed.
    rank : int, default 5
        CP rank R (the low-rank MDP's Q* has CP rank at most 5).
    agent_params : dict, optional
        Overrides of `rl.agents.tensor.teql.TEQLConfig` fields; ``gamma`` defaults to
        the problem's and ``bounded`` to True.
    deltas : sequence of float, optional
        Proposition 3 margins (absolute); by default `DEFAULT_DELTAS` times
        the range of Q*.
    progress : callable, optional
        Called with the episode index after every finished episode.

    Returns
    -------
    BoundRecord

    Raises
    ------
    ValueError
        For an unknown problem, a bad episode or seed count, records that would
        not fit in memory or an invalid agent setting.
    """
    import gymnasium

    from rl.problems import make_problem
    from rl.runs.config import TrainConfig
    from rl.runs.training import build
    from rl.validation import check_int

    if env not in EXACT_ENVS:
        raise ValueError(f"The 'env' parameter must be one of {EXACT_ENVS}. Got {env!r} instead.")
    if not isinstance(episodes, (int, np.integer)) or episodes < 1:
        raise ValueError(f"The 'episodes' parameter must be an int >= 1. Got {episodes!r} instead.")
    check_int("seeds", seeds, 1)
    problem = make_problem(env)
    model = gymnasium.make(problem.env_id).unwrapped
    margins = len(DEFAULT_DELTAS if deltas is None else deltas)
    _check_record_memory(problem, int(episodes), int(seeds), margins)
    params = {"rank": rank, "gamma": float(model.gamma), "bounded": True, **(agent_params or {})}
    q_star = exact_qstar(env, gamma=params["gamma"])
    config = TrainConfig(
        env=env,
        agent="teql",
        reading="paper",  # the propositions are about the paper's algorithm
        out="unused",
        seeds=seeds,
        seed=seed,
        episodes=int(episodes),
        eval_every=0,
        agent_params=params,
    )
    runner, effective = build(config)
    agent = runner.agent
    n_states, n_actions = math.prod(model.state_dims), math.prod(model.action_dims)
    spread = float(q_star.tensor.max() - q_star.tensor.min())
    deltas = tuple(spread * f for f in DEFAULT_DELTAS) if deltas is None else tuple(deltas)
    recorder = _Recorder(
        agent,
        q_star.tensor,
        np.asarray(model.transition).reshape(n_states, n_actions, n_states),
        np.asarray(model.reward).reshape(n_states, n_actions),
        params["gamma"],
        agent.config.c,
        deltas,
    )
    agent.on_update = recorder
    try:
        for result in runner.episodes(0, int(episodes)):
            if progress is not None:
                progress(result.episode)
    finally:
        runner.close()
    if not recorder.columns:
        raise RuntimeError("The agent reported no updates through on_update.")
    cfg = agent.config
    v_max = model.reward_bound / (1.0 - cfg.gamma)
    order = len(model.state_dims) + len(model.action_dims)
    settings = BoundSettings(
        env=env,
        gamma=cfg.gamma,
        rank=cfg.rank,
        order=order,
        r_max=float(model.reward_bound),
        v_max=v_max,
        f_max=agent.bound.f_max if agent.bound is not None else math.inf,
        lam=cfg.lam,
        eps=cfg.eps,
        c=cfg.c,
        max_inner=cfg.max_inner,
        replicas=seeds,
        episodes=int(episodes),
        agent_params=effective["agent_params"],
    )
    updates = {name: np.concatenate(parts) for name, parts in recorder.columns.items()}
    return BoundRecord(
        settings=settings,
        q_star=q_star,
        updates=updates,
        initial_error=recorder.initial_error,
        selections=recorder.counts,
        deltas=deltas,
        t0=recorder.last_bad + 1,
        selections_before_t0=recorder.before_t0,
    )


def prop2_check(record: BoundRecord) -> tuple[NDArray[np.float64], float]:
    """Proposition 2's bound for every recorded update and the largest measured / bound ratio.

    Eq. (A.3) bounds one sweep (one gradient step per mode); Algorithm 1 takes
    up to I_max steps per mode, each bounded by the same per-step argument, so
    the bound used is I_max times (A.3), with the update's own step size and
    visit count.

    Parameters
    ----------
    record : BoundRecord

    Returns
    -------
    bound : ndarray, shape (n_updates,)
    max_ratio : float
        max over updates of Delta Q / bound (<= 1 when the proposition holds).

    References
    ----------
    Proposition 2, eq. (A.3).
    """
    from analysis.bounds import prop2_bound

    s, u = record.settings, record.updates
    bound = np.asarray(
        prop2_bound(
            step_size=u["step_size"],
            order=s.order,
            rank=s.rank,
            f_max=s.f_max,
            v_max=s.v_max,
            lam=s.lam,
            visits=u["visits"],
            eps=s.eps,
            inner_steps=s.max_inner,
        ),
        dtype=np.float64,
    )
    return bound, float(np.max(u["delta_q"] / bound))


def _window_mean(values: NDArray[np.float64], window: int) -> NDArray[np.float64]:
    """Trailing mean over at most ``window`` values (shorter at the start)."""
    cumulative = np.concatenate([[0.0], np.cumsum(values)])
    index = np.arange(1, len(values) + 1)
    lower = np.maximum(index - window, 0)
    return (cumulative[index] - cumulative[lower]) / (index - lower)


@dataclass(frozen=True)
class Theorem1Curves:
    """Measured ||Q_t - Q*||_inf and the bound of eq. (A.1) under two readings of t.

    Attributes
    ----------
    t : ndarray of int64, shape (T,)
        Update index (replica 0).
    measured : ndarray, shape (T,)
        ||Q_t - Q*||_inf of replica 0 after update t.
    bound_updates : ndarray, shape (T,)
        Eq. (A.1) with t = updates and eps_t the trailing mean of the measured
        TD noise over `NOISE_WINDOW` updates.
    bound_phases : ndarray, shape (T,)
        Eq. (A.1) with t = completed covering phases and eps_k the mean noise
        of phase k, held constant within a phase.
    limit : float
        Eq. (A.2), (B_R + eps_bar) / (1 - gamma), eps_bar the mean noise over
        the second half of the run.
    b_r : float
        B_R used.
    noise_bar : float
        eps_bar used.
    """

    t: NDArray[np.int64]
    measured: NDArray[np.float64]
    bound_updates: NDArray[np.float64]
    bound_phases: NDArray[np.float64]
    limit: float
    b_r: float
    noise_bar: float


def theorem1_curves(record: BoundRecord, b_r: float) -> Theorem1Curves:
    """Eq. (A.1) against the measured error of replica 0.

    Parameters
    ----------
    record : BoundRecord
    b_r : float
        B_R at the run's rank, e.g. the ``sup_error`` of
        `analysis.rank.rank_profile` on Q* (an upper estimate).

    Returns
    -------
    Theorem1Curves

    References
    ----------
    Theorem 1, eqs. (A.1) and (A.2).
    """
    from analysis.bounds import theorem1_bound, theorem1_limit

    gamma = record.settings.gamma
    mine = record.updates["replica"] == 0
    noise = record.updates["noise"][mine]
    e0 = float(record.initial_error[0])
    eps_updates = _window_mean(noise, NOISE_WINDOW)
    bound_updates = np.asarray(theorem1_bound(e0, gamma, b_r, eps_updates), dtype=np.float64)
    phase = record.updates["phase"][mine]
    n_phases = int(phase.max()) + 1
    phase_noise = np.bincount(phase, weights=noise, minlength=n_phases) / np.maximum(
        np.bincount(phase, minlength=n_phases), 1
    )
    completed = np.asarray(
        theorem1_bound(e0, gamma, b_r, phase_noise[: max(n_phases - 1, 1)]), dtype=np.float64
    )
    by_phase = np.concatenate([[e0 + b_r / (1.0 - gamma)], completed])
    noise_bar = float(noise[len(noise) // 2 :].mean())
    return Theorem1Curves(
        t=record.updates["t"][mine],
        measured=record.updates["sup_error"][mine],
        bound_updates=bound_updates,
        bound_phases=by_phase[np.minimum(phase, len(by_phase) - 1)],
        limit=float(theorem1_limit(gamma, b_r, noise_bar)),
        b_r=float(b_r),
        noise_bar=noise_bar,
    )


def prop3_table(record: BoundRecord) -> dict[str, NDArray]:
    """Proposition 3 for every (margin, replica, s, a) whose conditions hold at the end.

    A pair qualifies for margin delta when conditions (i) (Q_{t-1}(s, a) <=
    max_a' Q_{t-1}(s, a') - delta) and (ii) (c Delta Q_{t-1}(s, a) <= delta / 4)
    held at every update from t0 to the end of the run, t0 the first such
    update.

    Returns
    -------
    dict of str to ndarray
        Columns ``delta``, ``replica``, ``state``, ``action``, ``t0``,
        ``horizon``, ``selections`` (up to T), ``reselections`` (at or after
        t0), ``log_term`` (16 c^2 / delta^2 log T) and ``bound`` (eq. (A.4),
        t0 + log_term).

    References
    ----------
    Proposition 3, eq. (A.4).
    """
    from analysis.bounds import prop3_bound

    c, horizon = record.settings.c, record.horizon
    columns: dict[str, list] = {k: [] for k in ("delta", "replica", "state", "action", "t0")}
    columns.update({k: [] for k in ("horizon", "selections", "reselections", "log_term", "bound")})
    for k, delta in enumerate(record.deltas):
        qualifies = record.t0[k] <= horizon[:, None, None]
        replica, state, action = np.nonzero(qualifies)
        t0 = record.t0[k][replica, state, action]
        total = record.selections[replica, state, action]
        big_t = horizon[replica]
        bound = np.zeros(len(t0))
        if len(t0):
            bound = np.asarray(prop3_bound(t0=t0, c=c, delta=delta, horizon=big_t), dtype=float)
            bound = bound.reshape(t0.shape)
        values = {
            "delta": np.full(len(t0), delta),
            "replica": replica,
            "state": state,
            "action": action,
            "t0": t0,
            "horizon": big_t,
            "selections": total,
            "reselections": total - record.selections_before_t0[k][replica, state, action],
            "log_term": bound - t0,
            "bound": bound,
        }
        for name, value in values.items():
            columns[name].append(np.asarray(value))
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def _save(figure: Any, path_stem: str | Any) -> list[str]:
    from pathlib import Path

    from rl.runs.rundir import atomic_write_bytes

    Path(path_stem).parent.mkdir(parents=True, exist_ok=True)
    paths = [str(Path(path_stem).with_suffix(suffix)) for suffix in (".png", ".pdf")]
    for path in paths:
        image = io.BytesIO()
        figure.savefig(image, dpi=120, format=path[-3:])
        atomic_write_bytes(path, image.getvalue())  # never through a link, permissions by umask
    return paths


def plot_bound_overlays(
    record: BoundRecord, curves: Theorem1Curves, path_stem: str | Any
) -> list[str]:
    """Draw each measured quantity over its bound (PNG and PDF); return the file paths.

    Left: Delta Q per update against I_max times eq. (A.3) and the trivial
    2 V_max. Middle: ||Q_t - Q*||_inf against eq. (A.1) under both readings
    of t and eq. (A.2). Right: re-selections at or after t0 of the pairs that
    meet Proposition 3's conditions, against 16 c^2 / delta^2 log T.

    Parameters
    ----------
    record : BoundRecord
    curves : Theorem1Curves
        From `theorem1_curves`.
    path_stem : path-like
        Output path without suffix.

    Returns
    -------
    list of str
    """
    from matplotlib.figure import Figure

    s, u = record.settings, record.updates
    bound, ratio = prop2_check(record)
    figure = Figure(figsize=(15, 4.4), layout="constrained")
    left, middle, right = figure.subplots(1, 3)
    floor = max(float(u["delta_q"][u["delta_q"] > 0].min(initial=1e-12)), 1e-12)
    left.scatter(u["t"], np.maximum(u["delta_q"], floor), s=2, alpha=0.4, label="measured ΔQ")
    left.scatter(u["t"], bound, s=2, color="C3", label="I_max × eq. (A.3)")
    left.axhline(2 * s.v_max, color="k", ls=":", label="2 V_max (trivial)")
    left.set(yscale="log", xlabel="update t", ylabel="ΔQ_t(s_t, a_t)")
    left.set_title(f"Proposition 2: max measured/bound = {ratio:.2e}", fontsize=10)
    left.legend(fontsize=8, markerscale=4)
    middle.plot(curves.t, curves.measured, label="measured ||Q_t − Q*||∞ (seed 0)")
    middle.plot(curves.t, curves.bound_updates, label="eq. (A.1), t = updates")
    middle.plot(curves.t, curves.bound_phases, label="eq. (A.1), t = covering phases")
    middle.axhline(curves.limit, color="k", ls="--", label="eq. (A.2) limit")
    middle.axhline(s.v_max, color="k", ls=":", label="V_max")
    middle.set(yscale="log", xlabel="update t", ylabel="sup-norm error")
    middle.set_title(f"Theorem 1: B_R = {curves.b_r:.3g}, ε̄ = {curves.noise_bar:.3g}", fontsize=10)
    middle.legend(fontsize=8)
    table = prop3_table(record)
    for k, delta in enumerate(record.deltas):
        mine = table["delta"] == delta
        right.scatter(
            table["t0"][mine],
            table["reselections"][mine],
            s=6,
            color=f"C{k}",
            label=f"δ = {delta:.3g}",
        )
        log_term = 16 * s.c**2 / delta**2 * math.log(max(int(record.horizon.max()), 2))
        right.axhline(log_term, color=f"C{k}", ls="--")
    right.set_yscale("symlog", linthresh=1.0)
    right.set_ylim(bottom=0)
    right.set(xlabel="t0 (conditions hold from here on)", ylabel="selections at or after t0")
    right.set_title("Proposition 3: dashed = 16c²/δ² log T", fontsize=10)
    right.legend(fontsize=8)
    figure.suptitle(
        f"TEQL bounds on {s.env} (R = {s.rank}, γ = {s.gamma:g}, "
        f"{s.episodes} episodes, {s.replicas} seed(s))"
    )
    return _save(figure, path_stem)
