"""The failure shape of a receipt (SPEC 4.1 Receipts, 3.0): `code` equal to `status`, and `next`.

Every receipt with `ok: false` — written by the supervisor, or made up by `wait` (`worker-lost`,
`wait-timeout`) — carries the universal failure fields, so a failing `pair send` or `pair wait`
document has `code`, `reason` and `next` like every other refusal. This module words them, and
builds the minimal receipt written when nobody can build the full one (a supervisor that broke,
a cancel whose supervisor is gone); it reads and writes nothing.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.paths import PairPaths
    from pair.state import Marker, Session


# A Ray turn's node-side outcomes (SPEC 4.3) and their codes.
NODE_CODES = {"lost": "node-lost", "unknown": "cancel-unconfirmed"}


def _command(*words: str) -> str:
    return " ".join(shlex.quote(word) for word in words)


def failure_fields(
    status: str,
    *,
    root: str | Path,
    seq: int,
    kind: str | None,
    transcript: str | None = None,
    retry_after_seconds: float | None = None,
) -> dict[str, Any]:
    """`{code, next}` for a failed turn of `status` in the worktree `root`."""
    # One command each (SPEC 3.0): what to read first, or the resend. FILE is the lead's own
    # body file, which a receipt does not know.
    resend = _command("pair", "send", "--repo", str(root), "--kind", kind or "task")
    resend += " --body-file FILE"
    read = _command("tail", "-n", "40", transcript) if transcript else None
    if status == "rate-limited":
        pause = f"{retry_after_seconds:g}" if retry_after_seconds is not None else "300"
        step = f"sleep {pause} && {resend}"
    elif status == "hang-killed":
        step = f"{resend} --idle-min 30"
    elif status in ("cancelled", "lost", "unknown"):
        step = resend  # a lost node's turn: the re-send re-places the unit (SPEC 4.3)
    elif status == "worker-lost":
        step = f"{_command('pair', 'clear', '--repo', str(root))} && {resend}"
    elif status == "wait-timeout":
        step = _command("pair", "wait", "--repo", str(root), "--seq", str(seq))
    else:  # failed, empty-reply: the transcript says why (an empty reply may have used the prompt)
        step = read or resend
    return {"code": NODE_CODES.get(status, status), "next": step}


def minimal_receipt(
    paths: PairPaths,
    session: Session,
    marker: Marker,
    *,
    status: str,
    reason: str,
    supervisor_pid: int | None,
    started_at: str | None,
    leftovers: list[dict[str, Any]],
) -> dict[str, Any]:
    """A receipt of plain values only, so building it cannot fail the way the full one did."""
    seq, kind = marker.seq, marker.kind
    transcript = paths.turn_file(seq, kind, ".log")
    partner = marker.partner or {}
    return {
        "seq": seq,
        "kind": kind,
        "sid": session.sid,
        "partner": session.partner,
        "model": None,
        "effort": None,
        "write": marker.write,
        "command": [],
        "ok": False,
        "status": status,
        **failure_fields(
            status, root=session.worktree, seq=seq, kind=kind, transcript=str(transcript)
        ),
        "reason": reason,
        "exit_code": None,
        "seconds": None,
        "reply": None,
        "partial_reply": False,
        "heavy_queue": None,
        "throttle_signals": None,
        "rate_limits": None,
        "retry_after_seconds": None,
        "leftovers": leftovers,
        "foreign_ref_changes": None,
        "unattributed_ref_changes": None,
        "foreign_config_changes": None,
        "receipt_file": str(paths.turn_file(seq, kind, "-receipt.json")),
        "transcript": str(transcript),
        "prompt_file": str(paths.turn_file(seq, kind, "-prompt.md")),
        "reply_file": None,
        "started_at": started_at or marker.started_at,
        "finished_at": iso_z(),
        "supervisor_pid": supervisor_pid,
        "partner_pid": partner.get("pid") if isinstance(partner, dict) else None,
        "budgets": {"idle_seconds": marker.idle_seconds, "total_seconds": marker.total_seconds},
        "base_commit": marker.base_commit,
    }


def untrusted(
    paths: PairPaths, session: Session, marker: Marker, supervisor_pid: int, started_at: str
) -> dict[str, Any] | None:
    """The `failed` receipt of a turn whose session the lead did not sign (SPEC 8), to write
    instead of starting a partner; None when the lead's MAC covers the session."""
    from pair.session_trust import session_trusted, untrusted_session_error

    if session_trusted(paths, session):
        return None
    error = untrusted_session_error(paths, session.worktree)
    receipt = minimal_receipt(
        paths,
        session,
        marker,
        status="failed",
        reason=error.reason,
        supervisor_pid=supervisor_pid,
        started_at=started_at,
        leftovers=[],
    )
    receipt["next"] = error.next_step  # its code stays its status, as every failed receipt's
    return receipt


# A receipt is read with a 1 MiB bound (SPEC 8, registry/bounded.py): the reply it embeds is
# cut to this much JSON, so a long reply never makes its own receipt unreadable. The whole
# reply stays in the turn's `-reply.md` (`reply_file`).
RECEIPT_REPLY_JSON_BYTES = 256 * 1024


def embedded_reply(reply: str | None) -> dict[str, Any]:
    """`{reply}` for a receipt, and `reply_truncated {bytes, kept_bytes}` when the reply was cut
    to RECEIPT_REPLY_JSON_BYTES of JSON (escapes counted: `\\u` forms are six bytes)."""
    import json

    if reply is None or len(reply) * 12 <= RECEIPT_REPLY_JSON_BYTES:  # fits even escaped
        return {"reply": reply}
    if len(json.dumps(reply)) <= RECEIPT_REPLY_JSON_BYTES:
        return {"reply": reply}
    low, high = 0, min(len(reply), RECEIPT_REPLY_JSON_BYTES)
    while low < high:  # the longest prefix whose JSON fits
        middle = (low + high + 1) // 2
        if len(json.dumps(reply[:middle])) <= RECEIPT_REPLY_JSON_BYTES:
            low = middle
        else:
            high = middle - 1
    kept = reply[:low]
    size = len(reply.encode("utf-8", "surrogateescape"))
    return {
        "reply": kept,
        "reply_truncated": {"bytes": size, "kept_bytes": len(kept.encode("utf-8", "replace"))},
    }
