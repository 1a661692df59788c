"""Read-only views of units: `list`, `status --unit` (its read part) and `status --all`.

`status --all` is lock-free, offline and writes nothing: one `git worktree list` in total, at most
three git calls per present worktree (usually one; unitmgr/views/worktree_scan.py runs them
concurrently and, for `unit watch`, skips unchanged worktrees), and pair state read in-process
through `pair.api.read_status`, which only stats transcripts — so its cost grows with units, not
with transcript size.

Over ~400 lines because `list` and `status --all` describe a unit from the same observations
(worktree, pair, overlaps, recovery); the rendering is unitmgr/views/table.py.
"""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from registry.lazy_re import lazy
from registry.records import UnitRecord
from registry.store import UnreadableRecord
from registry.timeutil import iso_from_epoch
from unitmgr import baseline, config, git
from unitmgr.steps import CREATE_PHASES
from unitmgr.units import (
    base_ref_of,
    first_turn_resend,
    manifest_path,
    pair_state,
    unsigned_fields,
)
from unitmgr.views import attention
from unitmgr.views.worktree_scan import WorktreeFacts, WorktreeJob, WorktreeScanner
from unitmgr.workspace import Workspace, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from unitmgr.forge import Forge

DIRTY_SAMPLE = 5
IN_FLIGHT_KEYS = ("seq", "started_at", "partner_pid", "heavy_queue", "alive")


def worktree_rows(
    workspace: Workspace,
    *,
    settled_for: str | None = None,
    listing: Callable[[], list[git.WorktreeRow]] | None = None,
) -> dict[str, git.WorktreeRow]:
    """Every worktree by real path. `settled_for` (a mutating command's label) lists under the
    fetch lock (`Workspace.settled_worktrees`); a view passes nothing and never locks, or the
    `listing` it started earlier (`quick_reads.EarlyListing`)."""
    if settled_for:
        rows = workspace.settled_worktrees(command=settled_for)
    elif listing is not None:
        rows = listing()
    else:
        rows = git.list_worktrees(cwd=workspace.toplevel)
    return {realpath(row.path): row for row in rows}


def observed(
    record: UnitRecord, rows: dict[str, git.WorktreeRow], forge: Forge | None = None
) -> dict[str, Any]:
    row = rows.get(realpath(record.worktree))
    pair = pair_state(record)
    seen: dict[str, Any] = {
        "worktree": row.to_json() if row else None,
        "pair": pair,
        "latest_receipt": pair.get("latest_receipt") if pair.get("ok") else None,
    }
    if forge is not None:
        seen["pull_requests"] = pull_requests(forge, record)
    return seen


def pull_requests(forge: Forge, record: UnitRecord) -> list[dict[str, Any]] | dict[str, Any]:
    """The branch's pull requests, or `{error}` when GitHub cannot be read."""
    from registry.errors import ToolError

    try:
        return [pull.to_json() for pull in forge.pulls_for_branch(record.branch)]
    except ToolError as error:
        return {"error": error.reason, "code": error.code}


def describe(
    record: UnitRecord, rows: dict[str, git.WorktreeRow], forge: Forge | None = None
) -> dict[str, Any]:
    """The record with `observed` inside it (SPEC 3.0 output shapes), and `runner` for a unit
    whose turns run on another machine (SPEC 4.3)."""
    view = record.to_json()
    view["observed"] = observed(record, rows, forge)
    runner = runner_view(record, view["observed"]["pair"])
    if runner is not None:
        view["runner"] = runner
    return view


# An ISO time as the lead's supervisor writes it; anything else in the (executor-writable)
# marker is shown as unknown.
_HEARTBEAT = lazy(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{8,15}Z")


def runner_view(record: UnitRecord, pair: dict[str, Any] | None) -> dict[str, Any] | None:
    """`{kind, node, heartbeat_at}` for a unit on another machine (SPEC 4.3), None for one on
    this machine. Files only: kind and node from the record's signed staffing, `heartbeat_at`
    from the in-flight marker as `pair.api.read_status` read it (None between turns) — never
    the cluster."""
    staffing = record.staffing.current if record.staffing is not None else None
    if staffing is None or staffing.runner is None:
        return None
    in_flight = pair.get("in_flight") if pair and pair.get("ok") else None
    heartbeat = in_flight.get("runner_heartbeat_at") if isinstance(in_flight, dict) else None
    if not isinstance(heartbeat, str) or not _HEARTBEAT.fullmatch(heartbeat):
        heartbeat = None
    return {"kind": staffing.runner, "node": staffing.node, "heartbeat_at": heartbeat}


# -- recovery --------------------------------------------------------------------------------


def _command(workspace: Workspace, *parts: str) -> str:
    words = ["unit", *parts, "--repo", str(workspace.toplevel)]
    return " ".join(shlex.quote(word) for word in words)


def create_command(workspace: Workspace, record: UnitRecord) -> str:
    """The exact create command that resumes `record` (every recorded option, no task file).

    Built only from what the lead signed (SPEC 8): a field without the lead's MAC is left out,
    so the command never carries a value an executor planted; `supply_again` names those
    options, and the resume takes the values the lead gives them then."""
    assert record.staffing is not None
    staffing = record.staffing.current
    unsigned = set(unsigned_fields(workspace, record, *RESUME_SIGNED))
    parts = [
        "create",
        "--unit", record.unit_id,
        "--worktree", record.worktree,
        "--branch", record.branch,
        "--base", record.base,
        "--scope", record.scope,
    ]  # fmt: skip
    if "validation" not in unsigned:
        parts += ["--validation", record.validation]
    parts += ["--lead", record.lead]
    if "staffing.current" not in unsigned:
        parts += ["--partner", staffing.partner, "--reason", staffing.reason]
        if staffing.model is not None:
            parts += ["--model", staffing.model]
        if staffing.effort is not None:
            parts += ["--effort", staffing.effort]
        if staffing.identity != "default" or staffing.partner == record.lead:
            parts += ["--identity", staffing.identity]
        if staffing.runner is not None:  # a resume compares it, whatever the config says
            parts += ["--runner", staffing.runner]
            if staffing.node is not None:
                parts += ["--node", staffing.node]
    if record.issue is not None:
        parts += ["--issue", str(record.issue)]
    if record.setup is not None and "setup" not in unsigned:
        parts += ["--setup", record.setup]
    for pattern in record.paths:
        parts += ["--paths", pattern]
    if record.ports:  # the resume keeps the recorded ports; the count is what it compares
        parts += ["--ports", str(len(record.ports))]
    if "task" in unsigned:
        parts += ["--task-file", "-"]  # the task again, on standard input
    return _command(workspace, *parts)


# The signed fields a create resume takes from the record, and the options that supply each.
RESUME_SIGNED = ("validation", "setup", "staffing.current", "task")
STAFFING_OPTIONS = (
    "--partner",
    "--reason",
    "--model",
    "--effort",
    "--identity",
    "--runner",
    "--node",
)
SUPPLY_AGAIN = {
    "validation": ("--validation",),
    "setup": ("--setup",),
    "staffing.current": STAFFING_OPTIONS,
    "task": ("--task-file",),
    "pending_staffing": STAFFING_OPTIONS,
}


def _resuming(
    workspace: Workspace, record: UnitRecord, why: str, command: str, fields: tuple[str, ...]
) -> dict[str, Any]:
    """A recovery whose command is a resume: `supply_again` lists the options left out of it
    because their recorded value is not signed by this lead (SPEC 8)."""
    unsigned = unsigned_fields(workspace, record, *fields)
    if not unsigned:
        return {"needed": True, "why": why, "command": command}
    options = sorted({option for field in unsigned for option in SUPPLY_AGAIN[field]})
    return {
        "needed": True,
        "why": f"{why}; not signed by this lead, supply again: {', '.join(options)}",
        "command": command,
        "supply_again": options,
        "unsigned": unsigned,
    }


def dismantle_command(workspace: Workspace, unit_id: str, *, force: bool) -> str:
    parts = ["dismantle", "--unit", unit_id]
    if force:
        parts += ["--force", unit_id]
    return _command(workspace, *parts)


def recovery(
    workspace: Workspace,
    entry: UnitRecord | UnreadableRecord,
    *,
    pair: dict[str, Any] | None = None,
    row: git.WorktreeRow | None = None,
    busy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`{needed, why, command}`: the exact command that resumes a unit needing it (SPEC 3.1).

    A unit one of the lead's own commands is working on (`busy`, its unit lock's live holder)
    needs no recovery: its half-made state is that command's work in progress (SPEC 3.4)."""
    if busy is not None and not isinstance(entry, UnreadableRecord):
        return {"needed": False, "why": attention.busy_why(busy), "command": None}
    if isinstance(entry, UnreadableRecord):
        return {
            "needed": True,
            "why": "record unreadable" if entry.code == "record-unreadable" else "record too new",
            "command": dismantle_command(workspace, entry.unit_id, force=True),
        }
    record = entry
    lifecycle = record.lifecycle
    if lifecycle in ("dismantling", "dismantle-failed"):
        return {
            "needed": True,
            "why": f"lifecycle {lifecycle}",
            "command": dismantle_command(
                workspace, record.unit_id, force=record.abandoned is not None
            ),
        }
    worktree_owned = record.resources.worktree or lifecycle == "working"
    if worktree_owned and not os.path.isdir(record.worktree):
        return {
            "needed": True,
            "why": "worktree missing",
            "command": dismantle_command(workspace, record.unit_id, force=True),
        }
    if worktree_owned and row is not None and row.head is not None and not row.head.strip("0"):
        # The branch ref was deleted behind unitmgr's back (git shows a zero HEAD).
        return {
            "needed": True,
            "why": "branch missing",
            "command": dismantle_command(workspace, record.unit_id, force=True),
        }
    unfinished = {entry.get("command") for entry in record.journal}
    if lifecycle in ("restaffing", "restaff-failed") or (
        lifecycle == "working" and "restaff" in unfinished
    ):
        why = f"lifecycle {lifecycle}" if lifecycle != "working" else "unfinished restaff journal"
        return _resuming(
            workspace, record, why, restaff_command(workspace, record), _restaff_source(record)
        )
    pair = pair or {}
    pair_owned = record.resources.pair or lifecycle == "working"
    if pair_owned and pair.get("code") == "no-pair-session":
        return {
            "needed": True,
            "why": "pair session missing",
            "command": dismantle_command(workspace, record.unit_id, force=True),
        }
    if lifecycle in CREATE_PHASES:
        return _resuming(
            workspace,
            record,
            f"lifecycle {lifecycle}",
            create_command(workspace, record),
            RESUME_SIGNED,
        )
    if lifecycle == "create-failed":
        return {
            "needed": True,
            "why": "lifecycle create-failed",
            "command": dismantle_command(workspace, record.unit_id, force=True),
        }
    if lifecycle == "working" and "create" in unfinished:
        # A create killed after its last step but before clearing its journal.
        return _resuming(
            workspace,
            record,
            "unfinished create journal",
            create_command(workspace, record),
            RESUME_SIGNED,
        )
    if lifecycle == "working" and "addendum" in unfinished:
        text = next(
            (
                (entry.get("detail") or {}).get("text")
                for entry in record.journal
                if entry.get("command") == "addendum" and entry.get("step") == "append"
            ),
            None,
        )
        if text:
            return {
                "needed": True,
                "why": "unfinished addendum",
                # One `--text=…` word: a text starting with `-` must not parse as an option.
                "command": _command(
                    workspace, "addendum", "--unit", record.unit_id, f"--text={text}", "--queue"
                ),
            }
    if lifecycle == "working" and "feedback" in unfinished:
        # The text is in the ledger's `pending_send`: the repeat delivers exactly it.
        return {
            "needed": True,
            "why": "unfinished feedback send",
            "command": _command(
                workspace, "feedback", "--unit", record.unit_id, "--send", "--queue"
            ),
        }
    if lifecycle not in CREATE_PHASES and not manifest_path(workspace, record).exists():
        return {
            "needed": True,
            "why": "manifest missing",
            "command": _command(
                workspace, "addendum", "--unit", record.unit_id, "--restore-manifest"
            ),
        }
    in_flight = pair.get("in_flight") or {}
    if lifecycle == "working" and in_flight.get("alive") is False:
        # The supervisor and partner are gone but their marker stays: no receipt will come,
        # and every send refuses until it is cleared.
        return {
            "needed": True,
            "why": "turn lost",
            "command": " ".join(
                shlex.quote(word) for word in ("pair", "clear", "--repo", record.worktree)
            ),
        }
    receipt = pair.get("latest_receipt") or {}
    if (
        lifecycle == "working"
        and not pair.get("in_flight")
        and (receipt.get("seq"), receipt.get("kind")) == (1, "task")
        and receipt.get("ok") is False
        and receipt.get("status") != "cancelled"
    ):
        # SPEC 3.3: a failed first turn leaves the unit working; the task is sent again.
        return {"needed": True, "why": "first turn failed", "command": first_turn_resend(record)}
    if record.pending_notice and not pair.get("in_flight"):
        return {
            "needed": True,
            "why": "pending notice",
            "command": _command(workspace, "status", "--unit", record.unit_id),
        }
    return {"needed": False, "why": None, "command": None}


def _restaff_source(record: UnitRecord) -> tuple[str, ...]:
    """The signed field the restaff target is read from."""
    return ("pending_staffing",) if record.pending_staffing else ("staffing.current",)


def restaff_command(workspace: Workspace, record: UnitRecord) -> str:
    """The exact restaff command that resumes `record`; its target only when the lead signed it
    (else `--lead` alone, and the recovery's `supply_again` names the rest)."""
    pending = record.pending_staffing or {}
    if not pending and record.staffing is not None:
        pending = record.staffing.current.to_json()  # a restaff finalized, journal not cleared
    if unsigned_fields(workspace, record, *_restaff_source(record)):
        pending = {}
    parts = ["restaff", "--unit", record.unit_id, "--lead", record.lead]
    for option, key in (
        ("--partner", "partner"),
        ("--reason", "reason"),
        ("--model", "model"),
        ("--effort", "effort"),
        ("--identity", "identity"),
        ("--runner", "runner"),
        ("--node", "node"),
    ):
        value = pending.get(key)
        if value is not None and not (key == "identity" and value == "default"):
            parts += [option, str(value)]
    if pending and pending.get("runner") is None and _current_runner(record) is not None:
        parts += ["--runner", "local"]  # the target is this machine: say so, not "keep it"
    return _command(workspace, *parts)


def _current_runner(record: UnitRecord) -> str | None:
    return record.staffing.current.runner if record.staffing is not None else None


def busy_holder(workspace: Workspace, unit_id: str) -> dict[str, Any] | None:
    """The live holder of the unit's lock (`{pid, command, since}`), None when nobody holds it:
    one non-blocking flock probe, no wait and no write (`registry.locks.held_by`)."""
    from registry.locks import held_by

    holder = held_by(workspace.registry.unit_lock_path(unit_id))
    # `status --unit` holds the lock for its own write-back: a reader is never its own "busy".
    return None if holder is not None and holder.get("pid") == os.getpid() else holder


# -- list ------------------------------------------------------------------------------------


def list_units(workspace: Workspace, *, with_pulls: bool = False) -> dict[str, Any]:
    """Every record; offline unless `with_pulls` (`--prs`) asks GitHub for each branch's PRs."""
    forge = None
    if with_pulls:
        from unitmgr.forge_github import open_forge

        forge = open_forge(workspace)
    scanned = workspace.scan()
    rows = worktree_rows(workspace) if scanned else {}
    now = time.time()
    stuck_after, warning = config.for_reads(workspace)
    units = []
    for entry in scanned:
        busy = busy_holder(workspace, entry.unit_id)
        if isinstance(entry, UnreadableRecord):
            view = entry.to_json()
            view["observed"] = None
            view["recovery"] = recovery(workspace, entry)
            pair = None
            busy = None
        else:
            view = describe(entry, rows, forge)
            pair = view["observed"]["pair"]
            view["recovery"] = recovery(
                workspace, entry, pair=pair, row=rows.get(realpath(entry.worktree)), busy=busy
            )
        view["attention"] = attention.of_view(
            view, pair, now=now, stuck_after=stuck_after, busy=busy
        )
        units.append(view)
    return {
        "ok": True,
        "repository": str(workspace.toplevel),
        "units": units,
        **config_changes(workspace, scanned),
        **config.warning_field(warning),
    }


def config_changes(workspace: Workspace, entries: list[Any]) -> dict[str, Any]:
    """`{config_changes}`: the foreign git config, hooks and attributes in force now (SPEC 8),
    once per command — a read still answers (the lead's git is neutralized) and shows them.
    Nothing on an empty registry, which answers without git (unitmgr/quick_reads.py)."""
    if not entries:
        return {}
    from unitmgr import config_audit

    return {
        "config_changes": config_audit.changes_now(workspace.toplevel, workspace.common_git_dir)
    }


# -- status --all ----------------------------------------------------------------------------


def _unreadable(found: dict[str, Any]) -> dict[str, Any] | None:
    """`{unreadable, error}` for a marker or receipt the bounded reader refused (SPEC 8)."""
    if "unreadable" not in found:
        return None
    return {"unreadable": found["unreadable"], "error": found.get("error")}


def receipt_summary(receipt: dict[str, Any] | None) -> dict[str, Any] | None:
    if receipt is None:
        return None
    refused = _unreadable(receipt)
    if refused is not None:
        return refused
    keys = (
        "seq", "kind", "status", "reason", "heavy_queue", "rate_limits", "throttle_signals",
        "foreign_ref_changes", "foreign_config_changes", "receipt_file",
    )  # fmt: skip
    return {key: receipt.get(key) for key in keys}


def _pair_summary(status: dict[str, Any], *, busy: dict[str, Any] | None = None) -> dict[str, Any]:
    if not status.get("ok"):
        if busy is not None and status.get("code") in ("no-pair", "no-pair-session"):
            # The lead's own command (a create in its setup, a dismantle mid-way) has not
            # made the pair yet, or has ended it: no error, just not there.
            return {"pending": attention.busy_why(busy)}
        return {"error": status.get("reason") or "unknown"}
    in_flight = status.get("in_flight")
    return {
        "seq": status.get("seq", 0),
        "in_flight": (
            _unreadable(in_flight) or {key: in_flight.get(key) for key in IN_FLIGHT_KEYS}
            if in_flight
            else None
        ),
        "latest_receipt": receipt_summary(status.get("latest_receipt")),
        "turn": status.get("turn"),
    }


def _worktree_summary(
    record: UnitRecord, row: git.WorktreeRow, facts: WorktreeFacts
) -> tuple[dict[str, Any], list[str] | None]:
    """The worktree block of `status --all` and the unit's changed files (committed since the
    merge base, plus staged, unstaged and untracked)."""
    counts, entries = facts.counts, facts.entries
    if entries is not None and record.setup_baseline:  # setup's leftovers are not changes
        kept = baseline.unchanged(record, Path(record.worktree), by_stat=True)
        entries = baseline.without_baseline(entries, kept)
    files: list[str] | None = None
    if facts.committed is not None and entries is not None:
        files = sorted(set(facts.committed) | {entry[3:] for entry in entries})
    summary = {
        "present": True,
        "head": row.head,
        "base_ref": base_ref_of(record),
        "ahead_of_base": counts[0] if counts else None,
        "behind_base": counts[1] if counts else None,
        "dirty_files": len(entries) if entries is not None else None,
        "dirty_sample": entries[:DIRTY_SAMPLE] if entries is not None else None,
    }
    return summary, files


def facts_by_unit(
    records: list[UnitRecord],
    rows: dict[str, git.WorktreeRow],
    scanner: WorktreeScanner | None = None,
) -> dict[str, tuple[dict[str, Any], list[str] | None]]:
    """Every unit's worktree block and changed files; the git calls run concurrently
    (unitmgr/views/worktree_scan.py), and a long-lived `scanner` reuses what did not change."""
    found: dict[str, tuple[dict[str, Any], list[str] | None]] = {}
    present: list[tuple[UnitRecord, git.WorktreeRow]] = []
    for record in records:
        row = rows.get(realpath(record.worktree))
        if row is None or not os.path.isdir(record.worktree):
            found[record.unit_id] = ({"present": False}, None)
        else:
            present.append((record, row))
    jobs = [
        WorktreeJob(
            Path(record.worktree),
            base_ref_of(record),
            row.branch,
            row.head,
            "all" if record.setup_baseline else "normal",
        )
        for record, row in present
    ]
    for (record, row), facts in zip(
        present, (scanner or WorktreeScanner()).scan(jobs), strict=True
    ):
        found[record.unit_id] = _worktree_summary(record, row, facts)
    return found


def status_all(
    workspace: Workspace,
    scanner: WorktreeScanner | None = None,
    *,
    listing: Callable[[], list[git.WorktreeRow]] | None = None,
) -> dict[str, Any]:
    """The `status --all` document; `scanner` (held by `unit watch`) reuses unchanged facts;
    `listing`, a `git worktree list` the caller already started (`quick_reads.EarlyListing`).

    Pipelined (SPEC 7): `git worktree list` runs while the records are read; each unit's git
    call starts as soon as its record is read and the listing is in, and this thread reads
    the next record, the pair files and the unit lock meanwhile; the config audit's listing
    runs beside them. Git works in its own processes, so the reads cost the batch little."""
    from registry.threads import Pool

    now = time.time()
    observed_at = iso_from_epoch(now, milliseconds=True)
    stuck_after, warning = config.for_reads(workspace)
    entries: list[UnitRecord | UnreadableRecord] = []
    records: list[UnitRecord] = []
    pairs: dict[str, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    worktrees: dict[str, tuple[dict[str, Any], list[str] | None]] = {}
    real: dict[str, str] = {}  # unit id -> real path of its worktree
    scanned: dict[str, tuple[int, git.WorktreeRow]] = {}  # unit id -> (scan index, row)
    # An empty registry needs no `git worktree list`: nothing would be matched against it.
    listing_needed = bool(workspace.registry.unit_ids())
    with Pool(2) as side:
        listing_done = (
            side.submit(worktree_rows, workspace, listing=listing) if listing_needed else None
        )
        run = (scanner or WorktreeScanner()).begin()
        rows: dict[str, git.WorktreeRow] | None = None
        unscanned: list[UnitRecord] = []  # read before the listing was in

        def start(record: UnitRecord) -> None:
            assert rows is not None
            row = rows.get(real[record.unit_id])
            if row is None or not os.path.isdir(record.worktree):
                worktrees[record.unit_id] = ({"present": False}, None)
                return
            job = WorktreeJob(
                Path(record.worktree),
                base_ref_of(record),
                row.branch,
                row.head,
                "all" if record.setup_baseline else "normal",
            )
            scanned[record.unit_id] = (run.add(job), row)

        try:
            for entry in workspace.scan_each():
                entries.append(entry)
                if not isinstance(entry, UnitRecord):
                    continue
                records.append(entry)
                real[entry.unit_id] = realpath(entry.worktree)
                if rows is None and listing_done is not None and listing_done.done():
                    rows = listing_done.result()
                    for waiting in unscanned:
                        start(waiting)
                    unscanned.clear()
                if rows is None:
                    unscanned.append(entry)
                else:
                    start(entry)
                pairs[entry.unit_id] = (
                    pair_state(entry),
                    busy_holder(workspace, entry.unit_id),
                )
            if rows is None:
                rows = listing_done.result() if listing_done is not None and records else {}
                for waiting in unscanned:
                    start(waiting)
            audit = side.submit(config_changes, workspace, entries)
        except BaseException:
            run.close()  # the git calls already started end before this one does
            raise
        facts = run.finish()
        by_id = {record.unit_id: record for record in records}
        for unit_id, (index, row) in scanned.items():
            worktrees[unit_id] = _worktree_summary(by_id[unit_id], row, facts[index])
        changes = audit.result()

    units: list[dict[str, Any]] = []
    changed_files: dict[str, list[str]] = {}
    for entry in entries:
        if isinstance(entry, UnreadableRecord):
            view = entry.to_json()
            view["recovery"] = recovery(workspace, entry)
            view["attention"] = attention.of_view(view, None, now=now, stuck_after=stuck_after)
            units.append(view)
            continue
        record = entry
        status, busy = pairs[record.unit_id]
        worktree, files = worktrees[record.unit_id]
        if files is not None and record.lifecycle not in ("dismantling", "dismantle-failed"):
            changed_files[record.unit_id] = files
        view = {
            "unit_id": record.unit_id,
            "issue": record.issue,
            "lifecycle": record.lifecycle,
            "branch": record.branch,
            "base": record.base,
            "partner": record.partner,
            "identity": record.identity,
            **_runner_field(record, status),
            "ports": list(record.ports),
            "pair": _pair_summary(status, busy=busy),
            "worktree": worktree,
            "pending_notice": record.pending_notice,
            "error": record.error,
            "feedback": attention.feedback_summary(record.feedback),
            "_receipt": status.get("latest_receipt") if status.get("ok") else None,
        }
        view["recovery"] = recovery(
            workspace, record, pair=status, row=rows.get(real[record.unit_id]), busy=busy
        )
        view["attention"] = attention.derive(
            lifecycle=record.lifecycle,
            pair=status,
            recovery=view["recovery"],
            updated_at=record.updated_at,
            now=now,
            stuck_after=stuck_after,
            busy=busy,
            feedback=record.feedback,
        )
        units.append(view)
    unattributed = unattributed_changes(records, units)
    return {
        "ok": True,
        "repository": str(workspace.toplevel),
        "observed_at": observed_at,
        "units": units,
        "overlaps": overlaps(changed_files),
        "unattributed_ref_changes": unattributed,
        **changes,
        **config.warning_field(warning),
    }


def _runner_field(record: UnitRecord, status: dict[str, Any]) -> dict[str, Any]:
    runner = runner_view(record, status)
    return {"runner": runner} if runner is not None else {}


def unattributed_changes(
    records: list[UnitRecord], units: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The ref changes no unit's turn could be charged with (SPEC 4.1), each once: gathered from
    every latest receipt that saw one, and put also on the unit whose branch the ref is —
    never on every unit that happened to be running."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    for view in units:
        receipt = view.pop("_receipt", None) or {}
        for change in receipt.get("unattributed_ref_changes") or []:
            if isinstance(change, dict):
                key = (change.get("ref"), change.get("before"), change.get("after"))
                found.setdefault(key, {**change, "seen_by": []})["seen_by"].append(view["unit_id"])
    owners = {}
    for record in records:
        owners[f"refs/heads/{record.branch}"] = record.unit_id
        owners[f"refs/remotes/origin/{record.branch}"] = record.unit_id
    by_unit = {view["unit_id"]: view for view in units}
    changes = sorted(found.values(), key=lambda change: str(change.get("ref")))
    for change in changes:
        owner = owners.get(str(change.get("ref")))
        if owner is not None and owner in by_unit:
            by_unit[owner].setdefault("unattributed_ref_changes", []).append(change)
    return changes


def overlaps(changed_files: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Pairs of units whose changed files intersect, with the files, sorted.

    Through an index of who changed each file, so units that share nothing cost nothing (a
    pairwise comparison grows with the square of the units)."""
    changed_by: dict[str, list[str]] = {}
    for unit_id in sorted(changed_files):
        for path in set(changed_files[unit_id]):
            changed_by.setdefault(path, []).append(unit_id)
    shared: dict[tuple[str, str], list[str]] = {}
    for path, units in changed_by.items():
        for index, first in enumerate(units):
            for second in units[index + 1 :]:
                shared.setdefault((first, second), []).append(path)
    return [
        {"units": [first, second], "files": sorted(files)}
        for (first, second), files in sorted(shared.items())
    ]
