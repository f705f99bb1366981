import errno
import io
import json
import os
import pickle
import shlex
import zipfile

import numpy as np
import pytest

from rl.checkpoint import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointError,
    atomic_write_bytes,
    atomic_write_text,
    checkpoint_bytes,
    convert_legacy,
    load_checkpoint,
    main,
    save_checkpoint,
)


def _state():
    rng = np.random.default_rng(7)
    return {
        "q": np.arange(6.0).reshape(2, 3),
        "rng": [rng.bit_generator.state],  # PCG64: ints above 2**64
        "epsilon": np.float32(0.25),
        "gamma": np.float64(0.9),
        "done": np.bool_(True),
        "steps": np.int64(12),
        "counts": np.zeros((0, 3), dtype=np.int32),
        "names": np.array(["a", "bc"]),
        "optimizer": {  # torch-style: int keys, tuples
            "state": {0: {"step": np.array(3.0, dtype=np.float32)}, 1: {}},
            "param_groups": [{"params": [0, 1], "betas": (0.9, 0.999), "lr": 1e-3}],
        },
        "$odd": None,
        "loss": float("nan"),
        "blob": b"\x00\xff",
    }


def _checkpoint(episode: int, state=None) -> Checkpoint:
    return Checkpoint(
        episode=episode,
        agent_state=_state() if state is None else state,
        wall_time=1.5,
        metrics_bytes=123,
        config={"env": "cartpole", "agent_params": {"bins": [1, 2]}},
    )


def _assert_tree_equal(a, b):
    assert type(a) is type(b), (a, b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _assert_tree_equal(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_tree_equal(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def test_roundtrip_keeps_types_keys_and_values(tmp_path):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _checkpoint(7))
    loaded = load_checkpoint(path)
    assert (loaded.episode, loaded.wall_time, loaded.metrics_bytes) == (7, 1.5, 123)
    assert loaded.format == CHECKPOINT_FORMAT
    assert loaded.config == {"env": "cartpole", "agent_params": {"bins": [1, 2]}}
    _assert_tree_equal(loaded.agent_state, _state())
    rng = np.random.default_rng(0)
    rng.bit_generator.state = loaded.agent_state["rng"][0]
    assert rng.random() == np.random.default_rng(7).random()


def test_file_is_data_only_npz(tmp_path):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _checkpoint(1))
    with np.load(path, allow_pickle=False) as archive:
        names = set(archive.files)
        document = json.loads(str(archive["__document__"]))
    assert {"__document__", "__sha256__", "agent_state/q"} <= names
    assert document["kind"] == "rl.checkpoint" and document["format"] == CHECKPOINT_FORMAT
    assert sorted(names - {"__document__", "__sha256__"}) == document["arrays"]


def test_torch_tensors_are_stored_as_arrays(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _checkpoint(1, {"w": torch.arange(3.0)}))
    np.testing.assert_array_equal(load_checkpoint(path).agent_state["w"], [0.0, 1.0, 2.0])


@pytest.mark.parametrize("state", [{"f": lambda: None}, {"o": np.array([object()])}, {"s": {1, 2}}])
def test_non_data_state_is_refused_and_previous_file_kept(tmp_path, state):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _checkpoint(1))
    with pytest.raises(TypeError, match="Cannot store agent_state/"):
        save_checkpoint(path, _checkpoint(2, state))
    assert load_checkpoint(path).episode == 1


def test_failing_write_leaves_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.npz"
    save_checkpoint(path, _checkpoint(1))
    before = path.read_bytes()

    def disk_full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        save_checkpoint(path, _checkpoint(2))
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.npz"]


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


def _refused(path, match):
    before = path.read_bytes() if path.exists() else None
    with pytest.raises(CheckpointError, match=match) as caught:
        load_checkpoint(path)
    message = str(caught.value)
    assert "\n" not in message and str(path.parent) in message
    assert (path.read_bytes() if path.exists() else None) == before
    return message


@pytest.mark.parametrize("keep", [0, 10, 100, 0.5, 0.9, -1])
def test_truncated_file_is_refused(tmp_path, keep):
    path = tmp_path / "checkpoint.npz"
    data = checkpoint_bytes(_checkpoint(3))
    cut = keep if isinstance(keep, int) and keep >= 0 else int(len(data) * keep) % len(data)
    path.write_bytes(data[: cut if keep != -1 else len(data) - 1])
    _refused(path, "truncated|damaged|not a checkpoint")


def test_every_flipped_bit_region_is_refused(tmp_path):
    data = checkpoint_bytes(_checkpoint(3))
    path = tmp_path / "checkpoint.npz"
    rng = np.random.default_rng(0)
    positions = sorted(set(rng.integers(0, len(data), 40).tolist()) | {len(data) // 2})
    for position in positions:
        flipped = bytearray(data)
        flipped[position] ^= 1 << int(rng.integers(8))
        path.write_bytes(bytes(flipped))
        try:
            loaded = load_checkpoint(path)
        except CheckpointError as error:
            assert "\n" not in str(error)
            continue
        # A flip in zip metadata that nothing reads (timestamps, extra fields) is harmless.
        _assert_tree_equal(loaded.agent_state, _state())


def _rewrite(data: bytes, change) -> bytes:
    with np.load(io.BytesIO(data), allow_pickle=False) as archive:
        entries = {name: archive[name] for name in archive.files}
    change(entries)
    buffer = io.BytesIO()
    np.savez(buffer, **entries)
    return buffer.getvalue()


def test_consistently_edited_payload_fails_its_digest(tmp_path):
    path = tmp_path / "checkpoint.npz"

    def edit(entries):
        entries["agent_state/q"] = entries["agent_state/q"] + 1.0

    path.write_bytes(_rewrite(checkpoint_bytes(_checkpoint(3)), edit))
    _refused(path, "SHA-256")


def test_newer_format_is_refused(tmp_path):
    path = tmp_path / "checkpoint.npz"

    def newer(entries):
        body = json.loads(str(entries["__document__"]))
        body["format"] = CHECKPOINT_FORMAT + 1
        entries["__document__"] = np.array(json.dumps(body))

    path.write_bytes(_rewrite(checkpoint_bytes(_checkpoint(3)), newer))
    _refused(path, "newer version")


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        ('"x": ' + "[" * 100_000 + "]" * 100_000, "its document is nested deeper than 64 levels"),
        ('"x": ' + "[" * 65 + "]" * 65, "its document is nested deeper than 64 levels"),
        ('"x": ' + "7" * 5000, "its document holds an integer longer than 4300 digits"),
    ],
)
def test_deep_or_huge_documents_are_refused_in_one_line(tmp_path, tail, reason):
    path = tmp_path / "checkpoint.npz"

    def deepen(entries):
        document = str(entries["__document__"])
        entries["__document__"] = np.array(document[:-1] + ", " + tail + "}")

    path.write_bytes(_rewrite(checkpoint_bytes(_checkpoint(3)), deepen))
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(path)
    assert str(refused.value) == f"Refusing checkpoint {path}: {reason}."


@pytest.mark.parametrize(
    "content",
    [
        b"hello, not a checkpoint",
        b"",
        "npz",
        "zip",
    ],
)
def test_foreign_files_are_refused(tmp_path, content):
    path = tmp_path / "checkpoint.npz"
    if content == "npz":
        np.savez(path, weights=np.ones(3))
    elif content == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("readme.txt", "hi")
    else:
        path.write_bytes(content)
    _refused(path, "not a checkpoint of this project|truncated|damaged")


def test_missing_file_is_refused(tmp_path):
    _refused(tmp_path / "checkpoint.npz", "does not exist")


class _Planted:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_pickles_are_never_loaded(tmp_path):
    marker = tmp_path / "marker"
    legacy = tmp_path / "checkpoint.pkl"
    legacy.write_bytes(pickle.dumps({"format": 1, "payload": _Planted(str(marker))}))
    message = _refused(tmp_path / "checkpoint.npz", "old pickled checkpoint")
    assert f"python -m rl.checkpoint convert {tmp_path}" in message
    _refused(legacy, "old pickled checkpoint")
    disguised = tmp_path / "checkpoint.npz"  # a pickle under the new name
    disguised.write_bytes(legacy.read_bytes())
    _refused(disguised, "old pickled checkpoint")
    with open(disguised, "wb") as handle:  # an .npz whose document is a pickled object
        np.savez(handle, __document__=np.array([_Planted(str(marker))], dtype=object))
    _refused(disguised, "pickled Python objects, which are never loaded")
    assert not marker.exists()


def test_convert_legacy_pickle(tmp_path, capsys):
    old = {
        "format": 1,
        "episode": 4,
        "agent_state": {"q": np.ones(2), "rng": np.random.default_rng(1).bit_generator.state},
        "wall_time": 2.0,
        "metrics_bytes": 55,
        "config": {"env": "cartpole"},
    }
    (tmp_path / "checkpoint.pkl").write_bytes(pickle.dumps(old))
    assert main(["convert", str(tmp_path)]) == 0
    assert "Unpickling" in capsys.readouterr().err
    loaded = load_checkpoint(tmp_path / "checkpoint.npz")
    assert (loaded.episode, loaded.metrics_bytes, loaded.config) == (4, 55, {"env": "cartpole"})
    np.testing.assert_array_equal(loaded.agent_state["q"], np.ones(2))
    assert not (tmp_path / "checkpoint.pkl").exists()
    with pytest.raises(CheckpointError, match="Nothing to convert"):
        convert_legacy(tmp_path)
    assert main(["convert", str(tmp_path)]) == 2


@pytest.mark.parametrize(
    "agent", ["random", "tabular", "teql", "teql-released", "tlr", "lora-vi", "dqn", "sac"]
)
def test_every_agent_resumes_bitwise_through_the_npz_checkpoint(tmp_path, agent, request):
    """Stop after episode 3, resume from checkpoint.npz to 4: the numbers equal a straight run."""
    if agent in ("dqn", "sac"):  # gradient steps from episode 2: Adam states (int keys) saved
        request.getfixturevalue("torch_one_thread")
    from rl.config import TrainConfig
    from rl.metrics import COLUMNS, read_metrics
    from rl.runner import train

    env = "lowrank" if agent == "lora-vi" else "inventory"
    deep = {"learning_starts": 150, "batch_size": 4, "hidden": 4}
    params = deep if agent in ("dqn", "sac") else {}

    def config(out):
        return TrainConfig(
            env=env, agent=agent, out=str(out), seeds=2, episodes=4, eval_every=2,
            checkpoint_every=10, agent_params=params,
        )  # fmt: skip

    train(config(tmp_path / "stopped"), stop_after_episode=3)
    assert load_checkpoint(tmp_path / "stopped" / "checkpoint.npz").episode == 3
    train(config(tmp_path / "stopped"), resume=True)
    train(config(tmp_path / "straight"))
    resumed = read_metrics(tmp_path / "stopped" / "metrics.csv")
    straight = read_metrics(tmp_path / "straight" / "metrics.csv")
    for column in COLUMNS[:-1]:  # all but wall_time
        np.testing.assert_array_equal(resumed[column], straight[column], err_msg=column)


def test_convert_of_a_missing_pickle_says_so_without_unpickling(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    assert main(["convert", str(tmp_path / "run"), str(tmp_path / "absent")]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'run' / 'checkpoint.pkl'} does not exist; nothing to convert.\n"
        f"error: {tmp_path / 'absent' / 'checkpoint.pkl'} does not exist; nothing to convert.\n"
    )
    assert not (tmp_path / "absent").exists()


def test_convert_hint_is_shell_quoted(tmp_path):
    run_dir = tmp_path / "my run (1)"
    run_dir.mkdir()
    (run_dir / "checkpoint.pkl").write_bytes(pickle.dumps({"format": 1}))
    message = _refused(run_dir / "checkpoint.npz", "old pickled checkpoint")
    command = message.rpartition("convert it once with: ")[2]
    assert shlex.split(command) == ["python", "-m", "rl.checkpoint", "convert", str(run_dir)]
