"""`pair status` and `read_status` (SPEC 4.0, 4.1): a pair's state from its files.

`read_status` is what `unit status --all`, `unit list` and `unit wait` call for every unit: it
reads `session.json`, `in-flight.json`, the current receipt and a `stat` of the transcript — no
subprocess, no lock, no vendor store walk, and never the turn runner.
"""

from __future__ import annotations

import time
from pathlib import Path

from pair.commands.shared import locate_paths, require_session, session_view
from pair.errors import StateError
from pair.paths import PairPaths
from pair.state import Marker, MarkerUnreadable, load_session, read_marker, read_receipt
from registry import bounded
from registry.processes import ProcessIdentity
from registry.timeutil import iso_from_epoch

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _turn_view(paths: PairPaths, seq: int, kind: str | None) -> dict[str, Any] | None:
    if seq < 1 or not kind:
        return None
    transcript = paths.turn_file(seq, kind, ".log")
    try:
        info = bounded.lstat(transcript)  # a stat only (SPEC 4.0), of the link if it is one
    except FileNotFoundError:
        return {
            "seq": seq,
            "kind": kind,
            "transcript": str(transcript),
            "bytes": 0,
            "last_output_at": None,
            "seconds_since_output": None,
        }
    return {
        "seq": seq,
        "kind": kind,
        "transcript": str(transcript),
        "bytes": info.st_size,
        "last_output_at": iso_from_epoch(info.st_mtime),
        "seconds_since_output": max(0, round(time.time() - info.st_mtime)),
    }


def read_status(state_dir: str | Path) -> dict[str, Any]:
    """The pair's state from its files alone: no subprocess, no lock, no vendor store walk.

    Reads `session.json`, `in-flight.json`, the current seq's receipt and a `stat` of the
    current transcript, so its cost never depends on transcript size.
    """
    paths = PairPaths(Path(state_dir))
    try:
        session = load_session(paths)
    except StateError as error:
        return {"ok": False, "code": error.code, "reason": error.reason}
    if session is None:
        return {
            "ok": False,
            "code": "no-pair-session",
            "reason": f"no pair session in {paths.state_dir}",
        }
    in_flight: dict[str, Any] | None
    try:
        marker = read_marker(paths)
    except MarkerUnreadable as error:
        marker = None
        in_flight = {"unreadable": str(paths.marker_file), "error": str(error)}
    else:
        in_flight = _marker_view(marker) if marker is not None else None
    # Read the marker, then probed its processes: a supervisor that wrote its receipt and
    # released the marker in between looks dead. A turn is lost only if, once its process is
    # seen dead, it still has no receipt and still holds the marker (SPEC 3.4).
    dead = marker is not None and in_flight is not None and not in_flight["alive"]
    if dead and marker is not None and _ended_meanwhile(paths, marker):
        try:
            session = load_session(paths) or session  # the ended turn's seq and kind
        except StateError:
            pass
        marker, in_flight = None, None
    seq, kind = session.seq, session.latest_kind
    receipt = None
    if seq >= 1 and kind:
        receipt_file = paths.turn_file(seq, kind, "-receipt.json")
        receipt = read_receipt(receipt_file)
        if receipt is not None and "unreadable" not in receipt:
            # The receipt is the executor's to write: where it lies is derived, never read.
            receipt["receipt_file"] = str(receipt_file)
    turn_seq = marker.seq if marker is not None else seq
    turn_kind = marker.kind if marker is not None else kind
    return {
        "ok": True,
        **session_view(paths, session),
        "in_flight": in_flight,
        "latest_receipt": receipt,
        "turn": _turn_view(paths, turn_seq, turn_kind),
    }


def _ended_meanwhile(paths: PairPaths, marker: Marker) -> bool:
    """Whether the turn `marker` named has ended normally since the marker was read."""
    if marker.kind and read_receipt(paths.turn_file(marker.seq, marker.kind, "-receipt.json")):
        return True
    try:
        again = read_marker(paths)
    except MarkerUnreadable:
        return False
    return again is None or again.seq != marker.seq


def never_started(view: dict[str, Any]) -> bool:
    """Whether `read_status`'s latest turn was taken but never reached its partner: no receipt,
    and either no marker at all (its start failed and let go) or one nobody alive holds that
    names no partner — a `send` killed between taking the turn and starting it. Such a turn
    delivered nothing: whoever adopts "the turn an earlier attempt sent" must send again."""
    if not view.get("ok") or int(view.get("seq") or 0) < 1 or view.get("latest_receipt"):
        return False
    in_flight = view.get("in_flight")
    if in_flight is None:
        return True
    return (
        "unreadable" not in in_flight
        and in_flight.get("seq") == view.get("seq")
        and not in_flight.get("alive", True)
        and in_flight.get("partner_pid") is None
    )


def _marker_view(marker: Marker) -> dict[str, Any]:
    partner = ProcessIdentity.from_json(marker.partner)
    supervisor = ProcessIdentity.from_json(marker.supervisor)
    alive = marker.live_pid() is not None  # the same test `clear` applies
    view = {
        "seq": marker.seq,
        "kind": marker.kind,
        "started_at": marker.started_at,
        "write": marker.write,
        "partner_pid": partner.pid if partner else None,
        "supervisor_pid": supervisor.pid if supervisor else None,
        "heavy_queue": marker.heavy_queue,
        "alive": alive,
        # A turn on another machine (SPEC 4.3), from the marker alone: never the cluster.
        **(
            {
                "runner": {
                    "kind": marker.runner.get("kind"),
                    "node": marker.runner.get("node"),
                    "heartbeat_at": marker.runner_heartbeat_at,
                }
            }
            if isinstance(marker.runner, dict)
            else {}
        ),
    }
    if marker.runner_heartbeat_at is not None:  # a turn on another machine (SPEC 4.3)
        view["runner_heartbeat_at"] = marker.runner_heartbeat_at
    return view


def status(repo: str | Path) -> dict[str, Any]:
    _, paths = locate_paths(repo)
    session = require_session(paths)
    view = read_status(paths.state_dir)
    # Only a positive absence counts: an unreadable store or a CLI without one says True. The
    # store is looked up only where the lead's signed session says (SPEC 8: no planted path).
    from pair.partners import adapter_for
    from pair.session_trust import session_trusted

    if not session_trusted(paths, session):
        view["session_known"] = True
        return view
    view["session_known"] = adapter_for(session.partner).session_known(
        session.sid, identity_home=session.identity_home, worktree=Path(session.worktree)
    )
    return view
