"""The whole-paper driver, its report and the run tables under hostile or damaged input.

Links planted in an output directory are never followed (their targets stay
untouched and never reach a report), tables are capped, a killed driver takes
its running part with it, a second driver is refused, and every bad input is
one line with exit status 2.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl.envs.highway_twin import HighwayTwinVector
from rl.experiments import executor, paper_report, part_runs, whole
from rl.experiments.document import to_html
from rl.experiments.executor import MAX_TABLE_BYTES, ExecutorError, read_index
from rl.experiments.parts import PART_COLUMNS, PARTS_FILE, read_parts, write_parts
from rl.reproduce import main
from rl.runs.config import ConfigError, TrainConfig
from rl.runs.metrics import COLUMNS
from rl.runs.rundir import RunDirError, RunLock
from rl.sweep import main as sweep_main

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = ["--episodes-scale", "0.01", "--seeds", "2", "--readings", "released"]
SECRET_TEXT = "SECRET-TEXT-4711"
SECRET_PNG = b"\x89PNG\r\n\x1a\nSECRET-FIGURE-4711"
INDEX_HEADER = "position,name,hash,status,wall_time,error,copied_from\n"


def paper(out: Path, *flags: str) -> int:
    """Run ``python -m rl.reproduce paper`` at a tiny scale on ``out`` in this process."""
    return main(["paper", *SETTINGS, "--out", str(out), *flags])


@pytest.fixture
def started(tmp_path: Path) -> Path:
    """An output directory that a whole-paper run has started (its ``paper.json``)."""
    out = tmp_path / "paper"
    args = whole.build_parser().parse_args(SETTINGS)
    whole._check_manifest(out, whole.settings_from(args), False)
    return out


@pytest.fixture
def secrets(tmp_path: Path) -> dict[Path, bytes]:
    """Files outside the output directory that planted links point at, with their content."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    files = {folder / "secret.png": SECRET_PNG, folder / "secret.txt": SECRET_TEXT.encode()}
    for path, data in files.items():
        path.write_bytes(data)
    return files


def plant(link: Path, target: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)


def assert_untouched(secrets: dict[Path, bytes]) -> None:
    for path, data in secrets.items():
        assert path.read_bytes() == data


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "[Errno" not in err
    return err


# ----------------------------------------------------------------------------- links


def test_linked_figures_and_texts_never_reach_the_report(
    started: Path, secrets: dict[Path, bytes]
) -> None:
    png, txt = secrets
    plant(started / "analysis/rank-pendulum/rank_profile.png", png)
    plant(started / "released/comparison-cartpole/cartpole-curves.png", png)
    plant(started / "analysis/rank-cartpole/summary.txt", txt)
    plant(started / "analysis/params/params.md", txt)
    plant(started / "commands.txt", txt)
    assert paper(started, "--report-only") == 0
    markdown = (started / "report.md").read_text()
    page = (started / "report.html").read_text()
    for text in (markdown, page):
        assert SECRET_TEXT not in text
    assert base64.b64encode(SECRET_PNG).decode() not in page
    assert "data:image/png" not in page
    assert "analysis/params/params.md is not shown" in markdown
    assert_untouched(secrets)


def test_a_figure_replaced_by_a_link_after_the_check_is_not_embedded(
    tmp_path: Path, secrets: dict[Path, bytes]
) -> None:
    png, _ = secrets
    plant(tmp_path / "fig.png", png)
    page = to_html([("img", Path("fig.png"), "a figure")], tmp_path, "t")
    assert "data:image/png" not in page and "Figure fig.png not shown" in page
    assert_untouched(secrets)


def test_resume_never_appends_to_a_linked_commands_file(
    started: Path,
    secrets: dict[Path, bytes],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, txt = secrets
    plant(started / "commands.txt", txt)
    monkeypatch.setattr(whole, "run_parts", lambda *args, **kwargs: 0)  # nothing to train
    assert paper(started, "--resume") == 2
    assert "commands.txt: it is a symbolic link" in one_error_line(capsys)
    assert_untouched(secrets)


def test_linked_run_files_are_refused_not_read(
    started: Path, secrets: dict[Path, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    """paper.json, report.md, a run's metrics.csv and index.csv: each a link, each refused."""
    _, txt = secrets
    part = started / "released/comparison-cartpole"
    part.mkdir(parents=True)
    (part / "index.csv").write_text(INDEX_HEADER + "0,cartpole/teql,h,done,1.0,,\n")
    plant(part / "cartpole/teql/metrics.csv", txt)
    assert paper(started, "--report-only") == 2
    assert "metrics.csv: it is a symbolic link" in one_error_line(capsys)
    shutil.rmtree(part)
    plant(started / "report.md", txt)
    assert paper(started, "--report-only") == 2
    assert "report.md: it is a symbolic link" in one_error_line(capsys)
    (started / "report.md").unlink()
    (started / "paper.json").unlink()
    plant(started / "paper.json", txt)
    assert paper(started, "--report-only") == 2
    assert "paper.json: it is a symbolic link" in one_error_line(capsys)
    plant(started / "linked" / "index.csv", txt)
    with pytest.raises(ExecutorError, match="it is a symbolic link"):
        read_index(started / "linked")
    assert_untouched(secrets)


def test_a_linked_history_never_reaches_an_experiment_summary(
    tmp_path: Path, secrets: dict[Path, bytes], capsys: pytest.CaptureFixture[str]
) -> None:
    _, txt = secrets
    out = tmp_path / "ablation"
    plant(out / "commands.txt", txt)
    args = ["ablation", "--env", "cartpole", "--seeds", "2", "--episodes-scale", "0.01"]
    assert main([*args, "--out", str(out), "--report-only"]) == 2
    assert "commands.txt: it is a symbolic link" in one_error_line(capsys)
    assert not (out / "summary.md").exists()
    assert_untouched(secrets)


# ----------------------------------------------------------------------------- sizes


def test_a_table_above_the_cap_is_refused_unread(
    started: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with (started / PARTS_FILE).open("wb") as handle:
        handle.truncate(MAX_TABLE_BYTES + 1)  # sparse: no disk, and never read
    assert paper(started, "--report-only") == 2
    err = one_error_line(capsys)
    assert f"it has {MAX_TABLE_BYTES + 1} bytes, more than the {MAX_TABLE_BYTES}" in err
    measured = tmp_path / "measured" / "part"
    measured.mkdir(parents=True)
    with (measured / "index.csv").open("wb") as handle:
        handle.truncate(MAX_TABLE_BYTES + 1)
    args = ["paper", *SETTINGS, "--plan", "--measured", str(measured.parent)]
    assert main([*args, "--out", str(tmp_path / "x")]) == 2
    assert "more than the" in one_error_line(capsys)


# ----------------------------------------------------------------------------- processes

#: A driver running one part whose process writes its pid and sleeps.
DRIVER = """
import pathlib, sys
from rl.experiments import part_runs, whole
out = pathlib.Path(sys.argv[1])
sleeper = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)"
def command(part, out, resume):
    return [sys.executable, "-c", sleeper, str(out / "part.pid")]
part_runs.run_parts([whole.Part("released/x", ("x",), True)], out, False, command=command)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; only its exit status is left


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_driver_killed_by_sigkill_takes_its_running_part_with_it(tmp_path: Path) -> None:
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    pid_file, pid = tmp_path / "part.pid", None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (pid_file.is_file() and pid_file.read_text()):
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        driver.kill()
        driver.wait(timeout=10)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.05)
        assert not _alive(pid), "the part outlived its driver"
    finally:
        driver.kill()
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)


#: A part's process: it writes OUT/PART/index.csv and appends PART to OUT/ran.txt.
FAKE = (
    "import pathlib, sys; out, name = pathlib.Path(sys.argv[1]), sys.argv[2]; "
    "(out / name).mkdir(parents=True, exist_ok=True); "
    "(out / name / 'index.csv').write_text(''); "
    "open(out / 'ran.txt', 'a').write(name + '\\n'); print('the table')"
)


def test_a_part_recorded_done_whose_files_are_gone_runs_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    todo = [
        whole.Part("analysis/params", ("params",), False),
        whole.Part("released/x-0", ("x0",), True),
        whole.Part("released/x-1", ("x1",), True),
    ]

    def command(part: whole.Part, out: Path, resume: bool) -> list[str]:
        return [sys.executable, "-c", FAKE, str(out), part.name]

    assert part_runs.run_parts(todo, tmp_path, False, command=command) == 0
    assert (tmp_path / "analysis/params/params.md").read_text() == "the table\n"
    ran = tmp_path / "ran.txt"
    ran.unlink()
    shutil.rmtree(tmp_path / "released/x-0")
    (tmp_path / "analysis/params/params.md").unlink()
    assert part_runs.run_parts(todo, tmp_path, True, command=command) == 0
    assert ran.read_text().split() == ["analysis/params", "released/x-0"]
    err = capsys.readouterr().err
    assert f"rerunning released/x-0 (recorded done): {tmp_path / 'released/x-0'} is missing" in err
    assert "rerunning analysis/params (recorded done)" in err
    assert all(row["status"] == "done" for row in read_parts(tmp_path).values())


def test_a_second_driver_on_one_out_is_refused(
    started: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(whole, "run_parts", lambda *args, **kwargs: pytest.fail("it ran"))
    with RunLock.acquire(started):  # the first driver
        for flag in ("--resume", "--report-only"):
            assert paper(started, flag) == 2
            assert f"is in use by process {os.getpid()}" in one_error_line(capsys)
    assert not (started / "report.md").exists()


def test_an_experiment_on_an_out_in_use_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ablation"
    out.mkdir()
    args = ["ablation", "--env", "cartpole", "--seeds", "1", "--episodes-scale", "0.01"]
    with RunLock.acquire(out):
        assert main([*args, "--out", str(out)]) == 2
    assert f"is in use by process {os.getpid()}" in one_error_line(capsys)


# ----------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"scale": 0}, "scale"),
        ({"scale": -5}, "scale"),
        ({"scale": 1.5}, "scale"),
        ({"seeds": -3}, "seeds"),
        ({"deep_seeds": 0}, "deep_seeds"),
        ({"readings": ["nosuch"]}, "readings"),
        ({"readings": []}, "readings"),
        ({"readings": ["released", "released"]}, "readings"),
        ({"readings": [3]}, "readings"),
        ({"highway_engine": "warp"}, "highway_engine"),
    ],
)
def test_settings_no_run_has_are_refused(
    started: Path, change: dict, key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = started / "paper.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | change))
    assert paper(started, "--report-only") == 2
    err = one_error_line(capsys)
    assert f"{path} is damaged: {key!r} is" in err and "not a value a run has" in err


def test_seeds_past_int64_are_refused_up_front() -> None:
    last = 2**63 - 1
    TrainConfig(env="cartpole", agent="tlr", out="x", seed=last - 1, seeds=2)  # the largest
    with pytest.raises(ConfigError, match=r"'seed' parameter must be <= 2\*\*63 - seeds"):
        TrainConfig(env="cartpole", agent="tlr", out="x", seed=last, seeds=2)
    with pytest.raises(ConfigError, match=r"Got 9223372036854775808 instead"):
        TrainConfig(env="cartpole", agent="tlr", out="x", seed=2**63)
    twin = HighwayTwinVector(1)
    twin.reset(seed=last)
    with pytest.raises(ValueError, match=r"Seeds must be ints in \[0, 2\*\*63 - 1\]"):
        twin.reset(seed=2**63)


def test_a_seed_past_int64_is_one_line_in_the_training_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rl.train import main as train_main

    argv = ["--env", "cartpole", "--agent", "tlr", "--episodes", "1", "--seeds", "2"]
    assert train_main([*argv, "--seed", str(2**63 - 1), "--out", str(tmp_path / "r")]) == 2
    assert "'seed' parameter must be <= 2**63 - seeds" in capsys.readouterr().err


# ----------------------------------------------------------------------------- damaged inputs


def test_damaged_texts_of_a_part_are_shown_not_fatal(started: Path) -> None:
    (started / "analysis/params").mkdir(parents=True)
    (started / "analysis/params/params.md").write_text("")
    (started / "analysis/rank-cartpole").mkdir(parents=True)
    (started / "analysis/rank-cartpole/summary.txt").write_bytes(b"energy \xff\xfe 0.9\n")
    (started / "commands.txt").write_bytes(b"12\tpython -m rl.reproduce paper \xf6\n")
    assert paper(started, "--report-only") == 0
    text = (started / "report.md").read_text()
    assert "energy \ufffd\ufffd 0.9" in text
    assert "12\tpython -m rl.reproduce paper \ufffd" in text
    assert "The architectures this toolkit trains" not in text  # an empty table: no section


@pytest.mark.parametrize(
    ("index_row", "metrics", "message"),
    [
        ("0,cartpole,h,done,1.0,,", None, "the run directory 'cartpole' is not ENV/LINE"),
        ("0,cartpole/teql,h,done,1.0,,", "1,1,2.0,3,nan\n", "metrics.csv is damaged"),
        ("0,cartpole/teql,h,done,soon,,", None, "the wall time 'soon' is not a number"),
    ],
)
def test_a_damaged_run_table_is_one_line(
    started: Path,
    index_row: str,
    metrics: str | None,
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    part = started / "released/comparison-cartpole"
    part.mkdir(parents=True)
    (part / "index.csv").write_text(INDEX_HEADER + index_row + "\n")
    if metrics is not None:
        (part / "cartpole/teql").mkdir(parents=True)
        (part / "cartpole/teql/metrics.csv").write_text(",".join(COLUMNS) + "\n" + metrics)
    name = "released/comparison-cartpole"
    row = dict(zip(PART_COLUMNS, (name, "done", "1.0", "0", "c"), strict=True))
    write_parts(started, {name: row})
    assert paper(started, "--report-only") == 2
    assert message in one_error_line(capsys)


def test_a_wall_time_that_is_not_a_number_in_the_table_of_parts_is_one_line(
    started: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = dict(zip(PART_COLUMNS, ("analysis/params", "done", "fast", "0", "c"), strict=True))
    write_parts(started, {"analysis/params": row})
    assert paper(started, "--report-only") == 2
    assert f"Cannot read {started / PARTS_FILE}: the wall time 'fast'" in one_error_line(capsys)


def test_a_read_only_out_is_one_line_naming_the_file(
    started: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def read_only(path: Path, text: str) -> None:
        temporary = Path(path).parent / f".{Path(path).name}.k2_x9q1.tmp"
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(temporary))

    monkeypatch.setattr(paper_report, "atomic_write_text", read_only)
    assert paper(started, "--report-only") == 2
    err = one_error_line(capsys)
    assert err == (
        f"error: Cannot use {started / 'report.md'}: Read-only file system; choose a directory "
        "on a writable file system.\n"
    )


def test_an_out_whose_name_is_too_long_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / ("a" * 300))
    args = ["ablation", "--env", "cartpole", "--seeds", "1", "--episodes-scale", "0.01"]
    assert main([*args, "--out", out]) == 2
    assert "File name too long; choose a shorter path." in one_error_line(capsys)
    grid = tmp_path / "grid.toml"
    grid.write_text('[base]\nenv = "cartpole"\nagent = "tlr"\nepisodes = 2\n')
    assert sweep_main([str(grid), "--out", out, "--no-progress"]) == 2
    assert "File name too long; choose a shorter path." in one_error_line(capsys)
    assert paper(Path(out)) == 2
    assert "File name too long; choose a shorter path." in one_error_line(capsys)


# ----------------------------------------------------------------------------- more hostile input


@pytest.mark.parametrize(
    ("part", "status"),
    [("../../elsewhere", "done"), ("/etc", "done"), ("released/x", "<img src=x onerror=alert(1)>")],
)
def test_a_row_of_parts_no_run_has_is_refused(
    started: Path, part: str, status: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_parts(
        started, {part: dict(zip(PART_COLUMNS, (part, status, "1", "0", "c"), strict=True))}
    )
    assert paper(started, "--report-only") == 2
    assert f"the row of part {part!r}" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("position,name,status,wall_time\n0,a/b,done,3\n", "no column 'hash'"),
        (INDEX_HEADER + "0,a/b,h,done,soon,,\n", "the wall time 'soon' is not a number"),
    ],
)
def test_a_damaged_measured_index_is_one_line(
    tmp_path: Path, table: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "measured/part").mkdir(parents=True)
    (tmp_path / "measured/part/index.csv").write_text(table)
    args = ["paper", *SETTINGS, "--plan", "--measured", str(tmp_path / "measured")]
    assert main([*args, "--out", str(tmp_path / "x")]) == 2
    assert message in one_error_line(capsys)


def test_a_table_of_too_many_short_rows_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "MAX_TABLE_ROWS", 10)
    (tmp_path / "index.csv").write_text(INDEX_HEADER + "0,a/b,h,done,1,,\n" * 10)
    assert len(read_index(tmp_path)) == 10
    (tmp_path / "index.csv").write_text(INDEX_HEADER + "0,a/b,h,done,1,,\n" * 11)
    with pytest.raises(ExecutorError, match="more than the 10 rows a CSV index may have"):
        read_index(tmp_path)


def test_a_linked_part_directory_is_never_written_or_read(
    started: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere-dir"
    (elsewhere / "comparison-cartpole/cartpole/teql").mkdir(parents=True)
    (elsewhere / "comparison-cartpole/index.csv").write_text(
        INDEX_HEADER + "0,cartpole/teql,h,done,1.0,,\n"
    )
    metrics = elsewhere / "comparison-cartpole/cartpole/teql/metrics.csv"
    metrics.write_text(",".join(COLUMNS) + "\n0,10,1.0,3,4711.0,0.1\n")
    before = sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*"))
    (started / "released").symlink_to(elsewhere)
    part = whole.Part("released/comparison-cartpole", ("x",), True)
    with pytest.raises(RunDirError, match="released: it is a symbolic link"):
        part_runs.run_parts([part], started, False, command=lambda *a: pytest.fail("it ran"))
    assert paper(started, "--report-only") == 2
    assert "released: it is a symbolic link" in one_error_line(capsys)
    assert sorted(p.relative_to(elsewhere) for p in elsewhere.rglob("*")) == before
    # a run directory that is a link: its metrics are not read either
    (started / "released").unlink()
    (started / "released/comparison-cartpole/cartpole").mkdir(parents=True)
    (started / "released/comparison-cartpole/index.csv").write_text(
        INDEX_HEADER + "0,cartpole/teql,h,done,1.0,,\n"
    )
    (started / "released/comparison-cartpole/cartpole/teql").symlink_to(metrics.parent)
    assert paper(started, "--report-only") == 2
    assert "cartpole/teql: it is a symbolic link" in one_error_line(capsys)


def test_text_read_from_files_never_becomes_markup(started: Path) -> None:
    (started / "analysis/rank-cartpole").mkdir(parents=True)
    (started / "analysis/rank-cartpole/summary.txt").write_text(
        "energy\n```\n<img src=x onerror=alert(1)>\n```\n"
    )
    (started / "analysis/params").mkdir(parents=True)
    (started / "analysis/params/params.md").write_text(
        "| a | b |\n|---|---|\n| <script> | ![x](http://example.org/p.png) |\n"
    )
    assert paper(started, "--report-only") == 0
    markdown = (started / "report.md").read_text()
    assert "````\nenergy\n```\n<img src=x onerror=alert(1)>\n```\n````" in markdown
    assert "| &lt;script> | !\\[x\\](http://example.org/p.png) |" in markdown
    assert "<script" not in markdown and "![x]" not in markdown
    page = (started / "report.html").read_text()
    assert "<img src=x" not in page and "<script" not in page


def test_a_command_with_backticks_stays_one_code_span_in_a_summary(tmp_path: Path) -> None:
    out = tmp_path / "ablation"
    out.mkdir()
    (out / "commands.txt").write_text("3\tpython -m rl.reproduce `<b>x</b>`\nsoon\t<b>y</b>\n")
    args = ["ablation", "--env", "cartpole", "--seeds", "2", "--episodes-scale", "0.01"]
    assert main([*args, "--out", str(out), "--report-only"]) == 0
    summary = (out / "summary.md").read_text()
    assert "- `` python -m rl.reproduce `<b>x</b>` `` (3 s)" in summary
    assert "<b>y</b>" not in summary  # a line whose wall time is not a number is left out


def test_an_experiment_never_trains_or_reads_through_a_linked_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere-dir"
    elsewhere.mkdir()
    out = tmp_path / "ablation"
    out.mkdir()
    (out / "cartpole").symlink_to(elsewhere)
    args = ["ablation", "--env", "cartpole", "--seeds", "1", "--episodes-scale", "0.01"]
    for flags in ([], ["--report-only"]):
        assert main([*args, "--out", str(out), *flags]) == 2
        assert "cartpole: it is a symbolic link" in one_error_line(capsys)
    assert list(elsewhere.iterdir()) == []
