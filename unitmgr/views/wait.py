"""`unit wait` (SPEC 3.11): sleep until a unit needs the lead, instead of polling it.

Blocks until any listed unit (default: every `working` unit) gets a new receipt (a receipt file
written after `--since`, default the moment `wait` starts) or a lifecycle different from the one
seen at start. Every 0.25 s it `stat`s each unit's record, pair state and transcripts directory
— no git, no GitHub, no lock, no subprocess — and reads a file only when a directory or record
changed after `--since`. Pass `status --all`'s `observed_at` as `--since` to never miss a
wake-up between a look and a wait.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pair.api import is_receipt, parse_minutes, paths_at
from pair.state import read_receipt
from registry.errors import StateError, UsageError
from registry.records import UnitRecord
from registry.timeutil import parse_iso
from unitmgr import validation
from unitmgr.options import WaitOptions
from unitmgr.views.observe import receipt_summary
from unitmgr.workspace import Workspace

POLL_SECONDS = 0.25


def _since(value: str | None) -> float:
    if value is None:
        return time.time()
    try:
        return parse_iso(value).timestamp()
    except ValueError:
        raise UsageError(
            "invalid-since", f"--since must be an ISO 8601 time, got {value!r}"
        ) from None


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return 0.0


def newest_receipt(transcripts: Path, since: float) -> dict[str, Any] | None:
    best: tuple[float, Path] | None = None
    try:
        entries = os.scandir(transcripts)
    except FileNotFoundError:
        return None
    with entries:
        for entry in entries:
            if is_receipt(entry.name):
                mtime = entry.stat().st_mtime
                if mtime > since and (best is None or mtime > best[0]):
                    best = (mtime, Path(entry.path))
    return read_receipt(best[1]) if best else None


def run(repo: str, options: WaitOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_ids = [validation.unit_id(unit) for unit in options.units]
    since = _since(options.since)
    deadline = time.monotonic() + (parse_minutes(options.timeout_min, "--timeout-min") or 0) * 60
    registry = workspace.registry
    watched: dict[str, UnitRecord] = {}
    if unit_ids:
        for unit_id in unit_ids:
            record = workspace.read_record(unit_id)
            if record is None:
                raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
            watched[unit_id] = record
    else:
        for entry in registry.scan():
            if isinstance(entry, UnitRecord) and entry.lifecycle == "working":
                watched[entry.unit_id] = entry
    if not watched:
        return {"ok": True, "changed": [], "reason": "no units to wait for"}
    lifecycles = {unit_id: record.lifecycle for unit_id, record in watched.items()}
    while True:
        changed = []
        for unit_id, record in watched.items():
            change = _change(registry.record_path(unit_id), record, lifecycles[unit_id], since)
            if change is not None:
                changed.append({"unit_id": unit_id, **change})
        if changed or time.monotonic() >= deadline:
            return {"ok": True, "changed": changed}
        time.sleep(POLL_SECONDS)


def _change(
    record_file: Path, record: UnitRecord, lifecycle: str, since: float
) -> dict[str, Any] | None:
    current = lifecycle
    if not record_file.exists():
        current = "dismantled"
    elif _mtime(record_file) > since:
        from registry.records import RecordTooNew, RecordUnreadable, decode_record

        try:
            current = decode_record(record_file.read_bytes()).lifecycle
        except FileNotFoundError:
            current = "dismantled"
        except (RecordUnreadable, RecordTooNew):
            current = "unreadable"
    receipt = None
    if record.pair is not None and record.pair.state_dir:
        transcripts = paths_at(record.pair.state_dir).transcripts_dir
        if _mtime(transcripts) > since:
            receipt = newest_receipt(transcripts, since)
    if current == lifecycle and receipt is None:
        return None
    return {"lifecycle": current, "latest_receipt": receipt_summary(receipt)}
