"""The detached turn supervisor: `python -m pair _supervise --state-dir D --seq N --token T`.

`send` starts it in its own session with stdin from /dev/null and stdout/stderr to the turn's
`-supervisor.log`, so nobody capturing `send`'s output waits for it. It proves it owns the
in-flight marker (same seq and owner token), records itself and then the partner in the marker,
makes itself the child subreaper of the partner's descendants, runs the turn (`pair.turn`),
kills whatever of the turn is still running, writes the reply and the receipt atomically, and only
then releases the marker. If anything goes wrong it still writes a `failed` receipt and releases
the marker; if it is killed, `wait` reports `worker-lost` and `clear` recovers.

SIGTERM is a cancel (`pair cancel` records its reason in the marker first): the partner's tree is
killed and the receipt says `cancelled`.

It imports neither GitPython nor PyGithub. Over 400 lines by a few: the receipt's builder and
the rate-limit reading are the supervisor's own, and the Ray runner reuses them from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path

from pair import git as pair_git
from pair import receipts
from pair.environment import partner_environment, session_variables
from pair.notify import announce_turn_end, stuck_alarm
from pair.partners import adapter_for
from pair.partners.base import REPLY_MAX_BYTES, TurnOutcome, TurnRequest
from pair.paths import PairPaths
from pair.proof import turn_environment
from pair.reaper import become_subreaper, sweep_descendants
from pair.ref_audit import audit_refs, foreign_changes
from pair.state import (
    Marker,
    MarkerUnreadable,
    Session,
    load_session,
    marker_mutex,
    read_marker,
    release_owned_marker,
    save_session,
    update_owned_marker,
)
from pair.turn import (
    DEFAULT_BUDGET_MINUTES,
    HEAVY_PROBE_SECONDS,
    Budgets,
    QuietAlarm,
    TurnResult,
    run_turn,
)
from registry import bounded
from registry.atomic import write_text_atomic
from registry.processes import ProcessIdentity, current_identity
from registry.timeutil import iso_z, seconds_from_env

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    _A = TypeVar("_A")
    _B = TypeVar("_B")

EXIT_NOT_OWNER = 2
SIGTERM_REASON = "the supervisor received SIGTERM"
CLAUDE_API_KEY_LIMITS = (
    "claude runs under an API key (ANTHROPIC_API_KEY), whose stream carries no rate_limit_event"
)


class Stop:
    """Set by the SIGTERM handler; the turn loop polls it (a handler must not do the work)."""

    signalled = False


def _on_sigterm(signum: int, frame: Any) -> None:
    Stop.signalled = True


def passed(value: str | None, argv: list[str]) -> str | None:
    """`value` when the command line passes it (as a word, or as `key=value` / `key="value"`)."""
    if value is None:
        return None
    for word in argv:
        if word == value or word.endswith((f"={value}", f'="{value}"')):
            return value
    return None


def build_receipt(
    *,
    paths: PairPaths,
    session: Session,
    marker: Marker,
    request: TurnRequest,
    result: TurnResult,
    supervisor_pid: int,
    started_at: str,
    rate_limits: dict[str, Any] | None,
    leftovers: list[dict[str, Any]],
    audits: dict[str, list[dict[str, Any]] | None],  # foreign/unattributed ref, foreign config
) -> dict[str, Any]:
    seq, kind = marker.seq, marker.kind
    outcome = result.outcome
    retry_after = getattr(outcome, "retry_after_seconds", None)
    ok = result.status == "replied"
    # The minimal receipt names every key; the turn's own facts replace its plain values.
    receipt = receipts.minimal_receipt(
        paths,
        session,
        marker,
        status=result.status,
        reason=outcome.reason or "",
        supervisor_pid=supervisor_pid,
        started_at=started_at,
        leftovers=leftovers,
    )
    if ok:
        del receipt["code"], receipt["next"]
    else:  # worded again: a rate limit's next step names its wait
        receipt.update(
            receipts.failure_fields(
                result.status,
                root=session.worktree,
                seq=seq,
                kind=kind,
                transcript=receipt["transcript"],
                retry_after_seconds=retry_after,
            )
        )
    receipt.update(
        {
            "model": passed(request.model, result.command),
            "effort": passed(request.effort, result.command),
            "command": result.command,
            "ok": ok,
            "reason": outcome.reason,
            "exit_code": result.exit_code,
            "seconds": result.seconds,
            **receipts.embedded_reply(outcome.reply),
            "partial_reply": result.partial_reply,
            "heavy_queue": result.heavy_queue,
            "throttle_signals": result.throttle_signals,
            "rate_limits": rate_limits,
            "retry_after_seconds": retry_after,
            **audits,
            "reply_file": str(paths.turn_file(seq, kind, "-reply.md")) if outcome.reply else None,
            "partner_pid": result.partner.pid if result.partner else None,
        }
    )
    return receipt


def resume_model(session: Session) -> str | None:
    """The model a resumed turn is handed: the script's command line, else the resolved model.

    Claude gets the model its bootstrap reported on every turn, so a moving alias never changes
    a live session; `codex exec resume` does not keep the thread's model, so it needs it again.
    Whether an adapter passes it is its own business: the receipt's `model` is what the command
    line passed.
    """
    if session.partner == "script":
        return session.model
    if session.partner in ("claude", "codex"):
        return session.model_resolved
    return None


def read_rate_limits(
    paths: PairPaths, session: Session, result: TurnResult, environment: dict[str, str]
) -> dict[str, Any] | None:
    """Codex: its app-server's `account/rateLimits/read`; Claude: its `rate_limit_event`.

    An account that cannot report limits (`{available: false, why}`) is remembered per identity
    in the session, so no later turn starts the app-server to be refused again. Whatever the
    partner or its app-server says, this never stops the receipt from being written: a value it
    cannot read becomes `{error}`.
    """
    from pair import codex_rpc  # only codex and claude turns need it: off the start-up path

    try:
        if session.partner == "codex" and session.partner_bin:
            refused = (session.rate_limits_refused or {}).get(session.identity)
            if refused:
                return {"available": False, "why": refused}
            limits = codex_rpc.rate_limits(
                binary=session.partner_bin,
                codex_home=session.identity_home,
                environment=environment,
            )
            if limits.get("available") is False:
                remember_refusal(paths, session.identity, str(limits.get("why")))
            return limits
        event = result.outcome.extra.get("rate_limit_event")
        if session.partner == "claude" and isinstance(event, dict):
            return codex_rpc.claude_rate_limit(event)
        if session.partner == "claude" and environment.get("ANTHROPIC_API_KEY"):
            return {"available": False, "why": CLAUDE_API_KEY_LIMITS}
    except Exception as error:
        return {"error": f"rate limits unreadable: {type(error).__name__}: {error}"}
    return None


def remember_refusal(paths: PairPaths, identity: str, why: str) -> None:
    """Record in the session that `identity`'s account cannot report rate limits."""
    with marker_mutex(paths):
        session = load_session(paths)
        if session is None:
            return
        session.rate_limits_refused = {**(session.rate_limits_refused or {}), identity: why}
        save_session(paths, session)


# In a supervisor forked by its launcher (pair/launch.py): the write end of the pipe whose byte
# ends the launcher's wait for the running record without waiting for its next poll.
_launcher_wake: list[int] = []


def wake_launcher_once_started(fd: int) -> None:
    """Write a byte to `fd`, then close it, once the partner is recorded (a forked supervisor)."""
    _launcher_wake[:] = [fd]


def _wake_launcher() -> None:
    while _launcher_wake:
        fd = _launcher_wake.pop()
        with contextlib.suppress(OSError):
            os.write(fd, b"!")
        with contextlib.suppress(OSError):
            os.close(fd)  # once: the launcher has its answer


def supervise(state_dir: Path, seq: int, token: str) -> int:
    paths = PairPaths(state_dir)
    session = load_session(paths)
    marker = read_marker(paths)
    if session is None or marker is None or marker.seq != seq or marker.owner_token != token:
        return EXIT_NOT_OWNER
    me = current_identity(argv0="pair _supervise")
    # Before it is named in the marker: from then on a cancel may signal it at any moment.
    signal.signal(signal.SIGTERM, _on_sigterm)
    if session.runner is not None:
        _begin_ray()  # the longest part of a Ray turn's start, beside what follows here
    # The supervisor owns the turn from here: the launcher (possibly a long-lived caller of the
    # library, like `unit`) no longer keeps it "alive" for `clear` and `send`.
    owned = update_owned_marker(paths, token, supervisor=me.to_json(), launcher=None)
    if owned is None:
        return EXIT_NOT_OWNER
    if owned.cancel:
        Stop.signalled = True  # cancelled before this supervisor took the turn
    become_subreaper()  # Linux; elsewhere the partner's group and descendants are still killed
    started_at = iso_z()
    receipt_file = paths.turn_file(seq, owned.kind, "-receipt.json")
    try:
        try:
            # A session whose turns run on Ray (SPEC 4.3): the same receipt, from the node.
            run = run_and_account if session.runner is None else _remote()
            receipt = run(paths, session, owned, token, me.pid, started_at)
        except Exception as error:  # the receipt must exist whatever happened
            _print_traceback()
            # Plain values only: building the full receipt (or writing the reply) is what broke.
            receipt = receipts.minimal_receipt(
                paths,
                session,
                owned,
                status="failed",
                reason=f"supervisor error: {type(error).__name__}: {error}",
                supervisor_pid=me.pid,
                started_at=started_at,
                leftovers=sweep_descendants(),
            )
        write_text_atomic(receipt_file, json.dumps(receipt, indent=2) + "\n")
    finally:
        note = release_owned_marker(paths, token)
    if note:
        receipt["in_flight_note"] = note
        write_text_atomic(receipt_file, json.dumps(receipt, indent=2) + "\n")
    # Last: the turn is over for everyone else, so a slow sink delays nobody (SPEC 3.15).
    announce_turn_end(session.notify, receipt, paths.state_dir)
    if session.runner is not None:
        _disconnect()  # a forked supervisor leaves by os._exit: Ray's atexit would not run
    return 0 if receipt["ok"] else 1


def turn_request(
    paths: PairPaths, session: Session, marker: Marker, *, partner_bin: str | None
) -> TurnRequest:
    """The partner's command line for the marker's turn (`partner_bin` None: the partner found
    where the turn runs — on a Ray node, the node's own)."""
    seq, kind = marker.seq, marker.kind
    return TurnRequest(
        partner=session.partner,
        sid=session.sid,
        seq=seq,
        kind=kind,
        write=marker.write,
        model=resume_model(session),
        effort=session.effort,
        worktree=Path(session.worktree),
        prompt_file=paths.turn_file(seq, kind, "-prompt.md"),
        reply_file=paths.turn_file(seq, kind, "-reply.md"),
        partner_bin=partner_bin,
    )


def run_and_account(
    paths: PairPaths,
    session: Session,
    marker: Marker,
    token: str,
    supervisor_pid: int,
    started_at: str,
) -> dict[str, Any]:
    """Run the turn, kill what is left of it, write the reply; the receipt to write."""
    if refused := receipts.untrusted(paths, session, marker, supervisor_pid, started_at):
        return refused  # a session rewritten since `send` verified it: no partner starts
    seq, kind = marker.seq, marker.kind
    audit_since = time.time()  # the window the ledger and the ref log are read for
    audited = (Path(session.worktree), paths.state_dir.parent)  # the config audit (SPEC 8)
    # The snapshots before the turn (a git process each; a read-only turn has no ref audit) run
    # while the partner's command line and environment are made: the partner starts that much
    # sooner (SPEC 7), and only once both are in hand and their threads have ended.
    snapshots = started_side_by_side(
        (lambda: audit_refs(paths, session)) if marker.write else (lambda: None),
        lambda: pair_git.config_snapshot_or_none(*audited),
    )
    try:
        request = turn_request(paths, session, marker, partner_bin=session.partner_bin)
        environment = partner_environment(codex_home=session.identity_home)
        environment.update(session_variables(session.environment))  # the caller's (SPEC 3.19)
        # What proves the partner and all it starts this turn's before a cancel signals one
        # (SPEC 8).
        environment.update(turn_environment(paths.state_dir, token))
        if session.unit:  # a guard hook (SPEC 4.1) knows whose turn moves refs
            environment["UNITMGR_UNIT"] = session.unit
        branch = session.branch or pair_git.current_branch(paths.state_dir.parent)
    finally:
        refs_before, config_before = snapshots()

    def record_partner(identity: ProcessIdentity) -> None:
        update_owned_marker(paths, token, partner=identity.to_json())
        _wake_launcher()

    def record_heavy(queue: dict[str, Any]) -> None:
        update_owned_marker(paths, token, heavy_queue=queue)

    def stop_requested() -> str | None:
        if not Stop.signalled:
            return None
        with contextlib.suppress(MarkerUnreadable):
            current = read_marker(paths)
            if current is not None and current.owner_token == token and current.cancel:
                return str(current.cancel.get("reason") or SIGTERM_REASON)
        return SIGTERM_REASON

    alarm = stuck_alarm(session.notify, seq, kind, paths.state_dir)
    try:
        adapter = adapter_for(session.partner)
        result = run_turn(
            adapter,
            request,
            transcript=paths.turn_file(seq, kind, ".log"),
            budgets=Budgets(
                idle_seconds=marker.idle_seconds or DEFAULT_BUDGET_MINUTES[0] * 60,
                total_seconds=marker.total_seconds or DEFAULT_BUDGET_MINUTES[1] * 60,
            ),
            environment=environment,
            on_partner_start=record_partner,
            on_heavy_change=record_heavy,
            heavy_probe_seconds=seconds_from_env(
                "UNITMGR_HEAVY_PROBE_SECONDS", HEAVY_PROBE_SECONDS
            ),
            stop_requested=stop_requested,
            quiet_alarm=QuietAlarm(alarm.seconds, alarm.ring) if alarm else None,
        )
    except Exception as error:
        _print_traceback()
        result = TurnResult(
            outcome=TurnOutcome(status="failed", reason=f"supervisor error: {error}"),
            exit_code=None,
            seconds=0.0,
            command=[],
            partner=None,
        )
    if alarm is not None:
        alarm.join()  # a sink still running is this process's descendant: the sweep would kill it
    # Whatever the turn left running — in the partner's group, or escaped from it with setsid
    # and a double fork (reparented here, the subreaper) — dies with the turn.
    leftovers = [*result.leftovers, *sweep_descendants()]
    if marker.write:
        (changes, unattributed), config_changes = side_by_side(
            lambda: foreign_changes(paths, session, refs_before, branch, audit_since),
            lambda: pair_git.foreign_config_changes(*audited, config_before),
        )
    else:
        changes, unattributed = None, None
        config_changes = pair_git.foreign_config_changes(*audited, config_before)
    if result.outcome.reply:
        write_text_atomic(request.reply_file, result.outcome.reply + "\n")
    elif request.reply_file.exists():
        # A CLI that writes its own reply file (Codex's `-o`) wrote it unredacted.
        try:
            data = bounded.read_bytes(request.reply_file, REPLY_MAX_BYTES)
        except (FileNotFoundError, bounded.Unreadable):
            data = b""  # a FIFO, a symlink or an endless file: replaced, never read
        write_text_atomic(request.reply_file, data.decode("utf-8", errors="replace"))
    rate_limits = read_rate_limits(paths, session, result, environment)
    if session.partner == "codex":
        leftovers += sweep_descendants()  # anything the app-server left behind
    return build_receipt(
        paths=paths,
        session=session,
        marker=marker,
        request=request,
        result=result,
        supervisor_pid=supervisor_pid,
        started_at=started_at,
        rate_limits=rate_limits,
        leftovers=leftovers,
        audits={
            "foreign_ref_changes": changes,
            "unattributed_ref_changes": unattributed,
            "foreign_config_changes": config_changes,
        },
    )


def started_side_by_side(
    first: Callable[[], _A], second: Callable[[], _B]
) -> Callable[[], tuple[_A, _B]]:
    """Both started now, each in a thread, while the caller goes on; the returned call waits
    for both answers, and when it returns both threads have ended (an error in either is
    raised there, after both have)."""
    from registry.threads import Pool

    pool = Pool(2)
    try:
        tasks = pool.submit(first), pool.submit(second)
    except BaseException:  # no second thread to be had: the first is not left running
        pool.shutdown()
        raise

    def answers() -> tuple[_A, _B]:
        pool.shutdown()  # waits for both
        return tasks[0].result(), tasks[1].result()

    return answers


def side_by_side(first: Callable[[], _A], second: Callable[[], _B]) -> tuple[_A, _B]:
    """Both answers, run at once: the ref and config audits are a git process each, and a
    turn's receipt is written one process sooner when they run side by side (SPEC 7). No thread
    is left when this returns; an error in either is raised here."""
    return started_side_by_side(first, second)()


def _remote() -> Any:
    from pair.runners.ray import run_remote

    return run_remote


def _begin_ray() -> None:
    from pair.runners.ray_driver import begin

    begin()


def _disconnect() -> None:
    from pair.runners.ray_driver import disconnect

    disconnect()


def _print_traceback() -> None:
    import traceback  # only on a failure: off the start-up path

    traceback.print_exc()


def main(argv: list[str]) -> int:
    """`--state-dir D --seq N --token T` as `send` writes them (argparse: ~15 ms a turn)."""
    options = dict(zip(argv[::2], argv[1::2], strict=False))
    try:
        state_dir, seq, token = options["--state-dir"], int(options["--seq"]), options["--token"]
    except (KeyError, ValueError):
        print(
            f"usage: pair _supervise --state-dir D --seq N --token T (got {argv})", file=sys.stderr
        )
        return EXIT_NOT_OWNER
    return supervise(Path(state_dir), seq, token)


if __name__ == "__main__":  # pragma: no cover (entered through `python -m pair _supervise`)
    sys.exit(main(sys.argv[1:]))
