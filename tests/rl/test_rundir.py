import errno
import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rl.rundir import (
    LOCK_FILE,
    RunDirError,
    RunLock,
    check_writable,
    has_run_files,
    lock_holder,
    make_run_dir,
    refuse_if_locked,
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


def test_lock_of_a_dead_process_is_released_by_the_kernel(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, sys
        from rl.rundir import RunLock
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
    from rl.config import TrainConfig

    values = {"env": "inventory", "agent": "tabular", "seeds": 2, "episodes": 6}
    return TrainConfig(out=str(out), checkpoint_every=2, **{**values, **changes})


def _enospc(*args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_fails_before_any_training(tmp_path, monkeypatch):
    from rl.runner import train

    played = []
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(RunDirError, match="No space left on device"):
        train(_config(tmp_path / "run"), progress=played.append)
    assert played == []
    assert not has_run_files(tmp_path / "run")


def test_failed_write_mid_run_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from rl.checkpoint import load_checkpoint
    from rl.metrics import COLUMNS, read_metrics
    from rl.runner import RunWriteError, train

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
    from rl.config import ConfigError
    from rl.runner import train

    out = tmp_path / "run"
    train(_config(out, episodes=1))
    assert lock_holder(out) is None
    with pytest.raises(ConfigError, match="differs from the checkpoint"):
        train(_config(out, seeds=3), resume=True)
    assert lock_holder(out) is None
    train(_config(out, episodes=2), resume=True)
