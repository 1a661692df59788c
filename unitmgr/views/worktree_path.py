"""`unit path ID` (SPEC 3.18): the unit's worktree path, for `cd "$(unit path ID)"`.

The record is executor-writable, so the path printed is the one git proves is the unit's
(unitmgr/ownership.py: a linked worktree of this repository with the recorded branch, its `.git`
linking back, no symlink, not the common dir or the main worktree, no other unit's), never the
record's word alone — a record naming `/etc` is refused `record-untrusted`. A proven path that a
shell could not take back verbatim from one line (a control character: newline, escape) or that
is not absolute is refused too, rather than printed escaped: `cd` would go somewhere else. It only
reads; it takes no lock.
"""

from __future__ import annotations

import os

from registry.errors import StateError
from registry.output import Rendered
from unitmgr import validation


def _printable(path: str) -> bool:
    return os.path.isabs(path) and not any(
        ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in path
    )


def run(repo: str, unit: str, *, lock_timeout: str) -> Rendered:
    from unitmgr.quick_reads import lock_free
    from unitmgr.units import load
    from unitmgr.workspace import Workspace, dismantle_label

    lock_free(lock_timeout)
    unit_id = validation.unit_id(unit, "ID")
    workspace = Workspace.open(repo)
    record = load(workspace, unit_id)
    from unitmgr.ownership import Ownership, RecordUntrusted

    proven = Ownership(workspace, record, workspace.scan(), read_only=True).worktree()
    if proven is None or not proven.present:
        raise StateError(
            "worktree-missing",
            f"unit {unit_id} worktree is missing: {record.worktree}",
            next_step=dismantle_label(unit_id),
        )
    if not _printable(proven.path):
        raise RecordUntrusted(
            record, "worktree", proven.path, "a path a shell cannot take from one line"
        )
    return Rendered(proven.path + "\n")
