"""Crash-safe file writes: private directories, atomic replace, single-write appends.

A write lands completely or not at all: temp file in the same directory (created exclusively,
mode 0600), flush + fsync, `os.replace`, then fsync of the directory (`F_FULLFSYNC` on macOS,
where `fsync` only reaches the drive cache). A SIGKILL at any point leaves the old file intact and
at worst a `.*.tmp` file, which `sweep_temp_files` removes.

Text passes through `registry.redact` on its way to disk. Nothing here knows git or JSON schemas.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

from registry.redact import redact

DIR_MODE = 0o700
FILE_MODE = 0o600
TEMP_SUFFIX = ".tmp"


def ensure_private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) with mode 0700; leave an existing one as it is."""
    missing: list[Path] = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            directory.mkdir(mode=DIR_MODE)
            os.chmod(directory, DIR_MODE)  # mkdir's mode is filtered by the umask
    return path


def _fsync(fd: int) -> None:
    full_fsync = getattr(fcntl, "F_FULLFSYNC", None)
    if full_fsync is not None:
        try:
            fcntl.fcntl(fd, full_fsync)
            return
        except OSError:
            pass
    os.fsync(fd)


def fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(
    path: Path, data: bytes, *, mode: int = FILE_MODE, staging: Path | None = None
) -> None:
    """`staging`, when given, holds the temp file instead of `path`'s directory: it must be on
    the same filesystem, and a writer killed mid-write leaves its temp there, not beside `path`
    (a hook's temp in the hooks directory is a stranger to the config audit)."""
    ensure_private_dir(path.parent)
    name = f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}{TEMP_SUFFIX}"
    temp = (staging or path.parent) / name
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        _fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    os.close(fd)
    try:
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
        raise
    fsync_directory(path.parent)


def write_text_atomic(
    path: Path, text: str, *, mode: int = FILE_MODE, staging: Path | None = None
) -> None:
    write_bytes_atomic(path, redact(text).encode("utf-8"), mode=mode, staging=staging)


def append_line(path: Path, line: str) -> None:
    """Append one line with a single `os.write` on an `O_APPEND` descriptor.

    Appends of one write are not interleaved with other appenders on a local filesystem, so
    concurrent commands never tear each other's event lines.
    """
    ensure_private_dir(path.parent)
    data = (redact(line.rstrip("\n")) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def remove_file(path: Path) -> bool:
    """Remove `path`; return whether it existed."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def sweep_temp_files(directory: Path, *, older_than_seconds: float = 600.0) -> list[Path]:
    """Remove `.*.tmp` leftovers of crashed writers: those whose writer (the pid in the name,
    `write_bytes_atomic`'s) is no longer alive, and any old enough that its writer must be dead
    (a live pid may be another process by now)."""
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    cutoff = time.time() - older_than_seconds
    for candidate in directory.glob(f".*{TEMP_SUFFIX}"):
        with contextlib.suppress(OSError):
            if not _writer_alive(candidate.name) or candidate.stat().st_mtime < cutoff:
                candidate.unlink()
                removed.append(candidate)
    return removed


def _writer_alive(temp_name: str) -> bool:
    """Whether the process that named this temp file may still be writing it."""
    parts = temp_name[: -len(TEMP_SUFFIX)].rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return True  # not one of ours: only age removes it
    pid = int(parts[1])
    if pid == os.getpid():
        return True  # this process: a write in another thread may be under way
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True
