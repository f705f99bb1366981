import os

import numpy as np
import pytest

from rl.checkpoint import (
    Checkpoint,
    atomic_write_bytes,
    atomic_write_text,
    load_checkpoint,
    save_checkpoint,
)


def _checkpoint(episode: int) -> Checkpoint:
    return Checkpoint(
        episode=episode,
        agent_state={"q": np.arange(6.0).reshape(2, 3), "rng": [{"state": 1}]},
        wall_time=1.5,
        metrics_bytes=123,
        config={"env": "cartpole"},
    )


def test_roundtrip(tmp_path):
    path = tmp_path / "checkpoint.pkl"
    save_checkpoint(path, _checkpoint(7))
    loaded = load_checkpoint(path)
    assert loaded.episode == 7
    assert loaded.wall_time == 1.5
    assert loaded.metrics_bytes == 123
    assert loaded.config == {"env": "cartpole"}
    np.testing.assert_array_equal(loaded.agent_state["q"], np.arange(6.0).reshape(2, 3))


def test_failing_write_leaves_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pkl"
    save_checkpoint(path, _checkpoint(1))
    before = path.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, _checkpoint(2))
    assert path.read_bytes() == before
    assert load_checkpoint(path).episode == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pkl"]


def test_unpicklable_state_leaves_previous_file_intact(tmp_path):
    path = tmp_path / "checkpoint.pkl"
    save_checkpoint(path, _checkpoint(1))
    bad = Checkpoint(2, {"f": lambda: None}, 0.0, 0, {})
    with pytest.raises(Exception):  # noqa: B017 - pickling error type varies
        save_checkpoint(path, bad)
    assert load_checkpoint(path).episode == 1


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


def test_rejects_foreign_pickle(tmp_path):
    import pickle

    path = tmp_path / "other.pkl"
    path.write_bytes(pickle.dumps({"something": 1}))
    with pytest.raises(ValueError, match="not a checkpoint"):
        load_checkpoint(path)
