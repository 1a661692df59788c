"""Sleep until a directory's entries change, or a timeout: Linux inotify through ctypes.

`unit wait` (SPEC 3.11) stats its files every 0.25 s; with this it also wakes the moment a
receipt is renamed into place, instead of at the next tick. It only shortens a sleep: the
caller's stat pass stays the source of truth, so where inotify is missing (another OS, no libc
symbol, the watch limit reached) `DirectoryWatch.sleep` is a plain `time.sleep` and nothing else
changes. By default it watches entry changes only (create, rename, delete), never file contents,
so a turn whose transcript grows does not wake a waiter; `contents=True` adds writes. It knows
nothing of units, pairs or git.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import sys
import time
from collections.abc import Iterable
from pathlib import Path

IN_MODIFY, IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x100, 0x200, 0x40, 0x80
IN_NONBLOCK, IN_CLOEXEC = 0o4000, 0o2000000
_MASK = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1  # noqa: B018 — the symbol must exist
        libc.inotify_add_watch  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


class DirectoryWatch:
    """An inotify instance over some directories (those that exist); `sleep` returns early when
    an entry in one of them changes — or, with `contents`, when a file in one is written to
    (`unit log --follow` wakes on an append to `events.jsonl`)."""

    def __init__(self, directories: Iterable[Path], *, contents: bool = False) -> None:
        self.fd = -1
        libc = _libc()
        if libc is None:
            return
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return
        watched = 0
        for directory in directories:
            mask = _MASK | (IN_MODIFY if contents else 0)
            if libc.inotify_add_watch(fd, os.fsencode(directory), mask) >= 0:
                watched += 1
        if watched:
            self.fd = fd
        else:
            os.close(fd)

    @property
    def active(self) -> bool:
        return self.fd >= 0

    def sleep(self, seconds: float) -> None:
        if self.fd < 0:
            time.sleep(seconds)
            return
        ready, _, _ = select.select([self.fd], [], [], seconds)
        if ready:
            try:
                while os.read(self.fd, 65536):  # drain: the caller's stat pass says what changed
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> DirectoryWatch:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
