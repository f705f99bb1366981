"""A batch of configurations (rl.runs.batch, rl.sweep --batch) equals each configuration alone."""

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rl.experiments.executor import read_index
from rl.runs.batch.replica_state import (
    ReplicaStateError,
    join_states,
    layout_signature,
    split_state,
)
from rl.runs.batch.training import (
    batch_key,
    build_batch,
    resolve_members,
    state_layout,
    train_batch,
)
from rl.runs.checkpoint import load_checkpoint
from rl.runs.config import TrainConfig, resolve_settings
from rl.runs.metrics import COLUMNS, read_metrics
from rl.runs.training import train
from rl.seeding import spawn_replicas
from rl.sweep import SweepConfig, main, sweep_batches

ROOT = Path(__file__).resolve().parents[2]
EXCEPT_WALL = [c for c in COLUMNS if c != "wall_time"]

AGENTS = {  # name -> (agent, reading)
    "teql-released": ("teql-released", None),
    "teql-stable": ("teql", "stable"),
    "tlr": ("tlr", None),
    "tabular": ("tabular", None),
}


def _config(out, agent="teql-released", reading=None, seed=0, **changes):
    values = dict(
        env="cartpole",
        agent=agent,
        reading=reading,
        seeds=2,
        seed=seed,
        episodes=12,
        eval_every=5,
        checkpoint_every=5,
        out=str(out),
    )
    return TrainConfig(**{**values, **changes})


def _same_tree(a, b, where="agent_state"):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            _same_tree(a[key], b[key], f"{where}/{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _same_tree(x, y, f"{where}/{i}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        assert np.array_equal(a, b, equal_nan=True), where
    else:
        assert a == b, where


def _assert_same_run(batched: Path, alone: Path) -> None:
    """Metrics (all but wall time), checkpoint state and config.json (but out) are equal."""
    first, second = read_metrics(batched / "metrics.csv"), read_metrics(alone / "metrics.csv")
    for column in EXCEPT_WALL:
        assert np.array_equal(first[column], second[column], equal_nan=True), column
    one, two = (
        load_checkpoint(batched / "checkpoint.npz"),
        load_checkpoint(alone / "checkpoint.npz"),
    )
    assert one.episode == two.episode
    _same_tree(one.agent_state, two.agent_state)
    configs = [json.loads((d / "config.json").read_text()) for d in (batched, alone)]
    assert [{k: v for k, v in c.items() if k != "out"} for c in configs][0] == {
        k: v for k, v in configs[1].items() if k != "out"
    }


def _batch_against_alone(tmp_path, configs, capsys):
    train_batch(configs)
    assert "one by one" not in capsys.readouterr().err
    for config in configs:
        alone = dataclasses.replace(config, out=str(tmp_path / "alone" / Path(config.out).name))
        train(alone)
        _assert_same_run(Path(config.out), Path(alone.out))


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_seed_grid_in_one_batch_equals_each_configuration_alone(tmp_path, capsys, name):
    agent, reading = AGENTS[name]
    configs = [
        _config(tmp_path / "batch" / str(seed), agent, reading, seed) for seed in (0, 100, 7)
    ]
    _batch_against_alone(tmp_path, configs, capsys)


def test_members_with_dense_visit_tables_cut_from_a_batch_with_a_sparse_one(tmp_path, capsys):
    # CartPole's 40,000 states x 10 actions: one replica's table is dense, three are sparse
    configs = [_config(tmp_path / "batch" / str(seed), seed=seed, seeds=1) for seed in (0, 5, 9)]
    first = resolve_members(configs[:1])[0][0]
    alone = first.spec.agent_class(
        first.problem, first.agent, [s.agent for s in spawn_replicas([0])]
    )
    batch = first.spec.agent_class(
        first.problem, first.agent, [s.agent for s in spawn_replicas([0, 5, 9])]
    )
    assert "keys" not in alone.state_dict()["visits"] and "keys" in batch.state_dict()["visits"]
    _batch_against_alone(tmp_path, configs, capsys)


PER_REPLICA = [  # (agent name, field, values)
    ("teql-released", "alpha0", (0.005, 0.02)),
    ("teql-released", "c", (0.5, 2.0)),
    ("teql-released", "gamma", (0.9, 0.99)),
    ("teql-stable", "lam", (0.0, 0.1)),
    ("teql-stable", "epsilon_decay", (0.99, 0.999)),
    ("tlr", "alpha", (0.005, 0.02)),
    ("tlr", "gamma", (0.9, 0.99)),
    ("tabular", "step_size", (0.05, 0.2)),
    ("tabular", "gamma", (0.9, 0.99)),
]


@pytest.mark.parametrize(("name", "field", "values"), PER_REPLICA)
def test_a_grid_over_a_per_replica_setting_equals_each_configuration_alone(
    tmp_path, capsys, name, field, values
):
    agent, reading = AGENTS[name]
    first = _config(tmp_path / "x", agent, reading)
    spec = resolve_settings(first, build_problem=False).spec
    if field not in spec.agent_class.per_replica:
        pytest.skip(f"{spec.agent_class.__name__} does not list {field!r} in per_replica")
    configs = [
        _config(
            tmp_path / "batch" / f"{i}-{seed}", agent, reading, seed, agent_params={field: value}
        )
        for i, value in enumerate(values)
        for seed in (0, 100)
    ]
    keys = {batch_key(e, spec.agent_class.per_replica) for _, e in resolve_members(configs)}
    assert len(keys) == 1
    _batch_against_alone(tmp_path, configs, capsys)


def test_configurations_that_differ_in_more_than_seeds_and_per_replica_settings_train_apart(
    tmp_path,
):
    configs = [_config(tmp_path / str(n), episodes=n) for n in (12, 13)]
    per_replica = resolve_settings(configs[0], build_problem=False).spec.agent_class.per_replica
    keys = {batch_key(e, per_replica) for _, e in resolve_members(configs)}
    assert len(keys) == 2


@pytest.mark.parametrize("seeds", [1, 2])  # dense member tables joined into a sparse one; sparse
def test_a_resumed_batch_finishes_with_the_files_of_an_uninterrupted_one(tmp_path, capsys, seeds):
    configs = [
        _config(tmp_path / "cut" / str(seed), seed=seed, seeds=seeds) for seed in (0, 100, 7)
    ]
    train_batch(configs, stop_after_episode=5)
    assert load_checkpoint(Path(configs[0].out) / "checkpoint.npz").episode == 5
    # as if killed while writing the checkpoints of episode 10: one run is ahead of the others
    train(dataclasses.replace(configs[0]), resume=True, stop_after_episode=10)
    assert len(read_metrics(Path(configs[0].out) / "metrics.csv")["episode"]) == seeds * 10
    (Path(configs[2].out) / "checkpoint.npz").write_bytes(b"damaged")
    capsys.readouterr()
    train_batch(configs, resume=True)
    err = capsys.readouterr().err
    assert "continuing from episode 10" in err and "continuing from episode 5" in err
    assert "starting afresh" in err
    whole = [dataclasses.replace(c, out=str(tmp_path / "whole" / str(c.seed))) for c in configs]
    train_batch(whole)
    for config, uninterrupted in zip(configs, whole, strict=True):
        _assert_same_run(Path(config.out), Path(uninterrupted.out))


def _sweep_config(position, seeds, key="a", replica_bytes=1e4):
    config = TrainConfig(env="cartpole", agent="teql", out="x", seeds=seeds, seed=position)
    return SweepConfig(position, {}, config, f"{position:08x}", key, replica_bytes)


def test_batches_are_chunked_by_size_and_workers_and_never_split_a_configuration():
    five = [_sweep_config(i, 3) for i in range(5)]
    # 15 replicas, at most 7 a batch: 3 batches of about 5; a batch of one is no batch
    assert sweep_batches(five, workers=1, max_batch=7) == [[0, 1], [2, 3]]
    assert sweep_batches(five, workers=1) == [[0, 1, 2, 3, 4]]
    assert sweep_batches(five, workers=2) == [[0, 1, 2], [3, 4]]
    assert sweep_batches(five, workers=5) == []  # one configuration per worker
    mixed = [_sweep_config(i, 2, key="ab"[i % 2]) for i in range(6)]
    assert sweep_batches(mixed, workers=1) == [[0, 2, 4], [1, 3, 5]]
    # memory: a replica of more than half the budget leaves one replica per batch
    from rl.validation import memory_budget

    huge = [_sweep_config(i, 1, replica_bytes=memory_budget() * 0.6) for i in range(3)]
    assert sweep_batches(huge, workers=1) == []


def test_a_sparse_visit_table_of_the_batch_cuts_into_dense_member_tables_and_back():
    n_states, n_actions = 4, 2
    keys = np.array([5, 0, 9, 4, 11], dtype=np.int64)  # replica 1: states 1, 0; replica 2: 1, 3
    counts = np.arange(10, dtype=np.int64).reshape(5, 2) + 1
    delta = counts * 0.5
    batch = {"keys": keys, "counts": counts, "delta": delta}
    empty = {k: v[:0] for k, v in batch.items()}
    dense = {
        "counts": np.zeros((1, n_states, n_actions), np.int64),
        "delta": np.zeros((1, n_states, n_actions)),
    }
    member = split_state(batch, dense, empty, 1, 2, n_states)
    assert member["counts"][0].tolist() == [[7, 8], [1, 2], [0, 0], [0, 0]]
    assert member["delta"][0, 1].tolist() == [0.5, 1.0]
    sparse = split_state(batch, empty, empty, 2, 3, n_states)
    assert sparse["keys"].tolist() == [1, 3] and sparse["counts"].tolist() == [[5, 6], [9, 10]]
    parts = [split_state(batch, dense, empty, b, b + 1, n_states) for b in range(3)]
    joined = join_states(parts, [1, 1, 1], [dense] * 3, empty, n_states)
    order = np.argsort(keys)
    assert joined["keys"].tolist() == keys[order].tolist()
    assert np.array_equal(joined["counts"], counts[order])
    with pytest.raises(ReplicaStateError):
        split_state({"a": np.zeros(3)}, {"a": np.zeros(3)}, {"a": np.zeros(3)}, 0, 1, 1)


GRID = """
[base]
env = "cartpole"
agent = "teql-released"
episodes = {episodes}
seeds = 2
eval_every = 5
checkpoint_every = 5

[grid]
seed = [0, 100, 7]
"""


def test_the_sweep_batches_by_default_and_writes_what_no_batch_writes(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(episodes=8))
    assert main([str(grid), "--out", str(tmp_path / "d"), "--workers", "1", "--dry-run"]) == 0
    assert capsys.readouterr().out.count("batch 0") == 3
    common = ["--workers", "1", "--no-progress", "--no-plot"]
    assert main([str(grid), "--out", str(tmp_path / "batch"), *common]) == 0
    assert main([str(grid), "--out", str(tmp_path / "alone"), "--no-batch", *common]) == 0
    rows = read_index(tmp_path / "batch")
    assert [r["name"] for r in rows] == [r["name"] for r in read_index(tmp_path / "alone")]
    assert {r["status"] for r in rows} == {"done"}
    for row in rows:
        _assert_same_run(tmp_path / "batch" / row["name"], tmp_path / "alone" / row["name"])


def test_a_configuration_that_diverges_in_a_batch_fails_alone(tmp_path, capsys):
    """alpha_0 = 0.1 diverges after its first checkpoint: its batch-mate ends as if alone."""
    grid = tmp_path / "grid.toml"
    grid.write_text(
        GRID.format(episodes=20).replace(
            "seed = [0, 100, 7]", '"agent_params.alpha0" = [0.005, 0.1]'
        )
    )
    common = ["--workers", "1", "--no-progress", "--no-plot"]
    assert main([str(grid), "--out", str(tmp_path / "d"), *common, "--dry-run"]) == 0
    assert capsys.readouterr().out.count("batch 0") == 2  # the two share one batch
    assert main([str(grid), "--out", str(tmp_path / "batch"), *common]) == 1
    assert main([str(grid), "--out", str(tmp_path / "alone"), "--no-batch", *common]) == 1
    rows = read_index(tmp_path / "batch")
    assert (
        [r["status"] for r in rows]
        == ["done", "failed"]
        == [r["status"] for r in read_index(tmp_path / "alone")]
    )
    assert "diverged" in rows[1]["error"]
    _assert_same_run(tmp_path / "batch" / rows[0]["name"], tmp_path / "alone" / rows[0]["name"])


@pytest.mark.slow  # a sweep in a subprocess, killed by SIGKILL mid-batch, then resumed
def test_a_batch_killed_by_sigkill_resumes_to_the_files_of_an_uninterrupted_sweep(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(episodes=300))
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "rl.sweep", str(grid), "--workers", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [*command, "--out", str(out)], env=env, cwd=ROOT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            checkpoints = list(out.glob("*/checkpoint.npz"))
            if checkpoints and load_checkpoint(checkpoints[0]).episode >= 20:
                break
            time.sleep(0.5)
        else:
            pytest.fail("no checkpoint of episode 20 within 300 s")
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert (
        subprocess.run([*command, "--out", str(out), "--resume"], env=env, cwd=ROOT).returncode == 0
    )
    whole = tmp_path / "whole"
    assert subprocess.run([*command, "--out", str(whole)], env=env, cwd=ROOT).returncode == 0
    for row in read_index(whole):
        _assert_same_run(out / row["name"], whole / row["name"])


def test_an_entry_only_the_batch_holds_is_left_out_of_its_members_and_kept_on_joining():
    batch = {"q": np.arange(6.0).reshape(3, 2), "settings": {"alpha0": np.array([1.0, 2.0, 2.0])}}
    member = {"q": np.zeros((1, 2))}
    parts = [split_state(batch, member, batch, b, b + 1, 1) for b in range(3)]
    assert [p["q"].tolist() for p in parts] == [[[0.0, 1.0]], [[2.0, 3.0]], [[4.0, 5.0]]]
    assert all(set(p) == {"q"} for p in parts)
    joined = join_states(parts, [1, 1, 1], [member] * 3, batch, 1)
    assert np.array_equal(joined["q"], batch["q"])
    assert joined["settings"]["alpha0"].tolist() == [1.0, 2.0, 2.0]
    with pytest.raises(ReplicaStateError):
        split_state(batch, {"other": np.zeros(1)}, batch, 0, 1, 1)


def test_bad_grids_and_workers_are_refused_in_one_line_before_batching(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(episodes=8).replace("seed = [0, 100, 7]", "seed = []"))
    assert main([str(grid), "--out", str(tmp_path / "a"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be a non-empty list of values" in err
    grid.write_text(GRID.format(episodes=8))
    assert main([str(grid), "--out", str(tmp_path / "b"), "--workers", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == "error: The 'workers' parameter must be an int >= 1. Got 0 instead.\n"
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_batch_hands_the_agent_each_replica_s_value_of_a_varying_per_replica_field(tmp_path):
    from rl.agents.tables.tabular import TabularQ

    handed = []

    class Recording(TabularQ):
        def __init__(self, problem, config, streams, *, replica_settings=None):
            handed.append((config.gamma, replica_settings))
            super().__init__(problem, config, streams, replica_settings=replica_settings)

    configs = [
        _config(tmp_path / f"{gamma}-{seed}", "tabular", seed=seed, agent_params={"gamma": gamma})
        for gamma in (0.9, 0.99)
        for seed in (0, 100)
    ]
    resolved = [
        (s._replace(spec=dataclasses.replace(s.spec, agent_class=Recording)), e)
        for s, e in resolve_members(configs)
    ]
    batch = build_batch(resolved)
    batch.runner.close()
    assert handed[0] == (0.99, {"gamma": [0.9, 0.9, 0.9, 0.9, 0.99, 0.99, 0.99, 0.99]})
    assert handed[1:] == [(0.9, None)]  # the layout of a member's own state: no settings
    assert [(m.lo, m.hi) for m in batch.members] == [(0, 2), (2, 4), (4, 6), (6, 8)]


@pytest.mark.slow  # Ray's start-up
def test_a_batch_on_ray_writes_what_the_local_pool_writes_without_batches(tmp_path, capsys):
    pytest.importorskip("ray")
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(episodes=8))
    common = ["--workers", "1", "--no-progress", "--no-plot"]
    assert main([str(grid), "--out", str(tmp_path / "ray"), "--backend", "ray", *common]) == 0
    assert main([str(grid), "--out", str(tmp_path / "alone"), "--no-batch", *common]) == 0
    for row in read_index(tmp_path / "alone"):
        _assert_same_run(tmp_path / "ray" / row["name"], tmp_path / "alone" / row["name"])
        config = json.loads((tmp_path / "ray" / row["name"] / "config.json").read_text())
        assert config["out"] == str(tmp_path / "ray" / row["name"])


def test_configurations_with_and_without_the_epsilon_layer_train_in_different_batches(tmp_path):
    configs = [
        _config(tmp_path / str(eps), "teql-released", agent_params={"epsilon_start": eps})
        for eps in (0.0, 0.3, 0.5)
    ]
    keys = [
        batch_key(e, s.spec.agent_class.per_replica, group=s.spec.agent_class.batch_group(s.agent))
        for s, e in resolve_members(configs)
    ]
    assert keys[1] == keys[2] != keys[0]


def _rank_grid(out, agent="teql-released", reading=None, others=({"gamma": 0.9}, {"c": 2.0})):
    """Ranks 4 and 10 x 2 seeds x the other settings, one seed per configuration."""
    return [
        _config(
            out / f"r{rank}-{i}-{seed}",
            agent,
            reading,
            seed,
            seeds=1,
            agent_params={"rank": rank, **other},
        )
        for rank in (4, 10)
        for i, other in enumerate(others)
        for seed in (0, 100)
    ]


def test_configurations_of_different_ranks_share_a_layout_and_a_batch_key(tmp_path):
    resolved = resolve_members(_rank_grid(tmp_path))
    layouts, keys = set(), set()
    for settings, effective in resolved:
        streams = spawn_replicas([settings.config.seed])
        agent_class = settings.spec.agent_class
        state = agent_class(
            settings.problem, settings.agent, [s.agent for s in streams]
        ).state_dict()
        layout = state_layout(settings, state)
        assert layout != layout_signature(state)  # the component axis is left out
        layouts.add(layout)
        group = agent_class.batch_group(settings.agent)
        keys.add(batch_key(effective, agent_class.per_replica, layout, group))
    assert len(layouts) == len(keys) == 1
    (layout,) = layouts
    # a factor's component axis is left out, not the visit table's |A| = 10 = the larger rank
    assert "<f8(10, '*')" in layout and "counts:<i8(40000, 10)" in layout
    batch = build_batch(resolved)
    batch.runner.close()
    assert batch.runner.agent.config.rank == 10  # the largest rank: the batch's shape
    assert batch.runner.agent.ranks_.tolist() == [4, 4, 4, 4, 10, 10, 10, 10]
    assert batch.n_params == [4 * 70] * 4 + [10 * 70] * 4  # R sum(d_n), sum(d_n) = 70


@pytest.mark.parametrize("name", ["teql-released", "tlr"])
def test_a_grid_over_rank_in_one_batch_equals_each_configuration_alone(tmp_path, capsys, name):
    agent, reading = AGENTS[name]
    others = ({"gamma": 0.9}, {"gamma": 0.99}) if name == "tlr" else ({"gamma": 0.9}, {"c": 2.0})
    _batch_against_alone(tmp_path, _rank_grid(tmp_path / "batch", agent, reading, others), capsys)


def test_a_grid_over_rank_resumed_mid_run_finishes_with_the_files_of_each_configuration_alone(
    tmp_path, capsys
):
    configs = _rank_grid(tmp_path / "cut")
    train_batch(configs, stop_after_episode=5)
    rank4 = load_checkpoint(Path(configs[0].out) / "checkpoint.npz").agent_state["factors"]
    assert {f.shape[-1] for f in rank4} == {4}  # cut to its own rank
    capsys.readouterr()
    train_batch(configs, resume=True)
    err = capsys.readouterr().err
    assert err.count("continuing from episode 5") == len(configs) and "one by one" not in err
    for config in configs:
        alone = dataclasses.replace(config, out=str(tmp_path / "alone" / Path(config.out).name))
        train(alone)
        _assert_same_run(Path(config.out), Path(alone.out))


@pytest.mark.slow  # 2 ranks x 2 seeds x 3 other settings, 4 replicas each, 200 episodes
@pytest.mark.parametrize("name", ["teql-released", "teql-stable", "tlr"])
def test_a_larger_grid_over_rank_resumed_equals_each_configuration_alone(tmp_path, capsys, name):
    agent, reading = AGENTS[name]
    others = ({"gamma": 0.9}, {"gamma": 0.99, "epsilon_decay": 0.999}, {"gamma": 0.95})
    configs = [
        dataclasses.replace(c, seeds=4, episodes=200, eval_every=50, checkpoint_every=50)
        for c in _rank_grid(tmp_path / "cut", agent, reading, others)
    ]
    train_batch(configs, stop_after_episode=100)
    train_batch(configs, resume=True)
    assert "one by one" not in capsys.readouterr().err
    for config in configs:
        alone = dataclasses.replace(config, out=str(tmp_path / "alone" / Path(config.out).name))
        train(alone)
        _assert_same_run(Path(config.out), Path(alone.out))


def test_factors_are_cut_to_a_member_s_rank_and_padded_back_and_nonzero_masked_parts_refused():
    batch = {"factors": [np.zeros((3, 2, 5))], "steps": np.zeros(3, np.int64)}
    state = {"factors": [np.arange(30.0).reshape(3, 2, 5)], "steps": np.array([7, 8, 9])}
    state["factors"][0][1:, :, 2:] = 0.0  # replicas 1 and 2 of rank 2
    low = {"factors": [np.zeros((2, 2, 2))], "steps": np.zeros(2, np.int64)}
    high = {"factors": [np.zeros((1, 2, 5))], "steps": np.zeros(1, np.int64)}
    part = split_state(state, low, batch, 1, 3, 1)
    assert part["factors"][0].tolist() == [
        [[10.0, 11.0], [15.0, 16.0]],
        [[20.0, 21.0], [25.0, 26.0]],
    ]
    first = split_state(state, high, batch, 0, 1, 1)
    joined = join_states([first, part], [1, 2], [high, low], batch, 1)
    assert np.array_equal(joined["factors"][0], state["factors"][0])
    assert joined["steps"].tolist() == [7, 8, 9]
    state["factors"][0][2, 1, 4] = 1e-300  # a masked component that is not exactly 0
    with pytest.raises(ReplicaStateError, match=r"replicas 1 \.\. 2 hold nonzero entries"):
        split_state(state, low, batch, 1, 3, 1)
