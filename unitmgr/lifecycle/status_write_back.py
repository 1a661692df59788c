"""`unit status --unit ID`: the read (unitmgr/views/status.py), then its write-back.

The write-back runs under the unit lock tried once: when another command holds the unit, it is
skipped and the output says `write_back: "skipped: busy"`. It reconciles the recorded pair head
with what the pair reports and — SPEC 3.4 — sends a queued addendum notice once no turn is in
flight; a notice that cannot be sent says `"failed: <code>: …"` and stays queued. This is the
one place a status sends a turn, which is why it lives with the lifecycle and not the views.
"""

from __future__ import annotations

from registry.errors import ToolError
from unitmgr.views.status import UnitStatus, read_unit, reconcile

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def status_unit(repo: str, unit: str) -> dict[str, Any]:
    status = read_unit(repo, unit)
    if not status.stale:
        return status.document(None, None)
    write_back, seq = _write_back(status)
    return status.document(write_back, seq)


def _write_back(status: UnitStatus) -> tuple[str | None, int | None]:
    workspace, unit_id, pair = status.workspace, status.record.unit_id, status.pair
    notice_due = status.notice_due
    lock = workspace.registry.unit_lock(unit_id, command=f"unit status --unit {unit_id}")
    if not lock.try_acquire():
        return "skipped: busy", None
    seq = None
    try:
        fresh = workspace.read_record(unit_id)
        if fresh is None or fresh.pair is None:
            return None, None
        for key, value in reconcile(fresh, pair).items():
            setattr(fresh.pair, key, value)
        write_back = "written"
        if notice_due and fresh.pending_notice:
            # A queued addendum notice goes out now that no turn is in flight. (Imported only
            # now: the addendum's turn machinery would double every status's start-up, SPEC 7.)
            from unitmgr.lifecycle.addendum import notify
            from unitmgr.lifecycle.journal import Journal

            journal = Journal(workspace.registry, fresh, "addendum")
            try:
                _, seq = notify(fresh, journal)
            except ToolError as error:
                # The read still answers; the notice stays pending for next time.
                write_back = f"failed: {error.code}: {error.reason}"
                seq = None
            journal.clear()
        workspace.registry.write(fresh)
        status.redescribe(fresh)
    finally:
        lock.release()
    return write_back, seq
