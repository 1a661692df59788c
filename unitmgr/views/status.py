"""`unit status --unit ID`: the record with what is observed, and its reconciled pair head.

The read never waits for a lock. Reconciling the recorded pair head (`latest_seq`,
`latest_receipt_file`) with what the pair reports is a write-back under a unit lock tried once:
when another command holds the unit, the write is skipped and the output says
`write_back: "skipped: busy"`; a queued notice that cannot be sent says `"failed: <code>: …"`
and stays queued.
"""

from __future__ import annotations

from typing import Any

from registry.errors import StateError, ToolError
from registry.records import UnitRecord
from unitmgr import validation
from unitmgr.forge_github import open_forge
from unitmgr.lifecycle.addendum import notify
from unitmgr.lifecycle.journal import Journal
from unitmgr.views.observe import describe, worktree_rows
from unitmgr.workspace import Workspace


def _reconcile(record: UnitRecord, pair: dict[str, Any]) -> dict[str, Any]:
    """The pair fields to update, or {} when the record already agrees with the pair."""
    if record.lifecycle != "working" or record.pair is None or not pair.get("ok"):
        return {}
    if pair.get("sid") != record.pair.sid:
        return {}
    in_flight = pair.get("in_flight") or {}
    seq = in_flight.get("seq") or pair.get("seq") or record.pair.latest_seq
    receipt = pair.get("latest_receipt") or {}
    changes: dict[str, Any] = {}
    if seq != record.pair.latest_seq:
        changes["latest_seq"] = seq
    receipt_file = receipt.get("receipt_file")
    if receipt_file and receipt_file != record.pair.latest_receipt_file:
        changes["latest_receipt_file"] = receipt_file
    return changes


def status_unit(repo: str, unit: str) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(unit)
    record = workspace.read_record(unit_id)
    if record is None:
        raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
    rows = worktree_rows(workspace)
    forge = open_forge(workspace)
    view = describe(record, rows, forge)
    pair = view["observed"]["pair"]
    document: dict[str, Any] = {"ok": True}
    warnings = []
    if record.pair is not None and pair.get("ok") and pair.get("sid") != record.pair.sid:
        warnings.append(
            f"the pair reports sid {pair.get('sid')}, the record {record.pair.sid}: not reconciled"
        )
    changes = _reconcile(record, pair)
    notice_due = bool(record.pending_notice) and record.lifecycle == "working"
    notice_due = notice_due and not (pair.get("ok") and (pair.get("in_flight") or {}).get("alive"))
    # An addendum cut off mid-way owns the notice: its recovery command finishes both.
    notice_due = notice_due and not any(e.get("command") == "addendum" for e in record.journal)
    write_back = None
    if changes or notice_due:
        lock = workspace.registry.unit_lock(unit_id, command=f"unit status --unit {unit_id}")
        if lock.try_acquire():
            try:
                fresh = workspace.read_record(unit_id)
                if fresh is not None and fresh.pair is not None:
                    for key, value in _reconcile(fresh, pair).items():
                        setattr(fresh.pair, key, value)
                    write_back = "written"
                    if notice_due and fresh.pending_notice:
                        # A queued addendum notice goes out now that no turn is in flight.
                        journal = Journal(workspace.registry, fresh, "addendum")
                        try:
                            _, seq = notify(fresh, journal)
                        except ToolError as error:
                            # The read still answers; the notice stays pending for next time.
                            write_back = f"failed: {error.code}: {error.reason}"
                            seq = None
                        journal.clear()
                        if seq is not None:
                            document["notice_seq"] = seq
                    workspace.registry.write(fresh)
                    view = describe(fresh, rows, forge)
            finally:
                lock.release()
        else:
            write_back = "skipped: busy"
    document["write_back"] = write_back
    if warnings:
        document["warnings"] = warnings
    document["unit"] = view
    return document
