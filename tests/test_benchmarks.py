import json
import math

import pytest

from benchmarks.__main__ import main


def test_quick_step_benchmark_writes_its_table(tmp_path, capsys):
    assert main(["step", "--quick", "--json", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "step.json").read_text())
    assert {(r["grid"], r["B"]) for r in rows} == {
        (grid, b) for grid in ("cartpole", "cartpole-step", "highway-grid") for b in (1, 4)
    }
    for row in rows:
        parts = row["env"] + row["act"] + row["update"] + row["other"]
        if row["grid"] == "cartpole":  # the fused runner: end to end only
            assert math.isnan(parts)
        else:
            assert abs(parts - row["total"]) < 1e-6 * max(1.0, row["total"])
        assert row["agent_steps"] > 0 and row["plain_loop_us"] > 0 and row["peak_mb"] > 0
    assert "teql-released" in capsys.readouterr().out


def test_quick_runs_of_the_other_benchmarks(capsys):
    assert main(["tensorq", "agents", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "== tensorq" in out and "== agents" in out and "teql-released" in out


def test_flags_go_to_the_one_benchmark_named(capsys):
    assert main(["paper_scale", "--seeds", "2", "--episodes", "2"]) == 0
    assert "teql-released" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        main(["--episodes=2"])
    assert refused.value.code == 2
    assert "exactly one benchmark" in capsys.readouterr().err


def test_backends_benchmark_times_each_engine_after_its_warmup(tmp_path, capsys):
    args = ["--replicas", "2", "--engines", "compiled", "numpy", "--seconds", "0.2"]
    assert main(["backends", *args, "--warmup", "0.2", "--json", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "backends.json").read_text())
    assert [(r["engine"], r["B"]) for r in rows] == [("compiled", 2), ("numpy", 2)]
    assert all(r["agent_steps"] > 0 and r["us_per_agent_step"] > 0 for r in rows)


def test_metrics_benchmark_reads_the_same_table_both_ways(capsys):
    assert main(["metrics", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "metrics.csv of 120 rows" in out and "same table: True" in out


def test_tensorboard_benchmark_times_both_kinds_of_run(capsys):
    pytest.importorskip("tensorboard")
    assert main(["tensorboard", "--quick", "--agents", "tlr"]) == 0
    out = capsys.readouterr().out
    assert "B = 3, 6 episodes" in out
    (row,) = [line.split() for line in out.splitlines() if line.startswith("tlr")]
    with_writer, without, ratio, cpu_ratio, size = map(float, row[1:])
    assert with_writer > 0 and without > 0 and ratio > 0 and cpu_ratio > 0 and size > 0


def test_against_names_a_revision_it_cannot_check_out(capsys):
    with pytest.raises(SystemExit) as refused:
        main(["against", "--rev", "no-such-revision"])
    assert refused.value.code == 2
    assert "cannot check out 'no-such-revision'" in capsys.readouterr().err


def test_sweep_batch_benchmark_times_both_sweeps_with_the_same_metrics(capsys):
    assert main(["sweep_batch", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "batches: 1, largest 4 replicas" in out
    assert "metrics equal (all columns but wall time): True" in out


@pytest.fixture
def classics_trained(monkeypatch):
    """The configs `benchmarks classics` trains, in order (each still trained)."""
    from benchmarks import bench_classics

    trained = []
    real_train = bench_classics.train
    monkeypatch.setattr(
        bench_classics, "train", lambda config: trained.append(config) or real_train(config)
    )
    return trained


def test_classics_set_and_env_option_change_every_row(classics_trained, capsys):
    trained = classics_trained
    flags = ["--envs", "FrozenLake-v1", "--agents", "TEQL stable", "tabular", "--set", "gamma=0.9",
             "--env-option", "max_episode_steps=20"]  # fmt: skip
    assert main(["classics", "--seeds", "1", "--scale", "0.002", *flags]) == 0
    assert [(c.agent, c.agent_params, c.env_options) for c in trained] == [
        (agent, {"gamma": 0.9}, {"max_episode_steps": 20}) for agent in ("teql", "tabular")
    ]
    assert "| TEQL stable, gamma=0.9, max_episode_steps=20 |" in capsys.readouterr().out


def test_classics_tuned_scale_multiplies_the_presets_episodes_and_reports_core_seconds(
    classics_trained, tmp_path
):
    import csv

    trained = classics_trained
    table = tmp_path / "tuned.csv"
    flags = ["--envs", "CliffWalking-v1", "--agents", "tabular", "--csv", str(table)]
    assert main(["classics", "--preset", "tuned", "--seeds", "1", "--scale", "0.05", *flags]) == 0
    assert [(c.agent, c.episodes) for c in trained] == [("tabular", 5)]  # the preset's 100
    header, row = list(csv.reader(table.open(encoding="utf-8")))
    assert row[header.index("episodes x seeds")] == "5 x 1"
    wall, cpu = (float(row[header.index(name)]) for name in ("wall time (s)", "core-seconds"))
    assert wall > 0.0 and cpu > 0.0


def test_classics_keep_best_trains_with_it_and_adds_the_best_states_columns(
    classics_trained, tmp_path
):
    import csv

    from benchmarks.bench_classics import BEST_COLUMNS, BEST_EVALUATIONS, TUNED_COLUMNS

    trained = classics_trained
    table = tmp_path / "best.csv"
    flags = ["--envs", "CartPole-v1", "--agents", "teql", "--csv", str(table), "--keep-best"]
    flags += ["--eval-episodes", "3"]
    assert main(["classics", "--preset", "tuned", "--seeds", "1", "--scale", "0.1", *flags]) == 0
    [config] = trained
    assert config.keep_best
    assert (config.eval_every, config.eval_episodes) == (BEST_EVALUATIONS["CartPole-v1"][0], 3)
    header, row = list(csv.reader(table.open(encoding="utf-8")))
    assert header == [*TUNED_COLUMNS, *BEST_COLUMNS]
    kept = float(row[header.index("best state's episode, median")])
    assert 0 < kept <= config.episodes and kept % config.eval_every == 0


def test_sparse_grid_benchmark_writes_a_row_per_grid_and_setting(tmp_path):
    import csv

    from benchmarks.bench_sparse_grid import GRIDS

    table = tmp_path / "grid.csv"
    assert main(["sparse_grid", "--quick", "--csv", str(table)]) == 0
    header, *rows = list(csv.reader(table.open(encoding="utf-8")))
    assert header[:3] == ["grid", "slip", "setting"]
    expected = [(f"{s[0]} x {s[1]}", f"{slip:g}", name) for s, slip in GRIDS
                for name in ("default", "tabular")]  # fmt: skip
    assert [tuple(row[:3]) for row in rows] == expected
    for row in rows:  # the mean of one seed is that seed's return, and it is the worst
        mean, worst = float(row[4].split(" ± ")[0]), float(row[5])
        assert mean == worst and -20.0 <= mean <= 9.0
        assert row[6] == ("1/1" if mean > -20.0 else "0/1")
