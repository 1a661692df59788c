"""`pair wait` (SPEC 4.1): a turn's receipt, `worker-lost` when nobody can write it, `wait-timeout`
at the bound; and `ended_receipt`, which never waits on a running turn.
"""

from __future__ import annotations

import time
from pathlib import Path

from pair.commands.shared import WAIT_POLL_SECONDS, locate_paths, parse_minutes, require_session
from pair.errors import UsageError
from pair.paths import PairPaths
from pair.receipts import failure_fields
from pair.runners import runner_for
from pair.state import (
    MarkerUnreadable,
    load_session,
    read_marker,
    read_receipt,
    receipt_file_of,
    record_lost_turn,
)
from registry.processes import ProcessIdentity, is_alive

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

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
    runner = runner_for(paths.state_dir)
    started = time.monotonic()
    deadline = started + minutes * 60
    while True:
        receipt = runner.receipt(target)
        if receipt is not None:
            return receipt
        turn = runner.probe(target)
        now = time.monotonic()
        if turn.lost is not None and runner.reattach(target):
            continue  # a turn on another machine outlived its lead supervisor: a new one follows
        no_marker = not turn.held and now - started > NO_MARKER_GRACE_SECONDS
        if turn.lost is not None or no_marker:
            # The supervisor writes its receipt, releases the marker and exits: it may have done
            # all three between the receipt read above and the probe. Only a turn whose receipt
            # is still missing after the probe found it gone is lost.
            receipt = runner.receipt(target)
            if receipt is not None:
                return receipt
        if turn.lost is not None:
            lost = _record_lost(paths, target)
            if lost is not None:
                return lost
            return {
                **_unfinished("worker-lost", root, target, turn.kind, turn.lost),
                "partner_pid": turn.partner_pid,
            }
        if no_marker:
            return _unfinished(
                "worker-lost",
                root,
                target,
                None,
                "the turn has no receipt and no in-flight marker",
            )
        if now > deadline:
            return _unfinished(
                "wait-timeout", root, target, turn.kind, f"no receipt appeared within {minutes:g}m"
            )
        # Closely at first: a short turn's receipt is usually there within a second.
        time.sleep(WAIT_POLL_SECONDS if now - started > 1.0 else WAIT_POLL_SECONDS / 5)


def _record_lost(paths: PairPaths, seq: int) -> dict[str, Any] | None:
    """The lost turn's receipt, written now if nobody has (SPEC 3.4: the first to find it)."""
    try:
        marker = read_marker(paths)
    except MarkerUnreadable:
        return None
    if marker is None or marker.seq != seq or marker.live_pid() is not None:
        return None  # a partner that outlived its supervisor still runs: not lost yet
    return record_lost_turn(paths, marker, found_by="pair wait")


def _unfinished(status: str, root: Path, seq: int, kind: str | None, reason: str) -> dict[str, Any]:
    """`wait`'s own answer when there is no receipt: `worker-lost` or `wait-timeout`."""
    return {
        "ok": False,
        "status": status,
        **failure_fields(status, root=root, seq=seq, kind=kind),
        "seq": seq,
        "reason": reason,
    }


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
        receipt_path = receipt_file_of(paths, session, seq) if session else None
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
