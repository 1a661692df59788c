"""Start a turn's detached supervisor and wait for its handshake.

The supervisor runs in its own session with stdin from /dev/null and stdout/stderr to the turn's
`-supervisor.log`, so nobody capturing the caller's output waits for it. This returns once the
partner has started (the running record) or the turn already ended (its receipt); it never
waits for a turn to finish.

How it starts (references/decisions.md, "The supervisor is forked"): a fresh interpreter with
its imports costs more than the whole 150 ms turn budget (SPEC 7), so on Linux a single-threaded
caller forks itself — the supervisor's modules imported first — and the child becomes the
supervisor: new session, stdio reopened, every inherited descriptor closed (an flock held by
the caller must not live on in the turn), signal handlers reset, and it leaves only by
`os._exit`, never back into the caller's stack. A caller with other threads (whose locks a fork
would copy held) and other systems start `python -P -m pair _supervise ...` as before, and so
does `UNITMGR_PAIR_SUPERVISOR=exec`. Either way the supervisor is this process's child, so its
pid cannot be reused while the handshake watches it. A forked supervisor also keeps the write end
of a pipe and writes a byte to it once its partner is recorded (its exit closes it): the
handshake wakes on it instead of waiting out its poll, and still reads its answer from the files.

Just over 400 lines because the forked, exec'd and warm-served starts share one handshake and
one rule for a supervisor that misses it; keeping them together keeps it one rule.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pair.errors import StateError
from pair.paths import PairPaths
from pair.state import (
    MarkerUnreadable,
    read_marker,
    read_receipt,
    release_owned_marker,
    release_unclaimed_marker,
)
from registry.processes import OWN_CHILD, ProcessIdentity, identify, kill_tree
from registry.timeutil import seconds_from_env

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, NoReturn, Protocol
else:
    Protocol = object  # a structural type for mypy only: no `typing` at run time (SPEC 7)

HANDSHAKE_SECONDS = 10.0
HANDSHAKE_POLL_SECONDS = 0.01
# The supervisor's name in `ps -o comm` / psutil's name() when forked (its argv stays the caller's).
FORKED_NAME = b"pair-supervise"


class Supervisor(Protocol):
    """The started supervisor, a child of this process: a `subprocess.Popen` or a forked child."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self) -> int: ...


class ForkedSupervisor:
    """A supervisor forked from this process (the `Popen` methods the handshake uses)."""

    def __init__(self, pid: int, wake_fd: int | None = None) -> None:
        self.pid = pid
        self.returncode: int | None = None
        # The read end of a pipe the child writes a byte to once its partner is recorded (and
        # closes by exiting): the handshake wakes at once instead of at its next poll.
        self.wake_fd = wake_fd

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1  # reaped elsewhere: it is gone either way
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            os.kill(self.pid, signal.SIGKILL)

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
            except ChildProcessError:
                self.returncode = -1
        return self.returncode


# Forked supervisors still running when their launch returned: reaped (without blocking) at the
# next launch, as `subprocess` does for a dropped `Popen`, so a long-lived caller keeps no zombies.
_unreaped: list[ForkedSupervisor] = []


def _reap_finished() -> None:
    _unreaped[:] = [child for child in _unreaped if child.poll() is None]


def _forks() -> bool:
    """Whether to fork the supervisor: on Linux, single-threaded, unless told to exec. A
    process that loaded Ray's core holds native threads Python does not count: never forked."""
    return (
        sys.platform.startswith("linux")
        and threading.active_count() == 1
        and "ray._raylet" not in sys.modules
        and os.environ.get("UNITMGR_PAIR_SUPERVISOR") != "exec"
    )


def _exec_supervisor(paths: PairPaths, seq: int, token: str, log_fd: int) -> Supervisor:
    return subprocess.Popen(
        [
            sys.executable,
            "-P",  # never import from the cwd: a worktree may hold its own `pair/` package
            "-m",
            "pair",
            "_supervise",
            "--state-dir",
            str(paths.state_dir),
            "--seq",
            str(seq),
            "--token",
            token,
        ],
        cwd=paths.state_dir,
        stdin=subprocess.DEVNULL,
        stdout=log_fd,
        stderr=log_fd,
        start_new_session=True,
    )


def _fork_supervisor(paths: PairPaths, seq: int, token: str, log_fd: int) -> Supervisor:
    import gc

    from pair import supervisor  # imported once, here: the child starts with it loaded

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()  # a buffered line must not be written twice, once by the child
    wake_read, wake_write = os.pipe()  # both close on exec: the partner inherits neither
    gc.freeze()  # the child never collects (and so never closes) the caller's objects
    try:
        pid = os.fork()
    except BaseException:
        gc.unfreeze()
        os.close(wake_read)
        os.close(wake_write)
        raise
    if pid == 0:
        _become_supervisor(
            supervisor.supervise, paths.state_dir, seq, token, log_fd, wake_fd=wake_write
        )
    gc.unfreeze()
    os.close(wake_write)
    child = ForkedSupervisor(pid, wake_read)
    _unreaped.append(child)
    return child


def _become_supervisor(
    supervise: Any,
    state_dir: Path,
    seq: int,
    token: str,
    log_fd: int,
    environ: dict[str, str] | None = None,
    wake_fd: int | None = None,
) -> NoReturn:
    """The forked child: detach, keep only stdio, run the turn, and `os._exit` — whatever
    happens, control never returns into the caller's stack. `environ` replaces the process's
    environment (the warm Ray server's child takes its requester's: `ray_forkserver`)."""
    code = 1
    try:
        os.setsid()
        if environ is not None:
            os.environ.clear()
            os.environ.update(environ)
        os.chdir(state_dir)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2 and int(name) != wake_fd:
                with contextlib.suppress(OSError):
                    os.close(int(name))  # the caller's locks, pipes and sockets
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's own stdio)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        import faulthandler

        if faulthandler.is_enabled():
            faulthandler.enable(sys.stderr)  # its old descriptor is closed
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from registry.errors import reset_interrupt_hold

        reset_interrupt_hold()
        if wake_fd is not None:
            from pair.supervisor import wake_launcher_once_started

            wake_launcher_once_started(wake_fd)
        with contextlib.suppress(OSError), open("/proc/self/comm", "wb") as comm:
            comm.write(FORKED_NAME)
        code = supervise(state_dir, seq, token)
    except BaseException:
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def start_supervisor(
    paths: PairPaths,
    root: Path,
    seq: int,
    kind: str,
    token: str,
    *,
    handshake_seconds: float = HANDSHAKE_SECONDS,
    fork: bool = True,
    warm: bool = False,
) -> dict[str, Any]:
    """Start the supervisor; return the running record once the partner started (a remote
    partner, SPEC 4.3, counts: `remote_partner`) or the receipt. `handshake_seconds` is the
    default bound (a Ray turn's: connect, place the actor, start the partner on its node);
    `fork=False` always starts a fresh interpreter. `warm` (a Ray turn's) asks the warm Ray
    server (`pair.runners.ray_forkserver`) to fork it, with `ray` imported; with no server this
    turn starts cold and a server is started for the next."""
    _reap_finished()
    log_file = paths.turn_file(seq, kind, "-supervisor.log")
    log_fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        supervisor = _warm_supervisor(paths, seq, kind, token, log_fd) if warm else None
        if supervisor is None:
            start = _fork_supervisor if fork and _forks() else _exec_supervisor
            supervisor = start(paths, seq, token, log_fd)
    except OSError as error:
        release_owned_marker(paths, token)
        raise StateError(
            "supervisor-failed",
            f"could not start the detached turn supervisor: {error}",
            next_step=f"tail -n 40 {shlex.quote(str(log_file))}",
        ) from None
    finally:
        os.close(log_fd)
    try:
        return _handshake(paths, seq, kind, token, supervisor, log_file, handshake_seconds)
    finally:
        wake = getattr(supervisor, "wake_fd", None)
        if wake is not None:
            os.close(wake)


def _handshake(
    paths: PairPaths,
    seq: int,
    kind: str,
    token: str,
    supervisor: Supervisor,
    log_file: Path,
    handshake_seconds: float,
) -> dict[str, Any]:
    """The running record once the partner started, or the receipt (see `start_supervisor`)."""
    receipt_file = paths.turn_file(seq, kind, "-receipt.json")
    handshake = seconds_from_env("UNITMGR_PAIR_HANDSHAKE_SECONDS", handshake_seconds)
    poll = HANDSHAKE_POLL_SECONDS
    if os.environ.get("UNITMGR_TEST_HOOKS") == "1":
        # SPEC 8's test hooks may lengthen the poll: the forked supervisor's wake-up, not the
        # poll, must be what answers (tests/test_supervisor_launch.py).
        poll = seconds_from_env("UNITMGR_TEST_HANDSHAKE_POLL_SECONDS", poll)
    deadline = time.monotonic() + handshake
    while True:
        if receipt_file.exists():
            # Finished (or failed to start) before the handshake: the receipt is the answer.
            receipt = read_receipt(receipt_file)
            if receipt and "unreadable" not in receipt:
                return receipt
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            marker = None
        started = marker.partner or marker.remote_partner if marker is not None else None
        if marker is not None and marker.owner_token == token and started:
            partner = ProcessIdentity.from_json(started)
            return {
                "ok": True,
                "status": "running",
                **_running_view(paths, seq, kind, supervisor.pid, partner.pid if partner else None),
            }
        if supervisor.poll() is not None and not receipt_file.exists():
            release_owned_marker(paths, token)
            raise StateError(
                "supervisor-failed",
                f"the detached supervisor pid {supervisor.pid} exited before startup — see "
                f"{log_file}",
                next_step=f"tail -n 40 {shlex.quote(str(log_file))}",
            )
        if time.monotonic() > deadline:
            _stop_late_supervisor(paths, supervisor, token)
            # A turn fast enough to end between the last look and the kill has its receipt:
            # that is the answer, not a failure to start.
            receipt = read_receipt(receipt_file) if receipt_file.exists() else None
            if receipt and "unreadable" not in receipt:
                return receipt
            raise StateError(
                "supervisor-failed",
                f"the detached supervisor pid {supervisor.pid} did not start within "
                f"{handshake:g}s and was stopped — see {log_file}",
                detail={"seq": seq, "supervisor_pid": supervisor.pid},
                next_step=f"tail -n 40 {shlex.quote(str(log_file))}",
            )
        # Never past the deadline: a supervisor that misses it is stopped at the deadline.
        _nap(supervisor, max(0.0, min(poll, deadline - time.monotonic())))


def _nap(supervisor: Supervisor, seconds: float) -> None:
    """Sleep `seconds`, or less: a forked supervisor's byte (its partner is recorded) or exit
    wakes it at once. Each wake is followed by the same look at the files as a timeout."""
    wake = getattr(supervisor, "wake_fd", None)
    if wake is None:
        time.sleep(seconds)
        return
    import select

    ready, _, _ = select.select([wake], [], [], seconds)
    if ready and not os.read(wake, 64):  # the child has exited: polls alone from here
        os.close(wake)
        supervisor.wake_fd = None  # type: ignore[attr-defined]


def _warm_supervisor(
    paths: PairPaths, seq: int, kind: str, token: str, log_fd: int
) -> Supervisor | None:
    """The warm Ray server's supervisor for this turn, or None (start it cold: `spawn` was
    asked for a server for the next turn, never waited for)."""
    if not sys.platform.startswith("linux") or os.environ.get("UNITMGR_PAIR_SUPERVISOR") == "exec":
        return None
    if os.environ.get("UNITMGR_RAY_WARM_SERVER", "").strip() == "0":
        return None
    from pair.runners import ray_warm

    try:
        served = ray_warm.request(paths.state_dir, seq, token, log_fd)
    except ray_warm.Unanswered as error:
        # It may have forked one: never a second, cold, for the same turn. One that claimed
        # the turn is the turn's supervisor; one that has not yet never will (the marker goes).
        claimed = ProcessIdentity.from_json(release_unclaimed_marker(paths, token))
        if claimed is not None:  # named by a file: waited for, never killed
            return ray_warm.ServedSupervisor(
                claimed.pid, claimed.create_time, paths.state_dir, adopted=True
            )
        if paths.turn_file(seq, kind, "-receipt.json").exists():
            return _Finished()  # it ran and ended within the wait: its receipt is the answer
        raise OSError(str(error)) from None
    if served is None:
        ray_warm.spawn()
    return served


class _Finished:
    """A served supervisor that is already done (its receipt is written): nothing to signal."""

    pid = 0
    returncode = 0

    def poll(self) -> int:
        return 0

    def wait(self) -> int:
        return 0

    def kill(self) -> None:
        pass


def _stop_late_supervisor(paths: PairPaths, supervisor: Supervisor, token: str) -> None:
    """Kill a supervisor that missed its handshake, with its group and every descendant (a
    partner it may have started meanwhile), then release the marker: no orphan may run the turn
    later. It is our child and not yet reaped, so its pid cannot belong to anyone else — or,
    forked by the warm Ray server, it is killed only as the process its identity records."""
    if isinstance(supervisor, _Finished):
        return
    if getattr(supervisor, "identity", None) is not None:
        supervisor.kill()  # `ServedSupervisor.kill`: proven by identity and place
        supervisor.wait()
        if supervisor.poll() is None:  # unproven (it left the state dir), or SIGKILL not yet done
            raise StateError(
                "supervisor-failed",
                f"the detached supervisor pid {supervisor.pid} missed its start and could not "
                "be stopped; its turn stays in flight",
                next_step="pair cancel",
            )
        release_owned_marker(paths, token)
        return
    found = identify(supervisor.pid, argv0="pair _supervise")
    if found is not None:
        # No grace: on SIGTERM a supervisor would still finish and write a receipt.
        kill_tree(
            ProcessIdentity(pid=found.pid, create_time=found.create_time, pgid=supervisor.pid),
            proof=OWN_CHILD,
            grace_seconds=0.0,
        )
    with contextlib.suppress(ProcessLookupError):
        supervisor.kill()
    supervisor.wait()
    release_owned_marker(paths, token)


def _running_view(
    paths: PairPaths, seq: int, kind: str, supervisor_pid: Any, partner_pid: Any
) -> dict[str, Any]:
    return {
        "seq": seq,
        "kind": kind,
        "supervisor_pid": supervisor_pid,
        "partner_pid": partner_pid,
        "transcript": str(paths.turn_file(seq, kind, ".log")),
        "prompt_file": str(paths.turn_file(seq, kind, "-prompt.md")),
        "reply_file": str(paths.turn_file(seq, kind, "-reply.md")),
        "receipt_file": str(paths.turn_file(seq, kind, "-receipt.json")),
    }
