"""The one bounded reader of registry and pair files (SPEC 8 "Bounded reads everywhere").

An executor can write every file a view reads (records, the manifest, `events.jsonl`, lock
holders, its pair's session, marker, receipts and transcripts), so each read here:

- walks from a trusted anchor directory (`below`, default: the file's own directory) one
  component at a time with `O_NOFOLLOW|O_DIRECTORY`, so a symlinked `pair/`, `transcripts/` or
  `units/` is refused as well as a symlinked file, and a `..` never climbs out;
- `lstat`s the last component and refuses anything but a regular file *before* opening it (a
  FIFO is never opened, a device never touched), then opens it
  `O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC` and requires the descriptor to be that same regular
  file;
- reads at most `limit` bytes, by `pread` up to the size `fstat` gave, never past it (a file
  that grows while it is read, or a sparse 2 GiB one, costs no more than its bound).

Anything else is `Unreadable` (a `ValueError`, so a caller that already treats a corrupt JSON
file as unreadable treats these the same way) with a reason for a person; a missing file is
`FileNotFoundError`. This module must stay import-light (the fast reads load it): os, stat and
errno only, json on use.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

MAX_JSON_BYTES = 1024 * 1024  # SPEC 8: session, marker, receipts, holders
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Unreadable(ValueError):
    """A file the bounded reader refused; `reason` says why, for a person."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


def _parts(path: str | Path, below: str | Path | None) -> tuple[str, list[str]]:
    text = os.fspath(path)
    anchor = os.fspath(below) if below is not None else os.path.dirname(text) or "."
    relative = os.path.relpath(text, anchor) if os.path.isabs(text) == os.path.isabs(anchor) else ""
    parts = relative.split("/") if relative else []
    if not parts or any(part in ("", ".", "..") for part in parts):
        raise Unreadable(path, f"is not a file under {anchor}")
    return anchor, parts


def open_regular(path: str | Path, *, below: str | Path | None = None) -> int:
    """A descriptor of the regular file `path`, reached from `below` without following a
    symlink; the caller closes it. `FileNotFoundError` when it is missing."""
    anchor, parts = _parts(path, below)
    try:
        directory = os.open(anchor, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise Unreadable(path, f"cannot open {anchor}: {error.strerror}") from None
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, DIR_FLAGS, dir_fd=directory)
            except FileNotFoundError:
                raise
            except OSError as error:
                if error.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Unreadable(
                        path, f"{part}/ is a symbolic link or not a directory"
                    ) from None
                raise Unreadable(path, f"cannot open {part}/: {error.strerror}") from None
            os.close(directory)
            directory = inner
        name = parts[-1]
        before = os.stat(name, dir_fd=directory, follow_symlinks=False)
        if not stat.S_ISREG(before.st_mode):
            raise Unreadable(path, f"is {_kind(before.st_mode)}, not a regular file")
        try:
            fd = os.open(name, FILE_FLAGS, dir_fd=directory)
        except FileNotFoundError:
            raise
        except OSError as error:
            raise Unreadable(path, f"cannot open it: {error.strerror}") from None
        info = os.fstat(fd)
        # Another inode than the one checked is the normal case of an atomic rewrite
        # (`os.replace` between the stat and the open): what counts is that the file opened
        # — without following a link, without blocking — is itself a regular file.
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise Unreadable(path, "was swapped for something else while it was opened")
        return fd
    finally:
        os.close(directory)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _pread(fd: int, path: str | Path, offset: int, count: int) -> bytes:
    chunks, done = [], 0
    while done < count:
        try:
            chunk = os.pread(fd, min(count - done, 1 << 20), offset + done)
        except OSError as error:
            raise Unreadable(path, f"cannot read it: {error.strerror}") from None
        if not chunk:
            break  # it shrank since the fstat
        chunks.append(chunk)
        done += len(chunk)
    return b"".join(chunks)


def read_bytes(
    path: str | Path, limit: int = MAX_JSON_BYTES, *, below: str | Path | None = None
) -> bytes:
    """The whole of a regular file of at most `limit` bytes."""
    fd = open_regular(path, below=below)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise Unreadable(path, f"is {size} bytes, over the {limit}-byte bound")
        return _pread(fd, path, 0, size)
    finally:
        os.close(fd)


def read_json(
    path: str | Path, limit: int = MAX_JSON_BYTES, *, below: str | Path | None = None
) -> Any:
    """A JSON file of at most `limit` bytes; `ValueError` (or `Unreadable`) when it is not."""
    import json

    return json.loads(read_bytes(path, limit, below=below))


def read_range(
    path: str | Path, offset: int, limit: int, *, below: str | Path | None = None
) -> tuple[bytes, int]:
    """At most `limit` bytes from `offset` (never past the size `fstat` gave), and that size."""
    fd = open_regular(path, below=below)
    try:
        size = os.fstat(fd).st_size
        start = min(max(0, offset), size)
        return _pread(fd, path, start, min(limit, size - start)), size
    finally:
        os.close(fd)


def read_tail(
    path: str | Path, limit: int, *, below: str | Path | None = None
) -> tuple[bytes, int, int]:
    """The last `limit` bytes of a regular file, its size and the offset they start at; a line
    cut by the start is dropped."""
    fd = open_regular(path, below=below)
    try:
        size = os.fstat(fd).st_size
        offset = max(0, size - limit)
        data = _pread(fd, path, offset, size - offset)
    finally:
        os.close(fd)
    if offset:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data, size, offset


def lstat(path: str | Path) -> os.stat_result:
    """A `stat` of the link itself: a size or mtime view never follows an executor's symlink."""
    return os.stat(path, follow_symlinks=False)
