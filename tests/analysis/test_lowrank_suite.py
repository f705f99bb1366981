"""The known-rank suite: Q* ranks recovered, a small suite end to end, resume, verdicts, costs."""

import csv
import json
import shutil

import numpy as np
import pytest

from analysis.lowrank_suite import cli, measure, page_tables
from analysis.lowrank_suite.cost import Probe, _fit, batch_seconds
from analysis.lowrank_suite.grid import AgentSetup, ExactReference, Instance
from analysis.lowrank_suite.report import (
    VERDICT_MARKS,
    axis_markdown,
    rank_bracket,
    verdict_cell_rows,
    verdict_count_rows,
    verdict_counts_markdown,
    verdict_grid_markdown,
)
from analysis.lowrank_suite.verdicts import verdict

SMALL = [
    "--seeds", "2", "--episodes", "6", "--eval-every", "3", "--qstar-ranks", "2",
    "--state-modes", "2", "--agent-ranks", "1", "--agents", "teql-stable", "--discounts", "0.9",
]  # fmt: skip


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(("rank", "modes"), [(1, 3), (3, 3), (5, 4)])
def test_planted_q_star_rank_is_recovered_exactly(rank, modes):
    """The bracket of analysis.rank closes on the construction's rank: [r, r]."""
    q_star = Instance(rank, modes, 0.9).make().q_star
    assert rank_bracket(q_star, rank) == (rank, rank)


def test_full_rank_q_star_has_no_low_rank_fit():
    q_star = Instance(None, 2, 0.9).make().q_star  # shape (3, 3, 3, 3)
    # certified: no CP model of rank 6 is exact (its 9 x 9 matricization has rank 9)
    assert rank_bracket(q_star, None, max_rank=6) == (7, None)


@pytest.mark.parametrize("gamma", [0.9, 0.99])
def test_exact_reference_scores_the_optimum_zero_and_random_one(gamma):
    reference = ExactReference.of(Instance(2, 2, gamma))
    q = np.stack([reference.q_star, -reference.q_star])
    gaps = reference.normalized_gap(reference.values(q))
    assert gaps[0] == pytest.approx(0, abs=1e-12) and gaps[1] > 1.0
    assert reference.normalized_gap(reference.j_random) == pytest.approx(1.0)
    # J of the random policy from the dense model, as a check of the structured solve
    env = reference.env
    n = int(np.prod(env.state_dims))
    transition = env.transition.reshape(n, -1, n).mean(axis=1)
    values = np.linalg.solve(np.eye(n) - gamma * transition, env.reward.reshape(n, -1).mean(1))
    assert reference.j_random == pytest.approx(values.mean(), rel=1e-12)


@pytest.fixture(scope="module")
def small_suite(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "out"
    assert cli.main([*SMALL, "--out", str(out)]) == 0
    return out


def test_small_suite_writes_every_table_and_figure(small_suite):
    for name in ("runs.csv", "instances.csv", "verdicts.csv", "rank_axis.csv",
                 "modes_axis.csv", "rank_axis.png", "modes_axis.png", "suite.json"):  # fmt: skip
        assert (small_suite / name).is_file(), name
    runs = _rows(small_suite / "runs.csv")
    # instances r2-m4 (rank axis) and r5-m2 (modes axis), tabular and TEQL rank 1, 2 seeds
    assert len(runs) == 2 * 2 * 2
    assert {r["instance"] for r in runs} == {"r2-m4-g0.9", "r5-m2-g0.9"}
    for row in runs:
        assert int(row["budget_steps"]) == 600
        assert 0.0 <= float(row["sup_error"])
        assert int(row["n_params"]) == (int(row["table_params"]) if row["agent"] == "tabular"
                                        else 3 * int(row["state_modes"]) + 6)  # fmt: skip
    brackets = {r["instance"]: r for r in _rows(small_suite / "instances.csv")}
    assert (brackets["r2-m4-g0.9"]["rank_low"], brackets["r2-m4-g0.9"]["rank_high"]) == ("2", "2")
    verdicts = _rows(small_suite / "verdicts.csv")
    assert len(verdicts) == 2
    assert {v["verdict"] for v in verdicts} <= {"faster", "equal", "slower", "neither"}


def test_resume_runs_only_the_missing_batches_and_gives_the_same_rows(small_suite, tmp_path):
    out = tmp_path / "resumed"
    shutil.copytree(small_suite, out)
    full = _rows(out / "runs.csv")
    kept = [r for r in full if r["instance"] == "r2-m4-g0.9"]
    kept += [r for r in full if r["instance"] == "r5-m2-g0.9" and r["agent_key"] == "tabular"]
    kept.append(next(r for r in full if r["agent_key"] == "teql-stable-r1"
                     and r["instance"] == "r5-m2-g0.9"))  # fmt: skip  # half a batch
    cli.write_csv(out / "runs.csv", kept, list(full[0]))
    assert cli.main([*SMALL, "--out", str(out), "--jobs", "2"]) == 0  # jobs may differ
    resumed = _rows(out / "runs.csv")
    assert len(resumed) == len(full)
    untimed = [{k: v for k, v in r.items() if k != "wall_s"} for r in full]
    assert sorted(map(json.dumps, untimed)) == sorted(
        json.dumps({k: v for k, v in r.items() if k != "wall_s"}) for r in resumed
    )
    kept_walls = {(r["instance"], r["agent_key"], r["seed"]): r["wall_s"] for r in kept[:-1]}
    for row in resumed:  # finished batches are not run again
        key = (row["instance"], row["agent_key"], row["seed"])
        if key in kept_walls:
            assert row["wall_s"] == kept_walls[key]


def test_other_settings_in_the_same_out_are_refused(small_suite, capsys):
    args = [*SMALL, "--out", str(small_suite)]
    args[args.index("--seeds") + 1] = "3"
    assert cli.main(args) == 2
    assert "other settings (seeds)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--seeds", "0"), ("--discounts", "1.5"), ("--agents", "dqn"), ("--state-modes", "x")],
)
def test_bad_arguments_exit_2_in_one_line(flag, value, tmp_path, capsys):
    args = [*SMALL, "--out", str(tmp_path / "o")]
    args[args.index(flag) + 1] = value
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and flag in err


def test_verdict_reads_the_two_intervals():
    assert verdict((10, 20), (30, 40), True) == "faster"
    assert verdict((50, 60), (30, 40), True) == "slower"
    assert verdict((25, 35), (30, 40), True) == "equal"
    assert verdict((25, 35), (30, 40), False) == "neither"


def test_cost_model_recovers_known_costs():
    a, b, c, episodes = 0.02, 0.01, 0.5, 10
    walls = {(s, k): c * s + k * episodes * (a + b * s) for s, k in ((2, 1), (8, 1), (8, 3))}
    probe = _fit("tabular", 9, 0, walls, episodes)
    assert (probe.overhead, probe.per_seed, probe.setup) == pytest.approx((a, b, c))
    probes = [probe, Probe("tabular", 729, 0, 2 * a, 2 * b, 2 * c)]
    middle = Instance(1, 2, 0.9)  # 9 states: the first probe exactly
    assert batch_seconds(probes, middle, AgentSetup("tabular", "paper"), 10, 100) == (
        pytest.approx(c * 10 + 100 * (a + b * 10))
    )
    assert np.isfinite(batch_seconds(probes, Instance(1, 4, 0.9), AgentSetup("tabular", "paper"),
                                     10, 100))  # fmt: skip


def test_a_diverged_batch_is_recorded_not_raised(tmp_path, monkeypatch):
    """An agent whose Q overflows stops its batch: rows say so, censored at the full budget."""
    real_run = measure.run

    def overflowing_run(runner, config, effective, *, progress, **kwargs):
        def progress_then_overflow(log):
            progress(log)
            if log.episode == 3:
                raise ValueError("TLRAgent diverged: the TD target of replica 0 is inf.")

        return real_run(runner, config, effective, progress=progress_then_overflow, **kwargs)

    monkeypatch.setattr(measure, "run", overflowing_run)
    instance, setup = Instance(2, 2, 0.9), AgentSetup("tlr", "paper", 1)
    rows = measure.run_batch(
        instance, setup, seeds=2, episodes=8, eval_every=2, work_dir=tmp_path / "w"
    )
    assert [r["diverged"] for r in rows] == [1, 1]
    assert [r["budget_steps"] for r in rows] == [800, 800]
    assert all(np.isfinite(r["final_gap"]) for r in rows)  # from the evaluation at episode 2


def test_figure_tables_are_one_per_discount_and_verdicts_are_counted():
    rows = [
        {"gamma": g, "qstar_rank": "", "agent_key": f"teql-stable-r{r}", "agent": "teql",
         "reading": "stable", "agent_rank": r, "n_params": 18, "table_params": 729,
         "iqm_steps": 1000, "iqm_low": 900, "iqm_high": 1100, "tabular_iqm_steps": 2000,
         "tabular_low": 1800, "tabular_high": 2200, "ratio": 0.5, "ratio_low": 0.4,
         "ratio_high": 0.6, "reached": 3, "tabular_reached": 3, "seeds": 3, "verdict": v}
        for g, r, v in ((0.99, 10, "faster"), (0.9, 2, "equal"), (0.9, 10, "faster"))
    ]  # fmt: skip
    lines = axis_markdown(rows, "qstar_rank")
    assert lines.index("gamma 0.9:") < lines.index("gamma 0.99:")
    body = [line for line in lines if line.startswith("| full")]
    assert [line.split(" | ")[1] for line in body] == [
        "teql-stable-r2",
        "teql-stable-r10",
        "teql-stable-r10",
    ]  # rank 2 before 10: ranks sort as numbers
    grid = verdict_grid_markdown(rows, "qstar_rank")
    assert grid[0] == "| gamma | Q* rank | teql stable (R = 2, 10) |"
    assert grid[2:] == ["| 0.9 | full | = F |", "| 0.99 | full |   F |"]  # no rank 2 at 0.99
    counts = verdict_counts_markdown(rows)
    assert counts[2:] == ["| teql | stable | 0.9 | 2 | 1 | 1 | 0 | 0 |",
                          "| teql | stable | 0.99 | 1 | 1 | 0 | 0 | 0 |"]  # fmt: skip


def test_estimate_prints_cpu_hours_and_the_wall_time_of_the_jobs(capsys, tmp_path):
    args = [*SMALL, "--out", str(tmp_path / "o"), "--estimate", "--probe-episodes", "1"]
    assert cli.main([*args, "--jobs", "2"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("plan: 2 instances x 2 agent set-ups, 2 seeds, 6 episodes: ")
    cpu, wall = (float(part.split()[0]) for part in last.split(": ")[-1].split(", about "))
    assert wall == pytest.approx(cpu / 2, abs=0.01)
    assert last.endswith("with --jobs 2 on 2 idle cores") and not (tmp_path / "o").exists()


COMMITTED = page_tables.DATA


def test_the_page_tables_written_from_the_committed_suite_are_the_committed_ones(tmp_path, capsys):
    assert page_tables.main(["--out", str(tmp_path)]) == 0
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == [f"lowrank-{n}.csv" for n in ("modes-axis", "rank-axis", "verdict-counts")]
    for name in names:
        written = (tmp_path / name).read_text(encoding="utf-8")
        assert written == (page_tables.RESULTS / name).read_text(encoding="utf-8"), name
    assert capsys.readouterr().out.count("wrote ") == 3


def _interval(row, keys, scale):
    point, low, high = (float(row[key]) / scale for key in keys)
    digits = 1 if scale > 1 else 2
    return f"{point:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


@pytest.mark.parametrize(
    ("figure", "axis"), [("rank_axis", "qstar_rank"), ("modes_axis", "state_modes")]
)
def test_every_cell_of_a_page_table_is_its_row_of_the_committed_verdicts(figure, axis):
    verdicts = _rows(COMMITTED / f"{figure}.csv")
    header, *body = verdict_cell_rows(verdicts, axis)
    ranks = [int(cell.removeprefix("R = ")) for cell in header[4:]]
    cells = {
        (float(r["gamma"]), r[axis] or "full", f"{r['agent']} {r['reading']}",
         int(r["agent_rank"])): r
        for r in verdicts
    }  # fmt: skip
    shown = {}
    for gamma, x, tabular, agent, *marks in body:
        for rank, mark in zip(ranks, marks, strict=True):
            shown[float(gamma), x, agent, rank] = (tabular, mark)
    assert shown.keys() == cells.keys()
    assert len(body) == (36 if axis == "qstar_rank" else 30)  # 2 discounts x 6 or 5 x 3 agents
    for key, (tabular, mark) in shown.items():
        row = cells[key]
        steps = _interval(row, ("tabular_iqm_steps", "tabular_low", "tabular_high"), 1000)
        assert tabular == f"{steps}, {row['tabular_reached']}/{row['seeds']}", key
        ratio = _interval(row, ("ratio", "ratio_low", "ratio_high"), 1)
        verdict_ = row["verdict"]
        assert mark == ("-" if verdict_ == "neither" else f"{VERDICT_MARKS[verdict_]} {ratio}"), key


def test_verdict_counts_of_the_page_add_up_to_the_committed_cells():
    verdicts = _rows(COMMITTED / "verdicts.csv")
    header, *body = verdict_count_rows(verdicts)
    assert header == ["agent", "reading", "gamma", "cells", "faster", "equal", "slower", "neither"]
    assert sum(int(row[3]) for row in body) == len(verdicts) == 300
    for agent, reading, gamma, cells, *counts in body:
        mine = [
            v for v in verdicts if (v["agent"], v["reading"], v["gamma"]) == (agent, reading, gamma)
        ]
        assert int(cells) == len(mine) == sum(map(int, counts))
        assert [int(c) for c in counts] == [
            sum(v["verdict"] == k for v in mine) for k in header[4:]
        ]


def test_page_tables_of_a_missing_suite_exit_2_in_one_line(tmp_path, capsys):
    assert page_tables.main(["--data", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert "verdicts.csv is missing or empty" in err and "\n" not in err
    assert not (tmp_path / "o").exists()
