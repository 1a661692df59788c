"""The one ownership check (SPEC 2.5): prove from git itself that a target belongs to a unit.

A record is untrusted input — every executor can write the git common dir — so no field of it is
ever the only proof for a destructive act. Before anything reaps, removes a worktree (the
`rm -rf` fallback included), ends a pair or deletes a branch (local or at origin), it asks this
module, which answers from `git worktree list --porcelain`, the common dir's `worktrees/<name>/`
admin dirs and the refs:

- the worktree is a linked worktree git reports, whose admin dir lies under this common dir's
  `worktrees/`, with the recorded branch checked out (a prunable entry whose directory is gone
  passes: only git's stale entry is dropped), and no other recorded unit names it;
- the branch is not the recorded base, not origin's default, not `main`/`master` unless the unit
  created it (its oldest reflog entry is git's `branch: Created from`), not checked out in any
  other worktree, and no other recorded unit names it;
- a process is reaped only when its cwd lies inside a worktree that passed.

A failed check raises `record-untrusted` (exit 1) naming the field and what git reports; the
caller has touched nothing yet. This module never deletes, kills or writes anything itself
except through `reap`, which only runs on a proven worktree.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pair.paths import state_dir_for
from registry.errors import StateError
from registry.processes import reap_processes_under
from registry.records import UnitRecord
from unitmgr import git
from unitmgr.workspace import Workspace, realpath

PROTECTED_NAMES = ("main", "master")


class RecordUntrusted(StateError):
    def __init__(self, record: UnitRecord, field: str, recorded: Any, reported: str) -> None:
        super().__init__(
            "record-untrusted",
            f"unit {record.unit_id}'s record names {field} {recorded!r}, but git reports "
            f"{reported} — it was left untouched",
            detail={"field": field, "recorded": recorded, "git": reported},
            next_step=f"inspect {field} in units/{record.unit_id}.json under the registry; "
            "unitmgr never deletes what git does not prove is the unit's",
        )


@dataclass(frozen=True)
class ProvenWorktree:
    """A worktree git confirms is the unit's: its row and its admin dir under `worktrees/`."""

    row: git.WorktreeRow
    admin_dir: Path

    @property
    def path(self) -> str:
        return self.row.path

    @property
    def present(self) -> bool:
        return os.path.isdir(self.row.path)

    @property
    def pair_state_dir(self) -> Path:
        return state_dir_for(self.admin_dir)  # admin_dir is the linked worktree's git dir


def _admin_dirs(common_git_dir: Path) -> dict[str, Path]:
    """`worktrees/<name>/` of this common dir, keyed by the worktree path its `gitdir` names."""
    found: dict[str, Path] = {}
    root = common_git_dir / "worktrees"
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return found
    for name in names:
        admin = root / name
        try:
            gitdir = (admin / "gitdir").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if gitdir:
            found[os.path.normpath(os.path.dirname(gitdir))] = admin
    return found


class Ownership:
    """What git proves about one record's targets; built once per command step."""

    def __init__(
        self, workspace: Workspace, record: UnitRecord, others: list[UnitRecord] | None = None
    ) -> None:
        self.workspace = workspace
        self.record = record
        self.others = [o for o in (others or []) if o.unit_id != record.unit_id]
        self.rows = git.list_worktrees(cwd=workspace.toplevel)

    def _untrusted(self, field: str, recorded: Any, reported: str) -> RecordUntrusted:
        return RecordUntrusted(self.record, field, recorded, reported)

    def _row_for(self, path: str) -> git.WorktreeRow | None:
        real = realpath(path)
        for row in self.rows:
            if row.path == path or realpath(row.path) == real:
                return row
        return None

    # -- the worktree --------------------------------------------------------------------------

    def worktree(self) -> ProvenWorktree | None:
        """The proven worktree, or None when git has no entry for it and the path is gone.

        A path that exists but that git does not report as this repository's linked worktree,
        the main worktree, a row whose branch is not the recorded one, or another unit's
        worktree raise `record-untrusted`.
        """
        record = self.record
        path = record.worktree
        if not path:
            return None
        for other in self.others:
            if other.worktree and realpath(other.worktree) == realpath(path):
                raise self._untrusted("worktree", path, f"it is unit {other.unit_id}'s worktree")
        row = self._row_for(path)
        if row is None:
            if os.path.lexists(path):
                raise self._untrusted(
                    "worktree", path, "no worktree of this repository at that path"
                )
            return None
        admin = _admin_dirs(self.workspace.common_git_dir).get(os.path.normpath(row.path))
        if admin is None or row is self.rows[0] or row.bare:
            raise self._untrusted(
                "worktree",
                path,
                "the main worktree"
                if row is self.rows[0]
                else "no admin dir for it under this repository's worktrees/",
            )
        gone = not os.path.lexists(row.path)
        if not (gone and row.prunable is not None) and row.branch != record.branch:
            checked_out = row.branch or ("a detached HEAD" if row.detached else "no branch")
            raise self._untrusted("branch", record.branch, f"{row.path} has {checked_out}")
        return ProvenWorktree(row, admin)

    def pair_state_dir(self, proven: ProvenWorktree | None) -> Path | None:
        """The pair state to end and archive: only the proven worktree's own.

        A recorded `pair.state_dir` elsewhere (another unit's pair, any directory) is refused.
        """
        recorded = self.record.pair.state_dir if self.record.pair else None
        if proven is None:
            if recorded and os.path.lexists(recorded):
                raise self._untrusted("pair.state_dir", recorded, "no proven worktree owns it")
            return None
        if recorded and realpath(recorded) != realpath(proven.pair_state_dir):
            raise self._untrusted(
                "pair.state_dir",
                recorded,
                f"the worktree's pair state is {proven.pair_state_dir}",
            )
        return proven.pair_state_dir

    def reap(self, proven: ProvenWorktree | None) -> dict[str, Any] | None:
        """Reap the processes inside a proven, present worktree (None when there is none)."""
        if proven is None or not proven.present:
            return None
        return reap_processes_under(realpath(proven.path))

    # -- the branch ----------------------------------------------------------------------------

    def branch(self, *, own_worktree: str | None = None) -> None:
        """Refuse a branch the unit cannot own (SPEC 2.5); the caller then deletes it.

        `own_worktree` is the unit's own proven worktree path, the one place the branch may be
        checked out.
        """
        record = self.record
        branch = record.branch
        cwd = self.workspace.toplevel
        if branch == record.base:
            raise self._untrusted("branch", branch, "it is the recorded base")
        default = git.origin_default_branch(cwd=cwd)
        if default is not None and branch == default:
            raise self._untrusted("branch", branch, "it is origin's default branch")
        if branch in PROTECTED_NAMES and not git.branch_was_created(branch, cwd=cwd):
            raise self._untrusted("branch", branch, f"{branch} was not created by a unit")
        for other in self.others:
            if branch in (other.branch, other.base):
                raise self._untrusted("branch", branch, f"unit {other.unit_id} records it")
        own = realpath(own_worktree) if own_worktree else None
        for row in self.rows:
            if row.branch == branch and realpath(row.path) != own:
                raise self._untrusted("branch", branch, f"it is checked out in {row.path}")


def others_of(workspace: Workspace, record: UnitRecord) -> list[UnitRecord]:
    """Every other readable record: a target two records claim belongs to neither for sure."""
    return [
        entry
        for entry in workspace.registry.scan()
        if isinstance(entry, UnitRecord) and entry.unit_id != record.unit_id
    ]
