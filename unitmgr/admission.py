"""Admission (SPEC 3.2, 3.3), shared by `unit create` and `unit intake`: how many more units may
start, the base a new unit starts from, and the conflicts that refuse it.

Per unit, from its record and its branch's live PR state: an open draft PR or no PR is
`active`; an open ready PR is `held` (awaiting human review); a merged PR is `merged`; any
lifecycle other than `working` is `active` whatever the PR says. Without GitHub every recorded unit
counts `active` and `pr_state` is "not-configured".

    slots = max(0, min(max_active - active, max_held - held - active))

Admission pauses (exit 1) on an unreadable record or two open PRs for one branch, and (exit 75)
when live PR state cannot be read within the retry bound.

`resolve_base` fetches the base under `locks/fetch.lock` (falling back to the local branch);
`check_conflicts` runs under the registry lock, from a fresh read of every record, so two creates
racing for one branch, worktree, issue or overlapping `--paths` cannot both pass.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from registry.errors import RetryableError, Rewrite, StateError
from registry.light_dataclass import dataclass
from registry.locks import Deadline
from registry.output import progress
from registry.records import UnitRecord
from registry.ref_ledger import record_lead_moves
from registry.store import UnreadableRecord
from registry.timeutil import parse_iso
from unitmgr import git
from unitmgr.forge import Forge, PullRequest
from unitmgr.scope import overlapping_pairs
from unitmgr.workspace import Workspace, is_inside, real_target, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:
    Protocol = object  # a structural type for mypy only: no `typing` at run time (SPEC 7)


def refuse_unreadable(entries: list[UnitRecord | UnreadableRecord]) -> list[UnitRecord]:
    unreadable = [entry for entry in entries if isinstance(entry, UnreadableRecord)]
    if unreadable:
        raise StateError(
            "admission-paused",
            "admission paused: unreadable unit record "
            + ", ".join(entry.unit_id for entry in unreadable),
            detail={"unreadable": [entry.to_json() for entry in unreadable]},
            next_step="inspect the record; `unit dismantle --unit ID --force ID` removes it",
        )
    return [entry for entry in entries if isinstance(entry, UnitRecord)]


def live_pr_state(
    forge: Forge | None, records: list[UnitRecord]
) -> dict[str, list[PullRequest]] | None:
    """Each recorded branch's pull requests, or None when GitHub is not configured."""
    if forge is None:
        return None
    found: dict[str, list[PullRequest]] = {}
    for record in records:
        try:
            found[record.unit_id] = forge.pulls_for_branch(record.branch)
        except RetryableError as error:
            raise RetryableError(
                "admission-paused",
                "admission paused: cannot read live PR state",
                detail={"unit": record.unit_id, "cause": error.reason},
                next_step="try again later",
            ) from None
    return found


def merged_since_created(record: UnitRecord, pull: PullRequest) -> bool:
    """A merged PR that belongs to this unit, not to an earlier one that used the same branch
    name (dismantle deletes a branch, so a name can come back): merged after the unit began."""
    if pull.state != "merged" or not pull.merged_at:
        return False
    if not record.created_at:
        return True
    try:
        # GitHub stamps whole seconds: a merge in the unit's first second still counts.
        return parse_iso(pull.merged_at) >= parse_iso(record.created_at).replace(microsecond=0)
    except ValueError:
        return False


def unit_state(
    record: UnitRecord, pulls: list[PullRequest] | None
) -> tuple[str, PullRequest | None]:
    if pulls is None:
        return "active", None
    open_pulls = [pull for pull in pulls if pull.state == "open"]
    if len(open_pulls) > 1:
        raise StateError(
            "admission-paused",
            f"admission paused: {len(open_pulls)} open PRs for branch {record.branch} of unit "
            f"{record.unit_id}",
            detail={"unit": record.unit_id, "pulls": [pull.to_json() for pull in open_pulls]},
            next_step="close all but one of those pull requests",
        )
    if record.lifecycle != "working":
        return "active", open_pulls[0] if open_pulls else None
    if open_pulls:
        return ("active" if open_pulls[0].draft else "held"), open_pulls[0]
    merged = [pull for pull in pulls if merged_since_created(record, pull)]
    if merged:
        return "merged", merged[0]
    return "active", None


def compute(
    entries: list[UnitRecord | UnreadableRecord],
    *,
    max_active: int,
    max_held: int,
    pulls: dict[str, list[PullRequest]] | None = None,
) -> dict[str, Any]:
    records = refuse_unreadable(entries)
    units = []
    for record in records:
        state, pull = unit_state(record, None if pulls is None else pulls.get(record.unit_id, []))
        units.append(
            {
                "unit_id": record.unit_id,
                "issue": record.issue,
                "state": state,
                "pr": pull.url if pull else None,
            }
        )
    active = sum(1 for unit in units if unit["state"] == "active")
    held = sum(1 for unit in units if unit["state"] == "held")
    return {
        "max_active": max_active,
        "max_held": max_held,
        "active": active,
        "held": held,
        "slots": max(0, min(max_active - active, max_held - held - active)),
        "pr_state": "not-configured" if pulls is None else "live",
        "units": units,
    }


class Candidate(Protocol):
    """What admission needs to know about a unit asked for (create's validated request)."""

    @property
    def unit_id(self) -> str: ...
    @property
    def worktree(self) -> Path: ...
    @property
    def branch(self) -> str: ...
    @property
    def base(self) -> str: ...
    @property
    def issue(self) -> int | None: ...
    @property
    def paths(self) -> list[str]: ...
    @property
    def max_active(self) -> int: ...
    @property
    def max_held(self) -> int: ...
    @property
    def allow_overlap(self) -> bool: ...
    def command_with(self, changes: dict[str, str]) -> str: ...
    @property
    def dry_run(self) -> bool: ...


@dataclass(frozen=True)
class Base:
    ref: str
    sha: str
    source: str  # "origin" | "local"


def resolve_base(
    workspace: Workspace,
    request: Candidate,
    deadline: Deadline,
    remote_heads: dict[str, str | None] | None = None,
) -> Base:
    """The commit a new unit starts from. A dry run fetches nothing: it reads origin's head
    (from `remote_heads` when the caller already listed them, `git.remote_branch_heads`)."""
    cwd = workspace.toplevel
    remote_ref = f"refs/remotes/origin/{request.base}"
    local_ref = f"refs/heads/{request.base}"
    if git.has_remote(cwd):
        if request.dry_run:
            remote_sha = (
                remote_heads[request.base]
                if remote_heads is not None
                else git.remote_branch_head(request.base, cwd=cwd)
            )
            if remote_sha:
                return Base(remote_ref, remote_sha, "origin")
        else:
            progress(f"unit create {request.unit_id}: fetching origin {request.base}")
            lock = workspace.registry.fetch_lock(command=f"unit create --unit {request.unit_id}")
            with lock.hold(deadline):
                fetched = git.fetch_base(request.base, cwd=cwd)
                if fetched == "fetched":
                    # Written after the fetch, which only a fetch of something writes: a turn
                    # whose window ends in between sees a fast forward of a remote-tracking ref,
                    # which is nobody's fault anyway (pair/ref_audit.py); a forced one is named.
                    record_lead_moves(
                        workspace.common_git_dir,
                        [remote_ref],
                        command="create",
                        unit=request.unit_id,
                    )
            if fetched == "fetched":
                sha = git.resolve_commit(remote_ref, cwd=cwd)
                if sha:
                    return Base(remote_ref, sha, "origin")
    sha = git.resolve_commit(local_ref, cwd=cwd)
    if sha:
        return Base(local_ref, sha, "local")
    raise StateError(
        "base-missing",
        f"unit base {request.base} does not exist at origin or locally",
        next_step=f"git -C {shlex.quote(str(cwd))} branch --all --list",
    )


def admit(
    entries: list[UnitRecord | UnreadableRecord],
    request: Candidate,
    pulls: dict[str, list[PullRequest]] | None,
) -> dict[str, Any]:
    """The capacity, or the `admission-paused` refusal when no slot is free."""
    capacity = compute(
        entries, max_active=request.max_active, max_held=request.max_held, pulls=pulls
    )
    if capacity["slots"] <= 0:
        raise StateError(
            "admission-paused",
            "admission paused: active or human-review limit reached — " + _limits(capacity),
            detail=capacity,
            next_step=request.command_with(raised_limits(capacity)),
        )
    return capacity


def raised_limits(capacity: dict[str, Any]) -> dict[str, str]:
    """The limit flags that free one slot: each limit that binds, raised by what it lacks."""
    active, held = capacity["active"], capacity["held"]
    raised = {}
    if capacity["max_active"] - active <= 0:
        raised["--max-active"] = str(active + 1)
    if capacity["max_held"] - held - active <= 0:  # held units count against active ones too
        raised["--max-held"] = str(active + held + 1)
    return raised


def _limits(capacity: dict[str, Any]) -> str:
    """The limits, the counts and what binds, so "0 held" never reads as a contradiction; and
    how to raise them, by flag on this create or once for the repository (SPEC 3.3 Defaults)."""
    active, held = capacity["active"], capacity["held"]
    max_active, max_held = capacity["max_active"], capacity["max_held"]
    counted = (
        "; without GitHub every recorded unit counts as active"
        if capacity["pr_state"] == "not-configured"
        else ""
    )
    return (
        f"max_active {max_active}: {active} active, {max(0, max_active - active)} free; "
        f"max_held {max_held}: {held} held + {active} active, "
        f"{max(0, max_held - held - active)} free (max_held bounds the units waiting on review "
        f"and those still active{counted}). Wait for a unit to be merged or dismantled, or raise "
        "the limit that binds: --max-active/--max-held, or max_active/max_held in .unitmgr.toml"
    )


def check_conflicts(workspace: Workspace, request: Candidate, records: list[UnitRecord]) -> None:
    target = real_target(request.worktree)
    for other in records:
        reason = None
        if other.branch == request.branch:
            reason = f"same branch {request.branch}"
        elif realpath(other.worktree) == target:
            reason = f"same worktree {request.worktree}"
        elif is_inside(target, realpath(other.worktree)) or is_inside(
            realpath(other.worktree), target
        ):
            # Checked again here, under the registry lock: two creates racing with `/w/a` and
            # `/w/a/b` both passed the lock-free check before either worktree existed.
            reason = f"worktree {request.worktree} nests with {other.worktree}"
        elif request.issue is not None and other.issue == request.issue:
            reason = f"same issue #{request.issue}"
        elif not request.allow_overlap and other.paths and request.paths:
            shared = overlapping_pairs(request.paths, other.paths)
            if shared:
                reason = "overlapping --paths " + ", ".join(f"{a} ~ {b}" for a, b in shared)
        if reason:
            raise StateError(
                "conflict",
                f"unit {request.unit_id} conflicts with recorded unit {other.unit_id}: {reason}",
                detail={"unit": other.unit_id, "why": reason},
                next_step=f"--branch, --worktree or --issue: one no recorded unit has ({reason})"
                if "paths" not in reason
                else None,
                next_command=Rewrite(flags=("--allow-overlap",)) if "paths" in reason else None,
            )
    refs = (f"refs/heads/{request.branch}", f"refs/remotes/origin/{request.branch}")
    found = git.existing_refs(refs, cwd=workspace.toplevel)  # one git process for both
    for ref in refs:  # answered in this order
        if ref in found:
            raise StateError(
                "branch-exists",
                f"branch {request.branch} already exists at {ref}",
                next_step=f"--branch: a name no branch has yet ({request.branch} exists at {ref})",
            )
    if os.path.lexists(request.worktree):
        raise StateError(
            "worktree-exists",
            f"worktree path already exists: {request.worktree}",
            next_step=f"--worktree: a path that does not exist yet ({request.worktree} does)",
        )
