"""Checkpoints that hold data, not code, written atomically.

A checkpoint is taken only at an episode boundary. Environments are reset at
the start of every episode with a seed derived from the replica's environment
seed and the episode index (see `rl.runs.training`), so they need no saved state: the
agent's ``state_dict()``, the episode index, the cumulative wall time and the
length of ``metrics.csv`` are enough to continue bitwise-identically.

File format (``CHECKPOINT_FORMAT`` 2, ``RUN_DIR/checkpoint.npz``)
-------------------------------------------------------------------
An uncompressed NumPy ``.npz`` archive, read back with
``numpy.load(..., allow_pickle=False)``, so loading a checkpoint never runs
code. Its entries:

``__document__``
    A 0-d unicode array holding one JSON document: ``kind`` (always
    ``"rl.checkpoint"``, the module's name when the format was fixed), ``format``,
    ``episode``, ``wall_time``, ``metrics_bytes``, ``config``, ``agent_state``, in
    a run with ``keep_best`` also ``best`` (`rl.runs.training.BestStates`: each replica's
    best-evaluated state; a checkpoint without it loads with ``best`` None), and
    ``arrays`` (the names of the array entries).
``__sha256__``
    A 0-d unicode array, the hex SHA-256 of the payload: the UTF-8 JSON
    document, then for every array entry in sorted name order its name, dtype,
    shape and raw bytes (see `payload_digest`).
every other entry
    One array of the agent state (or configuration), named by its path in the
    nested state, for example ``agent_state/visits/counts``.

Flattening of nested state (`encode_tree` and `decode_tree`): dicts with string
keys, lists, strings, ``None``, bools, Python ints (of any size: PCG64 states
hold ints above 2**64) and floats (NaN and infinities included) are stored in
the JSON document as they are. Everything else is a one-key tagged object:

==================  ============================================  ==================
value               JSON                                          loads back as
==================  ============================================  ==================
ndarray             ``{"$array": name}``                          the same ndarray
NumPy scalar        ``{"$scalar": name}`` (a 0-d array entry)     the same NumPy scalar
PyTorch tensor      ``{"$array": name}``                          ndarray (the agent
                                                                  converts it back)
tuple               ``{"$tuple": [...]}``                         tuple
bytes               ``{"$bytes": base64}``                        bytes
dict, other keys    ``{"$dict": [[key, value], ...]}``            dict, keys restored
==================  ============================================  ==================

A dict whose keys are not all strings, or that has a key starting with ``$``,
uses the ``$dict`` form, so optimizer states keyed by integer parameter ids
keep their int keys. Arrays of Python objects are refused when saving.

What is refused when loading (`CheckpointError`, one line naming the file and
the reason; the file is never changed): a file that is truncated or damaged
(the archive does not parse or a member fails its CRC), whose SHA-256 does not
match, that is not a checkpoint of this project (foreign), of a newer format,
or an old pickled ``checkpoint.pkl`` (format 1), which is never unpickled:
``python -m rl.runs.legacy_checkpoint convert RUN_DIR`` converts one's own runs once.

What the hash protects. The SHA-256 has no key: it detects damage (a copy cut
short, a flipped bit), not tampering, since anyone can edit a checkpoint and
recompute it with `payload_digest`. What passes it is therefore checked like
any input before use: `restore_agent` refuses complex or non-finite arrays and
lets the agent's ``load_state_dict`` check shapes, dtypes and ranges against
its configuration, and `check_checkpoint_against_metrics` checks the episode
against ``metrics.csv``.

Reading within bounds. Only a regular file is read (``O_NOFOLLOW |
O_NONBLOCK`` then ``fstat``: a link, FIFO or device is refused unread), at most
`MAX_CHECKPOINT_BYTES`. Every member must be stored, not compressed (the
project writes them so), so nothing inflates beyond the file's size; each
member's ``.npy`` header is read first and its declared shape and dtype must
account for exactly the bytes the member holds before the array is allocated.

Every write goes to a temporary file in the destination's directory, is
flushed to disk, and then replaces the destination with ``os.replace`` (atomic
on POSIX and Windows within one file system). If anything fails before the
rename, the previous file is left intact and the temporary file is removed.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import math
import os
import re
import shlex
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rl.runs.documents import DocumentError, parse_json
from rl.runs.rundir import (
    RunDirError,
    atomic_write_bytes,
    read_run_file,
)

CHECKPOINT_FORMAT = 2
"""Version of the checkpoint layout; bumped when `Checkpoint` or the file changes incompatibly.

Format 1 was a pickle (``checkpoint.pkl``); format 2 is the ``.npz`` described above.
"""

CHECKPOINT_KIND = "rl.checkpoint"
"""Value of the document's ``kind`` field, which tells our checkpoints from other ``.npz`` files."""

BEST_ENTRIES = ("agent_state", "episodes", "greedy_returns")
"""The entries of a checkpoint's ``best`` tree (`rl.runs.training.BestStates`)."""

CHECKPOINT_NAME = "checkpoint.npz"
"""File name of the checkpoint in a run directory."""

LEGACY_CHECKPOINT_NAME = "checkpoint.pkl"
"""File name of the pickled checkpoints of format 1 (refused; see `convert_legacy`)."""

_DOCUMENT = "__document__"
_DIGEST = "__sha256__"
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTOCOL_2_PLUS = b"\x80"


MAX_CHECKPOINT_BYTES = 8 * 2**30
"""Largest checkpoint file (8 GiB) that `load_checkpoint` reads unless given another limit."""


class CheckpointError(ValueError):
    """A checkpoint is refused; the message is the one line shown to the user."""


@dataclass(frozen=True)
class Checkpoint:
    """The state of a run at the end of a training episode.

    Attributes
    ----------
    episode : int
        Number of training episodes completed (the next one is ``episode + 1``).
    agent_state : dict
        What the agent's ``state_dict()`` returned.
    wall_time : float
        Seconds of training spent so far, summed over every resumed segment.
    metrics_bytes : int
        Byte length of ``metrics.csv`` after the rows of ``episode`` were written.
    config : dict
        The effective configuration of the run, to check that a resume matches.
    best : dict, optional
        A run with ``keep_best``: each replica's best-evaluated state
        (`rl.runs.training.BestStates`); None otherwise.
    format : int
        `CHECKPOINT_FORMAT` at the time of writing.
    """

    episode: int
    agent_state: dict[str, Any]
    wall_time: float
    metrics_bytes: int
    config: dict[str, Any]
    best: dict[str, Any] | None = None
    format: int = CHECKPOINT_FORMAT


# ----------------------------------------------------------------------------- flattening


class _Arrays:
    """Collects the arrays of a tree under unique, readable entry names."""

    def __init__(self) -> None:
        self.entries: dict[str, np.ndarray] = {}

    def add(self, path: Sequence[str], array: np.ndarray) -> str:
        if array.dtype.hasobject:
            raise TypeError(
                f"Cannot store {'/'.join(path)} in a checkpoint: arrays of Python objects "
                "would need pickle."
            )
        base = re.sub(r"[^A-Za-z0-9_./-]+", "_", "/".join(path)).strip("/") or "array"
        name, k = base, 1
        while name in self.entries or name in (_DOCUMENT, _DIGEST):
            k += 1
            name = f"{base}~{k}"
        self.entries[name] = array
        return name


def encode_tree(value: Any, arrays: _Arrays, path: tuple[str, ...] = ()) -> Any:
    """Return the JSON form of ``value``, moving its arrays into ``arrays``.

    See the module docstring for the tags. Raises TypeError naming the path of
    a value that has no data-only representation.
    """
    if isinstance(value, np.generic):  # before int and float: np.float64 is a float
        return {"$scalar": arrays.add(path, np.asarray(value))}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, np.ndarray):
        return {"$array": arrays.add(path, value)}
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a PyTorch tensor
        return {"$array": arrays.add(path, value.detach().cpu().numpy())}
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, tuple):
        return {"$tuple": [encode_tree(v, arrays, (*path, str(i))) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode_tree(v, arrays, (*path, str(i))) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        plain = all(isinstance(k, str) and not k.startswith("$") for k in value)
        if plain:
            return {k: encode_tree(v, arrays, (*path, k)) for k, v in value.items()}
        return {
            "$dict": [
                [encode_tree(k, arrays, (*path, "key")), encode_tree(v, arrays, (*path, str(k)))]
                for k, v in value.items()
            ]
        }
    where = "/".join(path) or "the state"
    raise TypeError(
        f"Cannot store {where} in a checkpoint: {type(value).__name__} is not data "
        "(use arrays, numbers, strings, lists, tuples and dicts)."
    )


def decode_tree(value: Any, arrays: Mapping[str, np.ndarray]) -> Any:
    """Inverse of `encode_tree`; raises ValueError on an unknown tag or a missing array."""
    if isinstance(value, list):
        return [decode_tree(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (tag, content), *_ = value.items()
        if tag.startswith("$"):
            if tag == "$array":
                return arrays[content]
            if tag == "$scalar":
                return arrays[content][()]
            if tag == "$tuple":
                return tuple(decode_tree(v, arrays) for v in content)
            if tag == "$bytes":
                return base64.b64decode(content)
            if tag == "$dict":
                return {
                    _hashable(decode_tree(k, arrays)): decode_tree(v, arrays) for k, v in content
                }
            raise ValueError(f"unknown tag {tag!r}")
    return {k: decode_tree(v, arrays) for k, v in value.items()}


def _hashable(key: Any) -> Any:
    return tuple(map(_hashable, key)) if isinstance(key, list) else key


def payload_digest(document: str, arrays: Mapping[str, np.ndarray]) -> str:
    """Return the hex SHA-256 of a checkpoint's payload (document, then arrays by name)."""
    digest = hashlib.sha256(document.encode("utf-8"))
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"\0{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


# ----------------------------------------------------------------------------- save and load


def checkpoint_bytes(checkpoint: Checkpoint) -> bytes:
    """Return the ``.npz`` file content of ``checkpoint`` (see the module docstring).

    Raises
    ------
    TypeError
        If the agent state or configuration holds something that is not data.
    """
    arrays = _Arrays()
    body = {
        "kind": CHECKPOINT_KIND,
        "format": CHECKPOINT_FORMAT,
        "episode": int(checkpoint.episode),
        "wall_time": float(checkpoint.wall_time),
        "metrics_bytes": int(checkpoint.metrics_bytes),
        "config": encode_tree(checkpoint.config, arrays, ("config",)),
        "agent_state": encode_tree(checkpoint.agent_state, arrays, ("agent_state",)),
    }
    if checkpoint.best is not None:
        body["best"] = encode_tree(checkpoint.best, arrays, ("best",))
    body["arrays"] = sorted(arrays.entries)
    document = json.dumps(body)
    entries = {
        _DOCUMENT: np.array(document),
        _DIGEST: np.array(payload_digest(document, arrays.entries)),
        **arrays.entries,
    }
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **entries)
    return buffer.getvalue()


def save_checkpoint(path: str | os.PathLike, checkpoint: Checkpoint) -> None:
    """Write ``checkpoint`` to ``path`` atomically as a data-only ``.npz`` archive.

    Parameters
    ----------
    path : path-like
        Destination, conventionally ``RUN_DIR/checkpoint.npz``.
    checkpoint : Checkpoint
        What to save.

    Raises
    ------
    TypeError
        If the state holds something that is not data; the previous file is kept.
    OSError
        If the file cannot be written (disk full, read-only); the previous file is kept.
    """
    atomic_write_bytes(path, checkpoint_bytes(checkpoint))


def refuse(path: Path, reason: str) -> CheckpointError:
    """Return the one-line `CheckpointError` refusing ``path`` for ``reason``."""
    return CheckpointError(f"Refusing checkpoint {path}: {' '.join(reason.split())}")


def _legacy_message(path: Path) -> CheckpointError:
    return refuse(
        path,
        "it is an old pickled checkpoint (format 1), which is never loaded because unpickling "
        "can run arbitrary code. If you wrote this run yourself, convert it once with: "
        f"python -m rl.runs.legacy_checkpoint convert {shlex.quote(str(path.parent))}",
    )


def load_checkpoint(path: str | os.PathLike, max_bytes: int = MAX_CHECKPOINT_BYTES) -> Checkpoint:
    """Read and verify a checkpoint written by `save_checkpoint`; never runs code.

    Only a regular file is read (a symbolic link, FIFO or device is refused
    unread), at most ``max_bytes`` of it, and every array is allocated only
    after its declared shape was checked against the bytes its member holds
    (see the module docstring, "Reading within bounds").

    Parameters
    ----------
    path : path-like
        Conventionally ``RUN_DIR/checkpoint.npz``.
    max_bytes : int
        Largest file read; `MAX_CHECKPOINT_BYTES` by default.

    Returns
    -------
    Checkpoint
        Its arrays (the agent state's factors, tables, counts) are NumPy
        arrays, whatever TensorLy's global backend is: the file is read with
        NumPy alone.

    Raises
    ------
    CheckpointError
        With a one-line message naming the file and the reason, if the file is
        missing, a link or not a regular file, too large, truncated, damaged,
        fails its SHA-256, is not a checkpoint of this project, is of a newer
        format, or is an old pickled checkpoint. The file is not changed.
    """
    path = Path(path)
    legacy = path.with_name(LEGACY_CHECKPOINT_NAME)
    if not os.path.lexists(path):
        if path.suffix != ".pkl" and legacy.is_file():
            raise _legacy_message(legacy)
        raise refuse(path, "the file does not exist.")
    try:
        data = read_run_file(path, max_bytes)
    except RunDirError as error:
        raise CheckpointError(str(error)) from None
    except OSError as error:
        raise refuse(path, f"it cannot be read ({error.strerror or error}).") from None
    if data[:1] == _PICKLE_PROTOCOL_2_PLUS or path.suffix == ".pkl":
        raise _legacy_message(path)
    if data[:4] != _ZIP_MAGIC:
        raise refuse(path, "it is not a checkpoint of this project (not an .npz archive).")
    try:
        entries = _read_entries(path, data)
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError) as error:
        raise refuse(path, f"the file is truncated or damaged ({error}).") from None
    except Exception as error:  # noqa: BLE001 - any parse failure of a damaged file is a refusal
        raise refuse(path, f"the file is damaged ({type(error).__name__}: {error}).") from None
    return _from_entries(path, entries)


def _read_entries(path: Path, data: bytes) -> dict[str, np.ndarray]:
    """Arrays of the archive ``data``, each allocated only once its size is known to be real."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        names = [member.filename for member in members]
        if len(set(names)) != len(names):
            raise refuse(path, "the archive holds two members of the same name.")
        for member in members:
            if not member.filename.endswith(".npy"):
                raise refuse(
                    path,
                    f"it is not a checkpoint of this project (its member {member.filename!r} "
                    "is not an array).",
                )
            if member.compress_type != zipfile.ZIP_STORED:
                raise refuse(
                    path,
                    f"its member {member.filename!r} is compressed; checkpoints are written "
                    "uncompressed, and a compressed member can expand without bound.",
                )
        if sum(member.file_size for member in members) > len(data):
            raise refuse(path, "its members declare more bytes than the file holds.")
        return {member.filename[:-4]: _read_member(path, archive, member) for member in members}


def _read_member(path: Path, archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> np.ndarray:
    """Read one ``.npy`` member: header first, then exactly the bytes it declares."""
    name = member.filename[:-4]
    with archive.open(member) as stream:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
        else:
            raise refuse(path, f"its entry {name} has an unknown .npy version {version}.")
        if dtype.hasobject:
            raise refuse(
                path, "it holds pickled Python objects, which are never loaded (they can run code)."
            )
        size = math.prod(shape) * dtype.itemsize
        held = member.file_size - stream.tell()
        if size != held:
            raise refuse(
                path,
                f"its entry {name} declares shape {tuple(shape)} of {dtype} ({size} bytes) but "
                f"holds {held} bytes.",
            )
        raw = stream.read(size)  # reaching the end checks the member's CRC
    if len(raw) != size:
        raise refuse(path, f"its entry {name} is truncated.")
    flat = np.frombuffer(raw, dtype=dtype, count=math.prod(shape)).copy()
    return flat.reshape(shape, order="F" if fortran else "C")


def _from_entries(path: Path, entries: dict[str, np.ndarray]) -> Checkpoint:
    raw = entries.pop(_DOCUMENT, None)
    if raw is None or raw.dtype.kind != "U" or raw.ndim != 0:
        raise refuse(path, "it is not a checkpoint of this project (no checkpoint document).")
    document = str(raw[()])
    try:
        body = parse_json(document, "its document")
    except DocumentError as error:
        raise refuse(path, str(error)) from None
    except ValueError:
        body = None
    if not isinstance(body, dict) or body.get("kind") != CHECKPOINT_KIND:
        raise refuse(path, "it is not a checkpoint of this project (unknown document).")
    version = body.get("format")
    if isinstance(version, int) and version > CHECKPOINT_FORMAT:
        raise refuse(
            path,
            f"it was written by a newer version of this project (format {version}; this "
            f"version reads format {CHECKPOINT_FORMAT}). Upgrade to resume it.",
        )
    digest = entries.pop(_DIGEST, None)
    if (
        digest is None
        or digest.dtype.kind != "U"
        or str(digest[()]) != payload_digest(document, entries)
    ):
        raise refuse(path, "the file is corrupted (its SHA-256 does not match its content).")
    if version != CHECKPOINT_FORMAT:
        raise refuse(path, f"its format {version!r} is not {CHECKPOINT_FORMAT}.")
    try:
        if sorted(entries) != body["arrays"]:
            raise ValueError("the array entries do not match the document")
        checkpoint = Checkpoint(
            episode=_number(body["episode"], int),
            agent_state=decode_tree(body["agent_state"], entries),
            wall_time=_number(body["wall_time"], float),
            metrics_bytes=_number(body["metrics_bytes"], int),
            config=decode_tree(body["config"], entries),
            best=decode_tree(body["best"], entries) if "best" in body else None,
        )
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as error:
        reason = f"{type(error).__name__}: {error}"
        raise refuse(path, f"its document is malformed ({reason}).") from None
    if not isinstance(checkpoint.agent_state, dict) or not isinstance(checkpoint.config, dict):
        raise refuse(path, "its document is malformed (state or config is not a table).")
    best = checkpoint.best
    if best is not None and (not isinstance(best, dict) or sorted(best) != sorted(BEST_ENTRIES)):
        raise refuse(path, f"its document is malformed (best is not a table of {BEST_ENTRIES}).")
    return checkpoint


def _number(value: Any, kind: type) -> Any:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or (kind is int and not isinstance(value, int)) or not math.isfinite(value):
        raise ValueError(f"expected a finite {kind.__name__}, got {value!r}")
    if value < 0:
        raise ValueError(f"expected a value >= 0, got {value!r}")
    return kind(value)


# ----------------------------------------------------------------------------- checks before use


def check_checkpoint_against_metrics(
    checkpoint: Checkpoint, metrics_path: str | os.PathLike, replicas: int
) -> None:
    """Refuse a checkpoint whose episode and metrics length disagree with ``metrics.csv``.

    The first ``checkpoint.metrics_bytes`` bytes of ``metrics.csv`` must be the
    header and exactly ``checkpoint.episode * replicas`` whole rows, the last of
    them of episode ``checkpoint.episode``. Reads only that prefix, changes nothing.

    Parameters
    ----------
    checkpoint : Checkpoint
        As loaded by `load_checkpoint`.
    metrics_path : path-like
        The run's ``metrics.csv``.
    replicas : int
        Number of seeds of the run (rows per episode).

    Raises
    ------
    CheckpointError
        One line naming both files and the disagreement.
    """
    from rl.runs.metrics import COLUMNS
    from rl.runs.rundir import open_run_file

    path, length = Path(metrics_path), checkpoint.metrics_bytes
    where = (
        f"The checkpoint in {path.parent} (episode {checkpoint.episode}, "
        f"{length} bytes of {path.name})"
    )
    try:
        descriptor = open_run_file(path, os.O_RDONLY)
    except RunDirError as error:
        raise CheckpointError(str(error)) from None
    except OSError as error:
        raise CheckpointError(f"{where} cannot be checked: {error.strerror or error}.") from None
    try:
        size = os.fstat(descriptor).st_size
        if size < length:
            raise CheckpointError(
                f"{where} does not match {path}, which has only {size} bytes; it was changed "
                "after the checkpoint and cannot be resumed."
            )
        prefix = os.pread(descriptor, length, 0)
    finally:
        os.close(descriptor)
    header = (",".join(COLUMNS) + "\n").encode()
    rows, expected = prefix.count(b"\n") - 1, checkpoint.episode * replicas
    last = prefix.rstrip(b"\n").rsplit(b"\n", 1)[-1].split(b",")
    last_episode = last[1].decode("ascii", "replace") if len(last) > 1 else ""
    if (
        not prefix.startswith(header)
        or not prefix.endswith(b"\n")
        or rows != expected
        or (rows > 0 and last_episode != str(checkpoint.episode))
    ):
        raise CheckpointError(
            f"{where} does not match {path}: {expected} rows ({replicas} per episode) expected "
            f"after its header, found {max(rows, 0)} rows"
            + (f" ending at episode {last_episode}" if rows > 0 else "")
            + "; one of them was changed."
        )


def restore_agent(agent: Any, checkpoint: Checkpoint, path: str | os.PathLike) -> None:
    """Check the checkpoint's agent state like any input, then load it into ``agent``.

    Every array of the state must be real (no complex, no strings where numbers
    are kept) and its floats finite; the agent's ``load_state_dict`` then checks
    shapes, dtypes and ranges against its configuration. Anything wrong is one
    refusal naming the entry.

    Parameters
    ----------
    agent : rl.agents.base.Agent
        A freshly built agent of the checkpoint's configuration.
    checkpoint : Checkpoint
        As loaded by `load_checkpoint`.
    path : path-like
        The checkpoint file, for the message.

    Raises
    ------
    CheckpointError
        If a value is invalid or does not fit the agent.
    """
    path = Path(path)
    _check_numbers(path, checkpoint.agent_state, ("agent_state",))
    try:
        agent.load_state_dict(checkpoint.agent_state)
    except KeyError as error:
        raise refuse(path, f"its agent state lacks the entry {error}.") from None
    except (
        TypeError,
        ValueError,
        OverflowError,
        IndexError,
        ZeroDivisionError,
        AttributeError,
        RuntimeError,
    ) as error:
        raise refuse(path, f"its agent state does not fit this run: {error}") from None


def best_checkpoint(checkpoint: Checkpoint, path: str | os.PathLike, agent: Any) -> dict[str, Any]:
    """Return a checkpoint's ``best`` tree, checked like any input.

    Its agent state is checked by loading it into ``agent`` (`restore_agent`),
    an agent of the checkpoint's configuration whose own state it replaces; each
    replica's episode must lie in 0 .. ``checkpoint.episode`` and its evaluation
    be a number or -inf.

    Raises
    ------
    CheckpointError
        If the checkpoint keeps no best states, or they do not fit the run; one line.
    """
    path = Path(path)
    best = checkpoint.best
    if best is None:
        raise refuse(
            path,
            "it keeps no best states (the run was trained without keep_best); evaluate its "
            "last state instead (without --best).",
        )
    replicas = agent.replicas
    episodes, returns = best["episodes"], best["greedy_returns"]
    for name, value, kind in (("episodes", episodes, "i"), ("greedy_returns", returns, "f")):
        if (
            not isinstance(value, np.ndarray)
            or value.dtype.kind != kind
            or value.shape != (replicas,)
        ):
            raise refuse(path, f"its best {name} is not one {kind}-number per replica.")
    if ((episodes < 0) | (episodes > checkpoint.episode)).any():
        raise refuse(path, f"its best episodes lie outside 0 .. {checkpoint.episode}.")
    if np.isnan(returns).any() or np.isposinf(returns).any():
        raise refuse(path, "its best evaluations hold NaN or +inf.")
    restore_agent(agent, Checkpoint(checkpoint.episode, best["agent_state"], 0.0, 0, {}), path)
    return best


def _check_numbers(path: Path, value: Any, where: tuple[str, ...]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _check_numbers(path, item, (*where, str(key)))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_numbers(path, item, (*where, str(i)))
    elif isinstance(value, (np.ndarray, np.generic)):
        name = "/".join(where)
        if value.dtype.kind not in "biuf":
            raise refuse(path, f"its entry {name} is not a real number array ({value.dtype}).")
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise refuse(path, f"its entry {name} holds NaN or infinite values.")
