"""The build steps of `unit create` (Phase C): one method per journaled step, each filling the
step's `done` detail. The step runner (unitmgr/lifecycle/runner.py) decides which run;
unitmgr/lifecycle/create.py declares their order.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from pair import api as pair_api
from registry.atomic import write_text_atomic
from registry.errors import (
    Rewrite,
    StateError,
)
from registry.locks import Deadline
from registry.output import progress
from registry.processes import ChildTimeout, is_alive, run_streamed
from registry.proof import Proof, child_proof, new_child_token
from registry.records import UnitRecord
from registry.ref_ledger import record_lead_moves
from registry.timeutil import seconds_from_env
from unitmgr import baseline, git, notify, port_leases, ref_guard
from unitmgr.copy_files import copy_listed
from unitmgr.lifecycle.create_request import command_label
from unitmgr.lifecycle.journal import Journal
from unitmgr.lifecycle.manifest import ensure_manifest, read_manifest
from unitmgr.lifecycle.pairing import init_pair, send_or_adopt, verify_pair
from unitmgr.ownership import Ownership, others_of, stop_journaled_child
from unitmgr.steps import CREATE_LIFECYCLE_AFTER
from unitmgr.views.observe import worktree_rows
from unitmgr.workspace import Workspace, realpath

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

PR_BODY_PATTERN = "/PR_BODY.md"


class CreateSteps:
    """The steps of Phase C over one record; the caller holds its unit lock."""

    def __init__(self, workspace: Workspace, record: UnitRecord, deadline: Deadline):
        self.workspace = workspace
        self.registry = workspace.registry
        self.record = record
        self.deadline = deadline
        self.journal = Journal(self.registry, record, "create")
        self.guard_refs = False  # the project config's guard_refs (SPEC 4.1), set by build

    # -- steps ---------------------------------------------------------------------------------

    def _reached(self, step: str) -> None:
        self.record.lifecycle = CREATE_LIFECYCLE_AFTER[step]

    def _working(self, outcome: dict[str, Any]) -> None:
        self.record.error = None

    def _manifest(self, outcome: dict[str, Any]) -> None:
        record = self.record
        ensure_manifest(record)
        record.resources.task_file = True
        outcome["task_file"] = record.task_file

    def _worktree(self, outcome: dict[str, Any]) -> None:
        record = self.record
        cwd = self.workspace.toplevel
        rows = worktree_rows(self.workspace, settled_for=command_label(record.unit_id))
        row = rows.get(realpath(record.worktree))
        if row is not None and row.branch != record.branch:
            raise StateError(
                "worktree-branch-differs",
                f"unit {record.unit_id} worktree {record.worktree} has branch {row.branch}, "
                f"not {record.branch}",
                next_step=f"git -C {shlex.quote(record.worktree)} status --branch --short",
            )
        if row is not None and row.locked is not None and "initializing" in row.locked:
            # `git worktree add` was killed half-way; its half-made worktree is ours to redo,
            # once git proves it is (SPEC 2.5).
            Ownership(self.workspace, record, others_of(self.workspace, record)).worktree()
            git.remove_worktree(row.path, force=True, cwd=cwd)
            row = None
        if row is None:
            path = Path(record.worktree)
            if os.path.lexists(path):
                raise StateError(
                    "worktree-exists",
                    f"recorded worktree path exists but is not a linked worktree: {path}",
                    next_step=f"mv {shlex.quote(str(path))} {shlex.quote(str(path) + '.moved')}",
                )
            progress(f"unit create {record.unit_id}: git worktree add {path} ({record.branch})")
            branch_sha = git.resolve_commit(f"refs/heads/{record.branch}", cwd=cwd)
            if branch_sha is not None and branch_sha != record.base_sha:
                raise StateError(
                    "branch-exists",
                    f"recorded worktree is missing but branch {record.branch} exists at "
                    f"{branch_sha}, not at the recorded base {record.base_sha}",
                    next_step=f"git -C {shlex.quote(str(cwd))} log --oneline -5 {record.branch}",
                )
            # `git fetch` reads every worktree's HEAD, and `worktree add` leaves its new one
            # half-written for a moment: both hold the fetch lock (SPEC 3.3).
            lock = self.registry.fetch_lock(command=command_label(record.unit_id))
            with lock.hold(self.deadline):
                if branch_sha is None:
                    assert record.base_sha is not None
                    # The lead's own ref change: no executor's receipt is charged with it.
                    record_lead_moves(
                        self.workspace.common_git_dir,
                        [f"refs/heads/{record.branch}"],
                        command="create",
                        unit=record.unit_id,
                    )
                    git.add_worktree(
                        path, branch=record.branch, start=record.base_sha, new_branch=True, cwd=cwd
                    )
                else:
                    # Made by this unit's earlier, interrupted attempt (the name was reserved).
                    git.add_worktree(
                        path, branch=record.branch, start="", new_branch=False, cwd=cwd
                    )
        # Always, also on a resume that found the worktree made: a create killed between the
        # `--no-checkout` add and this checkout left it empty (nothing has used it since).
        git.populate_worktree(Path(record.worktree))
        record.worktree = realpath(record.worktree)
        record.resources.worktree = True
        record.resources.local_branch = True
        outcome.update(worktree=record.worktree, base_ref=record.base_ref, base_sha=record.base_sha)

    def _pr_body_exclude(self, outcome: dict[str, Any]) -> None:
        exclude = git.exclude_file(cwd=Path(self.record.worktree))
        lock = self.registry.registry_lock(command=command_label(self.record.unit_id))
        with lock.hold(self.deadline):
            try:
                text = exclude.read_text(encoding="utf-8")
                mode = exclude.stat().st_mode & 0o777
            except FileNotFoundError:
                text, mode = "", 0o644
            added = PR_BODY_PATTERN not in text.splitlines()
            if added:
                if text and not text.endswith("\n"):
                    text += "\n"
                write_text_atomic(exclude, text + PR_BODY_PATTERN + "\n", mode=mode)
        outcome.update(path=str(exclude), pattern=PR_BODY_PATTERN, added=added)

    def _copy_files(self, listed: list[str], outcome: dict[str, Any]) -> None:
        """The config's `copy` list, from the main worktree into the new one (SPEC 3.3): never
        from a linked worktree `--repo` may name, which is some executor's checkout."""
        progress(f"unit create {self.record.unit_id}: copy-files: {', '.join(listed)}")
        target = Path(self.record.worktree)
        source = git.main_worktree(self.workspace.common_git_dir)
        if source is None:
            why = "no main worktree (a bare repository)"
            outcome.update(copied=[], skipped=[{"path": path, "why": why} for path in listed])
            return
        report = copy_listed(listed, source=source, target=target)
        outcome.update(copied=report.copied, skipped=report.skipped)

    def _setup(self, outcome: dict[str, Any]) -> None:
        record = self.record
        assert record.setup is not None
        timeout = seconds_from_env("UNITMGR_SETUP_TIMEOUT", 1800.0)
        progress(f"unit create {record.unit_id}: setup: {record.setup}")
        try:
            result = run_streamed(
                ["sh", "-c", record.setup],
                cwd=Path(record.worktree),
                timeout_seconds=timeout,
                sink=sys.stderr.buffer,
                on_start=lambda child: self.journal.note_child("setup", child),
                child_token=new_child_token(record.unit_id),  # journaled: its proof (SPEC 8)
                env=port_leases.unit_environment(record.ports),
            )
        except ChildTimeout as error:
            raise StateError(
                "timeout",
                f"setup timed out after {int(error.seconds)}s",
                detail={"output_tail": error.output_tail[-2000:]},
                next_command=Rewrite(
                    environment={"UNITMGR_SETUP_TIMEOUT": str(max(int(error.seconds * 2), 60))}
                ),
            ) from None
        outcome.update(exit_code=result.exit_code, seconds=result.seconds)
        if result.exit_code != 0:
            raise StateError(
                "setup-failed",
                f"setup exited {result.exit_code}",
                detail={"output_tail": result.output_tail[-2000:]},
                next_step="--setup: a hook that exits 0 (its output is in detail.cause)",
            )
        # What setup left is not the unit's change (written with this step's `done`).
        record.setup_baseline = baseline.take(Path(record.worktree))
        outcome["setup_baseline"] = sorted(record.setup_baseline)[:20]

    def _pair_init(self, outcome: dict[str, Any]) -> None:
        assert self.record.staffing is not None
        # Before the first turn can move a ref: the hook that logs whose ref moved (and
        # refuses foreign ones with guard_refs).
        outcome["ref_hook"] = ref_guard.install(
            self.workspace.toplevel, self.workspace.common_git_dir, guard=bool(self.guard_refs)
        )
        if self.guard_refs:
            progress(f"unit create {self.record.unit_id}: guard_refs: {outcome['ref_hook']}")
        outcome.update(
            init_pair(
                self.record,
                self.journal,
                "pair-init",
                self.record.staffing.current,
                notify=notify.session_target(
                    self.workspace, self.record.unit_id, self.record.worktree
                ),
            )
        )

    def _pair_verify(self, outcome: dict[str, Any]) -> None:
        assert self.record.staffing is not None
        outcome.update(verify_pair(self.record, self.record.staffing.current))

    def _first_task(self, outcome: dict[str, Any]) -> None:
        manifest = read_manifest(Path(self.record.task_file))
        outcome.update(send_or_adopt(self.record, body=manifest, what="the first task"))
        # The first task carries the whole manifest, addenda included: nothing is pending.
        self.record.pending_notice = None

    def _kill_journaled_child(self, step: str) -> None:
        """Stop the child an earlier attempt journaled in `step`, once it is proven (SPEC 8):
        setup's carries the token unitmgr gave it; a bootstrap partner carries its turn's token
        and the state dir of the worktree git proves is the unit's."""
        child = self.journal.journaled_child(step)  # None unless the lead's MAC covers it
        if child is None or not is_alive(child):
            return
        token = child.token
        if step == "pair-init":
            proven = Ownership(self.workspace, self.record, others_of(self.workspace, self.record))
            worktree = proven.worktree()
            proof = (
                pair_api.turn_proof(worktree.pair_state_dir, token)
                if worktree is not None and token
                else Proof()
            )
        else:
            proof = child_proof(token, self.record.unit_id)
        what = f"unit create {self.record.unit_id}: stopping the earlier {step}"
        stop_journaled_child(self.record, f"journal {step} detail.child", child, proof, what=what)
