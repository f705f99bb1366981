"""Run-directory mechanics: one run per directory, and writability checked up front.

One run per directory. A run holds an OS advisory lock (``fcntl.flock``) on
``RUN_DIR/.lock`` from before it reads or changes anything in the directory
until it returns; a process that only reads a finished run (`rl.runs.copy_run`)
holds the lock shared, so that several read it at once and none writes it
meanwhile. The lock file records the holder's process id and host, so a
second ``rl.train`` (or ``--resume``) on the same directory is refused with a
message naming them. The kernel releases the lock when the process dies, so a
killed run never blocks its own resume; the stale content of ``.lock`` is
harmless. ``flock`` locks are advisory and, on some network file systems, only
hold between processes of one host.

Resources. `check_writable` writes, flushes and removes a probe file before any
training, so a read-only directory or a full disk fails at once with a clear
message rather than after hours of training.

Run files are data from wherever the directory came from (docs/run-directories.md, "Run
directories from elsewhere"). Every file the project writes or reads in a run
directory goes through the helpers here: `open_run_file` opens without
following a symbolic link (``O_NOFOLLOW``) and only regular files (a FIFO or a
device is refused, never waited on or read), `read_run_file` reads a regular
file up to a size limit, `atomic_write_bytes` refuses a link at the destination
and creates the file with the permissions the umask gives (as ``open`` does),
`check_run_files` refuses a directory holding a link or a non-regular file
where a run file should be, and `remove_stale_temporaries` deletes what a
killed atomic write left behind.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

from rl.runs.documents import parse_json

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
    def acquire(cls, run_dir: str | os.PathLike, shared: bool = False) -> RunLock:
        """Lock ``run_dir`` (which must exist) for this process, or refuse.

        The lock is exclusive (a process that writes the run), or with
        ``shared`` a reader's: readers hold it together, and a writer is
        refused while one does (and a reader while a writer does).

        Raises
        ------
        RunDirError
            If another live process holds the lock (naming its pid and host),
            the lock file is a symbolic link or not a regular file, or it
            cannot be created (naming the OS error).
        """
        run_dir = Path(run_dir)
        try:
            descriptor = open_run_file(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        except OSError as error:
            raise _cannot_write(run_dir, error) from None
        try:
            fcntl.flock(descriptor, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
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
    Of several readers holding it shared, the one that took it last.
    """
    path = Path(run_dir) / LOCK_FILE
    try:
        descriptor = open_run_file(path, os.O_RDONLY)
    except (OSError, RunDirError):
        return None
    try:
        try:  # exclusive: any holder, writer or reader, refuses it
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return _read_holder(descriptor)
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def _read_holder(descriptor: int) -> dict[str, Any]:
    try:
        holder = parse_json(os.pread(descriptor, 4096, 0).decode("utf-8"), "The lock file")
    except (OSError, ValueError):  # DocumentError is a ValueError: a hostile holder record
        holder = None
    return holder if isinstance(holder, dict) else {"pid": "unknown", "host": "unknown"}


def _busy(run_dir: Path) -> RunDirError:
    holder = lock_holder(run_dir) or {"pid": "unknown", "host": "unknown"}
    return RunDirError(
        f"The run directory {run_dir} is in use by process {holder.get('pid')} on host "
        f"{holder.get('host')} (it holds {run_dir / LOCK_FILE}); wait for that run to end "
        "or stop it, then try again."
    )


_HINTS = {
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.EROFS: "choose a directory on a writable file system",
    errno.EACCES: "choose a directory you may write to",
    errno.EPERM: "choose a directory you may write to",
    errno.ENOSPC: "free some space or choose another disk",
    errno.EDQUOT: "free some space or choose another disk",
    errno.ENOTDIR: "a part of the path is a file, not a directory",
}


def _cannot_write(run_dir: Path, error: OSError) -> RunDirError:
    return RunDirError(f"Cannot write to the run directory {run_dir}: {_reason(error)}")


def _reason(error: OSError) -> str:
    """Return the OS's reason for ``error`` and, where one helps, what to do: one sentence end."""
    hint = _HINTS.get(error.errno or 0)
    return (error.strerror or str(error)) + (f"; {hint}." if hint else ".")


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


# ----------------------------------------------------------------------------- safe run-file I/O


def _link_error(path: Path) -> RunDirError:
    return RunDirError(
        f"Refusing {path}: it is a symbolic link, and run files are never read or written "
        "through links; remove it if the run directory is yours."
    )


def _not_regular(path: Path) -> RunDirError:
    return RunDirError(
        f"Refusing {path}: it is not a regular file (a directory, FIFO, socket or device); "
        "remove it if the run directory is yours."
    )


def open_run_file(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """Open a run file without following a link and return its descriptor (blocking).

    The file is opened with ``O_NOFOLLOW | O_NONBLOCK`` (so a FIFO never blocks
    the open), checked to be a regular file with ``fstat``, then switched back
    to blocking I/O. A new file gets ``mode`` less the umask.

    Parameters
    ----------
    path : path-like
        The file.
    flags : int
        ``os.open`` flags, for example ``os.O_RDWR | os.O_CREAT``.
    mode : int
        Permission bits of a new file, before the umask.

    Raises
    ------
    RunDirError
        If ``path`` is a symbolic link or not a regular file.
    OSError
        For any other failure of ``open`` (missing file, permissions, full disk).
    """
    path = Path(path)
    try:
        descriptor = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _link_error(path) from None
        if error.errno == errno.EISDIR or (error.errno == errno.ENXIO and path.is_fifo()):
            raise _not_regular(path) from None
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise _not_regular(path)
    os.set_blocking(descriptor, True)
    return descriptor


def read_run_file(path: str | os.PathLike, max_bytes: int) -> bytes:
    """Return the content of the regular file ``path``, at most ``max_bytes`` long.

    Raises
    ------
    RunDirError
        If ``path`` is a link or not a regular file, or is longer than
        ``max_bytes`` (nothing is read then).
    OSError
        If it cannot be opened or read.
    """
    path = Path(path)
    descriptor = open_run_file(path, os.O_RDONLY)
    with os.fdopen(descriptor, "rb") as handle:
        size = os.fstat(descriptor).st_size
        if size > max_bytes:
            raise RunDirError(
                f"Refusing {path}: it has {size} bytes, more than the {max_bytes} allowed."
            )
        data = handle.read(size + 1)  # one byte more: a file that grew is seen
    if len(data) > size:
        raise RunDirError(f"Refusing {path}: it changed while being read.")
    return data


def read_run_text(path: str | os.PathLike, max_bytes: int) -> str:
    """Return the regular file ``path`` as text to show, at most ``max_bytes`` long.

    Read as `read_run_file` reads; bytes that are not UTF-8 become U+FFFD.

    Raises
    ------
    RunDirError
        If ``path`` is a link, not a regular file, or longer than ``max_bytes``.
    OSError
        If it cannot be opened or read.
    """
    return read_run_file(path, max_bytes).decode("utf-8", errors="replace")


def os_error_line(error: OSError) -> str:
    """Return ``error`` as one sentence naming the file, the reason and what to do.

    A temporary file of `atomic_write_bytes` (``.NAME.*.tmp``) is named as the
    file it was to become.
    """
    name = error.filename
    if name is not None:
        path = Path(os.fsdecode(name))
        if path.name.startswith(".") and path.name.endswith(".tmp") and path.name.count(".") >= 3:
            path = path.parent / path.name[1:].rsplit(".", 2)[0]
        name = str(path)
    where = f" {name}" if name else ""
    return f"Cannot use{where}: {_reason(error)}"


def refuse_link(path: str | os.PathLike) -> None:
    """Raise `RunDirError` if ``path`` is a symbolic link (dangling or not)."""
    if os.path.islink(path):
        raise _link_error(Path(path))


def refuse_linked_path(root: str | os.PathLike, relative: str | os.PathLike) -> None:
    """Raise `RunDirError` if ``ROOT/RELATIVE`` or a directory between it and ``ROOT`` is a link.

    ``root`` itself may be a link (the user named it); what lies below it is data.
    """
    path = Path(root)
    for name in Path(relative).parts:
        path = path / name
        refuse_link(path)


def check_run_files(run_dir: str | os.PathLike, names: Iterable[str]) -> None:
    """Refuse ``run_dir`` if one of ``names`` in it is a link or exists but is not a regular file.

    Raises
    ------
    RunDirError
        Naming the first offending file.
    """
    for name in names:
        path = Path(run_dir) / name
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            raise _link_error(path)
        if not stat.S_ISREG(mode):
            raise _not_regular(path)


def _umask() -> int:
    try:  # Linux: read it without changing it (os.umask would, for every thread)
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file in the same directory, then rename).

    The temporary file ``.NAME.*.tmp`` gets the permissions ``0o666`` less the
    umask (what ``open`` would give) before it replaces ``path``. If anything
    fails before the rename, ``path`` is left intact and the temporary file is
    removed.

    Parameters
    ----------
    path : path-like
        Destination; its directory must exist.
    data : bytes
        The whole new content.

    Raises
    ------
    RunDirError
        If ``path`` is a symbolic link or a directory.
    """
    _atomic_write(Path(path), lambda handle: handle.write(data))


def atomic_copy(source: str | os.PathLike, path: str | os.PathLike) -> None:
    """Copy the regular file ``source`` to ``path`` atomically, as `atomic_write_bytes` writes.

    ``source`` is opened without following a link (`open_run_file`) and
    streamed, so a large checkpoint is never held in memory whole.

    Raises
    ------
    RunDirError
        If ``source`` is a link or not a regular file, or ``path`` is a link or a directory.
    OSError
        If ``source`` cannot be read.
    """
    descriptor = open_run_file(source, os.O_RDONLY)
    with os.fdopen(descriptor, "rb") as handle:
        _atomic_write(Path(path), lambda target: shutil.copyfileobj(handle, target))


def _atomic_write(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` atomically: ``fill`` writes a temporary file that then replaces it."""
    check_run_files(path.parent, [path.name])
    descriptor, temporary = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), 0o666 & ~_umask())
            fill(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; see `atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_stale_temporaries(run_dir: str | os.PathLike, names: Iterable[str]) -> list[Path]:
    """Remove the temporary files that killed writes of ``names`` left in ``run_dir``.

    Call it only while holding the run's lock: then no write of this run is in
    flight. Removes ``.NAME.*.tmp`` for every name and the ``.probe.*.tmp`` of
    `check_writable`; a link among them is removed, not followed.

    Returns
    -------
    list of Path
        The removed files.
    """
    prefixes = tuple(f".{name}." for name in (*names, "probe"))
    removed = []
    for entry in os.scandir(run_dir):
        if entry.name.startswith(prefixes) and entry.name.endswith(".tmp"):
            if entry.is_dir(follow_symlinks=False):
                continue
            Path(entry.path).unlink(missing_ok=True)
            removed.append(Path(entry.path))
    return removed
