"""The fused runner (`rl.loop.fused`) against the step-by-step runner, bit for bit."""

import numpy as np
import pytest

from rl.envs.cartpole import ContinuousCartPole
from rl.loop.copies import CompiledCopies
from rl.loop.fused import FusedLoop
from rl.loop.runner import Segment
from rl.loop.stepped import ObjectSteps
from rl.runs.config import TrainConfig
from rl.runs.training import build
from tests.rl.agent_drivers import assert_tree_equal

TWIN = "highway twin"  # the Highway problem on its compiled twin (rl.envs.highway_twin)
CASES = {
    "teql paper I_max=1": ("teql", "cartpole", {"reading": "paper", "max_inner": 1}),
    "teql paper I_max=5": ("teql", "cartpole", {"reading": "paper", "max_inner": 5}),
    "released": ("teql-released", "cartpole", {}),
    "released bounded, bin actions": (
        "teql-released",
        "cartpole",
        {"bounded": True, "continuous_random_actions": False},
    ),
    "released sparse visits": ("teql-released", "cartpole", {"visit_storage": "sparse"}),
    "stable": ("teql", "cartpole", {"reading": "stable"}),
    "tlr cartpole": ("tlr", "cartpole", {}),
    "tlr pendulum": ("tlr", "pendulum", {}),
    "released pendulum": ("teql-released", "pendulum", {}),
    "teql highway twin": ("teql", TWIN, {"reading": "paper"}),
}
SLOW_CASES = {
    "released highway twin": ("teql-released", TWIN, {}),
    "stable highway twin": ("teql", TWIN, {"reading": "stable"}),
    "tlr highway twin": ("tlr", TWIN, {}),
}


def _runner(agent, env, params, *, fused, seeds=3, **fields):
    params = dict(params)
    reading = params.pop("reading", None)
    if env == TWIN:
        env, fields["env_options"] = "highway", {"env_kwargs": {"engine": "twin"}}
    config = TrainConfig(
        env=env, agent=agent, reading=reading, seeds=seeds, eval_every=5, eval_episodes=2,
        out="unused", agent_params=params, **fields,
    )  # fmt: skip
    runner, _ = build(config)
    runner.fused = fused
    return runner


def _play(runner, barriers):
    rows, start = [], 0
    for stop in barriers:
        rows += [tuple(map(np.copy, result)) for result in runner.episodes(start, stop)]
        start = stop
    return rows


@pytest.mark.parametrize(
    "case", [*CASES, *(pytest.param(case, marks=pytest.mark.slow) for case in SLOW_CASES)]
)
def test_fused_equals_step_by_step(case):
    """Metrics, factors, visit tables, counters, epsilon, generator states, agent-steps."""
    agent, env, params = {**CASES, **SLOW_CASES}[case]
    fused, stepped = (_runner(agent, env, params, fused=f) for f in (True, False))
    rows = [_play(runner, (10, 20, 30)) for runner in (fused, stepped)]
    assert isinstance(fused.loop, FusedLoop) and isinstance(stepped.loop, ObjectSteps)
    assert len(rows[0]) == len(rows[1]) == 30
    for a, b in zip(*rows, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert_tree_equal(fused.agent.state_dict(), stepped.agent.state_dict())
    assert fused.agent_steps == stepped.agent_steps > 30 * 3


COPIES_CASES = {
    "reference engine, released pendulum (continuous draws)": (
        "teql-released", "pendulum", {"engine": "reference"},
    ),
    "array engine cartpole": ("teql-released", "cartpole", {"engine": "array"}),
    "dqn cartpole": ("dqn", "cartpole", {}),
    "random highway twin": ("random", TWIN, {}),
}  # fmt: skip
"""Agents the fused loop does not take, on problems whose copies step in compiled code."""


@pytest.mark.parametrize("case", COPIES_CASES)
def test_compiled_copies_equal_the_environment_objects(case):
    """The agent in Python, the copies in compiled code (`step_envs`): the same run, bitwise."""
    agent, env, params = COPIES_CASES[case]
    compiled, stepped = (_runner(agent, env, params, fused=f) for f in (True, False))
    rows = [_play(runner, (4, 9)) for runner in (compiled, stepped)]
    assert isinstance(compiled.loop, CompiledCopies) and isinstance(stepped.loop, ObjectSteps)
    for a, b in zip(*rows, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert_tree_equal(compiled.agent.state_dict(), stepped.agent.state_dict())
    assert compiled.agent_steps == stepped.agent_steps > 9 * 3


def test_fused_false_takes_the_environment_objects_from_the_next_segment():
    """Setting ``fused`` picks the loop again, for the compiled copies as for the fused loop."""
    runner = _runner("dqn", "cartpole", {}, fused=True)
    _play(runner, (1,))
    assert isinstance(runner.loop, CompiledCopies)
    runner.fused = False
    calls = []
    step = runner.env.step
    runner.env.step = lambda actions, active: calls.append(1) or step(actions, active)
    assert len(list(runner.episodes(1, 2))) == 1
    assert isinstance(runner.loop, ObjectSteps) and calls


def test_visit_table_grows_inside_a_fused_run():
    runner = _runner("teql-released", "cartpole", {"visit_storage": "sparse"}, fused=True, seeds=8)
    initial_rows = len(runner.agent.visits_.arrays().row_keys)
    list(runner.episodes(0, 20))
    assert len(runner.agent.visits_.arrays().row_keys) > initial_rows
    assert runner.agent.visits_.visited > initial_rows


def test_request_stop_finishes_started_episodes_and_equals_a_run_to_that_barrier(monkeypatch):
    monkeypatch.setattr("rl.loop.fused.BUDGET_AGENT_STEPS", 64)  # small bursts: replicas spread out
    runner = _runner("teql-released", "cartpole", {}, fused=True)
    seen = []
    for result in runner.episodes(0, 200):
        seen.append(result.episode)
        if result.episode == 2:
            runner.request_stop()
    stop = seen[-1]
    assert seen == list(range(1, stop + 1)) and 2 <= stop < 200
    straight = _runner("teql-released", "cartpole", {}, fused=False)
    list(straight.episodes(0, stop))
    assert_tree_equal(runner.agent.state_dict(), straight.agent.state_dict())


def test_request_stop_never_lowers_below_a_replica_waiting_at_the_barrier():
    """A replica that already finished the barrier episode keeps the barrier where it is."""
    segment = Segment(0, 3, 2, 2)
    segment.slots.episode[:] = (3, 2)  # replica 0 finished episode 3 and waits
    segment.slots.running[0] = False
    segment.lower_stop()
    assert segment.stop == 3
    segment.slots.episode[0], segment.slots.running[0] = 2, True  # both still on episode 2
    segment.lower_stop()
    assert segment.stop == 2


def _applies(agent, env, params):
    return FusedLoop.applies(_runner(agent, env, params, fused=True).lockstep)


def test_applies_only_where_every_part_is_compiled():
    assert _applies("teql", "cartpole", {})
    assert _applies("tlr", "pendulum", {})
    assert not _applies("teql", "cartpole", {"engine": "reference"})
    assert not _applies("tabular", "cartpole", {})
    assert not _applies("teql-released", "inventory", {})
    assert _applies("teql-released", TWIN, {})
    hooked = _runner("teql", "cartpole", {}, fused=True)
    hooked.agent.on_update = lambda record: None
    assert not FusedLoop.applies(hooked.lockstep)


def test_divergence_gives_the_step_by_step_error():
    params = {"reading": "paper", "bounded": False, "alpha0": 5.0, "max_inner": 10, "tol": 0.0}
    messages = []
    for fused in (True, False):
        runner = _runner("teql", "cartpole", params, fused=fused)
        with pytest.raises(ValueError, match="diverged") as error:
            list(runner.episodes(0, 100))
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_non_finite_observation_names_the_replica_and_seed(monkeypatch):
    monkeypatch.setattr(ContinuousCartPole, "reset_interval", (1e308, 1.7e308))
    for fused in (True, False):
        runner = _runner("teql-released", "cartpole", {}, fused=fused)
        with pytest.raises(ValueError, match=r"non-finite .* replica 0 \(seed 0\)"):
            list(runner.episodes(0, 2))


@pytest.mark.parametrize(
    ("agent", "env", "params", "fused", "loop"),
    [
        ("teql", "cartpole", {}, True, "fused"),
        ("tlr", TWIN, {}, True, "fused"),
        ("teql-released", "pendulum", {"engine": "array"}, True, "device copies"),
        ("teql-released", "pendulum", {"engine": "reference"}, True, "compiled copies"),
        ("dqn", "cartpole", {}, True, "compiled copies"),
        ("teql", "inventory", {}, True, "objects"),
        ("teql", "cartpole", {}, False, "objects"),
    ],
)
def test_the_runner_picks_its_loop_when_built(agent, env, params, fused, loop):
    assert _runner(agent, env, params, fused=fused).loop.name == loop


def test_a_hook_set_after_the_fused_runner_is_built_is_refused():
    runner = _runner("teql", "cartpole", {}, fused=True)
    runner.agent.on_update = lambda record: None
    with pytest.raises(ValueError, match="on_update hook was set after its Runner was built"):
        list(runner.episodes(0, 1))
    calls = []
    runner.agent.on_update = calls.append
    runner.fused = True  # picks the loop again: the agent in Python, which calls the hook
    assert runner.loop.name == "compiled copies" and len(list(runner.episodes(0, 1))) == 1
    assert sum(int(r.active.sum()) for r in calls) == runner.agent_steps > 0  # every step learnt
