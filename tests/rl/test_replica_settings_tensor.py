"""Per-replica settings of the tensor agents: replica b of a batch is its setting trained alone.

On every engine (compiled, reference, array on NumPy; on PyTorch behind
``slow``) each replica of a batch equals its setting trained alone, bit for
bit, its rank included: a replica of rank r_b < R sums its components as a
rank-r_b agent does. JAX is left out: there a seed's last bits depend on the
batch size B even without per-replica settings.
"""

import dataclasses

import numpy as np
import pytest

from rl.agents.base import Transitions
from rl.agents.replica_settings import replica_config
from rl.agents.tensor.teql import TEQLAgent
from rl.loop.runner import Runner
from rl.runs.config import TrainConfig, resolve_settings
from rl.seeding import spawn_replicas
from tests.rl.agent_drivers import assert_tree_equal

SEEDS = (0, 1)
EPISODES = 4

# Twelve settings each (two ranks among them): the fields a sweep varies.
TEQL_GRID = [
    {},
    {"alpha0": 0.02},
    {"c": 0.5, "bonus_unit": 2.0},
    {"lam": 0.01, "eps": 0.01},
    {"gamma": 0.9},
    {"epsilon_start": 0.3, "epsilon_decay": 0.99},
    {"epsilon_min": 0.05},
    {"rank": 3},
    {"rank": 5, "alpha0": 0.01},
    {"max_inner": 2},
    {"tol": 0.1, "kappa": 0.01},
    {"rank": 3, "gamma": 0.95, "c": 1.0},
]
TLR_GRID = [
    {},
    {"alpha": 0.02},
    {"alpha": 0.001},
    {"gamma": 0.99},
    {"gamma": 0.8},
    {"epsilon_start": 0.2},
    {"epsilon_decay": 0.99},
    {"epsilon_min": 0.1},
    {"rank": 3},
    {"rank": 5, "alpha": 0.01},
    {"epsilon_start": 0.6, "epsilon_min": 0.05},
    {"rank": 2, "gamma": 0.95},
]
CASES = {  # agent, reading, grid, the base params (every replica explores by an epsilon layer)
    "teql paper": ("teql", "paper", TEQL_GRID, {"epsilon_start": 0.1, "rank": 6}),
    "teql released": ("teql", "released", TEQL_GRID, {"rank": 6}),
    "teql stable": (
        "teql",
        "stable",
        [{**s, "alpha0": 0.5} if "alpha0" in s else s for s in TEQL_GRID],
        {"epsilon_start": 0.1, "rank": 6},
    ),  # fmt: skip
    "tlr": ("tlr", None, TLR_GRID, {"rank": 6}),
}


def _settings(agent, reading, params, engine, seeds):
    """The resolved settings; ``engine`` "pytorch" or "jax": the array engine on that backend."""
    chosen = {"engine": engine}
    if engine in ("pytorch", "jax"):
        pytest.importorskip("torch" if engine == "pytorch" else "jax")
        chosen = {"engine": "array", "backend": engine}
    config = TrainConfig(
        env="cartpole", agent=agent, reading=reading, seeds=len(seeds), eval_every=2,
        eval_episodes=1, out="unused", agent_params={**params, **chosen},
    )  # fmt: skip
    return resolve_settings(config)


def _runner(settings, config, seeds, replica_settings=None, fused=True):
    streams = spawn_replicas(seeds)
    agent = settings.spec.agent_class(
        settings.problem, config, [s.agent for s in streams], replica_settings=replica_settings
    )
    runner = Runner(settings.problem, agent, streams, eval_every=2, eval_episodes=1)
    runner.fused = fused
    return runner


def _play(runner):
    return [tuple(map(np.copy, result[1:])) for result in runner.episodes(0, EPISODES)]


def _batch_settings(grid, config):
    """The grid as per-replica values: every field given, each setting for every seed."""
    fields = sorted({field for setting in grid for field in setting})
    return {
        field: [setting.get(field, getattr(config, field)) for setting in grid for _ in SEEDS]
        for field in fields
    }


def _check_replica(batch, alone, rows, alone_rows, replica, seat):
    """Replica ``replica`` of ``batch`` equals replica ``seat`` of ``alone``, bitwise."""
    for runner in (batch, alone):
        runner.agent.engine_.sync()  # the host copies of an array engine off the host
    for together, apart in zip(rows, alone_rows, strict=True):
        for x, y in zip(together, apart, strict=True):  # returns, lengths, greedy returns
            np.testing.assert_array_equal(x[replica], y[seat])
    rank = alone.agent.config.rank
    for mine, theirs in zip(batch.agent.q_.factors, alone.agent.q_.factors, strict=True):
        mine = np.asarray(mine)
        np.testing.assert_array_equal(mine[replica, :, :rank], theirs[seat])
        assert not mine[replica, :, rank:].any()  # the masked components stay 0
    for name in ("steps_", "epsilon_"):
        assert getattr(batch.agent, name)[replica] == getattr(alone.agent, name)[seat]
    visits, lone = batch.agent.visits_, alone.agent.visits_
    if visits is not None:  # dense on CartPole: (B, |S|, |A|)
        mine, theirs = visits.state_dict(), lone.state_dict()
        for key in ("counts", "delta"):
            np.testing.assert_array_equal(mine[key][replica], theirs[key][seat], err_msg=key)


@pytest.mark.parametrize(
    "engine",
    ["compiled", "reference", "array",
     pytest.param("pytorch", marks=pytest.mark.slow)],
)  # fmt: skip
@pytest.mark.parametrize("case", list(CASES))
def test_batch_of_settings_equals_each_setting_alone(case, engine):
    """12 settings x 2 seeds in one batch: every replica's returns, Q and counts, bitwise."""
    agent, reading, grid, params = CASES[case]
    settings = _settings(agent, reading, params, engine, SEEDS)
    config = settings.agent
    values = _batch_settings(grid, config)
    seeds = [seed for _ in grid for seed in SEEDS]
    batch = _runner(settings, config, seeds, values)
    rows = _play(batch)
    arrays = batch.agent.replica_settings_
    for k in range(len(grid)):
        own = replica_config(config, arrays, k * len(SEEDS))
        assert own == dataclasses.replace(config, **grid[k])
        alone = _runner(settings, own, SEEDS)
        alone_rows = _play(alone)
        for seat in range(len(SEEDS)):
            _check_replica(batch, alone, rows, alone_rows, k * len(SEEDS) + seat, seat)


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_uniform_settings_equal_no_settings(engine):
    """Every field given, each with the config's value for every replica: today's numbers."""
    settings = _settings("teql", "released", {}, engine, SEEDS)
    config = settings.agent
    given = {field: [getattr(config, field)] * len(SEEDS) for field in TEQLAgent.per_replica}
    plain = _runner(settings, config, SEEDS)
    uniform = _runner(settings, config, SEEDS, given)
    rows = [_play(runner) for runner in (plain, uniform)]
    for a, b in zip(*rows, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    saved = uniform.agent.state_dict()
    assert set(saved.pop("replica_settings")) == TEQLAgent.per_replica
    assert_tree_equal(plain.agent.state_dict(), saved)


def _agent(settings, replica_settings, seeds=SEEDS):
    streams = [s.agent for s in spawn_replicas(seeds)]
    return settings.spec.agent_class(
        settings.problem, settings.agent, streams, replica_settings=replica_settings
    )


@pytest.mark.parametrize(
    ("agent", "given", "message"),
    [
        ("teql", {"alpha": [0.1, 0.2]}, "TEQLAgent cannot vary 'alpha' per replica"),
        ("tlr", {"alpha0": [0.1, 0.2]}, "TLRAgent cannot vary 'alpha0' per replica"),
        ("teql", {"init_scale": [1.0, 2.0]}, "cannot vary 'init_scale' per replica"),
        ("teql", {"c": [1.0, 2.0, 3.0]}, "'c' must be 2 numbers"),
        ("teql", {"rank": [3, 7]}, r"'rank' must be ints in \[1, 6\]"),
        ("tlr", {"rank": [0, 6]}, r"'rank' must be ints in \[1, 6\]"),
        ("teql", {"gamma": [0.9, 1.5]}, "The settings of replica 1: The 'gamma' parameter"),
        ("teql", {"epsilon_start": [0.0, 0.2]}, "'epsilon_start' must be all 0 or all above 0"),
        ("teql", {"max_inner": [0, 2]}, "The settings of replica 0: The 'max_inner'"),
    ],
)
def test_bad_settings_are_refused_in_one_line(agent, given, message):
    """Unknown fields, wrong lengths, ranks outside [1, R] and invalid values: a ValueError."""
    settings = _settings(agent, None, {"rank": 6}, "compiled", SEEDS)
    with pytest.raises(ValueError, match=message) as error:
        _agent(settings, given)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("engine", ["compiled", "reference"])
def test_state_dict_keeps_the_settings(engine):
    """A resumed batch runs the saved settings, also from an agent built without them."""
    settings = _settings("teql", "paper", {"rank": 6, "epsilon_start": 0.1}, engine, SEEDS)
    given = {"rank": [3, 6], "gamma": [0.9, 0.95], "alpha0": [0.01, 0.02], "max_inner": [2, 5]}
    trained = _runner(settings, settings.agent, SEEDS, given)
    _play(trained)
    saved = trained.agent.state_dict()
    np.testing.assert_array_equal(saved["replica_settings"]["rank"], [3, 6])
    restored = _agent(settings, None, seeds=(7, 8))
    restored.load_state_dict(saved)
    assert_tree_equal(restored.state_dict(), saved)
    np.testing.assert_array_equal(restored.state_.values.packed, trained.agent.state_.values.packed)
    rng = np.random.default_rng(3)
    problem = settings.problem
    for _ in range(20):  # the same transitions: the same updates and actions
        states = np.stack([rng.integers(0, d, 2) for d in problem.state_dims], axis=1)
        actions = np.stack([rng.integers(0, d, 2) for d in problem.action_dims], axis=1)
        batch = Transitions(
            states, actions, rng.normal(size=2), states[::-1], np.zeros(2, bool), np.ones(2, bool)
        )
        for agent in (trained.agent, restored):
            agent.observe(batch)
        np.testing.assert_array_equal(
            trained.agent.act(states, np.ones(2, bool)), restored.act(states, np.ones(2, bool))
        )
    assert_tree_equal(restored.state_dict(), trained.agent.state_dict())
    plain = _agent(settings, None)
    plain.load_state_dict({k: v for k, v in saved.items() if k != "replica_settings"})
    assert plain.replica_settings_ == {}
    assert np.all(plain.state_.values.rank == 6)
