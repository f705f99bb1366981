"""Stream a training run to TensorBoard: the rows of ``metrics.csv``, diagnostics, hparams.

A run logs into one directory, ``DIR/{name}_{n}`` (stable-baselines3's
convention, `run_log_dir`), with one TensorBoard run per seed,
``seed_{s}/events.out.tfevents.*``, so that seeds compare as runs. Every
training episode e adds, at step e of each seed's run, the numbers of that
seed's row of ``metrics.csv`` (``rollout/return``, ``rollout/length``,
``eval/greedy_return`` after an evaluation; float32 in the event file) and the
agent's diagnostics (`agent_diagnostics`, as
``train/NAME``). Each seed's run starts with the run's hyperparameters (the
effective configuration, dotted keys such as ``agent_params.alpha0``, and the
seed) as a session of the hparams plugin, grouped by the run's name, so runs
compare in TensorBoard's HParams view. A resumed run writes a new event file
into the same directories, starting with a restart at the first step it
replays: TensorBoard then drops the earlier file's steps from there on, so the
scalars stay those of ``metrics.csv``.

`agent_diagnostics` gathers what an agent already exposes, without touching
its step: ``metrics()`` where the agent has one (DQN: the last TD ``loss`` and
``epsilon``; discrete SAC: its last losses and ``alpha``), ``epsilon_`` of the
epsilon-greedy agents, and for the tensor agents (TEQL, TLR) the step size of
the next update, the Frobenius norm of every CP factor and, for TEQL, the mean
Delta Q over the visited entries of its visit table (the error term of EUGE)
and the share of its chosen actions' EUGE scores that is the exploration bonus.
DQN and discrete SAC also report ``q_mean``, the mean Q of the actions they
trained on over the stretch since the last reading (`WatchesQ`). Their steps
compute these two only once `watch_diagnostics` has asked for them, when the
writer starts.
They are the agent's state after the stretch of lockstep steps that ended an
episode: one episode at a time on the step-by-step loop (where a fast replica
may already be a few steps into its next one), every stretch of episodes up to
a checkpoint on the compiled fused loop (`rl.loop.fused`), so there they are
logged every ``checkpoint_every`` episodes.

The events are the `tensorboard` package's protocol buffers. Writing them
costs a few microseconds per seed and episode: all seeds' events of an
episode have the same layout, so one serialized event is the template that
every seed's values are patched into. Records are kept in memory and
appended to the files at every checkpoint, on close, and at least every
`FLUSH_SECONDS` while the run goes on; the checksums of all records of an
append are computed then, in one compiled call eight bytes at a time (the
package's own CRC-32C is pure Python, tens of microseconds an event, which at
B = 100 would be a large share of a training episode's time). The event
files stay open from their creation to the writer's close while the seeds
are at most a quarter of the process's open-file limit (`holds_files_open`),
so that an append is one write per seed.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import secrets
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from rl.agents.base import Agent
from rl.agents.tensor.agent import TensorAgent
from rl.agents.tensor.visits import DenseVisits, VisitTable
from rl.jit import kernel
from rl.runs.config import ConfigError
from rl.runs.rundir import RunWriteError, make_run_dir, open_run_file, refuse_link
from tensorq.schedule import step_size
from tensorq.validation import as_numpy

INSTALL_HINT = 'pip install "teql[tensorboard]"'
"""How to get the `tensorboard` package, named in the error when it is missing."""

RETURN_TAG = "rollout/return"
LENGTH_TAG = "rollout/length"
GREEDY_TAG = "eval/greedy_return"
DIAGNOSTIC_PREFIX = "train/"
"""Tags of the rows of ``metrics.csv`` (``return``, ``length``, ``greedy_return``) and of the
agent's diagnostics (``train/NAME``)."""

FLUSH_SECONDS = 5.0
"""At most this long between two appends to the event files while a run goes on."""

OPEN_FILES_SHARE = 4
"""A writer keeps its seeds' event files open while they are at most 1/4 of the open-file limit."""

_FILE_VERSION = "brain.Event:2"
_WRITER_MODULE = "tensorboard.summary.writer.event_file_writer"
_MASK_DELTA = 0xA282EAD8  # TFRecord's masked CRC: rotate right by 15 bits, then add this


def require_tensorboard() -> Any:
    """Import and return the `tensorboard` modules used here, or raise a one-line `ConfigError`.

    Returns
    -------
    tuple of modules
        ``event_pb2``, ``summary_pb2``, and the hparams plugin's ``summary_v2`` and
        ``plugin_data_pb2``.

    Raises
    ------
    rl.runs.config.ConfigError
        Naming ``pip install "teql[tensorboard]"``.
    """
    try:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.plugins.hparams import plugin_data_pb2
        from tensorboard.plugins.hparams import summary_v2 as hparams_summary
    except ImportError:
        raise ConfigError(
            f"Writing TensorBoard logs needs the tensorboard package: {INSTALL_HINT}"
        ) from None
    return event_pb2, summary_pb2, hparams_summary, plugin_data_pb2


def _new_event_file(event_pb2: Any, directory: Path, opening: Sequence[bytes]) -> tuple[Path, int]:
    """Create an event file in ``directory``, named and opened as the package does.

    The file starts with the record of the event file format's version, then
    the serialized events ``opening``. Where
    another library has replaced the package's `EventFileWriter` to learn of
    new event files (W&B's ``sync_tensorboard`` does), the file is created
    through that writer, so that it follows the directory. The name holds the
    time in nanoseconds (TensorBoard reads the files of a directory in the
    order of their names) and a random suffix, so that no link can wait for it.
    Returns the path and a descriptor open for appending (the caller closes it).
    """
    suffix = f".{secrets.token_hex(8)}"
    files = sys.modules.get(_WRITER_MODULE)  # a library that hooks it has imported it
    hooked = files is not None and files.EventFileWriter.__module__ != _WRITER_MODULE
    descriptor = None
    try:
        if hooked:
            files.EventFileWriter(str(directory), filename_suffix=suffix).close()
            (path,) = directory.glob(f"events.out.tfevents.*{suffix}")
            descriptor = open_run_file(path, os.O_WRONLY | os.O_APPEND)
            _write_all(descriptor, frame_sequence(opening))
            return path, descriptor
        now = time.time_ns()  # TensorBoard reads a directory's files in the order of their names
        name = f"events.out.tfevents.{now // 10**9:010d}.{socket.gethostname()}.{now:020d}{suffix}"
        path = directory / name
        version = event_pb2.Event(wall_time=time.time(), file_version=_FILE_VERSION)
        descriptor = open_run_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        _write_all(descriptor, frame_sequence([version.SerializeToString(), *opening]))
    except OSError as error:
        if descriptor is not None:
            os.close(descriptor)
        reason = error.strerror or " ".join(str(error).split())
        raise RunWriteError(f"Cannot create an event file in {directory}: {reason}.") from None
    return path, descriptor


def _write_all(descriptor: int, data: Any) -> None:
    """Write all bytes of ``data`` (a buffer) to ``descriptor``, however many calls it takes."""
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(descriptor, view) :]


def holds_files_open(seeds: int) -> bool:
    """Whether a writer of ``seeds`` seeds keeps its event files open for the whole run.

    It does while they are at most a quarter of the process's limit of open
    files (``ulimit -n``, `OPEN_FILES_SHARE`); otherwise every append opens
    and closes them again.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft == resource.RLIM_INFINITY or seeds * OPEN_FILES_SHARE <= soft


def run_log_dir(root: str | os.PathLike, name: str, *, resume: bool = False) -> Path:
    """Return the log directory ``root/{name}_{n}`` of a run (stable-baselines3's convention).

    ``n`` is one more than the largest number of a directory ``root/{name}_N``
    (1 if none), or that largest one itself when the run is resumed (a new
    directory if none), as stable-baselines3 does with and without
    ``reset_num_timesteps``.

    Parameters
    ----------
    root : path-like
        The directory given as ``--tensorboard`` or ``tensorboard_log``.
    name : str
        The run's name (``tb_log_name``): the run directory's name on the command line.
    resume : bool
        Whether the run continues one logged before.
    """
    root = Path(root)
    pattern = re.compile(re.escape(Path(name).name) + r"_(\d+)")
    parent = root / Path(name).parent
    numbers = [0]
    if parent.is_dir():
        numbers += [
            int(match.group(1))
            for entry in parent.iterdir()
            if (match := pattern.fullmatch(entry.name)) and entry.is_dir()
        ]
    latest = max(numbers)
    return root / f"{name}_{latest if resume and latest else latest + 1}"


def tensorboard_dir(
    root: str | os.PathLike | None, name: str, *, resume: bool = False
) -> Path | None:
    """Return `run_log_dir` of ``root`` for the run ``name``, or None without a ``root``."""
    return None if root is None else run_log_dir(root, name, resume=resume)


def hparams_of(effective: Mapping[str, Any]) -> dict[str, bool | int | float | str]:
    """Return the hyperparameters of a run for the hparams plugin: flat, no ``out`` and no None.

    Tables become dotted keys (``agent_params.alpha0``, ``env_options.state_bins``,
    as in a sweep's grid file); lists are written as their text.
    """
    flat: dict[str, bool | int | float | str] = {}

    def add(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for key, item in value.items():
                add(f"{prefix}.{key}" if prefix else str(key), item)
        elif isinstance(value, (bool, int, float, str)):
            flat[prefix] = value
        elif isinstance(value, (list, tuple)):
            flat[prefix] = str(list(value))

    add("", {key: value for key, value in effective.items() if key != "out"})
    return flat


@functools.cache
def _crc_table() -> NDArray[np.int64]:
    """Return the tables of CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), shape (8, 256).

    Row 0 is the byte table; row k advances a byte's contribution by k more
    zero bytes, so that eight bytes are folded in at once ("slicing by 8").
    """
    table = np.empty((8, 256), dtype=np.int64)
    row = np.arange(256, dtype=np.int64)
    for _ in range(8):
        row = np.where(row & 1, (row >> 1) ^ 0x82F63B78, row >> 1)
    table[0] = row
    for k in range(1, 8):
        table[k] = (table[k - 1] >> 8) ^ table[0][table[k - 1] & 0xFF]
    return table


@kernel
def _masked_crc32c(data: NDArray[np.uint8], table: NDArray[np.int64]) -> int:
    """Return the masked CRC-32C (TFRecord framing) of ``data``; ``table`` is `_crc_table`."""
    crc = 0xFFFFFFFF
    whole = len(data) - len(data) % 8
    for i in range(0, whole, 8):
        low = crc ^ (data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24))
        crc = (
            table[7, low & 0xFF]
            ^ table[6, (low >> 8) & 0xFF]
            ^ table[5, (low >> 16) & 0xFF]
            ^ table[4, low >> 24]
            ^ table[3, data[i + 4]]
            ^ table[2, data[i + 5]]
            ^ table[1, data[i + 6]]
            ^ table[0, data[i + 7]]
        )
    for i in range(whole, len(data)):
        crc = table[0, (crc ^ data[i]) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    rotated = ((crc >> 15) | (crc << 17)) & 0xFFFFFFFF
    return (rotated + _MASK_DELTA) & 0xFFFFFFFF


@kernel
def _masked_crc32c_rows(rows: NDArray[np.uint8], table: NDArray[np.int64]) -> NDArray[np.int64]:
    """`_masked_crc32c` of every row of ``rows`` (n, length), as int64."""
    out = np.empty(rows.shape[0], dtype=np.int64)
    for i in range(rows.shape[0]):
        out[i] = _masked_crc32c(rows[i], table)
    return out


@kernel
def _seal_records(
    framed: NDArray[np.uint8], lengths: NDArray[np.int64], table: NDArray[np.int64]
) -> None:
    """Write the masked CRC of every record's data into its last 4 bytes, in every row.

    Each row of ``framed`` holds the same sequence of records, of data
    ``lengths`` bytes each, framed (12 bytes before the data, 4 after).
    """
    for i in range(framed.shape[0]):
        start = 0
        for length in lengths:
            end = start + 12 + length
            crc = _masked_crc32c(framed[i, start + 12 : end], table)
            for k in range(4):  # little-endian
                framed[i, end + k] = (crc >> (8 * k)) & 0xFF
            start = end + 4


def masked_crc32c(rows: NDArray[np.uint8]) -> NDArray[np.uint32]:
    """Return the masked CRC-32C (TFRecord framing) of every row of ``rows`` (n, length)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    return _masked_crc32c_rows(rows, _crc_table()).astype(np.uint32)


@functools.cache
def _record_header(length: int) -> NDArray[np.uint8]:
    """Return the 12 bytes that open a TFRecord of ``length`` bytes: length, its masked CRC."""
    header = np.frombuffer(np.uint64(length).astype("<u8").tobytes(), dtype=np.uint8)
    crc = masked_crc32c(header[None, :]).astype("<u4").view(np.uint8)
    return np.concatenate([header, crc])


def frame_sequence(records: Sequence[bytes]) -> bytes:
    """Frame serialized events as consecutive TFRecords, as an event file holds them.

    Each record is its data's length (8 bytes, little-endian), that length's
    masked CRC-32C, the data, and the data's masked CRC-32C.

    Parameters
    ----------
    records : sequence of bytes
        Serialized events, of any lengths.

    Returns
    -------
    bytes
        The framed records, one after the other.
    """
    lengths = np.array([len(record) for record in records], dtype=np.int64)
    framed = np.empty((1, int(lengths.sum()) + 16 * len(records)), dtype=np.uint8)
    start = 0
    for record in records:
        end = start + 12 + len(record)
        framed[0, start : start + 12] = _record_header(len(record))
        framed[0, start + 12 : end] = np.frombuffer(record, dtype=np.uint8)
        start = end + 4
    _seal_records(framed, lengths, _crc_table())
    return framed.tobytes()


@runtime_checkable
class WatchesQ(Protocol):
    """An agent that reports the mean Q of the actions it trained on (DQN, discrete SAC).

    See `rl.agents.deep._torch_agent.BatchedTorchAgent.watch_q`.
    """

    def watch_q(self) -> None:
        """Start (or restart) summing the mean Q of the taken actions of each training step."""

    def watched_q(self) -> NDArray[np.float64]:
        """Return each replica's mean since `watch_q` (NaN if it has not trained), then restart."""


def watch_diagnostics(agent: Agent) -> None:
    """Ask ``agent`` for the diagnostics it computes only when asked, before a run logs them.

    The mean Q of the taken actions of DQN and discrete SAC (`WatchesQ`) and
    the bonus share of the EUGE actions of TEQL (`explores_by_euge`); nothing
    for the other agents. Their steps pay for it from here on; no result of
    the run changes.
    """
    if isinstance(agent, WatchesQ):
        agent.watch_q()
    if explores_by_euge(agent):
        agent.engine_.track_bonus_share()


def agent_diagnostics(agent: Agent) -> dict[str, NDArray[np.float64]]:
    """Return the agent's diagnostics, name -> values of shape (B,).

    Parameters
    ----------
    agent : rl.agents.base.Agent
        A B-replica agent, between two lockstep steps.

    Returns
    -------
    dict of str to ndarray of float64, shape (B,)
        In a fixed order for a given agent: ``metrics()``'s entries, then
        ``epsilon``, ``step_size`` (tensor agents whose alpha_t counts the
        agent's steps), ``delta_q_mean`` (TEQL), ``euge_bonus_share`` (TEQL
        exploring by EUGE, after `watch_diagnostics`: the mean, over the
        replica's EUGE actions since the last call, of the share of the chosen
        action's score that is the bonus, `rl.agents.tensor.step.bonus_share`;
        NaN where it took none) and ``factor_norm_n`` for every mode n (tensor
        agents), or ``q_mean`` (DQN, discrete SAC: the mean over the training
        steps since the last call of the mini-batch mean of Q(s, a) at the
        taken actions, SAC's over both critics; NaN for a replica that has not
        trained since, or without `watch_diagnostics`). Reading
        ``q_mean`` or ``euge_bonus_share`` starts the next stretch.

    References
    ----------
    Algorithm 1 (alpha_t = alpha_0 / (1 + kappa t)), eq. (decomp_error) (Delta Q)
    and eq. (euge) of the TEQL paper.
    """
    values: dict[str, NDArray[np.float64]] = {}
    metrics = getattr(agent, "metrics", None)
    if callable(metrics):
        values.update(metrics())
    if isinstance(agent, WatchesQ):
        values["q_mean"] = agent.watched_q()
    if isinstance(agent, TensorAgent):
        agent.engine_.sync()  # the array engine's host copies; nothing to do on the others
    epsilon = getattr(agent, "epsilon_", None)
    if epsilon is not None and "epsilon" not in values:
        values["epsilon"] = np.asarray(epsilon, dtype=np.float64)
    if isinstance(agent, TensorAgent):
        rule = agent.step_rule()
        if rule.step_count == "agent":  # per entry, alpha_t has no single value per replica
            numbers = agent.state_.values  # each replica's alpha_0 and kappa
            values["step_size"] = step_size(numbers.alpha0, numbers.kappa, agent.steps_ + 1.0)
        visits = agent.state_.visits  # brought up to date by the sync above
        if visits is not None:
            values["delta_q_mean"] = visited_delta_mean(visits)
        if explores_by_euge(agent) and agent.engine_.tracks_bonus_share:
            values["euge_bonus_share"] = agent.engine_.bonus_share()
        for mode, factor in enumerate(agent.q_.factors):
            array = np.asarray(as_numpy(factor), dtype=np.float64)
            values[f"factor_norm_{mode}"] = np.sqrt(np.einsum("bdr,bdr->b", array, array))
    return {name: np.asarray(value, dtype=np.float64) for name, value in values.items()}


def explores_by_euge(agent: Agent) -> bool:
    """Whether ``agent`` is a tensor agent exploring by EUGE (alone or under an epsilon layer)."""
    return isinstance(agent, TensorAgent) and agent.step_rule().exploration != "epsilon"


def visited_delta_mean(visits: VisitTable) -> NDArray[np.float64]:
    """Mean Delta Q(s, a) over each replica's visited entries (N(s, a) > 0), shape (B,).

    Delta Q as the table stores it (signed under the released reading); NaN for
    a replica that has visited nothing. One compiled pass over the table's rows.
    """
    arrays = visits.arrays()
    dense = isinstance(visits, DenseVisits)
    rows = len(arrays.counts) if dense else int(arrays.used[0])
    sums, entries = _visited_delta_sums(
        arrays.counts, arrays.delta, arrays.row_keys, rows, dense, visits.n_states, visits.replicas
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(entries > 0, sums / np.maximum(entries, 1), np.nan)


@kernel
def _visited_delta_sums(
    counts: NDArray[np.int64],
    delta: NDArray[np.float64],
    row_keys: NDArray[np.int64],
    rows: int,
    dense: bool,
    n_states: int,
    replicas: int,
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Per replica, the sum of Delta Q over visited entries and their number.

    A row's key is ``replica * n_states + state``: its index in a dense table,
    ``row_keys[row]`` in a sparse one. Each replica's entries are added in
    the order of the rows and actions; an unvisited entry is passed over by a
    select rather than a branch (which entries were visited follows no
    pattern a branch predictor learns, and mispredictions would double the
    pass).
    """
    sums = np.zeros(replicas)
    entries = np.zeros(replicas, dtype=np.int64)
    divisor = np.uint64(n_states)
    for row in range(rows):
        key = row if dense else row_keys[row]
        owner = np.uint64(key) // divisor  # keys are >= 0: no floor-division fix-up
        total, visited = sums[owner], entries[owner]
        for action in range(counts.shape[1]):
            seen = counts[row, action] > 0
            added = total + delta[row, action]
            total = added if seen else total
            visited += seen
        sums[owner], entries[owner] = total, visited
    return sums, entries


class TensorBoardWriter:
    """Event files of one run, one TensorBoard run per seed (see the module's docstring).

    Parameters
    ----------
    log_dir : path-like
        The run's log directory (`run_log_dir`); created if missing.
    seeds : sequence of int
        The seed of every replica, in replica order.
    effective : mapping
        The run's effective configuration (`rl.runs.config.effective_config`),
        logged as hyperparameters (`hparams_of`).
    resume_after : int, optional
        For a resumed run: the episode of the checkpoint it continues from. The
        new files then start with a restart at step ``resume_after + 1``. The
        hyperparameters open the first event file of each seed's directory.

    Raises
    ------
    rl.runs.config.ConfigError
        If the `tensorboard` package is not installed.
    rl.runs.rundir.RunDirError
        If a directory cannot be created, or a seed's directory is a symbolic link.
    rl.runs.rundir.RunWriteError
        If an event file cannot be created.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike,
        seeds: Sequence[int],
        effective: Mapping[str, Any],
        *,
        resume_after: int | None = None,
    ) -> None:
        self._event_pb2, self._summary_pb2, *hparams = require_tensorboard()
        self.log_dir = Path(log_dir)
        self.seeds = [int(seed) for seed in seeds]
        directories = [self.log_dir / f"seed_{seed}" for seed in self.seeds]
        for directory in directories:
            refuse_link(directory)
            make_run_dir(directory)
        fresh = [not any(directory.glob("events.out.tfevents.*")) for directory in directories]
        self._pending: list[NDArray[np.uint8]] = []  # framed rows (B, length), one per episode
        self._templates: dict[tuple[str, ...], tuple[bytes, NDArray[np.int64]]] = {}
        self._last_flush = time.monotonic()
        self._agent_steps: int | None = None
        self._diagnostics: dict[str, NDArray[np.float64]] = {}
        self._diagnostics_episode = 0
        event = self._event_pb2.Event
        now = time.time()
        opening = []
        logged = hparams_of(effective)
        starts = iter(self._hparams_events(hparams, logged, now, fresh))
        for first in fresh:
            records = [next(starts)] if first else []
            if resume_after is not None:
                restart = self._event_pb2.SessionLog(status=self._event_pb2.SessionLog.START)
                restarted = event(wall_time=now, step=resume_after + 1, session_log=restart)
                records.append(restarted.SerializeToString())
            opening.append(records)
        self.paths: list[Path] = []
        self._files: list[int] = []  # the open event files, or none: opened at every append
        hold = holds_files_open(len(self.seeds))
        try:
            for directory, records in zip(directories, opening, strict=True):
                path, descriptor = _new_event_file(self._event_pb2, directory, records)
                self.paths.append(path)
                if hold:
                    self._files.append(descriptor)
                else:
                    os.close(descriptor)
        except BaseException:
            self._close_files()
            raise

    def _hparams_events(
        self, modules: Sequence[Any], logged: Mapping[str, Any], now: float, fresh: Sequence[bool]
    ) -> list[bytes]:
        """Return the serialized hparams event of every seed whose directory is ``fresh``.

        The plugin's summary (``summary_v2.hparams_pb``: ``logged`` and the
        seed, the run's name as the trial) is built once; each seed's copy
        differs only in the number of its ``seed``.
        """
        hparams_summary, plugin_data_pb2 = modules
        seeds = [seed for seed, first in zip(self.seeds, fresh, strict=True) if first]
        if not seeds:
            return []
        summary = hparams_summary.hparams_pb(
            {**logged, "seed": seeds[0]}, trial_id=self.log_dir.name, start_time_secs=now
        )
        (value,) = summary.value
        data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
        events = []
        for seed in seeds:
            data.session_start_info.hparams["seed"].number_value = seed
            value.metadata.plugin_data.content = data.SerializeToString()
            events.append(
                self._event_pb2.Event(wall_time=now, step=0, summary=summary).SerializeToString()
            )
        return events

    def write(
        self,
        episode: int,
        returns: NDArray[np.float64],
        lengths: NDArray[np.int64],
        greedy_returns: NDArray[np.float64],
        *,
        agent_steps: int,
        diagnostics: Callable[[], Mapping[str, NDArray[np.float64]]],
    ) -> None:
        """Add training episode ``episode`` of every seed: its ``metrics.csv`` row and diagnostics.

        Parameters
        ----------
        episode : int
            The step of the events.
        returns, lengths, greedy_returns : ndarray, shape (B,)
            As in ``metrics.csv``; ``eval/greedy_return`` is left out of an
            episode without an evaluation (all NaN).
        agent_steps : int
            Agent-steps the runner has played so far (`rl.loop.runner.Runner.agent_steps`).
        diagnostics : callable
            Returns the agent's diagnostics now, name -> values of shape (B,),
            written as ``train/NAME``. It is called only when the agent has
            stepped since the last episode (the compiled runner plays whole
            stretches of episodes in one call), and its values are written at
            the last episode that came in before the agent stepped again: the
            state right after the stretch that ended with that episode.
        """
        if agent_steps != self._agent_steps:
            self._write_diagnostics()
            self._diagnostics = dict(diagnostics())
            self._agent_steps = agent_steps
        self._diagnostics_episode = int(episode)
        columns = [returns, lengths]
        tags = [RETURN_TAG, LENGTH_TAG]
        if not np.all(np.isnan(greedy_returns)):
            columns.append(greedy_returns)
            tags.append(GREEDY_TAG)
        self._add(episode, tags, columns)
        if time.monotonic() - self._last_flush > FLUSH_SECONDS:
            self._append()  # the diagnostics wait for the last episode of their stretch

    def _write_diagnostics(self) -> None:
        """Add the diagnostics waiting for their episode, if any."""
        if self._diagnostics:
            tags = [DIAGNOSTIC_PREFIX + name for name in self._diagnostics]
            self._add(self._diagnostics_episode, tags, list(self._diagnostics.values()))
        self._diagnostics = {}

    def _add(self, step: int, tags: Sequence[str], columns: Sequence[NDArray]) -> None:
        """Add one event per seed at ``step``: ``columns[k][i]`` as ``tags[k]`` for seed i.

        The records are framed here and their checksums computed when they are
        appended to the files, all of them in one call (`_seal_records`).
        """
        summary, positions = self._template(tuple(tags))
        clock = self._event_pb2.Event(wall_time=time.time(), step=int(step)).SerializeToString()
        template = np.frombuffer(clock + summary, dtype=np.uint8)  # an event with the summary
        framed = np.empty((len(self.seeds), template.size + 16), dtype=np.uint8)
        framed[:, :12] = _record_header(template.size)
        framed[:, 12:-4] = template
        values = np.stack(columns, axis=1).astype("<f4")  # (B, K)
        framed[:, positions] = values.view(np.uint8).reshape(len(self.seeds), -1)
        self._pending.append(framed)

    def _template(self, tags: tuple[str, ...]) -> tuple[bytes, NDArray[np.int64]]:
        """Return an event's summary field of ``tags`` and the positions of its floats' bytes.

        The field is an `Event` holding only the summary, serialized: appended
        to one holding the wall time and step, it makes the bytes of the whole
        event (a message's fields serialize in the order of their numbers, and
        the summary's is the last). Each value's float is its last four bytes,
        so the floats' distances from the end of the event hold in every event
        that ends with it; they are checked here once per set of tags. The
        positions count from the end of a framed record (negative), whose last
        four bytes are its checksum.
        """
        if tags not in self._templates:
            summary_pb2, event = self._summary_pb2, self._event_pb2.Event
            values = [summary_pb2.Summary.Value(tag=tag, simple_value=0.0) for tag in tags]
            summary = summary_pb2.Summary(value=values)
            sizes = [summary_pb2.Summary(value=[value]).ByteSize() for value in values]
            ends = np.cumsum(sizes)
            offsets = (ends[-1] - ends + 4).astype(np.int64)
            probe = summary_pb2.Summary()
            probe.CopyFrom(summary)
            for k, value in enumerate(probe.value):
                value.simple_value = float(k + 1)
            data = event(step=1, summary=probe).SerializeToString()
            found = [np.frombuffer(data[len(data) - o :][:4], "<f4")[0] for o in offsets]
            whole = event(step=1).SerializeToString() + event(summary=probe).SerializeToString()
            if found != [float(k + 1) for k in range(len(tags))] or whole != data:
                raise RuntimeError("Unexpected layout of a serialized TensorBoard summary.")
            positions = (-4 - offsets)[:, None] + np.arange(4)  # (K, 4)
            self._templates[tags] = (event(summary=summary).SerializeToString(), positions.ravel())
        return self._templates[tags]

    def flush(self) -> None:
        """Append the records kept in memory to every seed's event file.

        The diagnostics waiting for their episode are added first: every
        replica is then at the end of its last episode (a checkpoint) or the run ends.

        Raises
        ------
        rl.runs.rundir.RunWriteError
            Naming the file and the OS error (a full disk, say).
        """
        self._write_diagnostics()
        self._append()

    def _append(self) -> None:
        """Append the records kept in memory to every seed's event file (see `flush`)."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return
        pending = np.concatenate(self._pending, axis=1)  # row i: seed i's records in order
        lengths = np.array([framed.shape[1] - 16 for framed in self._pending], dtype=np.int64)
        self._pending = []
        _seal_records(pending, lengths, _crc_table())
        for i, (path, data) in enumerate(zip(self.paths, pending, strict=True)):
            try:
                if self._files:
                    _write_all(self._files[i], data)
                    continue
                descriptor = open_run_file(path, os.O_WRONLY | os.O_APPEND)
                try:
                    _write_all(descriptor, data)
                finally:
                    os.close(descriptor)
            except OSError as error:
                reason = error.strerror or " ".join(str(error).split())
                raise RunWriteError(
                    f"Cannot write the TensorBoard events {path}: {reason}."
                ) from None

    def close(self) -> None:
        """Append what is kept in memory (`flush`) and close the event files."""
        try:
            self.flush()
        finally:
            self._close_files()

    def _close_files(self) -> None:
        """Close the event files held open, if any; later appends open them again."""
        files, self._files = self._files, []
        for descriptor in files:
            os.close(descriptor)
