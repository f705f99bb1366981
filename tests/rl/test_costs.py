"""The cost estimates of ``python -m rl.reproduce``'s tasks (`rl.experiments.costs`)."""

from __future__ import annotations

import pytest

from rl.agents.readings import READINGS
from rl.experiments.costs import (
    HIGHWAY_ENV_STEP,
    MEASURED_WALLS,
    SAME_LINE,
    SHARED_REPLICAS,
    STEP_COST,
    STEP_COST_SEEDS,
    STEP_COSTS_FILE,
    WALLS_FILE,
    data_rows,
    read_walls,
    seed_factor,
    task_cost,
)
from rl.experiments.executor import config_hash
from rl.experiments.paper import EXPERIMENTS, FULL_EPISODES, reading_for
from rl.experiments.presets import preset_config
from rl.reproduce import build_parser, make_plan


def _lines(env: str) -> dict[str, str]:
    """Line key -> agent of every experiment's lines on ``env``."""
    return {
        line.key: line.agent for e in EXPERIMENTS.values() if env in e.envs for line in e.lines(env)
    }


def test_every_measured_wall_names_a_line_and_a_reading_of_its_agent() -> None:
    for env, reading, key in MEASURED_WALLS:
        lines = _lines(env)
        assert key in lines and (reading, key) not in SAME_LINE, (env, reading, key)
        assert reading in READINGS[lines[key]], (env, reading, key)


@pytest.mark.parametrize("reading", ["paper", "released", "stable"])
@pytest.mark.parametrize("env", ["cartpole", "pendulum", "highway"])
def test_same_line_keys_have_the_same_settings(env: str, reading: str) -> None:
    hashes, lines = {}, {}
    for chosen in EXPERIMENTS.values():
        for line in chosen.lines(env) if env in chosen.envs else []:
            used = reading_for(line.agent, reading)
            config = preset_config(
                f"{env}-{line.agent}-{used}",
                seeds=2,
                out="-",
                episodes=10,
                agent_params=dict(line.agent_params),
                env_options=dict(line.env_options),
            )
            hashes[line.key], lines[line.key] = config_hash(config), line
    for (same_reading, key), same in SAME_LINE.items():
        if same_reading != reading or key not in lines:
            continue
        assert hashes[key] == hashes[same], (env, reading, key)


def test_a_measured_line_costs_its_wall_scaled_to_seeds_and_episodes() -> None:
    wall, seeds = MEASURED_WALLS[("cartpole", "paper", "teql")]
    full = FULL_EPISODES["cartpole"]
    assert task_cost("cartpole", "paper", "teql", "teql", full, seeds, "twin") == wall
    assert task_cost("cartpole", "paper", "teql-lam", "teql", full, seeds, "twin") == wall
    # the released TEQL's lambda is 0: there the lambda = 1e-3 line is a line of its own
    released = task_cost("cartpole", "released", "teql-lam", "teql", full, seeds, "twin")
    assert released == MEASURED_WALLS[("cartpole", "released", "teql-lam")][0]
    assert released != task_cost("cartpole", "released", "teql", "teql", full, seeds, "twin")
    half = task_cost("cartpole", "paper", "teql-base", "teql", full // 2, 3 * seeds, "twin")
    assert half == pytest.approx(1.5 * wall)
    # measured at 30 seeds: a 100-seed task costs 100/30 of it
    wall, seeds = MEASURED_WALLS[("cartpole", "released", "tlr-fine")]
    assert seeds == 30
    cost = task_cost("cartpole", "released", "tlr-fine", "tlr", full, 100, "twin")
    assert cost == pytest.approx(wall * 100 / 30)


def test_an_unmeasured_line_costs_its_agents_released_step() -> None:
    steps = 1_000 * 1.1 * 100 * 4  # episodes, greedy one in ten, steps per episode, seeds
    assert ("cartpole", "released", "tlr-own") not in MEASURED_WALLS  # a user's own line
    cost = task_cost("cartpole", "released", "tlr-own", "tlr", 1_000, 4, "twin")
    assert cost == pytest.approx(steps * STEP_COST["cartpole"]["tlr"])
    # an agent without its own entry costs as TEQL
    cost = task_cost("cartpole", "released", "random", "random", 1_000, 4, "twin")
    assert cost == pytest.approx(steps * STEP_COST["cartpole"]["teql"])
    # DQN's step cost holds at STEP_COST_SEEDS; 4 seeds cost (k + 4) / (k + 100) of that task
    assert ("highway", "released", "dqn-own") not in MEASURED_WALLS  # a user's own line
    calibrated = 1_000 * 1.1 * 50 * STEP_COST_SEEDS * STEP_COST["highway"]["dqn"]
    cost = task_cost("highway", "released", "dqn-own", "dqn", 1_000, 4, "twin")
    k = SHARED_REPLICAS["dqn"]
    assert cost == pytest.approx(calibrated * (k + 4) / (k + STEP_COST_SEEDS))


def test_seed_factor_is_linear_for_the_tensor_agents_and_affine_for_the_deep_ones() -> None:
    assert seed_factor("teql", 100, 30) == pytest.approx(100 / 30)
    assert seed_factor("tlr", 3, 100) == pytest.approx(0.03)
    for agent in ("dqn", "sac"):
        # a replica among 100 costs less than one among 30, more than nothing
        factor, k = seed_factor(agent, 100, 30), SHARED_REPLICAS[agent]
        assert 1.0 < factor < 100 / 30
        assert factor == pytest.approx((k + 100) / (k + 30))
        assert seed_factor(agent, 30, 30) == 1.0


def test_highway_env_adds_its_step_to_the_twins_estimate() -> None:
    twin = task_cost("highway", "paper", "teql", "teql", 100, 1, "twin")
    reference = task_cost("highway", "paper", "teql", "teql", 100, 1, "reference")
    assert reference - twin == pytest.approx(100 * 1.1 * 50 * HIGHWAY_ENV_STEP)


def test_the_plan_orders_tasks_by_their_readings_costs() -> None:
    argv = ["comparison", "--env", "cartpole", "--seeds", "100", "--reading", "paper"]
    args = build_parser().parse_args(argv)
    plan = make_plan(args)
    costs = {planned.line.key: planned.cost for planned in plan.tasks}
    assert costs["dqn"] == MEASURED_WALLS[("cartpole", "paper", "dqn")][0]
    assert costs["teql"] == MEASURED_WALLS[("cartpole", "paper", "teql")][0]
    assert [planned.cost for planned in plan.tasks] == sorted(costs.values(), reverse=True)


def test_every_wall_names_its_machine_date_and_commit() -> None:
    rows = data_rows(WALLS_FILE) + data_rows(STEP_COSTS_FILE)
    assert len(rows) == len(MEASURED_WALLS) + sum(len(v) for v in STEP_COST.values())
    for row in rows:
        assert int(row["cores"]) >= 1 and row["cpu"], row
        assert len(row["commit"]) == 40 and row["date"].startswith("20"), row


def test_a_wall_of_a_partial_run_is_refused() -> None:
    row = {"env": "cartpole", "reading": "paper", "line": "teql", "wall_s": "9", "seeds": "10"}
    assert read_walls([{**row, "episodes": "10000"}]) == {("cartpole", "paper", "teql"): (9.0, 10)}
    with pytest.raises(ValueError, match="not at the paper's episodes"):
        read_walls([{**row, "episodes": "500"}])
