"""Why TEQL stops learning where tabular Q-learning learns: measurements over training.

On a Gymnasium problem with one ``Discrete`` state mode and one ``Discrete``
action mode (Taxi, CliffWalking) the Q-tensor is a |S| x |A| matrix
Q = S A^T of rank R. This module trains one replica of TEQL's stable reading
(with any overrides) and, for comparison, tabular Q-learning, on the same
episode seeds, and prints at every checkpoint what the hypotheses of
docs/discrete-problems.md need:

- the greedy return over fixed starts, and the training return;
- the step size eta_t in force;
- the action factor: row norms and the smallest cosine between two rows
  (1: every action row points the same way);
- the singular values of Q, relative to the largest (how far from rank 1);
- the greedy policy: how many states take the most frequent greedy action;
- the spread of Q (its range, the median gap between a state's two best
  actions) and EUGE's count bonus of an untried action in a typical state;
- the visit counts: states visited, median visits per visited state.

Run ``python -m analysis.teql_dynamics --env Taxi-v4`` (about a minute per
1,000 Taxi episodes on one core); ``--set key=value`` (JSON values)
overrides `rl.agents.tensor.teql.TEQLConfig` fields on top of the stable reading,
``--agent tabular`` (or ``tlr``) trains that agent instead; the factor
measurements then are left out (TLR, or problems with several state modes).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np

from rl.agents.base import Agent, Transitions
from rl.agents.readings import reading
from rl.agents.tables.tabular import TabularQ, TabularQConfig
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.agents.tensor.tlr import TLRAgent, TLRConfig
from rl.problems import Problem, make_problem
from rl.seeding import spawn_replicas
from tensorq.version import add_version_option

EVAL_SEED = 10_000_000
"""First reset seed of the greedy evaluation episodes (disjoint from training's)."""


def _episode(agent: Agent, problem: Problem, env: gymnasium.Env, seed: int, train: bool) -> float:
    """Play one episode (training: explore and learn; else greedy); return its return."""
    one = np.ones(1, dtype=bool)
    obs, _ = env.reset(seed=seed)
    state = problem.encode(obs).reshape(1, -1)
    total = 0.0
    while True:
        action = agent.act(state, one) if train else agent.greedy(state)
        obs, reward, terminated, truncated, _ = env.step(problem.decode(action)[0])
        following = problem.encode(obs).reshape(1, -1)
        if train:
            rewards, ended = np.array([reward], float), np.array([terminated])
            agent.observe(Transitions(state, action, rewards, following, ended, one))
        total += float(reward)
        state = following
        if terminated or truncated:
            return total


def _q_matrix(agent: Agent) -> np.ndarray:
    if isinstance(agent, TEQLAgent):
        states, actions = (factor[0] for factor in agent.q_.factors)
        return states @ actions.T
    return np.asarray(agent.q_table_[0])


def measure(agent: Agent, n_states: int) -> dict[str, Any]:
    """Return the diagnostics of one replica's Q (see the module docstring)."""
    q = _q_matrix(agent).reshape(n_states, -1)
    singular = np.linalg.svd(q, compute_uv=False)
    greedy = q.argmax(axis=1)
    spread = np.sort(q, axis=1)
    out: dict[str, Any] = {
        "sv": np.round(singular[1:4] / singular[0], 3).tolist(),
        "same_greedy": int(np.bincount(greedy).max()),
        "q_range": (round(float(q.min()), 1), round(float(q.max()), 1)),
        "gap": round(float(np.median(spread[:, -1] - spread[:, -2])), 3),
    }
    if isinstance(agent, TEQLAgent):
        actions = agent.q_.factors[-1][0]
        norms = np.linalg.norm(actions, axis=1)
        cosines = actions @ actions.T / np.outer(norms, norms)
        table = np.array([agent.visits_.rows(np.array([s])).counts[0] for s in range(n_states)])
        per_state = table.sum(axis=1)
        visited = per_state > 0
        visits_median = float(np.median(per_state[visited])) if visited.any() else 0.0
        out.update(
            eta=float(agent.schedule(int(agent.steps_[0]) + 1)),
            action_norms=np.round(norms, 1).tolist(),
            min_cos=round(float(cosines[np.triu_indices(len(norms), 1)].min()), 3),
            visited=int(visited.sum()),
            median_visits=visits_median,
            # EUGE's count bonus of an untried action in a typical visited state
            bonus=round(float(agent.config.c * np.sqrt(np.log(max(visits_median, 1.0)))), 3),
        )
    return out


def run(
    env_id: str,
    agent_name: str = "teql",
    overrides: dict[str, Any] | None = None,
    episodes: int = 1000,
    every: int = 250,
    seed: int = 0,
    cap: int = 200,
    eval_episodes: int = 100,
) -> list[dict[str, Any]]:
    """Train one replica and return one row of diagnostics per ``every`` episodes.

    Parameters
    ----------
    env_id : str
        A Gymnasium id whose observation and action spaces are ``Discrete``.
    agent_name : {"teql", "tlr", "tabular"}
        TEQL's stable reading or TLR's paper reading (with ``overrides``), or
        tabular Q-learning's defaults.
    overrides : dict, optional
        Config fields on top of the reading (``TEQLConfig`` or ``TabularQConfig``).
    episodes, every, seed, cap, eval_episodes : int
        Training episodes; checkpoint period; replica seed (episode k resets with
        ``seed * 100_000 + k``); episode cap; greedy episodes per checkpoint.
    """
    problem = make_problem(env_id)
    env = gymnasium.make(env_id, max_episode_steps=cap)
    streams = [s.agent for s in spawn_replicas([seed])]
    overrides = dict(overrides or {})
    agent: Agent
    if agent_name == "teql":
        stable = reading("teql", "stable").agent_params(problem.name, len(problem.state_dims))
        params = {**stable, **overrides}
        agent = TEQLAgent(problem, TEQLConfig(**params), streams)
    elif agent_name == "tlr":
        params = {**reading("tlr", "paper").agent_params(problem.name), **overrides}
        agent = TLRAgent(problem, TLRConfig(**params), streams)
    elif agent_name == "tabular":
        agent = TabularQ(problem, TabularQConfig(**overrides), streams)
    else:
        raise ValueError(f"The 'agent' must be 'teql', 'tlr' or 'tabular'. Got {agent_name!r}.")
    rows, returns = [], []
    for episode in range(episodes):
        returns.append(_episode(agent, problem, env, seed * 100_000 + episode, True))
        if (episode + 1) % every == 0:
            greedy = [
                _episode(agent, problem, env, EVAL_SEED + k, False) for k in range(eval_episodes)
            ]
            row = {"episode": episode + 1, "train": round(float(np.mean(returns[-every:])), 1),
                   "greedy": round(float(np.mean(greedy)), 2)}  # fmt: skip
            if len(problem.state_dims) == 1 and not isinstance(agent, TLRAgent):
                row.update(measure(agent, problem.state_dims[0]))
            rows.append(row)
    return rows


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m analysis.teql_dynamics``."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.teql_dynamics",
        description="Train one replica and print, every --every episodes, one JSON line of "
        "diagnostics: greedy return, step size, action-factor rows, singular values of Q.",
    )
    parser.add_argument("--env", default="Taxi-v4", help="a Gymnasium id (default Taxi-v4)")
    parser.add_argument(
        "--agent", default="teql", choices=("teql", "tlr", "tabular"), help="default teql"
    )
    parser.add_argument("--episodes", type=int, default=1000, help="training episodes")
    parser.add_argument("--every", type=int, default=250, help="episodes between rows")
    parser.add_argument("--seed", type=int, default=0, help="the replica's seed")
    parser.add_argument("--cap", type=int, default=200, help="steps per episode at most")
    parser.add_argument("--eval-episodes", type=int, default=100, help="greedy episodes per row")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an agent parameter (VALUE as JSON), as python -m rl.train --set",
    )
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: print one JSON line of diagnostics per checkpoint; returns the exit code."""
    from rl.runs.config import ConfigError, parse_assignment

    args = build_parser().parse_args(argv)
    try:
        overrides = dict(parse_assignment(item) for item in args.set)
        rows = run(args.env, args.agent, overrides, args.episodes, args.every, args.seed,
                   args.cap, args.eval_episodes)  # fmt: skip
    except (ConfigError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for row in rows:
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
