import errno
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rl.runs.rundir import (
    LOCK_FILE,
    RunDirError,
    RunLock,
    atomic_write_bytes,
    atomic_write_text,
    check_writable,
    has_run_files,
    lock_holder,
    make_run_dir,
    read_run_file,
    refuse_if_locked,
    remove_stale_temporaries,
)


def test_lock_records_holder_and_refuses_a_second_holder(tmp_path):
    with RunLock.acquire(tmp_path) as lock:
        assert lock.held
        holder = lock_holder(tmp_path)
        assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
        with pytest.raises(RunDirError, match=f"in use by process {os.getpid()} on host"):
            RunLock.acquire(tmp_path)
        with pytest.raises(RunDirError, match="in use"):
            refuse_if_locked(tmp_path)
    assert not lock.held
    assert lock_holder(tmp_path) is None
    refuse_if_locked(tmp_path)
    RunLock.acquire(tmp_path).release()  # free again


def test_readers_share_the_lock_and_keep_writers_out(tmp_path):
    with RunLock.acquire(tmp_path, shared=True), RunLock.acquire(tmp_path, shared=True):
        assert lock_holder(tmp_path)["pid"] == os.getpid()
        with pytest.raises(RunDirError, match=f"in use by process {os.getpid()} on host"):
            RunLock.acquire(tmp_path)
        with pytest.raises(RunDirError, match="in use"):
            refuse_if_locked(tmp_path)
    with RunLock.acquire(tmp_path):
        with pytest.raises(RunDirError, match="in use"):
            RunLock.acquire(tmp_path, shared=True)
    assert lock_holder(tmp_path) is None
    RunLock.acquire(tmp_path).release()  # free again


def test_lock_of_a_dead_process_is_released_by_the_kernel(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, sys
        from rl.runs.rundir import RunLock
        RunLock.acquire({str(tmp_path)!r})
        print("locked", flush=True)
        sys.stdin.readline()
        os._exit(0)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError, match=f"process {child.pid} on host"):
            RunLock.acquire(tmp_path)
        child.kill()
        child.wait(timeout=10)
    finally:
        child.kill()
    stale = json.loads((tmp_path / LOCK_FILE).read_text())
    assert stale["pid"] == child.pid  # stale content, but no live lock
    RunLock.acquire(tmp_path).release()


def test_has_run_files_ignores_the_lock(tmp_path):
    assert not has_run_files(tmp_path / "missing")
    assert not has_run_files(tmp_path)
    RunLock.acquire(tmp_path).release()
    assert not has_run_files(tmp_path)
    (tmp_path / "metrics.csv").write_text("x")
    assert has_run_files(tmp_path)


def test_check_writable_leaves_nothing_behind(tmp_path):
    check_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_full_disk_fails_with_a_clear_message(tmp_path, monkeypatch):
    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(RunDirError, match="Cannot write to the run directory .*No space left"):
        check_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_read_only_directory_fails_with_a_clear_message(tmp_path, monkeypatch):
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(RunDirError, match="Read-only file system"):
        RunLock.acquire(tmp_path)
    with pytest.raises(RunDirError, match="Read-only file system"):
        check_writable(tmp_path)


def test_make_run_dir_names_the_os_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunDirError, match="Cannot write to the run directory"):
        make_run_dir(tmp_path / "file" / "run")


def _config(out, **changes):
    from rl.runs.config import TrainConfig

    values = {"env": "inventory", "agent": "tabular", "seeds": 2, "episodes": 6}
    return TrainConfig(out=str(out), checkpoint_every=2, **{**values, **changes})


def _enospc(*args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_fails_before_any_training(tmp_path, monkeypatch):
    from rl.runs.training import train

    played = []
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(RunDirError, match="No space left on device"):
        train(_config(tmp_path / "run"), progress=played.append)
    assert played == []
    assert not has_run_files(tmp_path / "run")


def test_failed_write_mid_run_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from rl.runs.checkpoint import load_checkpoint
    from rl.runs.metrics import COLUMNS, read_metrics
    from rl.runs.training import RunWriteError, train

    real_fsync = os.fsync

    def fail_from_episode_3(log):
        if log.episode == 3:
            monkeypatch.setattr(os, "fsync", _enospc)

    out = tmp_path / "run"
    with pytest.raises(RunWriteError, match="episode 4.*No space left.*last good checkpoint"):
        train(_config(out), progress=fail_from_episode_3)
    assert load_checkpoint(out / "checkpoint.npz").episode == 2
    assert sorted(p.name for p in out.iterdir()) == [
        ".lock",
        "checkpoint.npz",
        "config.json",
        "metrics.csv",
    ]
    monkeypatch.setattr(os, "fsync", real_fsync)
    train(_config(out), resume=True)
    train(_config(tmp_path / "straight"))
    resumed, straight = (
        read_metrics(out / "metrics.csv"),
        read_metrics(tmp_path / "straight" / "metrics.csv"),
    )
    for column in COLUMNS[:-1]:
        np.testing.assert_array_equal(resumed[column], straight[column])


def test_lock_is_released_after_a_run_and_after_a_refusal(tmp_path):
    from rl.runs.config import ConfigError
    from rl.runs.training import train

    out = tmp_path / "run"
    train(_config(out, episodes=1))
    assert lock_holder(out) is None
    with pytest.raises(ConfigError, match="differs from the checkpoint"):
        train(_config(out, seeds=3), resume=True)
    assert lock_holder(out) is None
    train(_config(out, episodes=2), resume=True)


# ----------------------------------------------------------------------------- links and FIFOs


def _outside(tmp_path, size=28_000):
    target = tmp_path / "elsewhere.bin"
    target.write_bytes(bytes(range(256)) * (size // 256))
    return target, target.read_bytes()


def test_a_linked_lock_is_refused_and_its_target_untouched(tmp_path):
    target, content = _outside(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / ".lock").symlink_to(target)
    with pytest.raises(RunDirError, match=r"\.lock: it is a symbolic link"):
        RunLock.acquire(run_dir)
    assert target.read_bytes() == content
    assert lock_holder(run_dir) is None


def test_a_fifo_lock_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / ".lock")
    with pytest.raises(RunDirError, match="not a regular file"):
        RunLock.acquire(tmp_path)
    assert lock_holder(tmp_path) is None


def test_a_hostile_holder_record_reads_as_unknown(tmp_path):
    with RunLock.acquire(tmp_path):
        (tmp_path / ".lock").write_text("[" * 4000)  # past the JSON parser's recursion limit
        assert lock_holder(tmp_path) == {"pid": "unknown", "host": "unknown"}


@pytest.mark.parametrize("command", ["train", "resume", "sweep", "convert"])
def test_every_command_refuses_a_linked_lock_with_exit_2(tmp_path, capsys, command):
    from rl.runs.legacy_checkpoint import main as checkpoint_main
    from rl.sweep import main as sweep_main
    from rl.train import main as train_main

    target, content = _outside(tmp_path)
    run_dir = tmp_path / "run"
    flags = ["--no-plot", "--no-progress"]
    tiny = ["--env", "inventory", "--agent", "tabular", "--episodes", "1", "--seeds", "1"]
    if command == "resume":
        assert train_main([*tiny, "--out", str(run_dir), *flags]) == 0
        (run_dir / ".lock").unlink()
    run_dir.mkdir(exist_ok=True)
    (run_dir / ".lock").symlink_to(target)
    if command == "train":
        code = train_main(
            ["--env", "inventory", "--agent", "tabular", "--out", str(run_dir), *flags]
        )
    elif command == "resume":
        code = train_main(["--resume", str(run_dir), *flags])
    elif command == "sweep":
        grid = tmp_path / "grid.toml"
        grid.write_text('[base]\nenv = "inventory"\nagent = "tabular"\nepisodes = 1\n')
        code = sweep_main([str(grid), "--out", str(run_dir), "--no-progress"])
    else:
        (run_dir / "checkpoint.pkl").write_bytes(b"\x80\x04N.")
        code = checkpoint_main(["convert", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2
    assert "symbolic link" in err and "Traceback" not in err, err
    assert target.read_bytes() == content
    assert (run_dir / ".lock").is_symlink()


def test_interrupted_write_removes_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "config.json"
    atomic_write_text(path, "old")

    def interrupted_fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted_fsync)
    with pytest.raises(KeyboardInterrupt):
        atomic_write_bytes(path, b"new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_atomic_writes_refuse_a_link_and_follow_the_umask(tmp_path):
    target, content = _outside(tmp_path)
    (tmp_path / "config.json").symlink_to(target)
    with pytest.raises(RunDirError, match="config.json: it is a symbolic link"):
        atomic_write_text(tmp_path / "config.json", "{}")
    assert target.read_bytes() == content
    previous = os.umask(0o027)
    try:
        atomic_write_text(tmp_path / "index.csv", "a\n")
    finally:
        os.umask(previous)
    assert (tmp_path / "index.csv").stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "config.json",
        "elsewhere.bin",
        "index.csv",
    ]


def test_stale_temporaries_of_the_run_are_removed(tmp_path):
    names = [".checkpoint.npz.k2j4.tmp", ".config.json.x.tmp", ".probe.abc.tmp"]
    for name in names:
        (tmp_path / name).write_bytes(b"\0" * 100)
    (tmp_path / ".other.tmp").write_text("not ours")
    (tmp_path / "metrics.csv").write_text("kept")
    removed = remove_stale_temporaries(tmp_path, ["checkpoint.npz", "config.json"])
    assert sorted(p.name for p in removed) == sorted(names)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".other.tmp", "metrics.csv"]


def test_read_run_file_refuses_links_fifos_and_large_files(tmp_path):
    (tmp_path / "data").write_bytes(b"12345")
    assert read_run_file(tmp_path / "data", 5) == b"12345"
    with pytest.raises(RunDirError, match="has 5 bytes, more than the 4 allowed"):
        read_run_file(tmp_path / "data", 4)
    (tmp_path / "link").symlink_to("/dev/zero")
    with pytest.raises(RunDirError, match="symbolic link"):
        read_run_file(tmp_path / "link", 10)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(RunDirError, match="not a regular file"):
        read_run_file(tmp_path / "fifo", 10)
