"""`unit status --unit ID`, its read: the record with what is observed, and what is out of date.

The read never waits for a lock and writes nothing. What it finds out of date — the recorded pair
head (`latest_seq`, `latest_receipt_file`) behind what the pair reports, or a queued addendum
notice that may go out now — is written back by unitmgr/lifecycle/status_write_back.py, which
the status command calls; a view never writes and never sends a turn.
"""

from __future__ import annotations

import time

from registry.errors import StateError
from registry.light_dataclass import dataclass, field
from registry.records import UnitRecord
from unitmgr import config, git, validation
from unitmgr.views import attention
from unitmgr.views.observe import busy_holder, describe, recovery, worktree_rows
from unitmgr.workspace import Workspace, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from unitmgr.forge import Forge


def reconcile(record: UnitRecord, pair: dict[str, Any]) -> dict[str, Any]:
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


@dataclass
class UnitStatus:
    """One unit as read, and what a write-back would change."""

    workspace: Workspace
    record: UnitRecord
    rows: dict[str, git.WorktreeRow]
    forge: Forge | None
    view: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    # (stuck threshold, config_warning): the config read once per status (SPEC 3.16)
    read_config: tuple[float, dict[str, Any] | None] | None = None

    @property
    def pair(self) -> dict[str, Any]:
        pair: dict[str, Any] = self.view["observed"]["pair"]
        return pair

    @property
    def notice_due(self) -> bool:
        """A queued notice may go out: the unit works and no turn is in flight."""
        record, pair = self.record, self.pair
        due = bool(record.pending_notice) and record.lifecycle == "working"
        due = due and not (pair.get("ok") and (pair.get("in_flight") or {}).get("alive"))
        # An addendum cut off mid-way owns the notice: its recovery command finishes both.
        return due and not any(e.get("command") == "addendum" for e in record.journal)

    @property
    def stale(self) -> bool:
        return bool(reconcile(self.record, self.pair)) or self.notice_due

    def redescribe(self, record: UnitRecord) -> None:
        self.record = record
        self.view = describe(record, self.rows, self.forge)

    def attention(self) -> dict[str, Any]:
        """SPEC 3.4's attention, from the pair state and recovery this read already has."""
        record = self.record
        busy = busy_holder(self.workspace, record.unit_id)
        needed = recovery(
            self.workspace,
            record,
            pair=self.pair,
            row=self.rows.get(realpath(record.worktree)),
            busy=busy,
        )
        return attention.derive(
            busy=busy,
            lifecycle=record.lifecycle,
            pair=self.pair,
            recovery=needed,
            updated_at=record.updated_at,
            now=time.time(),
            stuck_after=self.stuck_after,
            feedback=record.feedback,
        )

    @property
    def stuck_after(self) -> float:
        return self._config()[0]

    def _config(self) -> tuple[float, dict[str, Any] | None]:
        if self.read_config is None:
            self.read_config = config.for_reads(self.workspace)
        return self.read_config

    def document(self, write_back: str | None, notice_seq: int | None) -> dict[str, Any]:
        document: dict[str, Any] = {"ok": True, **config.warning_field(self._config()[1])}
        if notice_seq is not None:
            document["notice_seq"] = notice_seq
        document["write_back"] = write_back
        if self.warnings:
            document["warnings"] = self.warnings
        document["unit"] = {**self.view, "attention": self.attention()}
        return document


def read_unit(repo: str, unit: str) -> UnitStatus:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(unit)
    record = workspace.read_record(unit_id)
    if record is None:
        raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
    from unitmgr.github_remote import open_forge  # GitHub's adapter only for a repo on it

    rows = worktree_rows(workspace)
    forge = open_forge(workspace)
    status = UnitStatus(workspace, record, rows, forge, describe(record, rows, forge))
    pair = status.pair
    if record.pair is not None and pair.get("ok") and pair.get("sid") != record.pair.sid:
        status.warnings.append(
            f"the pair reports sid {pair.get('sid')}, the record {record.pair.sid}: not reconciled"
        )
    return status
