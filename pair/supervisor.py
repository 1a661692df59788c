"""The detached turn supervisor: `python -m pair _supervise --state-dir D --seq N --token T`.

`send` starts it in its own session with stdin from /dev/null and stdout/stderr to the turn's
`-supervisor.log`, so nobody capturing `send`'s output waits for it. It proves it owns the
in-flight marker (same seq and owner token), records itself and then the partner in the marker,
runs the turn (`pair.turn`), writes the reply and the receipt atomically, and only then releases
the marker. If anything goes wrong it still writes a `failed` receipt and releases the marker; if
it is killed, `wait` reports `worker-lost` and `clear` recovers.

It imports neither GitPython nor PyGithub.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from pair import codex_rpc
from pair.environment import partner_environment
from pair.partners import adapter_for
from pair.partners.base import TurnOutcome, TurnRequest
from pair.state import (
    Marker,
    PairPaths,
    Session,
    load_session,
    read_marker,
    release_owned_marker,
    update_owned_marker,
)
from pair.turn import DEFAULT_BUDGET_MINUTES, HEAVY_PROBE_SECONDS, Budgets, TurnResult, run_turn
from registry.atomic import write_text_atomic
from registry.processes import ProcessIdentity, current_identity, kill_tree
from registry.timeutil import iso_z, seconds_from_env

EXIT_NOT_OWNER = 2


def build_receipt(
    *,
    paths: PairPaths,
    session: Session,
    marker: Marker,
    result: TurnResult,
    supervisor_pid: int,
    started_at: str,
    rate_limits: dict[str, Any] | None,
) -> dict[str, Any]:
    seq, kind = marker.seq, marker.kind
    outcome = result.outcome
    reply_file = paths.turn_file(seq, kind, "-reply.md")
    return {
        "seq": seq,
        "kind": kind,
        "sid": session.sid,
        "partner": session.partner,
        "write": marker.write,
        "command": result.command,
        "ok": result.status == "replied",
        "status": result.status,
        "reason": outcome.reason,
        "exit_code": result.exit_code,
        "seconds": result.seconds,
        "reply": outcome.reply,
        "partial_reply": result.partial_reply,
        "heavy_queue": result.heavy_queue,
        "throttle_signals": result.throttle_signals,
        "rate_limits": rate_limits,
        "receipt_file": str(paths.turn_file(seq, kind, "-receipt.json")),
        "transcript": str(paths.turn_file(seq, kind, ".log")),
        "prompt_file": str(paths.turn_file(seq, kind, "-prompt.md")),
        "reply_file": str(reply_file) if outcome.reply else None,
        "started_at": started_at,
        "finished_at": iso_z(),
        "supervisor_pid": supervisor_pid,
        "partner_pid": result.partner.pid if result.partner else None,
        "budgets": {"idle_seconds": marker.idle_seconds, "total_seconds": marker.total_seconds},
    }


def resume_model(session: Session) -> str | None:
    """The model of a resumed turn: the script's command line, else the session's resolved model.

    Claude gets the model its bootstrap reported on every turn, so a moving alias never changes
    a live session; codex needs it on every resume (SPEC 4.1); whether a CLI's resume passes it
    at all is its adapter's choice (opencode, cursor and grok keep the session's).
    """
    if session.partner == "script":
        return session.model
    return session.model_resolved


def read_rate_limits(
    session: Session, result: TurnResult, environment: dict[str, str]
) -> dict[str, Any] | None:
    """Codex: its app-server's `account/rateLimits/read`; Claude: its `rate_limit_event`.

    Whatever the partner or its app-server says, this never stops the receipt from being
    written: a value it cannot read becomes `{error}`.
    """
    try:
        if session.partner == "codex" and session.partner_bin:
            return codex_rpc.rate_limits(
                binary=session.partner_bin,
                codex_home=session.identity_home,
                environment=environment,
            )
        event = result.outcome.extra.get("rate_limit_event")
        if session.partner == "claude" and isinstance(event, dict):
            return codex_rpc.claude_rate_limit(event)
    except Exception as error:
        return {"error": f"rate limits unreadable: {type(error).__name__}: {error}"}
    return None


def supervise(state_dir: Path, seq: int, token: str) -> int:
    paths = PairPaths(state_dir)
    session = load_session(paths)
    marker = read_marker(paths)
    if session is None or marker is None or marker.seq != seq or marker.owner_token != token:
        return EXIT_NOT_OWNER
    me = current_identity(argv0="pair _supervise")
    # The supervisor owns the turn from here: the launcher (possibly a long-lived caller of the
    # library, like `unit`) no longer keeps it "alive" for `clear` and `send`.
    owned = update_owned_marker(paths, token, supervisor=me.to_json(), launcher=None)
    if owned is None:
        return EXIT_NOT_OWNER
    marker = owned
    started_at = iso_z()
    kind = marker.kind
    request = TurnRequest(
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
        partner_bin=session.partner_bin,
    )
    environment = partner_environment(codex_home=session.identity_home)

    def record_partner(identity: ProcessIdentity) -> None:
        update_owned_marker(paths, token, partner=identity.to_json())

    def record_heavy(queue: dict[str, Any]) -> None:
        update_owned_marker(paths, token, heavy_queue=queue)

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
        )
    except Exception as error:  # the receipt must exist whatever happened
        traceback.print_exc()
        current = read_marker(paths)
        partner = ProcessIdentity.from_json(current.partner) if current else None
        if partner is not None:
            kill_tree(partner)  # the turn is over: its partner must not run on unsupervised
        result = TurnResult(
            outcome=TurnOutcome(status="failed", reason=f"supervisor error: {error}"),
            exit_code=None,
            seconds=0.0,
            command=[],
            partner=None,
        )
    if result.outcome.reply:
        write_text_atomic(request.reply_file, result.outcome.reply + "\n")
    elif request.reply_file.exists():
        # A CLI that writes its own reply file (Codex's `-o`) wrote it unredacted.
        text = request.reply_file.read_text(encoding="utf-8", errors="replace")
        write_text_atomic(request.reply_file, text)
    receipt = build_receipt(
        paths=paths,
        session=session,
        marker=marker,
        result=result,
        supervisor_pid=me.pid,
        started_at=started_at,
        rate_limits=read_rate_limits(session, result, environment),
    )
    receipt_file = paths.turn_file(seq, kind, "-receipt.json")
    write_text_atomic(receipt_file, json.dumps(receipt, indent=2) + "\n")
    note = release_owned_marker(paths, token)
    if note:
        receipt["in_flight_note"] = note
        write_text_atomic(receipt_file, json.dumps(receipt, indent=2) + "\n")
    return 0 if receipt["ok"] else 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="pair _supervise")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--token", required=True)
    arguments = parser.parse_args(argv)
    return supervise(Path(arguments.state_dir), arguments.seq, arguments.token)


if __name__ == "__main__":  # pragma: no cover (entered through `python -m pair _supervise`)
    sys.exit(main(sys.argv[1:]))
