"""`unit wait` (SPEC 3.11): sleep until a unit needs the lead, instead of polling it.

Blocks until any listed unit (default: every `working` unit) gets a new receipt (a receipt file
written after `--since`, default the moment `wait` starts) or a lifecycle different from the one
seen at start. Every 0.25 s it `stat`s each unit's record, pair state and transcripts directory
— no git, no GitHub, no lock, no subprocess — and reads a file only when a directory or record
changed after `--since`; an inotify watch on those directories (registry/dirwatch.py, where
Linux offers it) ends each sleep as soon as a receipt or record is renamed into place. Pass
`status --all`'s `observed_at` as `--since` to never miss a wake-up between a look and a wait;
its own `observed_at` is the `--since` of the next wait, so
waits chain the same way. Each change carries the unit's `attention` (SPEC 3.4).
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path

from pair.api import is_receipt, parse_minutes, paths_at, read_receipt
from registry.errors import Rewrite, StateError, UsageError
from registry.records import UnitRecord
from registry.timeutil import iso_from_epoch, parse_iso
from unitmgr import config, validation
from unitmgr.options import WaitOptions
from unitmgr.units import pair_state
from unitmgr.views import attention
from unitmgr.views.observe import busy_holder, receipt_summary, recovery
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from registry.dirwatch import DirectoryWatch

POLL_SECONDS = 0.25
MTIME_LAG_SECONDS = 0.05
CLOCK_REALTIME_COARSE = 5  # Linux's clock id (the time module does not name it)


def _since(value: str | None) -> float:
    if value is None:
        return time.time()
    try:
        return parse_iso(value).timestamp()
    except ValueError:
        raise UsageError(
            "invalid-since",
            f"--since must be an ISO 8601 time, got {value!r}",
            next_command=Rewrite(drop=("--since",)),
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
    # Read once, before the wait: a read never fails on the config, and reports it (SPEC 3.16).
    stuck_after, warning = config.for_reads(workspace)
    found = _wait(workspace, unit_ids, since, deadline, stuck_after)
    return {**found, **config.warning_field(warning)}


def _wait(
    workspace: Workspace, unit_ids: list[str], since: float, deadline: float, stuck_after: float
) -> dict[str, Any]:
    registry = workspace.registry
    watched: dict[str, UnitRecord] = {}
    if unit_ids:
        for unit_id in unit_ids:
            record = workspace.read_record(unit_id)
            if record is None:
                raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
            watched[unit_id] = record
    else:
        for entry in workspace.scan():
            if isinstance(entry, UnitRecord) and entry.lifecycle == "working":
                watched[entry.unit_id] = entry
    if not watched:
        return {
            "ok": True,
            "observed_at": _observed_at(),
            "changed": [],
            "reason": "no units to wait for",
        }
    lifecycles = {unit_id: record.lifecycle for unit_id, record in watched.items()}
    directories = [registry.record_path(unit_id).parent for unit_id in list(watched)[:1]]
    directories += [
        paths_at(record.pair.state_dir).transcripts_dir
        for record in watched.values()
        if record.pair is not None and record.pair.state_dir
    ]
    watch = LazyWatch(directories)
    try:
        return _poll(workspace, watched, lifecycles, (since, deadline, stuck_after), watch)
    finally:
        watch.close()


class LazyWatch:
    """registry/dirwatch.py's inotify watch, begun at the first `sleep` (ctypes and its watch
    cost a `wait` that answers at once a tenth of its start-up, SPEC 7). That first `sleep`
    begins the watch and returns at once, so the caller looks again: whatever landed before
    the watch began is seen by that pass, whatever lands after it wakes the next sleep."""

    def __init__(self, directories: list[Path]) -> None:
        self._directories = directories
        self._watch: DirectoryWatch | None = None

    def sleep(self, seconds: float) -> None:
        if self._watch is None:
            from registry.dirwatch import DirectoryWatch

            self._watch = DirectoryWatch(self._directories)
            return
        self._watch.sleep(seconds)

    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()


def _poll(
    workspace: Workspace,
    watched: dict[str, UnitRecord],
    lifecycles: dict[str, str],
    times: tuple[float, float, float],  # since (epoch), deadline (monotonic), stuck after (s)
    watch: LazyWatch,
) -> dict[str, Any]:
    deadline = times[1]
    registry = workspace.registry
    lead_is_on: set[str] = set()  # units a command of the lead's was seen working on
    while True:
        # Taken before the stat pass, so whatever lands after this pass looked is newer than
        # `observed_at`: the next `wait --since <observed_at>` sees it (no lost wake-up).
        observed_at = _observed_at()
        changed = []
        for unit_id, record in list(watched.items()):
            change = _change(
                workspace, registry.record_path(unit_id), record, lifecycles[unit_id], times
            )
            if change is None:
                continue
            moved = change["lifecycle"] != lifecycles[unit_id] and not change["latest_receipt"]
            busy = change["attention"]["state"] == "busy"
            # The lead's own command moved it (a dismantle, a restaff): not news to the lead.
            # Follow it silently, and stop watching a unit that command dismantled.
            if moved and (busy or (unit_id in lead_is_on and change["lifecycle"] == "dismantled")):
                lead_is_on.add(unit_id)
                lifecycles[unit_id] = change["lifecycle"]
                if change["lifecycle"] == "dismantled":
                    del watched[unit_id]
                continue
            changed.append({"unit_id": unit_id, **change})
        if not watched and not changed:
            return {
                "ok": True,
                "observed_at": observed_at,
                "changed": [],
                "reason": "no units to wait for",
            }
        if changed or time.monotonic() >= deadline:
            return {"ok": True, "observed_at": observed_at, "changed": changed}
        # Woken early by a renamed-in receipt or record (inotify), else after one tick.
        watch.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def _observed_at() -> str:
    """A moment every later file write has an mtime after, as `--since` compares (`>`).

    A file's mtime comes from the kernel's coarse clock, which trails `time.time()` by up to a
    tick, so "now" from `time.time()` could postdate a receipt written just after it. Linux's
    `CLOCK_REALTIME_COARSE` is that clock; elsewhere a margin stands in. One millisecond less
    than that moment, floored, keeps the comparison strict. A receipt written in that same tick
    may wake two waits — never none.
    """
    now = time.time() - MTIME_LAG_SECONDS
    if sys.platform.startswith("linux"):
        try:
            now = time.clock_gettime(CLOCK_REALTIME_COARSE)
        except OSError:
            pass
    return iso_from_epoch(math.floor(now * 1000) / 1000 - 0.001, milliseconds=True)


def _change(
    workspace: Workspace,
    record_file: Path,
    record: UnitRecord,
    lifecycle: str,
    times: tuple[float, float, float],
) -> dict[str, Any] | None:
    since, stuck_after = times[0], times[2]
    current, fresh = lifecycle, record
    if not record_file.exists():
        current = "dismantled"
    elif _mtime(record_file) > since:
        from registry.records import RecordTooNew, RecordUnreadable

        try:
            found = workspace.registry.read(record.unit_id)  # the bounded reader
            if found is None:
                current = "dismantled"
            else:
                fresh, current = found, found.lifecycle
        except (RecordUnreadable, RecordTooNew):  # the bounded reader refused it, too
            current = "unreadable"
    receipt = None
    if record.pair is not None and record.pair.state_dir:
        transcripts = paths_at(record.pair.state_dir).transcripts_dir
        if _mtime(transcripts) > since:
            receipt = newest_receipt(transcripts, since)
    if current == lifecycle and receipt is None:
        return None
    return {
        "lifecycle": current,
        "latest_receipt": receipt_summary(receipt),
        "attention": _attention(workspace, fresh, current, stuck_after),
    }


def _attention(
    workspace: Workspace, record: UnitRecord, lifecycle: str, stuck_after: float
) -> dict[str, Any]:
    """The unit's attention now (SPEC 3.4), read only once it changed: its pair state and its
    recovery from files (no git: recovery's branch check needs a worktree row, skipped here)."""
    holder = busy_holder(workspace, record.unit_id) if lifecycle == "dismantled" else None
    if holder is not None:
        return {"state": "busy", "since": holder.get("since"), "why": attention.busy_why(holder)}
    if lifecycle in ("dismantled", "unreadable"):
        why = "dismantled" if lifecycle == "dismantled" else "record unreadable"
        state = "idle" if lifecycle == "dismantled" else "recovery"
        return {"state": state, "since": None, "why": why}
    pair = pair_state(record)
    busy = busy_holder(workspace, record.unit_id)
    return attention.derive(
        busy=busy,
        lifecycle=record.lifecycle,
        pair=pair,
        recovery=recovery(workspace, record, pair=pair, busy=busy),
        updated_at=record.updated_at,
        now=time.time(),
        stuck_after=stuck_after,
        feedback=record.feedback,
    )
