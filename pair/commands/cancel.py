"""`pair cancel` (SPEC 4.1): end the in-flight turn, returning only once none of its processes
lives."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from pair.commands.shared import WAIT_POLL_SECONDS, find_receipt_file, locate_paths, require_session
from pair.errors import StateError, UsageError
from pair.paths import PairPaths
from pair.state import (
    Marker,
    MarkerUnreadable,
    Session,
    marker_mutex,
    read_marker,
    read_receipt,
    write_marker,
)
from registry.atomic import remove_file, write_text_atomic
from registry.processes import ProcessIdentity, group_members, is_alive, kill_tree
from registry.timeutil import iso_z

CANCEL_GRACE_SECONDS = 5.0
# The supervisor's kill (SIGTERM, SIGKILL after 5 s), its sweep and its receipt, with slack.
CANCEL_WAIT_SECONDS = 20.0
DEFAULT_CANCEL_REASON = "cancelled by the lead"


def cancel(
    repo: str | Path, *, seq: int | None = None, reason: str | None = None
) -> dict[str, Any]:
    _, paths = locate_paths(repo)
    return cancel_state(paths.state_dir, seq=seq, reason=reason)


def cancel_state(
    state_dir: str | Path, *, seq: int | None = None, reason: str | None = None
) -> dict[str, Any]:
    """End the in-flight turn: its partner's group and every descendant get SIGTERM, SIGKILL
    after 5 s; the receipt says `cancelled` with `reason`; the marker is released.

    The supervisor does the work (it owns the receipt and is the subreaper of the partner's
    descendants): the reason goes into the marker, then the supervisor gets SIGTERM. When no
    supervisor is alive to do it, this does it itself. Returns only once no process of the turn
    is alive. Repeated on a cancelled turn it answers with the same receipt (`repeated: true`).
    """
    if seq is not None and seq < 1:
        raise UsageError("invalid-seq", f"--seq must be a positive integer, got {seq}")
    paths = PairPaths(Path(state_dir))
    session = require_session(paths)
    why = (reason or "").strip() or DEFAULT_CANCEL_REASON
    marker = _request_cancel(paths, session, seq, why)
    if marker is None:
        target = seq if seq is not None else session.seq
        receipt_path = find_receipt_file(paths, session, target)
        receipt = read_receipt(receipt_path) if receipt_path else None
        if receipt is not None and receipt.get("status") == "cancelled":
            return _cancel_document(receipt, repeated=True)
        raise _nothing_to_cancel(session, target, receipt)
    receipt = _await_cancel(paths, session, marker)
    if receipt.get("status") != "cancelled":
        raise _nothing_to_cancel(session, marker.seq, receipt)
    return _cancel_document(receipt, repeated=False)


def _request_cancel(paths: PairPaths, session: Session, seq: int | None, why: str) -> Marker | None:
    """Record the cancel in the marker of the turn in flight; None when none (or not `seq`)."""
    with marker_mutex(paths):
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            raise StateError(
                "marker-unreadable",
                f"the in-flight marker {paths.marker_file} cannot be read — inspect it, confirm "
                "no partner process remains, then run pair clear",
                next_step=f"pair clear --repo {session.worktree}",
            ) from None
        if marker is None or (seq is not None and marker.seq != seq):
            return None
        if marker.seq == 0:
            raise StateError(
                "bootstrap-in-flight",
                f"a bootstrap is in flight in {paths.state_dir}, not a turn — interrupt the pair "
                "init that runs it",
                next_step="interrupt the running pair init (or unit create); then pair clear",
            )
        if marker.cancel is None:  # a cancel already asked is waited for, not asked again
            marker.cancel = {"reason": why, "requested_at": iso_z()}
            write_marker(paths, marker)
        return marker


def _await_cancel(paths: PairPaths, session: Session, marker: Marker) -> dict[str, Any]:
    """Signal the turn's supervisor until its receipt is written and the marker released; kill
    the turn here when no supervisor is left to do it. The receipt."""
    receipt_file = paths.turn_file(marker.seq, marker.kind, "-receipt.json")
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    signalled: set[int] = set()
    while True:
        try:
            current = read_marker(paths)
        except MarkerUnreadable:
            current = marker
        if current is None or current.owner_token != marker.owner_token:
            receipt = read_receipt(receipt_file)
            if receipt is not None and "unreadable" not in receipt:
                _confirm_dead(marker)
                return receipt
        else:
            marker = current  # the latest view: the partner may have been recorded since
            supervisor = ProcessIdentity.from_json(marker.supervisor)
            launcher = ProcessIdentity.from_json(marker.launcher)
            stuck = time.monotonic() > deadline
            if supervisor is not None and is_alive(supervisor) and not stuck:
                if supervisor.pid not in signalled:
                    os.kill(supervisor.pid, signal.SIGTERM)
                    signalled.add(supervisor.pid)
            elif supervisor is not None or stuck or not is_alive(launcher):
                # Nobody left (or able) to write the receipt: a dead supervisor, a send killed
                # before its supervisor took the turn, or a supervisor that does not answer.
                if supervisor is not None:
                    kill_tree(supervisor, grace_seconds=0.0)
                receipt = _cancel_unsupervised(paths, session, marker)
                if receipt is not None:
                    _confirm_dead(marker)
                    return receipt
        time.sleep(WAIT_POLL_SECONDS)


def _cancel_unsupervised(
    paths: PairPaths, session: Session, marker: Marker
) -> dict[str, Any] | None:
    """Kill what remains of a turn with no supervisor, write its receipt and release its marker;
    None when the marker stopped being this turn's meanwhile (its supervisor finished)."""
    from pair.receipts import minimal_receipt

    partner = ProcessIdentity.from_json(marker.partner)
    killed = kill_tree(partner, grace_seconds=CANCEL_GRACE_SECONDS) if partner else []
    why = str((marker.cancel or {}).get("reason") or DEFAULT_CANCEL_REASON)
    receipt = minimal_receipt(
        paths,
        session,
        marker,
        status="cancelled",
        reason=f"cancelled: {why} (no supervisor was left; cancel stopped the partner itself)",
        supervisor_pid=(marker.supervisor or {}).get("pid"),
        started_at=None,
        leftovers=[{"pid": pid, "argv": []} for pid in killed if partner and pid != partner.pid],
    )
    with marker_mutex(paths):
        try:
            current = read_marker(paths)
        except MarkerUnreadable:
            current = marker
        if current is None or current.owner_token != marker.owner_token:
            return None
        write_text_atomic(Path(receipt["receipt_file"]), json.dumps(receipt, indent=2) + "\n")
        remove_file(paths.marker_file)
    return receipt


def _confirm_dead(marker: Marker) -> None:
    """No process of the cancelled turn may be alive when cancel returns."""
    partner = ProcessIdentity.from_json(marker.partner)
    if partner is not None and (
        is_alive(partner) or (partner.pgid is not None and group_members(partner.pgid))
    ):
        kill_tree(partner, grace_seconds=CANCEL_GRACE_SECONDS)
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    # It has written its receipt and released the marker: it only has to exit.
    if supervisor is not None and not _gone_within(supervisor, CANCEL_GRACE_SECONDS):
        kill_tree(supervisor, grace_seconds=0.0)


def _gone_within(identity: ProcessIdentity, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while is_alive(identity):
        if time.monotonic() > deadline:
            return False
        time.sleep(WAIT_POLL_SECONDS)
    return True


def _nothing_to_cancel(session: Session, seq: int, receipt: dict[str, Any] | None) -> StateError:
    ended = f" — seq {seq} already ended {receipt.get('status')}" if receipt else ""
    return StateError(
        "no-turn-in-flight",
        f"no turn is in flight in {session.worktree}{ended}",
        detail={"seq": seq, "receipt": receipt},
        next_step=f"pair status --repo {session.worktree}",
    )


def _cancel_document(receipt: dict[str, Any], *, repeated: bool) -> dict[str, Any]:
    return {
        "ok": True,
        "status": "cancelled",
        "seq": receipt.get("seq"),
        "reason": receipt.get("reason"),
        "repeated": repeated,
        "receipt": receipt,
    }
