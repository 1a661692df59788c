"""Run one partner turn to completion: spawn, stream, enforce budgets, kill, interpret.

Used by the detached supervisor for every `send`. The partner runs in its own process group with
stdin from the prompt file (or /dev/null); its stdout and stderr are written to the transcript as
they arrive (redacted, so a split token is still caught), and stdout is also kept (bounded) for the
adapter to read the reply from. Budgets: `idle` (no output) and `total` (wall time). On a hang the
partner's whole group and every descendant found with psutil get SIGTERM, then SIGKILL (after 2 s;
after 5 s when the turn is cancelled). What the partner left running after its exit is killed too
and described in `leftovers`.

Over ~400 lines because spawning, streaming, the two budgets and the kill are one loop over one
partner's process group, and the signals read from the stream (a queued heavy job, throttling)
are read in that loop; split, each part would need the others' state.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pair.partners.base import Partner, TurnCommand, TurnOutcome, TurnOutput, TurnRequest
from registry import bounded
from registry import light_dataclass as dataclasses
from registry.atomic import FILE_MODE
from registry.environment import start_found
from registry.lazy_re import lazy
from registry.light_dataclass import dataclass, field
from registry.processes import (
    OWN_CHILD,
    ProcessIdentity,
    child_create_time,
    exited_alone,
    group_members,
    kill_tree,
)
from registry.redact import StreamRedactor, redact
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

STDOUT_KEEP_BYTES = 32 * 1024 * 1024
POLL_SECONDS = 0.25
EXIT_DRAIN_SECONDS = 0.5
KILL_GRACE_SECONDS = 2.0
CANCEL_GRACE_SECONDS = 5.0
THROTTLE_PATTERN = lazy(
    rb"(?i)(rate.?limit|too many requests|\b429\b|usage limit|quota exceeded|retry(?:ing)? in \d)"
)
THROTTLE_LINE_CUT = 300
THROTTLE_SCAN_BYTES = 16 * 1024 * 1024  # a transcript's end: where a turn's throttling shows


# Budgets in minutes (SPEC 4): a writable task, and every other turn (the bootstrap included).
TASK_BUDGET_MINUTES = (45.0, 120.0)
DEFAULT_BUDGET_MINUTES = (20.0, 60.0)
HEAVY_PROBE_SECONDS = 10.0


@dataclass(frozen=True)
class QuietAlarm:
    """Rings once per quiet stretch: when the partner has written nothing for `seconds` (what
    SPEC 3.4 calls `stuck`), with how long it has been quiet. Output re-arms it. It never ends
    the turn (the idle budget does) and must not raise; it runs in the streaming loop, so it
    must return at once."""

    seconds: float
    ring: Callable[[float], None]


@dataclass(frozen=True)
class Budgets:
    idle_seconds: float
    total_seconds: float
    raise_with: str = "pair send"  # the command whose --idle-min / --total-min raise them


class HeavyQueue:
    """Watches the partner's descendants for a job queued on the machine-wide heavy slot.

    `agent-run heavy <command>` takes the slot with a blocking flock before it starts its child,
    so a queued job is an `agent-run heavy` process under the partner that has no child yet.
    While one is queued the budgets pause: the total excludes queue time and idle stays zero.
    """

    def __init__(
        self,
        partner_pid: int,
        probe_seconds: float,
        on_change: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.partner_pid = partner_pid
        self.probe_seconds = probe_seconds
        self.on_change = on_change
        # Not at once: a partner that has just started has queued nothing, and the first look
        # would import psutil into every turn, however short (SPEC 7).
        self.next_probe = time.monotonic() + probe_seconds
        self.queued_since: float | None = None
        self.queued_at: str | None = None
        self.paused = 0.0
        self.episodes = 0

    def poll(self, now: float) -> bool:
        if now >= self.next_probe:
            self.next_probe = now + self.probe_seconds
            job = queued_heavy_job(self.partner_pid)
            if job is not None and self.queued_since is None:
                self.queued_since, self.queued_at = now, iso_z()
                self.episodes += 1
                self._changed(now, job)
            elif job is None and self.queued_since is not None:
                self.paused += now - self.queued_since
                self.queued_since = self.queued_at = None
                self._changed(now, None)
        return self.queued_since is not None

    def seconds(self, now: float) -> float:
        return self.paused + (now - self.queued_since if self.queued_since is not None else 0.0)

    def summary(self, now: float) -> dict[str, Any] | None:
        if not self.episodes:
            return None
        return {"seconds": round(self.seconds(now)), "episodes": self.episodes}

    def _changed(self, now: float, job: dict[str, Any] | None) -> None:
        if self.on_change is not None:
            self.on_change(
                {
                    "queued": job is not None,
                    "since": self.queued_at,
                    "job": job,
                    "seconds": round(self.seconds(now)),
                    "episodes": self.episodes,
                }
            )


def queued_heavy_job(partner_pid: int) -> dict[str, Any] | None:
    """The first `agent-run heavy` descendant of the partner that has no child yet."""
    import psutil

    try:
        descendants = psutil.Process(partner_pid).children(recursive=True)
    except psutil.Error:
        return None
    for process in descendants:
        try:
            argv = process.cmdline()
            for index, word in enumerate(argv[:-1]):
                if os.path.basename(word) == "agent-run" and argv[index + 1] == "heavy":
                    if process.children():
                        break
                    rest = argv[index + 2 :]
                    if rest[:1] == ["--"]:
                        rest = rest[1:]
                    return {"pid": process.pid, "command": " ".join(rest)}
        except psutil.Error:
            continue
    return None


@dataclass
class TurnResult:
    outcome: TurnOutcome  # replied | empty-reply | failed | rate-limited | hang-killed | cancelled
    exit_code: int | None
    seconds: float
    command: list[str]
    partner: ProcessIdentity | None
    partial_reply: bool = False
    throttle_signals: dict[str, Any] | None = None
    heavy_queue: dict[str, Any] | None = None
    leftovers: list[dict[str, Any]] = field(default_factory=list)  # [{pid, argv}] killed after

    @property
    def status(self) -> str:
        return self.outcome.status


def _duration(seconds: float) -> str:
    return f"{int(seconds)}s" if seconds < 60 else f"{round(seconds / 60)}m"


def _exited(process: subprocess.Popen[bytes]) -> bool:
    """Whether the partner has exited, without reaping it.

    Its pid stays reserved (a zombie) until `wait()`, so its process group can still be
    signalled safely afterwards: no unrelated process can have taken that number.
    """
    try:
        return os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _note(transcript: Path, line: str) -> None:
    """Append one line of pair's own to the transcript."""
    fd = os.open(transcript, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        _write_all(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run_turn(
    adapter: Partner,
    request: TurnRequest,
    *,
    transcript: Path,
    budgets: Budgets,
    environment: dict[str, str],
    on_partner_start: Callable[[ProcessIdentity], None] | None = None,
    on_heavy_change: Callable[[dict[str, Any]], None] | None = None,
    heavy_probe_seconds: float = HEAVY_PROBE_SECONDS,
    stop_requested: Callable[[], str | None] | None = None,
    quiet_alarm: QuietAlarm | None = None,
) -> TurnResult:
    """Run one turn. `stop_requested` is polled while the partner runs: a reason it returns
    cancels the turn (the partner's tree is killed, the outcome is `cancelled`). `quiet_alarm`
    rings when the partner goes quiet for its seconds (once per quiet stretch)."""
    started = time.monotonic()
    command = adapter.command(request)
    transcript_fd = os.open(
        transcript, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE
    )
    try:
        try:
            process = _spawn(command, request.worktree, {**environment, **command.environment})
        except OSError as error:
            reason = redact(f"cannot run {command.argv[0]}: {error.strerror or error}")
            _write_all(transcript_fd, (reason + "\n").encode())
            return TurnResult(
                outcome=TurnOutcome(status="failed", reason=reason),
                exit_code=None,
                seconds=round(time.monotonic() - started, 3),
                command=command.recorded,
                partner=None,
            )
        partner = ProcessIdentity(
            pid=process.pid,
            create_time=child_create_time(process.pid),  # unreaped: readable even once it exits
            pgid=process.pid,  # start_new_session: the partner leads its own group
            argv0=command.argv[0],
        )
        try:
            if on_partner_start is not None:
                on_partner_start(partner)
            heavy = HeavyQueue(process.pid, heavy_probe_seconds, on_heavy_change)
            stdout, hang_reason, cancel_reason = _stream(
                process, transcript_fd, budgets, started, heavy, stop_requested, quiet_alarm
            )
        except BaseException:
            # Interrupted (Ctrl-C during init, a failing callback): never leave it running.
            kill_tree(partner, proof=OWN_CHILD, grace_seconds=KILL_GRACE_SECONDS)
            _close_pipes(process)
            process.wait()
            raise
    finally:
        os.close(transcript_fd)

    # A hang or a cancel kills the whole group; after an exit, whatever the partner left running
    # in it (a background job still editing the worktree) would otherwise overlap the next turn.
    # Both happen before the partner is reaped, so its pid (the group id) cannot be reused
    # meanwhile. The pipes close only after the kill: closing them first kills a leftover that
    # writes (SIGPIPE) before it is seen, and on a busy machine that left it out of `leftovers`.
    stopped = hang_reason or cancel_reason
    if not stopped and exited_alone(partner.pid, partner.pgid):
        described, killed = {}, []  # the usual end: nothing left, and no psutil to prove it
    else:
        described = {} if stopped else _described_tree(partner)
        grace = CANCEL_GRACE_SECONDS if cancel_reason else KILL_GRACE_SECONDS
        killed = kill_tree(partner, proof=OWN_CHILD, grace_seconds=grace)
    _close_pipes(process)
    leftovers = [] if stopped else [described.get(pid, {"pid": pid, "argv": []}) for pid in killed]
    exit_code = process.wait()
    seconds = round(time.monotonic() - started, 3)
    output = TurnOutput(exit_code=None if stopped else exit_code, stdout=stdout)
    throttle = throttle_signals(transcript)
    queue = heavy.summary(time.monotonic())
    if leftovers:
        _note(transcript, f"[pair: stopped {len(leftovers)} process(es) the partner left running]")
    if cancel_reason:
        _note(transcript, f"[pair: cancelled: {cancel_reason}]")
    if stopped:
        partial = adapter.partial_reply(output)
        return TurnResult(
            outcome=TurnOutcome(
                status="cancelled" if cancel_reason else "hang-killed",
                reply=redact(partial) if partial else None,
                reason=f"cancelled: {cancel_reason}" if cancel_reason else f"hang: {hang_reason}",
            ),
            exit_code=None,
            seconds=seconds,
            command=command.recorded,
            partner=partner,
            partial_reply=bool(partial),
            throttle_signals=throttle,
            heavy_queue=queue,
        )
    outcome = adapter.interpret(request, output)
    if outcome.reply:
        outcome = dataclasses.replace(outcome, reply=redact(outcome.reply))
    return TurnResult(
        outcome=outcome,
        exit_code=exit_code,
        seconds=seconds,
        command=command.recorded,
        partner=partner,
        throttle_signals=throttle,
        heavy_queue=queue,
        leftovers=leftovers,
    )


def _described_tree(partner: ProcessIdentity) -> dict[int, dict[str, Any]]:
    """`{pid: {pid, argv}}` of what runs in the partner's group or below it, read before the
    kill (a dead process's argv cannot be read)."""
    import psutil

    from pair.reaper import describe, running

    processes = []
    if partner.pgid is not None:
        for pid in group_members(partner.pgid):
            with contextlib.suppress(psutil.Error):
                processes.append(psutil.Process(pid))
    with contextlib.suppress(psutil.Error):
        processes.extend(psutil.Process(partner.pid).children(recursive=True))
    return {process.pid: describe(process) for process in running(processes)}


def _spawn(
    command: TurnCommand, worktree: Path, environment: dict[str, str]
) -> subprocess.Popen[bytes]:
    # Found once on the partner's PATH, not by an `execve` per directory; its argv is unchanged.
    if command.stdin_file is None:
        return start_found(
            subprocess.Popen,
            command.argv,
            cwd=worktree,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=environment,
        )
    with open(command.stdin_file, "rb") as prompt:
        return start_found(
            subprocess.Popen,
            command.argv,
            cwd=worktree,
            stdin=prompt,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=environment,
        )


def _stream(
    process: subprocess.Popen[bytes],
    transcript_fd: int,
    budgets: Budgets,
    started: float,
    heavy: HeavyQueue,
    stop_requested: Callable[[], str | None] | None = None,
    quiet_alarm: QuietAlarm | None = None,
) -> tuple[bytes, str | None, str | None]:
    """Copy the partner's output to the transcript until it exits, a budget runs out or the
    turn is cancelled. The pipes stay open (the caller closes them after its kill).

    Returns the kept stdout, on a hang why, and on a cancel its reason.
    """
    assert process.stdout is not None and process.stderr is not None
    names = {process.stdout.fileno(): "stdout", process.stderr.fileno(): "stderr"}
    redactors = {"stdout": StreamRedactor(), "stderr": StreamRedactor()}
    kept = bytearray()
    last_output = time.monotonic()
    rang = False  # the quiet alarm, for the current quiet stretch
    hang_reason: str | None = None
    cancel_reason: str | None = None
    exited_at: float | None = None
    closed_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for fd in names:
            os.set_blocking(fd, False)
            selector.register(fd, selectors.EVENT_READ)
        open_streams = len(names)
        while True:
            # With both pipes closed the partner may still run (it can close its output): keep
            # polling it, so the budgets still apply.
            events = selector.select(timeout=POLL_SECONDS) if open_streams else []
            if not open_streams and not _exited(process):
                # Pipes close a moment before the exit is visible: look again soon at first.
                closed_at = closed_at or time.monotonic()
                time.sleep(0.01 if time.monotonic() - closed_at < 1 else POLL_SECONDS)
            now = time.monotonic()
            for key, _ in events:
                name = names[key.fd]
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    selector.unregister(key.fd)
                    open_streams -= 1
                    _write_all(transcript_fd, redactors[name].flush())
                    continue
                last_output, rang = now, False
                if name == "stdout":
                    kept.extend(chunk)
                    del kept[:-STDOUT_KEEP_BYTES]
                _write_all(transcript_fd, redactors[name].feed(chunk, now))
            for redactor in redactors.values():
                _write_all(transcript_fd, redactor.pending(now))
            if _exited(process):
                # Exited. A background grandchild may hold the pipes open and keep writing:
                # drain what is there, briefly, then stop (the exit code decides the turn).
                exited_at = exited_at or now
                if not events or not open_streams or now - exited_at > EXIT_DRAIN_SECONDS:
                    break
            if stop_requested is not None:
                cancel_reason = stop_requested()
                if cancel_reason:
                    break
            if heavy.poll(now):
                last_output, rang = now, False  # queued on the heavy slot: not idle, not counted
            if quiet_alarm is not None and not rang and now - last_output >= quiet_alarm.seconds:
                rang = True
                quiet_alarm.ring(now - last_output)
            elapsed = now - started - heavy.seconds(now)
            if now - last_output > budgets.idle_seconds:
                hang_reason = (
                    f"no output for {_duration(now - last_output)} — raise it with "
                    f"{budgets.raise_with} --idle-min"
                )
            elif elapsed > budgets.total_seconds:
                hang_reason = (
                    f"total budget {_duration(budgets.total_seconds)} exceeded — raise it with "
                    f"{budgets.raise_with} --total-min"
                )
                if heavy.seconds(now) >= 1:
                    hang_reason += (
                        f" ({_duration(heavy.seconds(now))} queued on the heavy slot was excluded)"
                    )
            if hang_reason:
                break
    for redactor in redactors.values():
        _write_all(transcript_fd, redactor.flush())
    return bytes(kept), hang_reason, cancel_reason


def _close_pipes(process: subprocess.Popen[bytes]) -> None:
    """Close our ends of the partner's output pipes (once its tree is stopped: see run_turn)."""
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def throttle_signals(transcript: Path) -> dict[str, Any] | None:
    """`{rate_limit_lines, first}` over the transcript's lines, or None when there are none.

    Only its last `THROTTLE_SCAN_BYTES` are scanned, through the bounded reader: the partner
    can make its transcript a 2 GiB hole or one endless line (SPEC 8)."""
    count = 0
    first: str | None = None
    try:
        data, _, _ = bounded.read_tail(transcript, THROTTLE_SCAN_BYTES)
    except (FileNotFoundError, bounded.Unreadable):
        return None
    for line in data.splitlines():
        if THROTTLE_PATTERN.search(line):
            count += 1
            if first is None:
                first = line.decode("utf-8", "replace").strip()[:THROTTLE_LINE_CUT]
    return {"rate_limit_lines": count, "first": first} if count else None
