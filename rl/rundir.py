"""Run-directory mechanics: one run per directory, and writability checked up front.

One run per directory. A run holds an OS advisory lock (``fcntl.flock``) on
``RUN_DIR/.lock`` from before it reads or changes anything in the directory
until it returns. The lock file records the holder's process id and host, so a
second ``rl.train`` (or ``--resume``) on the same directory is refused with a
message naming them. The kernel releases the lock when the process dies, so a
killed run never blocks its own resume; the stale content of ``.lock`` is
harmless. ``flock`` locks are advisory and, on some network file systems, only
hold between processes of one host.

Resources. `check_writable` writes, flushes and removes a probe file before any
training, so a read-only directory or a full disk fails at once with a clear
message rather than after hours of training.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

LOCK_FILE = ".lock"
"""Name of the lock file inside a run directory."""

_PROBE_BYTES = 4096


class RunDirError(ValueError):
    """A run directory cannot be used (in use by another run, not writable); one-line message."""


class RunWriteError(OSError):
    """Writing a run file failed mid-run; the message says that the last good checkpoint is kept."""


class RunLock:
    """An exclusive ``flock`` on ``RUN_DIR/.lock``, held until `release`.

    Use `RunLock.acquire`; the lock is also a context manager.
    """

    def __init__(self, run_dir: Path, descriptor: int) -> None:
        self.run_dir = run_dir
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, run_dir: str | os.PathLike) -> RunLock:
        """Lock ``run_dir`` (which must exist) for this process, or refuse.

        Raises
        ------
        RunDirError
            If another live process holds the lock (naming its pid and host),
            or the lock file cannot be created (naming the OS error).
        """
        run_dir = Path(run_dir)
        path = run_dir / LOCK_FILE
        try:
            descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise _cannot_write(run_dir, error) from None
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(descriptor)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _busy(run_dir) from None
            raise _cannot_write(run_dir, error) from None
        try:
            holder = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, (json.dumps(holder) + "\n").encode(), 0)
        except OSError as error:
            os.close(descriptor)
            raise _cannot_write(run_dir, error) from None
        return cls(run_dir, descriptor)

    def release(self) -> None:
        """Release the lock (idempotent); the file stays, its content is then stale."""
        if self._descriptor is not None:
            descriptor, self._descriptor = self._descriptor, None
            os.close(descriptor)

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._descriptor is not None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.release()


def lock_holder(run_dir: str | os.PathLike) -> dict[str, Any] | None:
    """Return ``{"pid", "host", ...}`` of the live process locking ``run_dir``, else None.

    Reads only: a directory without ``.lock`` or with a released lock gives None.
    """
    path = Path(run_dir) / LOCK_FILE
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _read_holder(descriptor)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def _read_holder(descriptor: int) -> dict[str, Any]:
    try:
        holder = json.loads(os.pread(descriptor, 4096, 0).decode("utf-8"))
    except (OSError, ValueError):
        holder = None
    return holder if isinstance(holder, dict) else {"pid": "unknown", "host": "unknown"}


def _busy(run_dir: Path) -> RunDirError:
    holder = lock_holder(run_dir) or {"pid": "unknown", "host": "unknown"}
    return RunDirError(
        f"The run directory {run_dir} is in use by process {holder.get('pid')} on host "
        f"{holder.get('host')} (it holds {run_dir / LOCK_FILE}); wait for that run to end "
        "or stop it, then try again."
    )


def _cannot_write(run_dir: Path, error: OSError) -> RunDirError:
    reason = error.strerror or str(error)
    return RunDirError(f"Cannot write to the run directory {run_dir}: {reason}.")


def refuse_if_locked(run_dir: str | os.PathLike) -> None:
    """Raise `RunDirError` naming the holder if a live process locks ``run_dir``; read only."""
    if lock_holder(run_dir) is not None:
        raise _busy(Path(run_dir))


def has_run_files(run_dir: str | os.PathLike) -> bool:
    """Whether ``run_dir`` exists and holds anything besides the lock file."""
    run_dir = Path(run_dir)
    return run_dir.is_dir() and any(p.name != LOCK_FILE for p in run_dir.iterdir())


def make_run_dir(run_dir: str | os.PathLike) -> None:
    """Create ``run_dir`` (and its parents) or raise `RunDirError` naming the OS error."""
    try:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _cannot_write(Path(run_dir), error) from None


def check_writable(run_dir: str | os.PathLike) -> None:
    """Write, flush to disk and remove a small probe file in ``run_dir``, or raise.

    Catches a read-only directory or file system and a full disk before any
    training starts.

    Raises
    ------
    RunDirError
        Naming the directory and the OS error (for example "No space left on device").
    """
    run_dir = Path(run_dir)
    try:
        descriptor, probe = tempfile.mkstemp(prefix=".probe.", suffix=".tmp", dir=run_dir)
    except OSError as error:
        raise _cannot_write(run_dir, error) from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(b"\0" * _PROBE_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        raise _cannot_write(run_dir, error) from None
    finally:
        Path(probe).unlink(missing_ok=True)
