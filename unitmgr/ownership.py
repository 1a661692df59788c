"""The one ownership check (SPEC 2.5): prove from git itself that a target belongs to a unit.

A record is untrusted input — every executor can write the git common dir — so no field of it is
ever the only proof for a destructive act. Before anything reaps, removes a worktree (the
`rm -rf` fallback included), ends a pair or deletes a branch (local or at origin), it asks this
module, which answers from `git worktree list --porcelain`, the common dir's `worktrees/<name>/`
admin dirs and the refs:

- the worktree is a linked worktree git reports, whose admin dir lies under this common dir's
  `worktrees/`, with the recorded branch checked out (a prunable entry whose directory is gone
  passes: only git's stale entry is dropped), whose path has no symlink and does not overlap the
  common dir or the main worktree, which (when present) is not prunable and whose `.git` file
  links back to that admin dir, and no other recorded unit names it;
- the branch is not the recorded base, not origin's default (asked of origin), never
  `main`/`master` (a reflog is forgeable), not checked out in any other worktree, and no other
  recorded unit names it;
- while any other record is unreadable, nothing is proven;
- a process is reaped only when its cwd lies inside a worktree that passed.

A failed check raises `record-untrusted` (exit 1) naming the field and what git reports; the
caller has touched nothing yet. This module never deletes, kills or writes anything itself
except through `reap`, which only runs on a proven worktree, and `stop_journaled_child`, which
signals a journaled child only once its proof (SPEC 8, `registry.proof`) holds.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pair.paths import state_dir_for
from registry.errors import Rewrite, StateError
from registry.light_dataclass import dataclass
from registry.output import progress
from registry.processes import ProcessIdentity, is_alive, kill_tree, reap_processes_under
from registry.proof import Proof, unproven
from registry.records import UnitRecord
from registry.store import UnreadableRecord
from unitmgr import git
from unitmgr.workspace import Workspace, admin_dirs, is_inside, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

PROTECTED_NAMES = ("main", "master")


class ProcessUntrusted(StateError):
    """A process a record or a journal names, alive with the recorded identity, that nothing
    proves the unit's (SPEC 8 "Processes"): it is not signalled."""

    def __init__(self, record: UnitRecord, field: str, pid: int, found: str) -> None:
        super().__init__(
            "record-untrusted",
            f"unit {record.unit_id}'s record names {field} pid {pid}, but that is {found} — "
            "it was not signalled",
            detail={"field": field, "recorded": pid, "found": found},
            next_step=f"ps -o pid,lstart,args -p {pid}",
        )


def stop_journaled_child(
    record: UnitRecord, field: str, child: ProcessIdentity | None, proof: Proof, *, what: str
) -> bool:
    """Stop a child an earlier command journaled in `field` (SPEC 8), only once `proof` proves
    the live process is it; `ProcessUntrusted` otherwise. `what` names it in the progress line
    (`unit create ID: stopping the earlier setup`). Whether one was stopped."""
    if child is None or not is_alive(child):
        return False
    found = unproven(child.pid, proof)
    if found is not None:
        raise ProcessUntrusted(record, field, child.pid, found)
    progress(f"{what} pid {child.pid}")
    kill_tree(child, proof=proof, grace_seconds=2.0)
    return True


class RecordUntrusted(StateError):
    def __init__(self, record: UnitRecord, field: str, recorded: Any, reported: str) -> None:
        super().__init__(
            "record-untrusted",
            f"unit {record.unit_id}'s record names {field} {recorded!r}, but git reports "
            f"{reported} — it was left untouched",
            detail={"field": field, "recorded": recorded, "git": reported},
            # What the record names, read by hand: unitmgr never touches what git does not prove.
            next_step=f"unit status --unit {record.unit_id}",
            next_command=Rewrite(command=("unit", "status"), keep=("--unit", "--repo")),
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


class Ownership:
    """What git proves about one record's targets; built once per command step."""

    def __init__(
        self,
        workspace: Workspace,
        record: UnitRecord,
        others: list[UnitRecord | UnreadableRecord] | None = None,
        *,
        read_only: bool = False,
    ) -> None:
        self.workspace = workspace
        self.record = record
        entries = [o for o in (others or []) if o.unit_id != record.unit_id]
        self.others = [o for o in entries if isinstance(o, UnitRecord)]
        self.unreadable = [o for o in entries if isinstance(o, UnreadableRecord)]
        # A proof for a destructive act lists under the fetch lock, so another create's
        # half-written worktree never fails it (SPEC 3.3); a read-only view never locks.
        self.rows = (
            git.list_worktrees(cwd=workspace.toplevel)
            if read_only
            else workspace.settled_worktrees(command=f"ownership check of unit {record.unit_id}")
        )

    def refuse_while_unreadable(self) -> None:
        """Before a target is proven: an unreadable other record may name it, so while one
        exists nothing is proven (references/decisions.md). A record with no target to prove
        (a torn record being dismantled) is not held up by another torn one."""
        for entry in self.unreadable:
            raise RecordUntrusted(
                self.record,
                "registry",
                str(entry.path),
                f"unit {entry.unit_id}'s record is unreadable ({entry.code}), so what it owns "
                "cannot be told apart from this unit's",
            )

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
        admin = admin_dirs(self.workspace.common_git_dir).get(os.path.normpath(row.path))
        if admin is None or row is self.rows[0] or row.bare:
            raise self._untrusted(
                "worktree",
                path,
                "the main worktree"
                if row is self.rows[0]
                else "no admin dir for it under this repository's worktrees/",
            )
        self._prove_location(row, admin)
        gone = not os.path.lexists(row.path)
        if not gone:
            self._prove_back_link(row, admin)
        if not (gone and row.prunable is not None) and row.branch != record.branch:
            checked_out = row.branch or ("a detached HEAD" if row.detached else "no branch")
            raise self._untrusted("branch", record.branch, f"{row.path} has {checked_out}")
        self.refuse_while_unreadable()
        return ProvenWorktree(row, admin)

    def _prove_location(self, row: git.WorktreeRow, admin: Path) -> None:
        """No symlink on the way, and nowhere near the common dir or the main worktree.

        The row and the admin dir both come from the admin dir's own `gitdir` file, which an
        executor can rewrite: they agree with each other by construction, so the path itself
        is checked here.
        """
        path = self.record.worktree
        normal = os.path.normpath(row.path)
        real = realpath(row.path)
        if real != normal:
            raise self._untrusted("worktree", path, f"{row.path} resolves through a symlink")
        if os.path.islink(admin) or realpath(admin.parent) != realpath(
            self.workspace.common_git_dir / "worktrees"
        ):
            raise self._untrusted("worktree", path, f"its admin dir {admin} is a symlink")
        for name, guarded in (
            ("the git common dir", realpath(self.workspace.common_git_dir)),
            ("the main worktree", realpath(self.rows[0].path)),
        ):
            if is_inside(real, guarded) or is_inside(guarded, real):
                raise self._untrusted("worktree", path, f"{row.path} overlaps {name} {guarded}")

    def _prove_back_link(self, row: git.WorktreeRow, admin: Path) -> None:
        """A present worktree: git does not call it prunable, and its `.git` file names `admin`."""
        path = self.record.worktree
        if row.prunable is not None:
            raise self._untrusted(
                "worktree", path, f"git marks {row.path} prunable ({row.prunable or 'stale'})"
            )
        dot_git = os.path.join(row.path, ".git")
        try:
            info = os.lstat(dot_git)
            if not stat.S_ISREG(info.st_mode):
                raise OSError("not a regular file")
            with open(dot_git, encoding="utf-8", errors="replace") as handle:
                text = handle.read(8192).strip()
        except OSError:
            raise self._untrusted(
                "worktree", path, f"{dot_git} is not a regular file linking back to {admin}"
            ) from None
        target = text.removeprefix("gitdir:").strip() if text.startswith("gitdir:") else ""
        if not target or realpath(os.path.join(row.path, target)) != realpath(admin):
            raise self._untrusted("worktree", path, f"{dot_git} does not link back to {admin}")

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
        self.refuse_while_unreadable()
        if branch == record.base:
            raise self._untrusted("branch", branch, "it is the recorded base")
        if branch in PROTECTED_NAMES:
            # Stricter than SPEC 2.5's "unless the unit created it": the reflog that would
            # prove it is writable by every executor (references/decisions.md).
            raise self._untrusted("branch", branch, f"{branch} is never deleted by unitmgr")
        if branch in git.origin_default_branches(cwd=cwd):
            raise self._untrusted("branch", branch, "it is origin's default branch")
        for other in self.others:
            if branch in (other.branch, other.base):
                raise self._untrusted("branch", branch, f"unit {other.unit_id} records it")
        own = realpath(own_worktree) if own_worktree else None
        for row in self.rows:
            if row.branch == branch and realpath(row.path) != own:
                raise self._untrusted("branch", branch, f"it is checked out in {row.path}")


def others_of(workspace: Workspace, record: UnitRecord) -> list[UnitRecord | UnreadableRecord]:
    """Every other record: a target two records claim belongs to neither for sure.

    An unreadable other record may name this record's targets, so while one exists no target
    is proven and `record-untrusted` names it (`Ownership.refuse_while_unreadable`).
    """
    return [entry for entry in workspace.registry.scan() if entry.unit_id != record.unit_id]
