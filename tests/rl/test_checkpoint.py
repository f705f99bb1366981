import errno
import io
import json
import os
import pickle
import re
import shlex
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from rl.runs.checkpoint import (
    CHECKPOINT_FORMAT,
    Checkpoint,
    CheckpointError,
    check_checkpoint_against_metrics,
    checkpoint_bytes,
    load_checkpoint,
    payload_digest,
    restore_agent,
    save_checkpoint,
)
from rl.runs.legacy_checkpoint import convert_legacy, main


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
    assert f"python -m rl.runs.legacy_checkpoint convert {tmp_path}" in message
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
    from rl.runs.config import TrainConfig
    from rl.runs.metrics import COLUMNS, read_metrics
    from rl.runs.training import train

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
    assert shlex.split(command) == [
        "python",
        "-m",
        "rl.runs.legacy_checkpoint",
        "convert",
        str(run_dir),
    ]


# ----------------------------------------------------------------------------- tampered files


def _tamper(path, edit):
    """Rewrite the checkpoint ``path`` after ``edit(body, arrays)``, recomputing its SHA-256."""
    with np.load(path, allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    body = json.loads(str(arrays.pop("__document__")[()]))
    del arrays["__sha256__"]
    edit(body, arrays)
    body["arrays"] = sorted(arrays)
    document = json.dumps(body)
    digest = payload_digest(document, arrays)
    np.savez(path, __document__=np.array(document), __sha256__=np.array(digest), **arrays)


def _snapshot(run_dir):
    """Every file of ``run_dir`` but the lock, whose holder record each run rewrites."""
    files = sorted(run_dir.iterdir())
    return {p.name: p.read_bytes() for p in files if p.is_file() and p.name != ".lock"}


@pytest.fixture(scope="module")
def teql_run(tmp_path_factory):
    from rl.runs.config import TrainConfig
    from rl.runs.training import train

    out = tmp_path_factory.mktemp("teql") / "run"
    config = TrainConfig(
        out=str(out),
        env="cartpole",
        agent="teql",
        reading="paper",
        episodes=4,
        seeds=2,
        checkpoint_every=1,
        agent_params={"visit_storage": "sparse"},
    )
    train(config, stop_after_episode=2)
    return config


def _copy_run(config, tmp_path):
    import dataclasses
    import shutil

    out = tmp_path / "run"
    shutil.copytree(config.out, out)
    return dataclasses.replace(config, out=str(out)), out


def _set(name, value):
    def edit(body, arrays):
        arrays[name] = value(arrays[name])

    return edit


def _duplicate_visit_key(body, arrays):
    for name in ("keys", "counts", "delta"):
        entry = arrays[f"agent_state/visits/{name}"]
        arrays[f"agent_state/visits/{name}"] = np.concatenate([entry, entry[:1]])


def _drop_steps(body, arrays):
    del body["agent_state"]["steps"], arrays["agent_state/steps"]


def _huge_rng_state(body, arrays):
    body["agent_state"]["rngs"][0]["state"]["state"] = 2**200


def _rngs_not_a_list(body, arrays):
    body["agent_state"]["rngs"] = "PCG64"


FACTOR = "agent_state/factors/2"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set(FACTOR, lambda f: f[:, :, :-1].copy()), r"factors/2 must be .*\(2, 20, 10\)"),
        (_set(FACTOR, lambda f: f.astype(np.float32)), "factors/2 must be .* float64"),
        (_set(FACTOR, lambda f: np.where(f > 0, np.nan, f)), "agent_state/factors/2 holds NaN"),
        (_set(FACTOR, lambda f: f * np.inf), "agent_state/factors/2 holds NaN or infinite"),
        (_set(FACTOR, lambda f: f + 1j), "agent_state/factors/2 is not a real number"),
        (_set("agent_state/steps", lambda s: s - 10**6), r"steps must lie in \[0, None\]"),
        (_set("agent_state/epsilon", lambda e: e + 2.0), r"epsilon must lie in \[0.0, 1.0\]"),
        (_set("agent_state/visits/keys", lambda k: k + 10**9), "visits/keys must lie in"),
        (_duplicate_visit_key, "visits/keys holds the same"),
        (_drop_steps, "lacks the entry 'steps'"),
        (_huge_rng_state, "does not fit this run"),
        (_rngs_not_a_list, "rngs must be a list of 2 generator states"),
    ],
)
def test_tampered_agent_state_with_a_valid_hash_is_refused(teql_run, tmp_path, edit, message):
    from rl.runs.training import build

    config, out = _copy_run(teql_run, tmp_path)
    path = out / "checkpoint.npz"
    _tamper(path, edit)
    checkpoint = load_checkpoint(path)  # the recomputed hash passes: it detects damage only
    runner, _ = build(config)
    try:
        with pytest.raises(CheckpointError, match=message) as caught:
            restore_agent(runner.agent, checkpoint, path)
    finally:
        runner.close()
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def _resume_exit(out, capsys, *flags):
    from rl.train import main as train_main

    code = train_main(["--resume", str(out), "--no-plot", "--no-progress", *flags])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set(FACTOR, lambda f: f + 1j), "factors/2 is not a real number"),
        (_duplicate_visit_key, "visits/keys holds the same"),
        (
            lambda body, arrays: body.update(episode=4),
            r"8 rows .* expected after its header, found 4 rows ending at episode 2",
        ),
        (lambda body, arrays: body.update(episode=150), "episode 150 of a run of 4 episodes"),
        (lambda body, arrays: body.update(metrics_bytes=5), "expected after its header, found 0"),
        (lambda body, arrays: body.update(metrics_bytes=10**9), "has only .* bytes"),
    ],
)
def test_resume_of_a_tampered_checkpoint_exits_2_and_changes_nothing(
    teql_run, tmp_path, capsys, edit, message
):
    _, out = _copy_run(teql_run, tmp_path)
    _tamper(out / "checkpoint.npz", edit)
    before = _snapshot(out)
    code, err = _resume_exit(out, capsys)
    assert code == 2
    assert re.search(message, err), err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert _snapshot(out) == before


def test_checkpoint_against_metrics_accepts_the_real_pair(teql_run):
    from pathlib import Path

    checkpoint = load_checkpoint(Path(teql_run.out) / "checkpoint.npz")
    assert checkpoint.episode == 2
    check_checkpoint_against_metrics(checkpoint, Path(teql_run.out) / "metrics.csv", 2)
    with pytest.raises(CheckpointError, match="6 rows \\(3 per episode\\) expected"):
        check_checkpoint_against_metrics(checkpoint, Path(teql_run.out) / "metrics.csv", 3)


# ----------------------------------------------------------------------------- bounded reading

_BOUNDED_LOADER = """
import resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
from rl.runs.checkpoint import CheckpointError, load_checkpoint
for path in sys.argv[1:]:
    start = time.perf_counter()
    try:
        load_checkpoint(path)
        print("loaded", path)
    except CheckpointError as error:
        print(f"{{time.perf_counter() - start:.3f}}", error)
with open("/proc/self/status") as status:  # VmHWM: peak RSS of this image (ru_maxrss spans exec)
    print("peak_kb", next(line for line in status if line.startswith("VmHWM")).split()[1])
"""


def _load_bounded(paths, limit=768 * 2**20, timeout=60):
    """Load each path in a child limited to ``limit`` bytes of address space and ``timeout`` s."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDED_LOADER.format(limit=limit), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *lines, peak = done.stdout.splitlines()
    return lines, int(peak.split()[1])


def _deflated_zeros(path, name, declared_shape, dtype="<f8"):
    """A zip whose member is an .npy header and ``prod(shape)`` zero items, deflated (a bomb)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": dtype, "fortran_order": False, "shape": declared_shape}
    )
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            chunk = bytes(2**24)
            left = int(np.prod(declared_shape)) * np.dtype(dtype).itemsize
            while left > 0:
                member.write(chunk[: min(left, len(chunk))])
                left -= len(chunk)


def _stored_lying_header(path):
    """A stored member whose header declares 2**40 float64 items over 8 bytes of data."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (2**40,)}
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("agent_state/q.npy", header.getvalue() + bytes(8))


def test_hostile_files_are_refused_within_bounded_memory_and_time(tmp_path):
    bomb = tmp_path / "bomb" / "checkpoint.npz"
    bomb.parent.mkdir()
    _deflated_zeros(bomb, "agent_state/q", (2**27,))  # 1 GiB of zeros in about 1 MB
    lying = tmp_path / "lying" / "checkpoint.npz"
    lying.parent.mkdir()
    _stored_lying_header(lying)
    fifo = tmp_path / "fifo" / "checkpoint.npz"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    zero = tmp_path / "zero" / "checkpoint.npz"
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    assert bomb.stat().st_size < 2 * 2**20
    lines, peak_kb = _load_bounded([bomb, lying, fifo, zero], timeout=60)
    expected = [
        "member 'agent_state/q.npy' is compressed",
        r"entry agent_state/q declares shape \(1099511627776,\) of float64",
        "is not a regular file",
        "is a symbolic link",
    ]
    assert len(lines) == len(expected)
    for line, pattern in zip(lines, expected, strict=True):
        seconds, message = line.split(" ", 1)
        assert re.search(pattern, message), message
        assert float(seconds) < 1.0
    assert peak_kb < 400 * 1024  # the interpreter and NumPy; the 1 GiB is never inflated


def test_convert_refuses_a_linked_pickle_or_destination(tmp_path):
    elsewhere = tmp_path / "elsewhere.pkl"
    elsewhere.write_bytes(pickle.dumps({"format": 1}))
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint.pkl").symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="checkpoint.pkl: it is a symbolic link"):
        convert_legacy(run)
    (run / "checkpoint.pkl").unlink()
    (run / "checkpoint.pkl").write_bytes(elsewhere.read_bytes())
    (run / "checkpoint.npz").symlink_to(tmp_path / "missing.npz")
    with pytest.raises(CheckpointError, match="checkpoint.npz: it is a symbolic link"):
        convert_legacy(run)
    assert not (tmp_path / "missing.npz").exists()
