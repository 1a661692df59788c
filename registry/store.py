"""The registry on disk: `<git-common-dir>/orchestrate/` (SPEC 2.1).

```
units/<unit-id>.json     one record per unit (the durable journal)
tasks/<unit-id>.md       the task manifest (task body + addenda)
archive/<unit-id>-<UTC stamp>/   pair state copied out before a worktree is removed
registry.lock            the registry lock
locks/<unit-id>.lock     per-unit locks (never deleted)
locks/fetch.lock         serializes base fetches
events.jsonl             append-only event log
```

Readers never create anything (`status --all` writes nothing anywhere). Writers create
directories 0700 and files 0600. Unit ids are validated by callers before they reach a path.
"""

from __future__ import annotations

import json
from pathlib import Path

from registry import bounded, crashlog, layout
from registry.atomic import append_line, remove_file, sweep_temp_files, write_text_atomic
from registry.light_dataclass import dataclass
from registry.locks import Deadline, FileLock
from registry.records import (
    MAX_RECORD_BYTES,
    RecordTooNew,
    RecordUnreadable,
    UnitRecord,
    decode_record,
    encode_record,
)
from registry.timeutil import iso_z

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from registry.signing import Signer


@dataclass(frozen=True)
class UnreadableRecord:
    """A record file this version cannot use; listed, never rewritten or deleted."""

    unit_id: str
    path: Path
    code: str  # "record-unreadable" | "record-too-new"
    error: str

    def to_json(self) -> dict[str, Any]:
        return {
            "unit_id": self.unit_id,
            "lifecycle": "unreadable",
            "code": self.code,
            "error": self.error,
            "record_file": str(self.path),
        }


class Registry:
    def __init__(self, common_git_dir: Path) -> None:
        self.common_git_dir = common_git_dir
        self.root = layout.registry_root(common_git_dir)
        crashlog.remember(self.root)  # an unexpected error's log goes beside this registry
        self.units_dir = layout.units_dir(common_git_dir)
        self.tasks_dir = self.root / "tasks"
        self.archive_dir = self.root / "archive"
        self.locks_dir = self.root / "locks"
        self.events_file = self.root / "events.jsonl"
        self.registry_lock_file = self.root / "registry.lock"
        self.fetch_lock_file = self.locks_dir / "fetch.lock"

    def record_path(self, unit_id: str) -> Path:
        return self.units_dir / f"{unit_id}{layout.RECORD_SUFFIX}"

    def manifest_path(self, unit_id: str) -> Path:
        return self.tasks_dir / f"{unit_id}.md"

    def unit_lock_path(self, unit_id: str) -> Path:
        return self.locks_dir / f"{unit_id}.lock"

    # -- records ---------------------------------------------------------------------------

    def exists(self, unit_id: str) -> bool:
        return self.record_path(unit_id).exists()

    def read(self, unit_id: str) -> UnitRecord | None:
        """The record, or None when there is none. Raises `RecordUnreadable` / `RecordTooNew`."""
        path = self.record_path(unit_id)
        try:
            text = bounded.read_bytes(path, MAX_RECORD_BYTES, below=self.common_git_dir)
        except FileNotFoundError:
            return None
        except bounded.Unreadable as error:  # a symlink, a FIFO, over the bound
            raise RecordUnreadable(f"the record {error.reason}") from None
        record = decode_record(text, expected_id=unit_id)
        from registry import signing

        record.as_read = signing.snapshot(record)  # a write re-signs only what changes after
        # Derived, never read (SPEC 8): an executor could point `task_file` at any file, and
        # every reader of the manifest (addendum, restaff, create) uses this field.
        record.task_file = str(self.manifest_path(unit_id))
        return record

    def read_any(self, unit_id: str) -> UnitRecord | UnreadableRecord | None:
        try:
            return self.read(unit_id)
        except RecordTooNew as error:
            return UnreadableRecord(
                unit_id, self.record_path(unit_id), "record-too-new", str(error)
            )
        except RecordUnreadable as error:
            return UnreadableRecord(
                unit_id, self.record_path(unit_id), "record-unreadable", str(error)
            )

    def unit_ids(self) -> list[str]:
        return layout.unit_ids(self.units_dir)

    def scan(self) -> list[UnitRecord | UnreadableRecord]:
        """Every record, sorted by id; unreadable ones as `UnreadableRecord` entries."""
        entries: list[UnitRecord | UnreadableRecord] = []
        for unit_id in self.unit_ids():
            entry = self.read_any(unit_id)
            if entry is not None:
                entries.append(entry)
        return entries

    @property
    def signer(self) -> Signer:
        """The lead's MACs for this repository (registry/signing.py; the key is outside)."""
        from registry.signing import Signer

        return Signer.for_common_dir(self.common_git_dir)

    def write(self, record: UnitRecord) -> None:
        """The one write path of a record: what the lead set since reading it is signed here."""
        from registry import signing

        signing.sign_changed(self.signer, record)
        record.updated_at = iso_z()
        if not record.created_at:
            record.created_at = record.updated_at
        write_text_atomic(self.record_path(record.unit_id), encode_record(record))
        sweep_temp_files(self.units_dir)  # a writer killed mid-write left its temp file

    def delete(self, unit_id: str) -> bool:
        sweep_temp_files(self.units_dir)
        sweep_temp_files(self.tasks_dir)
        return remove_file(self.record_path(unit_id))

    # -- locks -----------------------------------------------------------------------------

    def unit_lock(self, unit_id: str, *, command: str) -> FileLock:
        return FileLock(self.unit_lock_path(unit_id), subject=f"unit {unit_id}", command=command)

    def registry_lock(self, *, command: str) -> FileLock:
        return FileLock(self.registry_lock_file, subject="the registry", command=command)

    def fetch_lock(self, *, command: str) -> FileLock:
        return FileLock(self.fetch_lock_file, subject="the base fetch", command=command)

    # -- events ----------------------------------------------------------------------------

    def append_event(self, event: dict[str, Any]) -> None:
        """One line of `events.jsonl`; stamped with `at` unless the event carries its own."""
        stamped = event if "at" in event else {**event, "at": iso_z()}
        append_line(self.events_file, json.dumps(stamped, ensure_ascii=False, sort_keys=False))


__all__ = ["Deadline", "FileLock", "Registry", "UnreadableRecord"]
