"""`unit dismantle --dry-run` (SPEC 3.9): every target of every step, read and never touched.

For a readable record: the pair state `end-pair` ends, the processes `reap` would stop (pid and
argv), what `archive` would copy and (forced) save, the worktree path with its dirty files, the
local branch with its head and commits ahead, the remote branch with its head and lease, the
manifest and the record. Targets are proven the way the real steps prove them (SPEC 2.5,
listing without a lock); a target git does not confirm is named with `untrusted`.

For an unreadable record: what it names (nothing of which is trusted, so nothing of which is
touched) and that the record and manifest move into the archive.

It must not write, lock, kill or send anything.
"""

from __future__ import annotations

import json
from pathlib import Path

from registry.errors import ToolError
from registry.processes import processes_under
from registry.records import MAX_RECORD_BYTES, UnitRecord
from registry.store import UnreadableRecord
from unitmgr import git
from unitmgr.lifecycle.archive import own_archive
from unitmgr.lifecycle.discard_saves import would_save
from unitmgr.lifecycle.journal import Journal
from unitmgr.ownership import Ownership, RecordUntrusted, others_of
from unitmgr.steps import DISMANTLE_STEPS
from unitmgr.workspace import Workspace, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

UNTRUSTED_SKIP = "the record is unreadable: nothing it names is trusted, so nothing is touched"
NAMED_FIELDS = ("worktree", "branch", "base", "base_ref", "common_git_dir", "task_file")
NAMED_LIMIT = 500  # characters of one named value shown


def named_targets(entry: UnreadableRecord) -> dict[str, Any]:
    """What an unreadable record names, as text, bounded: shown, never acted on (SPEC 2.2)."""
    try:
        with open(entry.path, "rb") as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
        raw = json.loads(data) if len(data) <= MAX_RECORD_BYTES else None
    except (OSError, ValueError):
        raw = None
    named: dict[str, Any] = {}
    if isinstance(raw, dict):
        for key in NAMED_FIELDS:
            if isinstance(raw.get(key), str):
                named[key] = raw[key][:NAMED_LIMIT]
        pair = raw.get("pair")
        if isinstance(pair, dict) and isinstance(pair.get("state_dir"), str):
            named["pair.state_dir"] = pair["state_dir"][:NAMED_LIMIT]
    return named


def plan(
    workspace: Workspace, entry: UnitRecord | UnreadableRecord, forced: bool
) -> list[dict[str, Any]]:
    if isinstance(entry, UnreadableRecord):
        moves = {
            "manifest": str(workspace.registry.manifest_path(entry.unit_id)),
            "record": str(entry.path),
        }
        return [
            {
                "step": step,
                "action": "run",
                "detail": {"moves_to_archive": moves[step]}
                if step in moves
                else {"skipped": UNTRUSTED_SKIP},
            }
            for step in DISMANTLE_STEPS
        ]
    steps = Journal(workspace.registry, entry, "dismantle", field="cleanup").plan()
    targets = step_targets(workspace, entry, forced)
    return [{**step, "detail": targets[step["step"]]} for step in steps]


def step_targets(workspace: Workspace, record: UnitRecord, forced: bool) -> dict[str, Any]:
    cwd = workspace.toplevel
    registry = workspace.registry
    ownership = Ownership(workspace, record, others_of(workspace, record), read_only=True)
    untrusted: str | None = None
    proven = state_dir = None
    try:
        proven = ownership.worktree()
        state_dir = ownership.pair_state_dir(proven)
    except RecordUntrusted as error:
        untrusted = error.reason
    present = proven is not None and proven.present
    worktree = Path(proven.path) if proven is not None else None
    local_head = (
        git.resolve_commit(f"refs/heads/{record.branch}", cwd=cwd) if record.branch else None
    )
    counts = None
    dirty = None
    if present and worktree is not None:
        counts = git.ahead_behind(record.base_ref, worktree=worktree) if record.base_ref else None
        dirty = git.status_porcelain(worktree)
    origin = git.has_remote(cwd)
    remote: dict[str, Any] = {"branch": record.branch, "origin": origin, "head": None}
    if origin and record.branch:
        try:
            remote["head"] = git.remote_branch_head(record.branch, cwd=cwd)
        except ToolError as error:
            remote["unread"] = error.reason
    proved_head = (record.pr or {}).get("head_sha")
    remote["lease"] = (
        ((record.abandoned or {}).get("remote_head") or remote["head"]) if forced else proved_head
    )
    has_state = state_dir is not None and state_dir.is_dir()
    archive: dict[str, Any] = {
        "destination": record.archive
        if own_archive(registry, record.unit_id, record.archive)
        else str(registry.archive_dir / f"{record.unit_id}-<UTC stamp>"),
        "pair_state": str(state_dir) if has_state else None,
    }
    if forced and present and worktree is not None:
        archive["saves"] = would_save(worktree)
    manifest = registry.manifest_path(record.unit_id)
    targets: dict[str, Any] = {
        "end-pair": {
            "pair_state": str(state_dir) if has_state else None,
            "sid": record.pair.sid if record.pair else None,
        },
        "reap": {
            "processes": processes_under(realpath(proven.path))
            if present and proven is not None
            else []
        },
        "archive": archive,
        "worktree": {
            "path": record.worktree or None,
            "present": present,
            "proven": proven is not None,
            "dirty_files": len(dirty) if dirty is not None else None,
            "dirty_sample": dirty[:5] if dirty is not None else None,
        },
        "local-branch": {
            "branch": record.branch or None,
            "head": local_head,
            "ahead_of_base": counts[0] if counts else None,
        },
        "remote-branch": remote,
        "manifest": {"path": str(manifest), "present": manifest.exists()},
        "record": {"path": str(registry.record_path(record.unit_id))},
    }
    if untrusted:
        for step in ("end-pair", "reap", "archive", "worktree"):
            targets[step]["untrusted"] = untrusted
    return targets
