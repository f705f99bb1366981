"""Microseconds per agent-step of the tensor agents at B = 1 .. 1000, against the plain loop.

For TEQL (the paper's update with I_max = 1, and the released reading) and
TLR, on CartPole end to end through the runner (environment included), and on
Highway's grid (20^9 states x 5 actions) with synthetic observations, so that
the simulator is not timed (``highway-grid``), and on Highway end to end
(``highway``: the compiled twin, `rl.envs.highway_twin`, inside the fused
runner; not in ``--quick``, whose rows stay small). CartPole is timed twice: ``cartpole`` with the
fused runner (`rl.loop.fused`, the default wherever it applies), end to end only,
since everything happens inside one compiled call; and ``cartpole-step``, the
step-by-step runner (``Runner.fused = False``), whose time per agent-step is
split into the environment (step, encode, decode), action selection
(``agent.act``), the update (``agent.observe``, visit tables included: the
compiled path updates them inside the same kernel) and the rest of the runner
(resets, bookkeeping). Each configuration runs in its own subprocess, which
also gives its peak resident memory. The yardstick, `benchmarks.plain_loop`,
runs in the same process right before, and every row carries its ratio.

Run with ``python -m benchmarks step`` (or ``python benchmarks/bench_step.py``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.child import measure_in_child

AGENTS = {
    "teql I_max=1": ("teql", {"max_inner": 1}),
    "teql-released": ("teql-released", {}),
    "tlr": ("tlr", {}),
}
GRIDS = ("cartpole", "cartpole-step", "highway-grid", "highway")
PAPER_READING = {"teql": "paper"}  # "teql I_max=1" is the paper's update, not TEQL's default
CARTPOLE_SHAPE = ((10, 10, 20, 20), 10)
HIGHWAY_SHAPE = ((20,) * 9, 5)


class _Clock:
    """Accumulates the wall time spent inside wrapped callables."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        self.seconds[name] = 0.0

        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - start

        return timed


def _end_to_end(
    grid: str, agent: str, params: dict, replicas: int, seconds: float, fused: bool
) -> dict[str, float]:
    """Time the runner on CartPole, or on Highway's compiled twin (``grid`` "highway")."""
    from rl.runs.config import TrainConfig
    from rl.runs.training import build

    env, options = "cartpole", {}
    if grid == "highway":
        env, options = "highway", {"env_kwargs": {"engine": "twin"}}
    config = TrainConfig(
        env=env, agent=agent, reading=PAPER_READING.get(agent), seeds=replicas, eval_every=0,
        out="unused", agent_params=params, env_options=options,
    )  # fmt: skip
    runner, _ = build(config)
    runner.fused = fused
    runner.episode(1)  # warm-up: compilation, allocation
    clock = _Clock()
    if not fused:  # the fused runner makes none of these calls: it is timed end to end only
        problem, env = runner.problem, runner.env
        runner.env.step = clock.wrap("env", env.step)
        object.__setattr__(problem, "encode", clock.wrap("env", problem.encode))
        object.__setattr__(problem, "decode", clock.wrap("env", problem.decode))
        runner.agent.act = clock.wrap("act", runner.agent.act)
        runner.agent.observe = clock.wrap("update", runner.agent.observe)
        clock.seconds["env"] = 0.0
    played, start = runner.agent_steps, time.perf_counter()
    for _ in runner.episodes(1, 10**6):
        if time.perf_counter() - start > seconds:
            break
    total = time.perf_counter() - start
    steps = runner.agent_steps - played
    runner.close()
    return _split(clock, total, steps)


def _highway_grid(agent: str, params: dict, replicas: int, seconds: float) -> dict[str, float]:
    from rl.agents.base import Transitions
    from rl.problems import Problem
    from rl.runs.config import TrainConfig, resolve_settings
    from rl.seeding import spawn_replicas

    state_dims, n_actions = HIGHWAY_SHAPE
    problem = Problem(
        name="highway-grid", env_id="none", env_kwargs={}, state_dims=state_dims,
        action_dims=(n_actions,), reward_bound=1.0, encode=None, decode=None,
    )  # fmt: skip
    config = TrainConfig(
        env="highway",
        agent=agent,
        reading=PAPER_READING.get(agent),
        out="unused",
        agent_params=params,
    )
    streams = spawn_replicas(range(replicas))
    settings = resolve_settings(config, build_problem=False)
    model = settings.spec.agent_class(problem, settings.agent, [s.agent for s in streams])
    rng = np.random.default_rng(0)
    everyone = np.ones(replicas, dtype=bool)
    # A random walk on the grid, made before the clock starts: each step moves one
    # state coordinate by +-1. Only act and observe are timed.
    horizon = 256
    walk = np.empty((horizon + 1, replicas, 9), dtype=np.int64)
    walk[0] = rng.integers(0, 20, size=(replicas, 9))
    for t in range(horizon):
        walk[t + 1] = walk[t]
        mode = rng.integers(0, 9, size=replicas)
        walk[t + 1, np.arange(replicas), mode] += rng.choice((-1, 1), size=replicas)
        np.clip(walk[t + 1], 0, 19, out=walk[t + 1])
    rewards = rng.uniform(0.0, 1.0, size=(horizon, replicas))
    done = np.zeros(replicas, dtype=bool)
    clock = _Clock()
    act = clock.wrap("act", model.act)
    observe = clock.wrap("update", model.observe)
    clock.seconds["env"] = 0.0
    steps, t, warm = 0, 0, 50
    while True:
        states, following = walk[t % horizon], walk[t % horizon + 1]
        actions = act(states, everyone)
        observe(Transitions(states, actions, rewards[t % horizon], following, done, everyone))
        t += 1
        if t == warm:  # restart the clocks after the warm-up steps
            clock.seconds = dict.fromkeys(clock.seconds, 0.0)
            steps = 0
        steps += replicas
        if t > warm and sum(clock.seconds.values()) > seconds:
            break
    timed = sum(clock.seconds.values())  # the synthetic walk is not part of the agent-step
    return _split(clock, timed, steps)


def _split(clock: _Clock, total: float, steps: int) -> dict[str, float]:
    per = dict.fromkeys(("env", "act", "update"), float("nan"))
    per |= {name: 1e6 * value / steps for name, value in clock.seconds.items()}
    per["total"] = 1e6 * total / steps
    per["other"] = per["total"] - sum(clock.seconds[n] for n in clock.seconds) * 1e6 / steps
    if not clock.seconds:  # timed end to end only: no split
        per["other"] = float("nan")
    per["agent_steps"] = steps
    return per


def measure(label: str, grid: str, replicas: int, seconds: float) -> dict[str, Any]:
    """Time one configuration in this process; returns a JSON-able row."""
    from benchmarks.plain_loop import plain_loop_us

    agent, params = AGENTS[label]
    shape = HIGHWAY_SHAPE if grid.startswith("highway") else CARTPOLE_SHAPE
    yardstick = plain_loop_us((*shape[0], shape[1]), len(shape[0]), steps=1000)
    if grid == "highway-grid":
        row = _highway_grid(agent, params, replicas, seconds)
    else:
        fused = grid != "cartpole-step"
        row = _end_to_end(grid, agent, params, replicas, seconds, fused=fused)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB -> MB on Linux
    return {
        "agent": label, "grid": grid, "B": replicas, **row, "plain_loop_us": yardstick,
        "speedup": yardstick / row["total"], "peak_mb": peak,
    }  # fmt: skip


def _row(label: str, grid: str, replicas: int, seconds: float, inline: bool) -> dict | str:
    """Measure one configuration in a fresh subprocess (or here when ``inline``)."""
    if inline:
        return measure(label, grid, replicas, seconds)
    child = ["-m", "benchmarks.bench_step", "--seconds", str(seconds)]
    return measure_in_child([*child, "--one", label, grid, str(replicas)])


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Print the table (and write JSON with ``--json``); returns its rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=list(AGENTS))
    parser.add_argument("--grids", nargs="+", default=list(GRIDS), choices=GRIDS)
    parser.add_argument("--seconds", type=float, default=2.0, help="timed seconds per row")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument(
        "--inline", action="store_true", help="measure in this process (peak memory is shared)"
    )
    parser.add_argument("--one", nargs=3, metavar=("AGENT", "GRID", "B"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # child process: one configuration, JSON on stdout
        label, grid, replicas = args.one
        print(json.dumps(measure(label, grid, int(replicas), args.seconds)))
        return []
    rows = []
    header = (
        "agent",
        "grid",
        "B",
        "total",
        "env",
        "act",
        "update",
        "other",
        "plain",
        "ratio",
        "MB",
    )
    print("{:14} {:13} {:>5} {:>7} {:>6} {:>6} {:>7} {:>6} {:>6} {:>6} {:>6}".format(*header))
    for grid in args.grids:
        for label in args.agents:
            for replicas in args.replicas:
                row = _row(label, grid, replicas, args.seconds, args.inline)
                if isinstance(row, str):
                    print(f"{label:14} {grid:13} {replicas:>5} failed: {row}")
                    continue
                rows.append(row)
                print(
                    f"{label:14} {grid:13} {replicas:>5} {row['total']:7.2f} {row['env']:6.2f} "
                    f"{row['act']:6.2f} {row['update']:7.2f} {row['other']:6.2f} "
                    f"{row['plain_loop_us']:6.1f} {row['speedup']:6.1f} {row['peak_mb']:6.0f}"
                )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
