"""flock-based locks with holder information and one shared deadline (SPEC 2.4).

A lock file is created once (mode 0600) and never deleted: deleting a flock file lets two
processes "hold" locks on two different inodes. Right after acquiring, the holder truncates the
file and writes one JSON line `{pid, create_time, command, since}`; a contender that gives up
names the holder only when that pid is alive with the same create_time, else "held by an
unidentified process". The kernel releases the flock of a crashed holder, so a `kill -9` never
blocks anyone.

Descriptors are opened close-on-exec (PEP 446), so a child never inherits a lock; nothing here
forks. A process holds at most one unit lock and takes it before the registry lock (callers keep
that order; `Deadline` bounds the total wait of one command).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from registry import bounded
from registry.atomic import FILE_MODE, ensure_private_dir
from registry.errors import RetryableError, Rewrite
from registry.light_dataclass import dataclass
from registry.redact import redact
from registry.timeutil import iso_z, parse_iso, utc_now

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

POLL_SECONDS = 0.02


class Deadline:
    """The total time one command may spend waiting for its locks (`--lock-timeout`; 0 = never
    wait). Only waiting counts: a fetch or a worktree add between two locks spends nothing."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, seconds)
        self.waited = 0.0

    def remaining(self) -> float:
        return max(0.0, self.seconds - self.waited)

    def spend(self, seconds: float) -> None:
        self.waited += seconds


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: its process and command, and since when."""

    pid: int
    create_time: float
    command: str
    since: str

    def to_json(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "create_time": self.create_time,
            "command": self.command,
            "since": self.since,
        }


def read_holder(path: Path) -> Holder | None:
    try:
        text = bounded.read_bytes(path, HOLDER_BYTES).decode("utf-8").strip()
    except (OSError, ValueError):  # missing, refused by the bounded reader, or not UTF-8
        return None
    return _holder_from(text.splitlines()[0] if text else "")


def _holder_from(line: str) -> Holder | None:
    try:
        data = json.loads(line) if line else None
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    pid, create_time = data.get("pid"), data.get("create_time")
    if not isinstance(pid, int) or not isinstance(create_time, int | float):
        return None
    return Holder(
        pid=pid,
        create_time=float(create_time),
        command=str(data.get("command", "")),
        since=str(data.get("since", "")),
    )


def describe_holder(path: Path) -> tuple[str, dict[str, Any] | None]:
    """`unit create --unit api-7 (pid 4242) has held it for 12s`, or the unidentified form."""
    from registry.processes import ProcessIdentity, is_alive

    holder = read_holder(path)
    if holder is None or not is_alive(ProcessIdentity(holder.pid, holder.create_time)):
        return "held by an unidentified process", None
    try:
        held = int((utc_now() - parse_iso(holder.since)).total_seconds())
    except ValueError:
        held = 0
    return f"{holder.command} (pid {holder.pid}) has held it for {max(0, held)}s", holder.to_json()


HOLDER_BYTES = 4096  # one JSON line; a larger (or planted) lock file is not read further


def held_by(path: Path) -> dict[str, Any] | None:
    """Who holds the flock on `path` right now, asked without waiting and without writing.

    None when nobody holds it (or there is no such lock file); else the holder's `{pid,
    command, since}` when its holder line names a live process, or `{pid: None, command: None,
    since: None}` for a holder nobody can name. The kernel is asked first (a shared flock
    attempt that fails only while an exclusive one is held), so a holder line an executor
    planted in an unlocked file never makes a unit look busy.
    """
    from registry.processes import ProcessIdentity, is_alive

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        line = os.read(fd, HOLDER_BYTES).decode("utf-8", "replace").strip().splitlines()
    finally:
        os.close(fd)
    holder = _holder_from(line[0] if line else "")
    if holder is None or not is_alive(ProcessIdentity(holder.pid, holder.create_time)):
        return {"pid": None, "command": None, "since": None}
    return {"pid": holder.pid, "command": holder.command, "since": holder.since}


class FileLock:
    """An exclusive flock on `path`, named `subject` in refusals (e.g. "unit api-7")."""

    def __init__(self, path: Path, *, subject: str, command: str) -> None:
        self.path = path
        self.subject = subject
        self.command = command
        self._fd: int | None = None

    def try_acquire(self) -> bool:
        """One attempt, never waiting."""
        if self._fd is not None:
            raise RuntimeError(f"{self.subject} lock is already held by this process")
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(fd)
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        self._fd = fd
        self._publish_holder(fd)
        return True

    def acquire(self, deadline: Deadline) -> None:
        while not self.try_acquire():
            remaining = deadline.remaining()
            if remaining <= 0:
                raise self.busy_error()
            pause = min(POLL_SECONDS, remaining)
            time.sleep(pause)
            deadline.spend(pause)

    def busy_error(self) -> RetryableError:
        description, holder = describe_holder(self.path)
        return RetryableError(
            "lock-busy",
            f"{self.subject} is busy: {description}",
            detail={"lock_file": str(self.path), "holder": holder},
            next_step="--lock-timeout 120 (wait longer for that command to finish)",
            next_command=Rewrite(set_options={"--lock-timeout": "120"}),
        )

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the only descriptor releases the flock

    def _publish_holder(self, fd: int) -> None:
        from registry.processes import current_identity

        me = current_identity()
        line = json.dumps(
            {
                "pid": me.pid,
                "create_time": me.create_time,
                "command": redact(self.command),
                "since": iso_z(),
            }
        )
        os.ftruncate(fd, 0)
        os.pwrite(fd, (line + "\n").encode("utf-8"), 0)

    @contextlib.contextmanager
    def hold(self, deadline: Deadline) -> Iterator[None]:
        """Acquire (waiting within `deadline`), run the body, release."""
        self.acquire(deadline)
        try:
            yield
        finally:
            self.release()
