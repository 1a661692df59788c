"""`unit scope` (SPEC 3.7): what a unit changed, whether it stayed in scope, who else touches it.

The base is `origin/<base>` after a fetch when the recorded `base_ref` is remote, else the
recorded local `base_ref`. The report covers `git diff <base>...HEAD`: merge base, head, diff
stat, files, the files outside the unit's `--paths` (matched by git's own `:(glob)` pathspecs),
and the files other active units change too. `--approve` records `scope_approval {sha,
approved_at, files}` under the unit lock, refusing a dirty worktree and out-of-scope files
(unless `--allow-outside`). This is the orchestrator's scope scan, not a code review.
"""

from __future__ import annotations

from pathlib import Path

from registry.errors import Rewrite, StateError
from registry.locks import Deadline
from registry.output import progress
from registry.records import UnitRecord
from registry.ref_ledger import record_lead_moves
from registry.timeutil import iso_z
from unitmgr import baseline, git, validation
from unitmgr.lifecycle.runner import dry_run_aware
from unitmgr.options import ScopeOptions
from unitmgr.units import base_ref_of, load, locked
from unitmgr.views.observe import facts_by_unit, worktree_rows
from unitmgr.workspace import Workspace, dismantle_label

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


@dry_run_aware
def run(repo: str, options: ScopeOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    seconds = validation.lock_timeout(options.lock_timeout)
    record = load(workspace, unit_id)
    if not Path(record.worktree).is_dir():
        raise StateError(
            "worktree-missing",
            f"unit {unit_id} worktree is missing: {record.worktree}",
            next_step=dismantle_label(unit_id),
        )
    if not options.approve:
        return {"ok": True, **report(workspace, record, fetch=not options.dry_run, seconds=seconds)}
    if options.dry_run:
        found = report(workspace, record, fetch=False, seconds=seconds)
        _refuse_approval(record, found, options.allow_outside)
        return {"ok": True, "dry_run": True, **found, "would_approve": found["head"]}
    with locked(
        workspace, unit_id, command=f"unit scope --unit {unit_id} --approve", seconds=seconds
    ):
        record = load(workspace, unit_id)
        found = report(workspace, record, fetch=True, seconds=seconds)
        _refuse_approval(record, found, options.allow_outside)
        record.scope_approval = {
            "sha": found["head"],
            "approved_at": iso_z(),
            "files": found["files"],
            "base": found["base"],
            "outside_paths": found["outside_paths"],
        }
        workspace.registry.write(record)
        workspace.registry.append_event(
            {
                "command": "scope",
                "step": "approve",
                "status": "done",
                "at": iso_z(),
                "unit": unit_id,
                "detail": record.scope_approval,
            }
        )
    return {"ok": True, **found, "scope_approval": record.scope_approval}


def _refuse_approval(record: UnitRecord, found: dict[str, Any], allow_outside: bool) -> None:
    if found["dirty_files"]:
        raise StateError(
            "worktree-dirty",
            f"unit {record.unit_id} worktree has uncommitted changes — commit them (or remove "
            "them) before approving its scope",
            detail={"dirty": found["dirty_files"]},
        )
    if found["outside_paths"] and not allow_outside:
        raise StateError(
            "outside-scope",
            f"unit {record.unit_id} changed {len(found['outside_paths'])} file(s) outside its "
            "--paths: " + ", ".join(found["outside_paths"][:10]),
            detail={"outside_paths": found["outside_paths"], "paths": record.paths},
            next_step="--allow-outside approves the files outside --paths",
            next_command=Rewrite(flags=("--allow-outside",)),
        )


def scope_base(workspace: Workspace, record: UnitRecord, *, fetch: bool, seconds: float) -> str:
    base_ref = base_ref_of(record)
    if base_ref.startswith("refs/remotes/origin/") and fetch:
        progress(f"unit scope {record.unit_id}: fetching origin {record.base}")
        lock = workspace.registry.fetch_lock(command=f"unit scope --unit {record.unit_id}")
        with lock.hold(Deadline(seconds)):
            if git.fetch_base(record.base, cwd=workspace.toplevel) == "fetched":
                record_lead_moves(  # after the fetch, as create's (unitmgr/admission.py)
                    workspace.common_git_dir, [base_ref], command="scope", unit=record.unit_id
                )
    return base_ref


def report(
    workspace: Workspace, record: UnitRecord, *, fetch: bool, seconds: float
) -> dict[str, Any]:
    """What the unit changed. Its git reads run side by side (SPEC 7: each is a process that
    mostly waits), their answers taken, and a failure raised, in the order they were read one
    after another before."""
    from registry.threads import Pool

    worktree = Path(record.worktree)
    base = scope_base(workspace, record, fetch=fetch, seconds=seconds)
    revisions = f"{base}...HEAD"
    with Pool(6) as pool:
        files_read = pool.submit(git.changed_files, revisions, worktree=worktree)
        inside_read = (
            pool.submit(git.changed_files, revisions, worktree=worktree, patterns=record.paths)
            if record.paths
            else None
        )
        dirty_read = pool.submit(baseline.dirty_entries, record, worktree)
        merge_base_read = pool.submit(git.merge_base, base, "HEAD", cwd=worktree)
        head_read = pool.submit(git.head_commit, worktree)
        stat_read = pool.submit(git.diff_stat, revisions, worktree=worktree)
        others_read = pool.submit(_others_and_facts, workspace, record)
        files = files_read.result()
        inside = set(inside_read.result()) if inside_read is not None else set()
        outside = [name for name in files if name not in inside]
        dirty = dirty_read.result()  # setup's leftovers do not count
        found: dict[str, Any] = {
            "unit_id": record.unit_id,
            "base": base,
            "merge_base": merge_base_read.result(),
            "head": head_read.result(),
            "diff_stat": stat_read.result(),
            "files": files,
            "paths": record.paths,
            "outside_paths": outside,
            "dirty_files": dirty,
        }
        others, facts = others_read.result()
    found["overlaps"] = _overlaps(others, facts, set(files) | {e[3:] for e in dirty})
    return found


def _others_and_facts(
    workspace: Workspace, record: UnitRecord
) -> tuple[list[UnitRecord], dict[str, Any]]:
    """The other live units and their worktrees' changed files (no `git worktree list` when
    there is no other unit: nothing would be matched against it)."""
    others = [
        entry
        for entry in workspace.registry.scan()
        if isinstance(entry, UnitRecord)
        and entry.unit_id != record.unit_id
        and entry.lifecycle not in ("dismantling", "dismantle-failed")
    ]
    return others, facts_by_unit(others, worktree_rows(workspace)) if others else {}


def _overlaps(
    others: list[UnitRecord], facts: dict[str, Any], mine: set[str]
) -> list[dict[str, Any]]:
    found = []
    for other in others:
        theirs = facts[other.unit_id][1] or []
        shared = sorted(mine & set(theirs))
        if shared:
            found.append({"unit": other.unit_id, "files": shared})
    return found
