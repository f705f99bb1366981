"""``python -m rl.reproduce paper --plan``: the schedule it plays and what it prints."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rl.experiments import paper_plan, whole
from rl.experiments.costs import ROW_SECONDS, postprocess_seconds, report_seconds
from rl.experiments.paper_plan import (
    Progress,
    measured_walls,
    plan_text,
    pool_wall,
    progress_in,
    schedule_wall,
)
from rl.experiments.parts import PART_COLUMNS, write_parts
from rl.reproduce import main

COSTS = {"small": {"h1": 1.0, "h2": 2.0}, "big": {"h2": 2.0, "h3": 9.0}, "alone": {"h4": 4.0}}


def plan(argv):
    return list(COSTS[argv[0]].items())


@pytest.fixture
def training_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan the training alone: parts and the report cost nothing besides it."""
    monkeypatch.setattr(paper_plan, "postprocess_seconds", lambda *args: 0.0)
    monkeypatch.setattr(paper_plan, "report_seconds", lambda *args: 0.0)


def test_the_pool_gives_each_task_to_the_first_free_worker() -> None:
    assert pool_wall([5.0, 3.0, 2.0, 2.0], 2) == 7.0  # 5 | 3 + 2 + 2
    assert pool_wall([5.0, 3.0, 2.0, 2.0], 1) == 12.0
    assert pool_wall([], 3) == 0.0


def test_the_schedule_waits_for_owners_and_runs_the_longest_first() -> None:
    parts = [
        whole.Part("a", (), True, cost=1.0),
        whole.Part("b", (), True, cost=5.0, after=("c",)),
        whole.Part("c", (), True, cost=3.0),
    ]
    walls = {"a": 1.0, "b": 5.0, "c": 3.0}
    assert schedule_wall(parts, 1, walls) == 9.0
    # side by side b is the longest but waits for c: c and a start, b once c has ended
    assert schedule_wall(parts, 2, walls) == 8.0
    assert schedule_wall(parts, 3, walls) == 8.0


def test_a_part_trains_what_it_owns_and_copies_the_rest(training_only: None) -> None:
    listed = [whole.Part(name, (name,), True) for name in ("small", "big", "alone")]
    shared = whole.share_lines(listed, Path("OUT"), plan, by_cost=False)
    assert {part.name: (list(part.trains), part.copies) for part in shared} == {
        "small": ([("h1", 1.0), ("h2", 2.0)], 0),
        "big": ([("h3", 9.0)], 1),
        "alone": ([("h4", 4.0)], 0),
    }
    text = plan_text(shared, 1, 2)
    assert "| big | 1 (0) | 1 | small | 9 | 9 |" in text
    # one after the other, two workers each: small 2, big 9 (after small), alone 4
    assert "Estimated 16 core-s" in text and "about 15 s" in text
    # a measured wall replaces the estimate of its configuration (h2: copied by big)
    text = plan_text(shared, 1, 2, {"h2": 6.0, "h3": 3.0, "other": 99.0})
    assert (
        "| small | 2 (1) | 0 | - | 7 | 6 |" in text
        and "| big | 1 (1) | 1 | small | 3 | 3 |" in text
    )
    assert "Estimated 14 core-s" in text and "2 of the 4 trained tasks" in text


def test_with_resume_what_is_done_costs_nothing(training_only: None) -> None:
    listed = [whole.Part(name, (name,), True) for name in ("small", "big", "alone")]
    shared = whole.share_lines(listed, Path("OUT"), plan, by_cost=False)
    progress = Progress(Path("OUT"), frozenset({"alone"}), frozenset({"h1", "h3"}), {})
    text = plan_text(shared, 1, 2, {"h2": 6.0}, progress)
    assert "| small | 2 (1), 1 done | 0 | - | 6 | 6 |" in text  # h2 measured, h1 done
    assert "| big | 1 (0), 1 done | 1 | small | 0 | 0 |" in text
    assert "| alone | 1 (0), 1 done | 0 | - | 0 | 0 |" in text  # the part is done
    assert "Estimated 6 core-s" in text and "about 6 s" in text
    assert "1 of the 3 parts and 3 of the 4 trained tasks are done" in text


def test_a_part_costs_its_summary_and_the_report_reads_every_line_again() -> None:
    rows = 10**6
    listed = [whole.Part(name, (name,), True, rows=rows) for name in ("small", "big", "alone")]
    shared = whole.share_lines(listed, Path("OUT"), plan, by_cost=False)
    after = {"small": postprocess_seconds(2, 0, rows), "big": postprocess_seconds(2, 1, rows)}
    assert after["big"] == after["small"] + ROW_SECONDS * rows  # the copy is read twice
    after["alone"] = postprocess_seconds(1, 0, rows)
    text = plan_text(shared, 1, 1)
    assert f"| small | 2 (0) | 0 | - | {3 + after['small']:,.0f} |" in text
    report = report_seconds(5 * rows)  # five lines, each read once more for the report
    core = 16 + sum(after.values()) + report
    assert f"Estimated {core:,.0f} core-s" in text and f"about {core:,.0f} s" in text
    assert f"{sum(after.values()) + report:,.0f} core-s are the parts' work" in text
    # a part recorded done costs nothing, but the report still reads its lines
    progress = Progress(Path("OUT"), frozenset({"small", "big", "alone"}), frozenset(), {})
    assert f"Estimated {report:,.0f} core-s" in plan_text(shared, 1, 1, None, progress)


def test_a_task_stopped_part_way_costs_what_is_left_after_its_checkpoint(
    tmp_path: Path, training_only: None
) -> None:
    from rl.runs.config import TrainConfig
    from rl.runs.training import train

    part = tmp_path / "released" / "comparison-cartpole"
    config = TrainConfig(
        out=str(part / "cartpole" / "teql"),
        env="cartpole",
        agent="teql",
        reading="paper",
        episodes=4,
        seeds=1,
    )
    train(dataclasses.replace(config, checkpoint_every=1), stop_after_episode=1)
    (part / "cartpole" / "tlr").mkdir()
    (part / "cartpole" / "tlr" / "checkpoint.npz").write_bytes(b"damaged")
    header = "position,name,hash,status,wall_time,error,copied_from\n"
    (part / "index.csv").write_text(
        header + "0,cartpole/teql,h1,interrupted,,,\n1,cartpole/tlr,h2,failed,,boom,\n"
        "2,cartpole/sac,h3,pending,,,\n"
    )
    progress = progress_in(tmp_path)
    assert progress.left == {"h1": 0.75, "h2": 1.0}  # a damaged checkpoint: the whole task
    listed = [whole.Part("released/comparison-cartpole", (), True, trains=(("h1", 8.0),))]
    text = plan_text(listed, 1, 1, None, progress)
    assert "| released/comparison-cartpole | 1 (0), 0 done | 0 | - | 6 | 6 |" in text
    assert "2 stopped part-way cost what is left after their last checkpoint" in text


def test_progress_is_the_parts_and_tasks_recorded_done(tmp_path: Path) -> None:
    rows = {
        name: dict(zip(PART_COLUMNS, (name, status, "1.0", "0", "cmd"), strict=True))
        for name, status in (("p/one", "done"), ("p/two", "failed"), ("p/three", "interrupted"))
    }
    write_parts(tmp_path, rows)
    header = "position,name,hash,status,wall_time,error,copied_from\n"
    (tmp_path / "p" / "two").mkdir(parents=True)
    (tmp_path / "p" / "two" / "index.csv").write_text(
        header + "0,x,h1,done,10.000,,\n1,y,h2,failed,3.000,boom,\n2,z,h3,done,0.100,,/OUT/a\n"
    )
    assert progress_in(tmp_path) == Progress(
        tmp_path, frozenset({"p/one"}), frozenset({"h1", "h3"}), {}
    )
    assert progress_in(tmp_path / "p" / "none") == Progress(
        tmp_path / "p" / "none", frozenset(), frozenset(), {}
    )


def test_plan_with_resume_plans_what_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    out.mkdir()
    done = ("analysis/params", "released/comparison-pendulum")
    write_parts(
        out,
        {
            name: dict(zip(PART_COLUMNS, (name, "done", "1", "0", "c"), strict=True))
            for name in done
        },
    )
    before = sorted(out.rglob("*"))
    argv = [
        "paper",
        "--scale",
        "paper",
        "--workers",
        "2",
        "--parts-at-once",
        "2",
        "--out",
        str(out),
    ]
    assert main([*argv, "--plan", "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "| released/comparison-pendulum | 6 (0), 6 done | 0 | - | 0 | 0 |" in printed
    assert "2 of the 33 parts and 6 of the 79 trained tasks are done" in printed
    assert sorted(out.rglob("*")) == before  # nothing written
    # other settings than the run's: refused in one line
    recorded = {"scale": 0.5, "seeds": 100, "deep_seeds": 100, "readings": ["paper"]}
    (out / "paper.json").write_text(json.dumps(recorded))
    assert main([*argv, "--plan", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "was started with other settings" in err and len(err.strip().splitlines()) == 1


def test_measured_walls_are_the_trained_tasks_recorded_done(tmp_path: Path) -> None:
    header = "position,name,hash,status,wall_time,error,copied_from\n"
    rows = {
        "a": ["0,x,h1,done,10.000,,", "1,y,h2,failed,3.000,boom,", "2,z,h3,done,5.000,,/elsewhere"],
        "b/deeper": ["0,x,h1,done,12.000,,", "1,y,h4,pending,,,"],
    }
    for name, lines in rows.items():
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "index.csv").write_text(header + "\n".join(lines) + "\n")
    # an index.csv without a wall_time column records nothing measured
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "index.csv").write_text("hash,status\nh5,done\n")
    assert measured_walls([tmp_path]) == {"h1": 12.0}


def test_plan_prints_the_parts_and_runs_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "never"
    argv = ["paper", "--scale", "paper", "--workers", "2", "--parts-at-once", "2"]
    assert main([*argv, "--out", str(out), "--plan"]) == 0
    printed = capsys.readouterr().out
    assert "| released/comparison-pendulum | 6 (0) | 0 | - |" in printed
    # a part that copies its one line reads it twice (check, summary): 100 seeds x 10,000
    after = f"{postprocess_seconds(1, 1, 100 * 10_000):,.0f}"
    copies = "| stable/comparison-cartpole | 0 (0) | 1 | stable/sensitivity-cartpole |"
    assert f"{copies} {after} | {after} |" in printed
    # the sensitivity study's base line is the comparison's TEQL line: trained once
    waits = "released/comparison-pendulum, released/sensitivity-tlr-pendulum"
    after = f"{postprocess_seconds(5, 5, 100 * 40_000):,.0f}"
    assert f"| released/sensitivity-pendulum | 0 (0) | 5 | {waits} | {after} | {after} |" in printed
    assert "--parts-at-once 2 with 1 worker(s) per part" in printed
    assert not out.exists()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--measured", "."], "--measured needs --plan."),
        (["--plan", "--measured", "/no/such/dir"], "'--measured' value '/no/such/dir' is not a"),
    ],
)
def test_bad_measured_is_one_line(
    extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["paper", "--scale", "paper", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_tensorboard_gives_each_training_part_a_log_directory_of_its_own(tmp_path: Path) -> None:
    args = whole.build_parser().parse_args(
        ["--episodes-scale", "0.01", "--seeds", "2", "--tensorboard", str(tmp_path / "tb")]
    )
    settings = whole.settings_from(args)
    found = whole.parts(settings, args, tmp_path / "out", lambda argv: [])
    training = [part for part in found if part.training]
    assert training
    for part in training:
        argv = list(part.argv)
        assert argv[argv.index("--tensorboard") + 1] == str(tmp_path / "tb" / part.name)
    assert all("--tensorboard" not in part.argv for part in found if not part.training)
