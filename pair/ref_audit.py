"""Charge a ref change to the unit that made it (SPEC 4.1 ref audit, revision 3).

The supervisor diffs `git for-each-ref` before and after a writable turn. In a batch that diff
holds everyone's work: other executors' commits on their own branches, their pushes, the lead's
creates, dismantles and fetches, a teammate's push fetched meanwhile. This module sorts each
change a turn may not make (`pair.git.foreign_ref_changes`) into:

- *charged* — this unit's processes made it (the `reference-transaction` hook's log names this
  unit for that ref in the turn's window): the receipt's `foreign_ref_changes`;
- someone else's — the lead's ledger names the ref, or the log names only other units: dropped;
- *unattributed* — nobody explains it: the receipt's `unattributed_ref_changes`, which `unit
  status --all` shows once for the repository and on the unit whose branch it is, never as
  this unit's fault.

A remote-tracking ref counts only when it is deleted or moved by something other than a fast
forward: a fetch of anyone's push only creates or fast-forwards them. A pair without a unit
(a bare `pair` session, nobody else sharing its refs by unitmgr's doing) keeps the plain audit:
every change it may not make is its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pair import git as pair_git
from pair.paths import PairPaths
from pair.state import Session
from registry import ref_ledger

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    Change = dict[str, Any]


def charge(
    changes: list[Change],
    *,
    unit: str | None,
    common_git_dir: Path,
    since_epoch: float,
    worktree: Path,
) -> tuple[list[Change], list[Change]]:
    """(charged to `unit`, unattributed) among the foreign `changes` of one turn's window."""
    if unit is None:
        return changes, []
    lead = ref_ledger.lead_moved(common_git_dir, since_epoch)
    movers = ref_ledger.movers(common_git_dir, since_epoch)
    charged: list[Change] = []
    unattributed: list[Change] = []
    for change in changes:
        ref, before, after = change["ref"], change["before"], change["after"]
        by = movers.get(ref, set())
        if unit in by:
            charged.append(change)
            continue
        if by or ref in lead:
            continue  # another unit's (its own receipt says so), or the lead's own
        if ref.startswith("refs/remotes/") and _fetched(before, after, worktree):
            continue
        unattributed.append(change)
    return charged, unattributed


def _fetched(before: str | None, after: str | None, worktree: Path) -> bool:
    """A remote-tracking ref created or fast-forwarded: what any fetch of a push does."""
    if after is None:
        return False  # a deletion is never a fetch's
    return before is None or pair_git.is_ancestor(before, after, worktree)


def audit_refs(paths: PairPaths, session: Session) -> dict[str, str] | None:
    """The refs before a writable turn (None when git cannot list them: no audit then)."""
    try:
        return pair_git.ref_snapshot(Path(session.worktree), paths.state_dir.parent)
    except Exception as error:
        print(f"ref audit unavailable: {error}", file=sys.stderr)
        return None


def foreign_changes(
    paths: PairPaths,
    session: Session,
    before: dict[str, str] | None,
    branch: str | None,
    since_epoch: float,
) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """(the changes this unit made outside its refs, the changes nobody can be charged with)."""
    if before is None:
        return None, None
    after = audit_refs(paths, session)
    if after is None:
        return None, None
    changes = list(pair_git.foreign_ref_changes(before, after, branch))
    try:
        return charge(
            changes,
            unit=session.unit,
            common_git_dir=pair_git.common_dir(paths.state_dir.parent),
            since_epoch=since_epoch,
            worktree=Path(session.worktree),
        )
    except Exception as error:  # an unreadable log never costs the receipt: charge nothing
        print(f"ref attribution unavailable: {error}", file=sys.stderr)
        return [], changes
