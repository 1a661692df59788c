"""`pair wait` (SPEC 4.1): a turn's receipt, `worker-lost` when nobody can write it, `wait-timeout`
at the bound; and `ended_receipt`, which never waits on a running turn.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pair.commands.shared import (
    WAIT_POLL_SECONDS,
    find_receipt_file,
    locate_paths,
    parse_minutes,
    require_session,
)
from pair.errors import UsageError
from pair.paths import PairPaths
from pair.receipts import failure_fields
from pair.state import Marker, MarkerUnreadable, load_session, read_marker, read_receipt
from registry.processes import ProcessIdentity, is_alive

NO_MARKER_GRACE_SECONDS = 10.0
DEFAULT_WAIT_MINUTES = 125.0


def wait(
    repo: str | Path, *, seq: int | None = None, timeout_min: float | str | None = None
) -> dict[str, Any]:
    minutes = parse_minutes(timeout_min, "--timeout-min") or DEFAULT_WAIT_MINUTES
    if seq is not None and seq < 1:
        raise UsageError("invalid-seq", f"--seq must be a positive integer, got {seq}")
    root, paths = locate_paths(repo)
    session = require_session(paths)
    target = seq if seq is not None else session.seq
    if target < 1:
        raise UsageError(
            "invalid-seq", "no turn has been sent in this pair yet — send one before waiting"
        )
    started = time.monotonic()
    deadline = started + minutes * 60
    next_liveness_check = started
    while True:
        session = load_session(paths) or session
        receipt_path = find_receipt_file(paths, session, target)
        receipt = read_receipt(receipt_path) if receipt_path else None
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            marker = None
        own_marker = marker if marker is not None and marker.seq == target else None
        now = time.monotonic()
        if receipt is not None:
            supervisor = ProcessIdentity.from_json(own_marker.supervisor) if own_marker else None
            if own_marker is None or not is_alive(supervisor):
                return receipt
        elif own_marker is not None:
            if now >= next_liveness_check:
                next_liveness_check = now + 1.0
                lost = _lost_reason(own_marker)
                if lost is not None:
                    return {
                        **_unfinished("worker-lost", root, target, own_marker.kind, lost),
                        "partner_pid": (own_marker.partner or {}).get("pid"),
                    }
        elif now - started > NO_MARKER_GRACE_SECONDS:
            return _unfinished(
                "worker-lost",
                root,
                target,
                None,
                "the turn has no receipt and no in-flight marker",
            )
        if now > deadline:
            kind = own_marker.kind if own_marker is not None else None
            return _unfinished(
                "wait-timeout", root, target, kind, f"no receipt appeared within {minutes:g}m"
            )
        # Closely at first: a short turn's receipt is usually there within a second.
        time.sleep(WAIT_POLL_SECONDS if now - started > 1.0 else WAIT_POLL_SECONDS / 5)


def _unfinished(status: str, root: Path, seq: int, kind: str | None, reason: str) -> dict[str, Any]:
    """`wait`'s own answer when there is no receipt: `worker-lost` or `wait-timeout`."""
    return {
        "ok": False,
        "status": status,
        **failure_fields(status, root=root, seq=seq, kind=kind),
        "seq": seq,
        "reason": reason,
    }


def _lost_reason(marker: Marker) -> str | None:
    """Why this marker's turn can no longer produce a receipt, or None while it still can."""
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    if supervisor is not None:
        if is_alive(supervisor):
            return None
        return f"the supervisor pid {supervisor.pid} exited before it wrote a receipt"
    launcher = ProcessIdentity.from_json(marker.launcher)
    if launcher is not None and is_alive(launcher):
        return None
    return "the turn's launcher exited before a supervisor took the turn"


def ended_receipt(
    state_dir: str | Path, seq: int, *, settle_seconds: float = 5.0
) -> dict[str, Any] | None:
    """The receipt of turn `seq` if that turn has already ended, else None.

    A turn whose partner has exited is over even while its supervisor is still writing the
    receipt: that receipt is waited for (up to `settle_seconds`). While the partner runs, None
    at once — nothing here waits on a running turn.
    """
    paths = PairPaths(Path(state_dir))
    deadline = time.monotonic() + settle_seconds
    while True:
        session = load_session(paths)
        receipt_path = find_receipt_file(paths, session, seq) if session else None
        receipt = read_receipt(receipt_path) if receipt_path else None
        if receipt is not None and "unreadable" not in receipt:
            return receipt
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            return None
        if marker is None or marker.seq != seq:
            return None  # no receipt and no marker: `wait` calls that worker-lost
        partner = ProcessIdentity.from_json(marker.partner)
        if partner is None or is_alive(partner) or time.monotonic() > deadline:
            return None
        time.sleep(WAIT_POLL_SECONDS / 5)
