"""The paper's hyperparameters and the released settings of every agent, in one place.

A *reading* is one consistent set of settings of an agent: ``paper`` follows
the paper's text (Table "Hyperparameter settings for all environments",
tab:hyperparams, and the Appendix "Parameter Matching Methodology"),
``released`` the authors' released code (docs/authors-code.md: the effective
settings of the published runs). Every agent has both; where the paper and the
released code agree (TLR, LoRa-VI, tabular Q-learning, the random agent) the
two are the same settings, and `same_settings` says so.

A reading gives, per problem (short name), overrides of the agent config's
defaults (`Reading.agent_params`) and options of `rl.problems.make_problem`
(`Reading.env_options`, for example LoRa-VI's coarse state grid). Problems
without an entry get the reading's ``common`` settings only. Parameter budgets
and matched network widths are computed from the formulas of
`rl.agents.param_formulas`, never written down.

A *preset* (``cartpole-teql-released``, `rl.experiments.presets`) names an
environment, an agent and a reading together.

Adding a reading
----------------
A reading is data: add an entry ``READINGS[agent][name] = Reading(...)`` below
(for example TEQL's ``stable`` reading, with its ``common`` overrides of
`rl.agents.tensor.teql.TEQLConfig` and any per-problem ones). Nothing else changes:
``--reading name`` then works for that agent, other agents refuse it with a
one-line error, and `PRESETS` gains ``{env}-{agent}-{name}`` for every
environment the agent runs on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rl.agents._explore import EPSILON_SCHEDULE
from rl.agents.base import DEFAULT_GAMMA
from rl.agents.param_formulas import cp_params, match_width, mlp_params, sac_params
from rl.problems.problem import REWARD_MARGIN

# ----------------------------------------------------------------------------- the paper

#: Table tab:hyperparams of the paper, one column per environment. ``dims`` is
#: the CP grid (state modes, then the action mode).
PAPER_TABLE: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "pendulum": {"rank": 10, "dims": (20, 20, 10), "alpha0": 0.005, "kappa": 0.001,
                 "tol": 0.01, "eps": 1e-4, "lam": 1e-3, "c": 1.0, "episodes": 40_000,
                 "steps": 100, "gamma": 0.99},
    "cartpole": {"rank": 10, "dims": (10, 10, 20, 20, 10), "alpha0": 0.005, "kappa": 0.001,
                 "tol": 0.01, "eps": 1e-4, "lam": 1e-3, "c": 2.0, "episodes": 10_000,
                 "steps": 100, "gamma": 0.99},
    "highway": {"rank": 20, "dims": (20,) * 9 + (5,), "alpha0": 0.0002, "kappa": 0.001,
                "tol": 0.01, "eps": 1e-4, "lam": 1e-3, "c": 2.0, "episodes": 10_000,
                "steps": 50, "gamma": 0.99},
})  # fmt: skip

#: Appendix "Parameter Matching Methodology": LoRa-VI's anchors K and coarse state grid
#: (infeasible on Highway, so absent).
PAPER_CUR: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "cartpole": {"anchors": 9, "state_bins": (3, 3, 3, 3)},
    "pendulum": {"anchors": 10, "state_bins": (7, 7)},
})  # fmt: skip

# ----------------------------------------------------------------------------- the released code

#: Effective settings of the released TEQL and TLR runs (docs/authors-code.md, "TEQL as released").
RELEASED_TABLE: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "pendulum": {"rank": 10, "alpha": 0.005, "gamma": 0.9, "max_inner": 1,
                 "epsilon_start": 1.0, "epsilon_decay": 0.999995, "epsilon_min": 0.0},
    "cartpole": {"rank": 10, "alpha": 0.005, "gamma": 0.9, "max_inner": 5,
                 "epsilon_start": 0.4, "epsilon_decay": 0.999999, "epsilon_min": 0.0},
    "highway": {"rank": 20, "alpha": 0.0002, "gamma": 0.8, "max_inner": 1,
                "epsilon_start": 1.0, "epsilon_decay": 0.999999, "epsilon_min": 0.0},
})  # fmt: skip

#: Hidden widths of the released DQN and SAC (not the formula-nearest ones on Pendulum).
RELEASED_HIDDEN: Mapping[str, Mapping[str, int]] = MappingProxyType({
    "dqn": {"cartpole": 46, "pendulum": 39, "highway": 247},
    "sac": {"cartpole": 15, "pendulum": 13, "highway": 82},
})  # fmt: skip

#: Environments whose random exploratory actions the released code draws from a
#: continuous interval (docs/authors-code.md, "Exploratory actions").
CONTINUOUS_ACTION_ENVS = ("cartpole", "pendulum")


# ----------------------------------------------------------------------------- budgets


def budget(problem: str) -> int:
    """Return the paper's parameter budget of ``problem``: P_CP = R sum_n d_n of its grid.

    700 (CartPole), 500 (Pendulum), 3,700 (Highway).

    References
    ----------
    Table tab:hyperparams (R and the bins) and Appendix "Parameter Matching
    Methodology", P_CP.
    """
    column = PAPER_TABLE[problem]
    return cp_params(column["rank"], column["dims"])


def network_io(problem: str) -> tuple[int, int]:
    """Return (d_in, d_out) of the networks on ``problem``: state components, actions."""
    dims = PAPER_TABLE[problem]["dims"]
    return len(dims) - 1, dims[-1]


def matched_hidden(agent: str, problem: str) -> int:
    """Return the hidden width of ``agent`` (``"dqn"`` or ``"sac"``) nearest the budget.

    DQN: P_DQN = d_in h + h + h d_out + d_out; SAC: P_SAC = 3 P_network + 1
    (CartPole 46 and 15, Pendulum 38 and 12, Highway 246 and 82).

    References
    ----------
    Appendix "Parameter Matching Methodology", P_DQN and P_SAC.
    """
    d_in, d_out = network_io(problem)
    count = mlp_params if agent == "dqn" else sac_params
    return match_width(budget(problem), lambda h: count(d_in, h, d_out))


# ----------------------------------------------------------------------------- readings


@dataclass(frozen=True)
class Reading:
    """One reading of one agent: config overrides and problem options, per problem.

    Attributes
    ----------
    description : str
        One line for ``--list-presets`` and docs.
    common : mapping
        Config overrides on every problem.
    per_problem : mapping
        Problem short name -> config overrides on top of ``common``.
    env_options : mapping
        Problem short name -> ``make_problem`` options.
    one_state_mode : mapping
        Config overrides on top of ``common`` on a problem without a ``per_problem``
        entry whose state is one tensor mode (known once the problem is built).
    per_reward_bound : tuple of str
        Keys of ``one_state_mode`` whose value counts per unit of the problem's reward
        bound R_max: the value used there is that value times R_max (known once the
        problem is built).
    per_reward_size : mapping
        Config key -> its value in units of the problem's reward size
        (`rl.problems.Problem.reward_size`) on a problem without a ``per_problem``
        entry that gives one: the value used there is that value times the size,
        on top of ``common`` and below ``one_state_mode``.
    """

    description: str
    common: Mapping[str, Any] = field(default_factory=dict)
    per_problem: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    env_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    one_state_mode: Mapping[str, Any] = field(default_factory=dict)
    per_reward_bound: tuple[str, ...] = ()
    per_reward_size: Mapping[str, float] = field(default_factory=dict)

    def agent_params(
        self,
        problem: str,
        state_modes: int | None = None,
        reward_bound: float | None = None,
        reward_size: float | None = None,
    ) -> dict[str, Any]:
        """Return the config overrides of this reading on ``problem`` (a fresh dict).

        ``state_modes``, ``reward_bound`` and ``reward_size``, the built problem's
        number of state modes, R_max and reward size (None: not built yet, or no
        size), select ``one_state_mode`` and scale its ``per_reward_bound`` keys and
        the ``per_reward_size`` keys.
        """
        if problem in self.per_problem:
            return {**self.common, **self.per_problem[problem]}
        sized = {}
        if reward_size is not None:
            sized = {key: units * reward_size for key, units in self.per_reward_size.items()}
        shaped = dict(self.one_state_mode) if state_modes == 1 else {}
        if shaped and reward_bound is not None:
            shaped.update({key: shaped[key] * reward_bound for key in self.per_reward_bound})
        return {**self.common, **sized, **shaped}

    def problem_options(self, problem: str) -> dict[str, Any]:
        """Return the ``make_problem`` options of this reading on ``problem`` (a fresh dict)."""
        return dict(self.env_options.get(problem, {}))


def _teql_paper() -> Reading:
    keys = ("rank", "alpha0", "kappa", "tol", "eps", "lam", "c", "gamma")
    return Reading(
        "the paper's Table tab:hyperparams: Algorithm 1, EUGE, bounded iterates",
        per_problem={p: {k: col[k] for k in keys} for p, col in PAPER_TABLE.items()},
    )


def _teql_released() -> Reading:
    common = {"kappa": 0.0, "lam": 0.0, "eps": 1e-4, "c": 1.0, "tol": 0.01, "bounded": False,
              "update": "released", "signed_delta": True, "count_before_update": True}  # fmt: skip
    per_problem = {}
    for problem, col in RELEASED_TABLE.items():
        values = {("alpha0" if k == "alpha" else k): v for k, v in col.items()}
        values["continuous_random_actions"] = problem in CONTINUOUS_ACTION_ENVS
        per_problem[problem] = values
    return Reading(
        "the released code: normalized Jacobi sweeps, no bound; epsilon-greedy over EUGE "
        "on CartPole, Pendulum and Highway (the released runs' settings), EUGE alone elsewhere",
        common,
        per_problem,
    )


def _tlr(continuous: bool) -> dict[str, dict[str, Any]]:
    keys = ("rank", "alpha", "gamma", "epsilon_start", "epsilon_decay", "epsilon_min")
    per_problem: dict[str, dict[str, Any]] = {}
    for problem, col in RELEASED_TABLE.items():
        per_problem[problem] = {k: col[k] for k in keys}
        if continuous and problem in CONTINUOUS_ACTION_ENVS:
            per_problem[problem]["continuous_random_actions"] = True
    return per_problem


def _networks(agent: str, released: bool) -> dict[str, dict[str, Any]]:
    per_problem: dict[str, dict[str, Any]] = {}
    for problem in PAPER_TABLE:
        if not released:
            per_problem[problem] = {
                "hidden": matched_hidden(agent, problem),
                "gamma": PAPER_TABLE[problem]["gamma"],
            }
            continue
        values: dict[str, Any] = {"hidden": RELEASED_HIDDEN[agent][problem], "input_scaling": "raw"}
        if agent == "dqn":
            values.update(loss="mse", epsilon_schedule="episode", epsilon_decay=0.999999)
            if problem == "highway":
                values.update(learning_rate=3e-4, buffer_size=50_000)
        per_problem[problem] = values
    return per_problem


_CUR = {p: {"anchors": v["anchors"]} for p, v in PAPER_CUR.items()}
_CUR_GRID = {p: {"state_bins": v["state_bins"]} for p, v in PAPER_CUR.items()}

#: The reading a run uses when none is named, for every agent but those of `AGENT_DEFAULTS`.
DEFAULT_READING = "paper"

#: Agents whose reading when none is named is another one: TEQL's ``stable`` reading, which
#: learns the paper's problems and the others, where the paper reading does not
#: (`NOT_LEARNING`; docs/readings.md, "The paper reading on CartPole").
AGENT_DEFAULTS: Mapping[str, str] = MappingProxyType({"teql": "stable"})

#: Readings measured not to learn a problem: (agent, reading) -> problem -> the measurement:
#: greedy return over episodes 901-1,000, mean ± std over seeds 0-7, against the stable
#: reading's (docs/readings.md, "The paper reading on CartPole", and its table at the
#: paper's scale).
NOT_LEARNING: Mapping[tuple[str, str], Mapping[str, str]] = MappingProxyType({
    ("teql", "paper"): MappingProxyType({
        "cartpole": "greedy return -39 ± 31 after 1,000 episodes, near a random policy's -62; "
                    "stable 82 ± 9",
        "pendulum": "greedy return 11 ± 7 after 1,000 episodes; stable 81 ± 13",
    }),
})  # fmt: skip


def default_reading(agent: str) -> str:
    """Return the reading a run of ``agent`` uses when none is named.

    TEQL's ``stable`` reading (`AGENT_DEFAULTS`), the one that learns: the paper
    reading does not learn CartPole or Pendulum (`NOT_LEARNING`) and its plain
    gradient step fails FrozenLake and Blackjack (docs/discrete-problems.md); the
    paper's text (`DEFAULT_READING`) for every other agent.
    """
    return AGENT_DEFAULTS.get(agent, DEFAULT_READING)


def not_learning(agent: str, name: str, problem: str) -> str | None:
    """Return one line saying that reading ``name`` of ``agent`` does not learn ``problem``.

    None unless `NOT_LEARNING` records it (``problem`` is a short name).
    """
    measured = NOT_LEARNING.get((agent, name), {}).get(problem)
    if measured is None:
        return None
    return (
        f"Note: reading {name!r} of {agent} is known not to learn {problem} ({measured}); "
        f"--reading {default_reading(agent)} learns it."
    )


#: The stable reading's steps on the paper's problems (CartPole, Pendulum, Highway) and on
#: every problem whose state has several modes: one step size for every entry, decaying
#: in agent steps, eta_t = eta_0 / (1 + kappa t), eta_0 = 0.5.
AGENT_STEPS: Mapping[str, Any] = MappingProxyType({
    "step_count": "agent", "kappa": 0.001, "footprint_power": 0.0, "init_actions": "uniform",
    "alpha0": 0.5,
})  # fmt: skip

#: The stable reading's steps where the paper gives no settings and the state is one mode
#: (docs/discrete-problems.md): the step of mode n's row
#: is rho_n eta_0 / (1 + kappa N_t(s, a)), rho_n = min(1, |A| / |S|)^2 on the action
#: modes, from orthogonal initial joint action rows; eta_0 = 1, so that an entry's first
#: visit moves it to its target, as tabular Q-learning's step 1 / (1 + kappa N) does.
TABULAR_LIKE_STEPS: Mapping[str, Any] = MappingProxyType({
    "step_count": "entry", "kappa": 0.05, "footprint_power": 2.0, "init_actions": "identity",
    "alpha0": 1.0,
})  # fmt: skip

#: EUGE's count bonus with the tabular-like steps: u = 1 reward bound R_max (the reading's
#: ``per_reward_bound`` scales it), so that it follows Q's scale where each entry learns on
#: its own (docs/readings.md, "Sparse rewards").
BONUS_IN_REWARD_BOUNDS: Mapping[str, Any] = MappingProxyType({"bonus_unit": 1.0})

#: EUGE's count bonus with several state modes: u = `REWARD_MARGIN` reward sizes (the
#: reading's ``per_reward_size`` scales it), the bound's margin over a typical reward, not
#: over the largest: where every reward has one size (CartPole's +1) u is the estimated
#: R_max, and a rare large reward (a goal) does not inflate it (docs/readings.md, "Sparse
#: rewards"). A problem without a reward size keeps u = 1, as printed.
BONUS_IN_REWARD_SIZES: Mapping[str, float] = MappingProxyType({"bonus_unit": REWARD_MARGIN})

#: TLR's settings on a problem without a column in the paper's table: tabular
#: Q-learning's discount and epsilon schedule, so that the two differ only in the form of Q
#: and its update (docs/discrete-problems.md, "Defaults on problems without a paper setting"). The
#: paper's problems override every key with the released runs' settings.
TLR_ELSEWHERE: Mapping[str, Any] = MappingProxyType({"gamma": DEFAULT_GAMMA, **EPSILON_SCHEDULE})

#: agent -> reading name -> `Reading`. Add a reading here (see the module docstring).
READINGS: dict[str, dict[str, Reading]] = {
    "teql": {
        "paper": _teql_paper(),
        "released": _teql_released(),
        # docs/readings.md, "The stable reading": the paper's loss, EUGE and Algorithm 1 with
        # the count after the visit, normalized-LMS row steps (alpha0 is the step eta_0 in
        # (0, 2)), one inner step, and the factor bound from V_max always on.
        "stable": Reading(
            "the paper's loss, EUGE and Algorithm 1, with normalized-LMS row steps, the "
            "post-visit count and the factor bound: a descent step with bounded iterates; "
            "off the paper's problems, EUGE's count bonus in units of the reward size and, "
            "on a state of one mode, tabular-like steps (orthogonal action rows, footprint "
            "and per-entry steps) with the bonus in units of the reward bound",
            common={
                "update": "stable",
                "count_before_update": True,
                "bounded": True,
                "max_inner": 1,
                "tol": 0.01,
                "lam": 1e-3,
                "eps": 1e-4,
                "epsilon_start": 0.0,
                "c": 1.0,  # where the paper's table gives no c: the released code's value
                **AGENT_STEPS,
            },
            per_problem={
                p: {"rank": col["rank"], "c": col["c"], "gamma": col["gamma"]}
                for p, col in PAPER_TABLE.items()
            },
            one_state_mode={**TABULAR_LIKE_STEPS, **BONUS_IN_REWARD_BOUNDS},
            per_reward_bound=tuple(BONUS_IN_REWARD_BOUNDS),
            per_reward_size=BONUS_IN_REWARD_SIZES,
        ),
    },
    "tlr": {
        "paper": Reading(
            "the paper's table lists no TLR values: the released TLR runs behind its curves; "
            "elsewhere tabular Q-learning's discount and epsilon schedule",
            common=TLR_ELSEWHERE,
            per_problem=_tlr(continuous=False),
        ),
        "released": Reading(
            "Rozada et al.'s released TLR: normalized Jacobi step, epsilon-greedy, continuous "
            "random actions; elsewhere tabular Q-learning's discount and epsilon schedule",
            common=TLR_ELSEWHERE,
            per_problem=_tlr(continuous=True),
        ),
    },
    "lora-vi": {
        "paper": Reading(
            "the paper's description and Appendix K and coarse grid",
            per_problem=_CUR,
            env_options=_CUR_GRID,
        ),
        "released": Reading(
            "the released LoRa-VI is not a CUR method and crashes on CartPole: the paper's",
            per_problem=_CUR,
            env_options=_CUR_GRID,
        ),
    },  # fmt: skip
    "dqn": {
        "paper": Reading(
            "formula-matched width, CleanRL-like settings",
            per_problem=_networks("dqn", released=False),
        ),
        "released": Reading(
            "released widths, raw index inputs, MSE, per-episode epsilon decay",
            per_problem=_networks("dqn", released=True),
        ),
    },  # fmt: skip
    "sac": {
        "paper": Reading(
            "formula-matched width, CleanRL-like settings",
            per_problem=_networks("sac", released=False),
        ),
        "released": Reading(
            "released widths, raw index inputs", per_problem=_networks("sac", released=True)
        ),
    },  # fmt: skip
    "tabular": {
        "paper": Reading("not one of the paper's baselines: the config defaults (gamma 0.99)"),
        "released": Reading("not in the released code: the config defaults"),
    },
    "random": {
        "paper": Reading("uniform random actions; no hyperparameters"),
        "released": Reading("uniform random actions; no hyperparameters"),
    },
}
# TLR: the paper gives no TLR settings of its own, so its reading is the released runs'
# settings with the actions executed at bin centres; the two differ only in that option.


def readings(agent: str) -> tuple[str, ...]:
    """Return the reading names of ``agent``."""
    return tuple(READINGS.get(agent, {}))


def reading(agent: str, name: str) -> Reading:
    """Return the `Reading` ``name`` of ``agent``.

    Raises
    ------
    ValueError
        In one line, naming the agent's readings, if it has no such reading.
    """
    options = READINGS.get(agent, {})
    if name not in options:
        known = ", ".join(options) or "none"
        raise ValueError(f"Agent {agent!r} has no reading {name!r}; its readings: {known}.")
    return options[name]


def same_settings(agent: str, first: str, second: str, problem: str) -> bool:
    """Return whether two readings of ``agent`` give the same settings on ``problem``."""
    a, b = reading(agent, first), reading(agent, second)
    return a.agent_params(problem) == b.agent_params(problem) and a.problem_options(
        problem
    ) == b.problem_options(problem)
