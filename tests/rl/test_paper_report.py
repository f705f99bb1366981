"""``python -m rl.reproduce paper``: verdict rule, report assembly, bad input, the whole run."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from rl.experiments import claims, paper_report, part_runs, whole
from rl.experiments.claims import FAILS, HOLDS, UNSURE, Check, combine, decide, evaluate
from rl.experiments.document import to_html, to_markdown
from rl.experiments.paper import experiment
from rl.experiments.parts import PARTS_FILE, read_parts, write_parts
from rl.experiments.report import LineRuns, LineStats
from rl.reproduce import main, plan_tasks

PNG = b"\x89PNG\r\n\x1a\n"  # a PNG signature: the report embeds the bytes without reading them

SECTIONS = (
    "## Claims and verdicts",
    "## Decision rule",
    "## The claims one by one",
    "## The rank claim (analysis.rank)",
    "## The parameter table (analysis.params)",
    "## Cost per part",
    "## How this report was made",
)


def synthetic(part: str, env: str, key: str, level: float, spread: float, seeds: int) -> LineStats:
    """A line whose seeds climb linearly to ``level`` plus seeded noise of std ``spread``."""
    line = next(ln for ln in experiment(part).lines(env) if ln.key == key)
    episodes = np.arange(10, 1001, 10)
    noise = np.random.default_rng(seeds).normal(0.0, spread, size=(seeds, 1))
    greedy = np.minimum(episodes / 500.0, 1.0) * level + noise + 0.0 * episodes
    runs = LineRuns(line, env, episodes, greedy, tuple(range(seeds)))
    scores = greedy[:, episodes >= 801].mean(axis=1)  # what line_stats computes, without SciPy
    nan = math.nan
    return LineStats(runs, 801, 1000, scores, scores, scores.mean(), scores.std(), *(nan,) * 6)


def test_decide_follows_the_documented_rule() -> None:
    assert decide(1.0, 0.5, 1.5, 0.0, "above") == HOLDS
    assert decide(-1.0, -1.5, -0.5, 0.0, "above") == FAILS
    assert decide(0.1, -0.5, 0.5, 0.0, "above") == UNSURE
    assert decide(2.0, 1.5, 2.5, 5.0, "below") == HOLDS
    assert decide(7.0, 6.0, 8.0, 5.0, "below") == FAILS
    assert decide(1.0, -2.0, 3.0, 5.0, "within") == HOLDS
    assert decide(9.0, 6.0, 12.0, 5.0, "within") == FAILS
    assert decide(4.0, 2.0, 6.0, 5.0, "within") == UNSURE
    assert decide(math.nan, 0.0, 1.0, 0.0, "above") == UNSURE
    assert combine([HOLDS, HOLDS]) == HOLDS
    assert combine([HOLDS, UNSURE]) == UNSURE
    assert combine([UNSURE, FAILS, HOLDS]) == FAILS
    assert combine([]) == UNSURE


def test_a_difference_check_holds_fails_or_cannot_tell() -> None:
    table = {
        ("comparison", "cartpole", "teql"): synthetic("comparison", "cartpole", "teql", 90, 2, 10),
        ("comparison", "cartpole", "tlr"): synthetic("comparison", "cartpole", "tlr", 60, 2, 10),
        ("comparison", "cartpole", "dqn"): synthetic("comparison", "cartpole", "dqn", 60, 20, 10),
        ("comparison", "cartpole", "sac"): synthetic("comparison", "cartpole", "sac", 95, 2, 2),
    }
    check = claims._pair("comparison", "cartpole", "teql", "tlr")
    verdict = evaluate(check, table.get)
    assert verdict.verdict == HOLDS
    assert verdict.estimate == pytest.approx(30.0, abs=3.0)
    assert verdict.low < verdict.estimate < verdict.high
    assert (
        evaluate(claims._pair("comparison", "cartpole", "tlr", "teql"), table.get).verdict == FAILS
    )
    # a 20-point spread over 10 seeds hides a 0-point difference
    assert evaluate(claims._pair("comparison", "cartpole", "dqn", "tlr"), table.get).verdict == (
        UNSURE
    )
    few = evaluate(claims._pair("comparison", "cartpole", "sac", "tlr"), table.get)
    assert few.verdict == UNSURE and "2 seeds" in few.note
    missing = evaluate(claims._pair("comparison", "cartpole", "teql", "lora-vi"), table.get)
    assert missing.verdict == UNSURE and "missing" in missing.note


def test_std_ratio_and_reach_checks() -> None:
    steady = synthetic("ablation", "cartpole", "teql-lam", 88, 0.5, 8)
    noisy = synthetic("ablation", "cartpole", "teql-lam0", 88, 10.0, 8)
    table = {
        ("ablation", "cartpole", "teql-lam"): steady,
        ("ablation", "cartpole", "teql-lam0"): noisy,
    }
    ratio = Check(
        "r",
        "ratio",
        (("ablation", "cartpole", "teql-lam0"), ("ablation", "cartpole", "teql-lam")),
        "final",
        1.0,
    )
    assert evaluate(ratio, table.get).verdict == HOLDS
    # 90% of 88 is reached at episode 450; the trailing mean of five evaluations lags 20-30
    assert 450 < claims.per_seed(steady, "reach", level=0.9 * 88).mean() < 490


def test_the_report_has_every_section_in_both_renderings(tmp_path: Path) -> None:
    (tmp_path / "paper.json").write_text(
        json.dumps(
            {
                "scale": 0.01,
                "seeds": 2,
                "deep_seeds": 2,
                "readings": ["released"],
                "highway_engine": "twin",
            }
        )
    )
    rank = tmp_path / "analysis" / "rank-pendulum"
    rank.mkdir(parents=True)
    (rank / "rank_profile.csv").write_text("rank,energy\n10,0.95\n20,0.99\n")
    (rank / "rank_profile.png").write_bytes(PNG)  # embedded as is: any bytes do
    blocks = paper_report.build_report(tmp_path, "python -m rl.reproduce paper --seeds 2")
    text = to_markdown(blocks)
    for section in SECTIONS:
        assert section in text
    assert "scale 0.01 of the paper's episodes, 2 seeds" in text
    assert "cannot tell" in text and "compiled twin" in text
    page = to_html(blocks, tmp_path, "report")
    assert page.count("data:image/png;base64,") == 1
    assert "<h2>Claims and verdicts</h2>" in page and "<script" not in page
    # every claim of CLAIMS, plus the rank and two parameter rows, is in the first table
    first = text.split("## Decision rule")[0]
    assert first.count(" | “") == len(claims.CLAIMS) + 3


def test_the_printed_parameter_table_against_its_formulas() -> None:
    disagree = {
        (env, algo)
        for env, algo, _, printed, formula in paper_report.PRINTED_PARAMS
        if printed != formula
    }
    assert disagree == {("CartPole", "DQN"), ("CartPole", "SAC"), ("Pendulum", "SAC")}


@pytest.mark.parametrize(
    "args,message",
    [
        (["--episodes-scale", "2"], "(0, 1]"),
        (["--readings", "paper,bogus"], "--readings"),
        (["--scale", "paper", "--seeds", "3"], "--scale paper sets"),
        (["--seeds", "0"], "seed counts"),
        (["--parts-at-once", "0"], "'--parts-at-once' value must be an int >= 1"),
        (["--workers", "-1"], "'--workers' value must be an int >= 1. Got -1"),
        (["--parts-at-once", "2", "--backend", "ray"], "needs --backend local"),
        (["--parts-at-once", "3", "--workers", "2"], "--parts-at-once 3 needs as many workers"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["paper", *args, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_used_directory_needs_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / whole.MANIFEST).write_text("{}")
    assert main(["paper", "--seeds", "2", "--out", str(tmp_path)]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, problem",
    [
        ("{not json", "not JSON"),
        ('["scale"]', "not a JSON object"),
        ('{"scale": 1, "seeds": "100", "deep_seeds": 100, "readings": []}', "'seeds'"),
        ('{"scale": true, "seeds": 100, "deep_seeds": 100, "readings": []}', "'scale'"),
        (b"\xff\xfe", "not JSON"),
    ],
)
@pytest.mark.parametrize("mode", [["--resume"], ["--report-only"], ["--plan", "--resume"]])
def test_a_damaged_settings_file_is_one_line(
    text: str | bytes,
    problem: str,
    mode: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = tmp_path / whole.MANIFEST
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["paper", "--seeds", "2", "--out", str(tmp_path), *mode]) == 2
    err = capsys.readouterr().err
    assert f"{path} is damaged" in err and problem in err and err.count("\n") == 1


def test_later_readings_train_only_lines_whose_settings_differ() -> None:
    assert whole.new_lines("comparison", "cartpole", "released", []) is None
    stable = whole.new_lines("comparison", "cartpole", "stable", ["released", "paper"])
    assert stable == ["teql"]


def test_a_configuration_two_parts_share_is_trained_by_one_and_copied_by_the_other() -> None:
    out = Path("OUT")
    listed = [whole.Part(f"released/{n}", (n,), True) for n in ("small", "big", "alone")]
    tasks = {"small": [("h1", 1.0), ("h2", 2.0)], "big": [("h2", 2.0), ("h3", 9.0)]}

    def plan(argv):
        return tasks.get(argv[0], [("h4", 4.0)])

    in_order = whole.share_lines(listed, out, plan, by_cost=False)
    assert [p.after for p in in_order] == [(), ("released/small",), ()]
    assert in_order[1].reuse == (str(out / "released/small"),)
    # the owner may copy too: a run resumed side by side has other owners
    assert in_order[0].reuse == (str(out / "released/big"),)
    assert in_order[2].reuse == ()
    assert [p.cost for p in in_order] == [3.0, 9.0, 4.0]
    # side by side the largest part owns it, so that it starts at once
    by_cost = whole.share_lines(listed, out, plan, by_cost=True)
    assert [p.after for p in by_cost] == [("released/big",), (), ()]
    assert [p.cost for p in by_cost] == [1.0, 11.0, 4.0]


def test_the_cost_of_a_line_two_parts_share_is_counted_once(tmp_path: Path) -> None:
    header = "position,name,hash,status,wall_time,error,copied_from\n"
    owner, copier = tmp_path / "released/owner", tmp_path / "released/copier"
    for directory, rows in (
        (owner, ["0,a,h1,done,360.000,,"]),
        (copier, [f"0,b,h1,done,360.000,,{owner / 'a'}", "1,c,h2,done,720.000,,"]),
    ):
        directory.mkdir(parents=True)
        (directory / "index.csv").write_text(header + "\n".join(rows) + "\n")
    write_parts(
        tmp_path,
        {
            name: {"part": name, "status": "done", "wall_s": "1", "code": "0", "command": ""}
            for name in ("released/owner", "released/copier")
        },
    )
    table = next(block for block in paper_report.cost_section(tmp_path) if block[0] == "table")
    hours = {row[0]: row[3] for row in table[2]}
    assert hours == {"released/owner": "0.100", "released/copier": "0.200", "**total**": "0.300"}


def test_a_part_copies_only_from_parts_that_have_started(tmp_path: Path) -> None:
    (tmp_path / "released/started").mkdir(parents=True)
    reuse = (str(tmp_path / "released/started"), str(tmp_path / "released/later"))
    part = whole.Part("released/x", ("x",), True, reuse=reuse)
    assert part_runs.command_of(part, tmp_path, False)[3:] == ["x", "--reuse", reuse[0]]


def test_every_shared_line_of_the_paper_is_copied_from_one_part(tmp_path: Path) -> None:
    """The real plan: within a reading, shared lines are copied; readings never share."""
    args = whole.build_parser().parse_args(["--episodes-scale", "0.01", "--seeds", "2"])
    found = whole.parts(whole.settings_from(args), args, tmp_path, plan_tasks)
    after = {part.name: part.after for part in found if part.after}
    assert after["released/comparison-pendulum"] == ("released/ablation-pendulum",)
    assert after["released/sensitivity-tlr-cartpole"] == ("released/sensitivity-cartpole",)
    assert after["stable/sensitivity-tlr-pendulum"] == ("stable/sensitivity-pendulum",)
    assert all(o.split("/")[0] == p.split("/")[0] for p, owners in after.items() for o in owners)
    unique: dict[str, float] = {}
    listed = 0
    for part in found:
        if part.training:
            tasks = plan_tasks(part.argv)
            unique.update(tasks)
            listed += len(tasks)
    # each configuration is counted once, in the part that trains it
    assert sum(p.cost for p in found if p.training) == pytest.approx(sum(unique.values()))
    assert len(unique) < listed


#: A stand-in for a part's process, called with LOG OUT PART PAUSE KILLED ARGV...: makes
#: the part's index.csv, sleeps PAUSE seconds, logs ARGV with its start and end times,
#: and exits 130 the first time it runs as the part KILLED.
FAKE_PART = """
import json, pathlib, sys, time
log, out, name, pause, killed = pathlib.Path(sys.argv[1]), *sys.argv[2:6]
begin = time.monotonic()
(pathlib.Path(out) / name).mkdir(parents=True, exist_ok=True)
(pathlib.Path(out) / name / "index.csv").write_text("")
time.sleep(float(pause))
marker = pathlib.Path(out) / "killed-once"
code = 0
if name == killed and not marker.exists():
    marker.write_text("")
    code = 130
with log.open("a") as handle:
    handle.write(json.dumps([sys.argv[6:], begin, time.monotonic()]) + "\\n")
sys.exit(code)
"""


def fake_parts(tmp_path: Path, pauses: list[float], killed: str = ""):
    """Training parts x0, x1, ... (cost = pause) run by `FAKE_PART`; return them and the log."""
    log = tmp_path / "calls.jsonl"
    todo = [
        whole.Part(f"released/x-{i}", (f"x{i}",), True, cost=pause)
        for i, pause in enumerate(pauses)
    ]
    pause_of = {part.name: str(pause) for part, pause in zip(todo, pauses, strict=True)}

    def command(part: whole.Part, out: Path, resume: bool) -> list[str]:
        argv = part_runs.command_of(part, out, resume)[3:]  # what follows python -m rl.reproduce
        fixed = [str(log), str(out), part.name, pause_of[part.name], killed]
        return [sys.executable, "-c", FAKE_PART, *fixed, *argv]

    return todo, command, log


def calls_of(log: Path) -> list[tuple[list[str], float, float]]:
    return [tuple(json.loads(line)) for line in log.read_text().splitlines()]


def test_a_killed_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    todo, command, log = fake_parts(tmp_path, [0.0, 0.0, 0.0], killed="released/x-1")
    assert part_runs.run_parts(todo, tmp_path, False, command=command) == 130
    assert [argv for argv, *_ in calls_of(log)] == [["x0"], ["x1"]]
    assert {k: r["status"] for k, r in read_parts(tmp_path).items()} == {
        "released/x-0": "done",
        "released/x-1": "interrupted",
    }
    log.unlink()
    assert part_runs.run_parts(todo, tmp_path, True, command=command) == 0
    # the finished part is skipped, the killed one resumes with its own --resume
    assert [argv for argv, *_ in calls_of(log)] == [["x1", "--resume"], ["x2"]]
    assert all(row["status"] == "done" for row in read_parts(tmp_path).values())


def test_parts_side_by_side_run_together_longest_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    todo, command, log = fake_parts(tmp_path, [0.2, 1.5, 0.2, 0.2])
    assert part_runs.run_parts(todo, tmp_path, False, at_once=2, command=command) == 0
    started = [line.split()[-1] for line in capsys.readouterr().err.splitlines()]
    assert started == ["released/x-1", "released/x-0", "released/x-2", "released/x-3"]
    times = {argv[0]: (begin, end) for argv, begin, end in calls_of(log)}
    # while x1 runs, the short parts follow one another on the other slot
    assert all(times["x1"][0] < times[x][0] < times["x1"][1] for x in ("x2", "x3"))
    assert times["x2"][1] <= times["x3"][0]
    assert all(row["status"] == "done" for row in read_parts(tmp_path).values())


def test_a_part_that_copies_lines_waits_for_their_owner(tmp_path: Path) -> None:
    todo, command, log = fake_parts(tmp_path, [1.0, 0.1, 0.1])
    todo[2] = todo[2]._replace(after=("released/x-0",))
    assert part_runs.run_parts(todo, tmp_path, False, at_once=2, command=command) == 0
    times = {argv[0]: (begin, end) for argv, begin, end in calls_of(log)}
    # x1 ended long before x0, but x2 starts only once x0 has ended
    assert times["x1"][1] < times["x0"][1] <= times["x2"][0]


def test_a_part_interrupted_side_by_side_stops_the_others(tmp_path: Path) -> None:
    todo, command, log = fake_parts(tmp_path, [60.0, 0.5, 0.1], killed="released/x-1")
    start = time.monotonic()
    assert part_runs.run_parts(todo, tmp_path, False, at_once=2, command=command) == 130
    assert time.monotonic() - start < 30  # x0 was stopped, not waited for
    rows = read_parts(tmp_path)
    assert {k: r["status"] for k, r in rows.items()} == {
        "released/x-0": "interrupted",
        "released/x-1": "interrupted",
    }
    assert rows["released/x-0"]["code"] == str(-signal.SIGTERM)  # x2 never started


@pytest.mark.slow
def test_tiny_scale_writes_a_report_with_every_section(tmp_path: Path) -> None:
    """All 13 parts of one reading at 1% of the episodes, 2 seeds; then a resume trains nothing."""
    out = tmp_path / "paper"
    args = ["paper", "--episodes-scale", "0.01", "--seeds", "2", "--readings", "released"]
    assert main([*args, "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    for section in SECTIONS:
        assert section in text
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") >= 10
    parts = read_parts(out)
    assert all(row["status"] == "done" for row in parts.values())
    # a second run with --resume trains nothing and rewrites the same verdicts
    before = text.split("## Decision rule")[0]
    assert main([*args, "--out", str(out), "--resume"]) == 0
    assert read_parts(out) == parts
    assert (out / "report.md").read_text().split("## Decision rule")[0] == before


@pytest.mark.slow
def test_sigterm_stops_parts_side_by_side_and_resume_finishes(tmp_path: Path) -> None:
    """The real command, two parts at once: SIGTERM -> 130, parts interrupted; --resume ends."""
    out = tmp_path / "paper"
    args = ["paper", "--episodes-scale", "0.02", "--seeds", "2", "--readings", "released"]
    args += ["--parts-at-once", "2", "--workers", "2", "--out", str(out)]
    root = Path(__file__).resolve().parents[2]
    driver = subprocess.Popen(
        [sys.executable, "-m", "rl.reproduce", *args],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    # wait until a training part has written its index (its tasks are under way), then stop
    while time.monotonic() < deadline and driver.poll() is None:
        if any(p.stat().st_size > 200 for p in out.glob("released/*/index.csv")):
            break
        time.sleep(0.1)
    driver.send_signal(signal.SIGTERM)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 130, err
    statuses = {row["status"] for row in read_parts(out).values()}
    assert "interrupted" in statuses and "failed" not in statuses
    assert main([*args, "--resume"]) == 0
    assert all(row["status"] == "done" for row in read_parts(out).values())
    assert len(read_parts(out)) == 13


RANK_PROFILE = "analysis/rank-cartpole/rank_profile.csv"
BOTH, REPORT = ("--resume", "--report-only"), ("--report-only",)  # --resume would train first


@pytest.mark.parametrize(
    ("name", "content", "message", "flags"),
    [
        (PARTS_FILE, b"part,status\nreleased/x,d\xf6ne\n",
         "it is not UTF-8 text (byte 0xf6 at offset 24)", BOTH),
        (PARTS_FILE, b"name,state\nreleased/x,done\n",
         "it is not a CSV table of parts (no column 'part')", BOTH),
        (RANK_PROFILE, b"rank,energy\n10,0.9\xf6\n",
         "it is not UTF-8 text (byte 0xf6 at offset 18)", REPORT),
        (RANK_PROFILE, b"rank,mass\n10,0.95\n",
         "it is not a CSV rank profile (no column 'energy')", REPORT),
        (RANK_PROFILE, b"rank,energy\nten,0.95\n", "a rank or an energy is not a number", REPORT),
    ],
)  # fmt: skip
def test_a_damaged_file_of_a_started_run_is_one_line(
    tmp_path: Path, capsys, name, content, message, flags
) -> None:
    out = tmp_path / "paper"
    args = ["paper", "--episodes-scale", "0.01", "--seeds", "2", "--out", str(out)]
    parser_args = whole.build_parser().parse_args(args[1:])
    whole._check_manifest(out, whole.settings_from(parser_args), False)  # a started run
    path = out / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    for flag in flags:
        assert main([*args, flag]) == 2
        error = capsys.readouterr().err
        assert error.startswith(f"error: Cannot read {path}: {message}")
        assert error.count("\n") == 1
