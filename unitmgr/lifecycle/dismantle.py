"""`unit dismantle --unit ID [--force ID]` (SPEC 3.9): take a unit apart, step by step.

Refuses an in-flight turn, even when forced. Without `--force` it needs a proved merged PR
(arrives with the GitHub issue; until then an unforced dismantle refuses). A forced dismantle
first records what it abandons. Steps, each journaled in the record's `cleanup`: `end-pair`,
`reap`, `archive`, `worktree`, `local-branch`, `remote-branch`, `manifest`, `record` (deleted
last). A failure leaves `dismantle-failed`; the same command resumes.

Every destructive step first asks `unitmgr.ownership` what git proves (SPEC 2.5): a target the
record names but git does not confirm is left untouched and the step fails `record-untrusted`,
with or without `--force`. The remote branch is deleted only under a lease (SPEC 3.9); when
origin moved since, the step is skipped and the branch stays.

An unreadable record is never rewritten and nothing it names is trusted (SPEC 2.2): `--force`
moves the record (and the unit's manifest) into the archive and acts on none of the targets it
names; the output lists them, untouched. A record from a newer schema stays refused
`record-too-new`, `--force` or not. A forced dismantle of a readable record keeps what it
discards (`abandoned.saved`: unitmgr/lifecycle/discard_saves.py); its `--dry-run` shows every
target of every step (unitmgr/lifecycle/dismantle_plan.py).

Over ~400 lines because its eight steps, the merged-PR proof and the salvage of an unreadable
record are one command's handlers; the mechanism they share is unitmgr/lifecycle/runner.py.
"""

from __future__ import annotations

import os
from pathlib import Path

from registry.atomic import remove_file
from registry.errors import RetryableError, Rewrite, StateError, ToolError, UsageError
from registry.locks import Deadline
from registry.output import progress
from registry.records import UnitRecord
from registry.ref_ledger import record_lead_moves
from registry.store import UnreadableRecord
from unitmgr import git, notify, validation
from unitmgr.admission import merged_since_created
from unitmgr.forge import PullRequest
from unitmgr.github_remote import open_forge
from unitmgr.lifecycle.archive import archive_pair_state, new_archive_dir, own_archive
from unitmgr.lifecycle.discard_saves import save_discarded
from unitmgr.lifecycle.dismantle_plan import UNTRUSTED_SKIP, named_targets, plan
from unitmgr.lifecycle.journal import Journal, StepOutcome
from unitmgr.lifecycle.pairing import end_proven_pair
from unitmgr.lifecycle.runner import Handler, Step, StepRunner, dry_run_aware
from unitmgr.options import DismantleOptions
from unitmgr.ownership import Ownership, others_of
from unitmgr.steps import DISMANTLE_STEPS
from unitmgr.units import refuse_in_flight
from unitmgr.workspace import Workspace, dismantle_label

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


@dry_run_aware
def run(repo: str, options: DismantleOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    forced = options.force is not None
    if forced and options.force != unit_id:
        raise UsageError(
            "force-mismatch",
            f"--force must repeat the exact unit id {unit_id!r}, got {options.force!r}",
            next_command=Rewrite(set_options={"--force": unit_id}),
        )
    seconds = validation.lock_timeout(options.lock_timeout)
    entry = workspace.registry.read_any(unit_id)
    if entry is None:
        raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
    _refuse_unusable(workspace, entry, forced)
    if options.dry_run:
        return _plan(workspace, entry, forced)
    lock = workspace.registry.unit_lock(unit_id, command=dismantle_label(unit_id, forced=forced))
    with lock.hold(Deadline(seconds)):
        entry = workspace.registry.read_any(unit_id)
        if entry is None:
            raise StateError("no-such-unit", f"unit {unit_id} is not recorded")
        _refuse_unusable(workspace, entry, forced)
        return Dismantler(workspace, entry, forced=forced).run()


def _refuse_unusable(
    workspace: Workspace, entry: UnitRecord | UnreadableRecord, forced: bool
) -> None:
    """An unreadable record only with `--force`; a too-new one never (SPEC 2.2): raises the
    exit-2 refusal naming the problem."""
    if isinstance(entry, UnreadableRecord) and (not forced or entry.code == "record-too-new"):
        workspace.read_record(entry.unit_id)


def _plan(
    workspace: Workspace, entry: UnitRecord | UnreadableRecord, forced: bool
) -> dict[str, Any]:
    if isinstance(entry, UnitRecord):
        _refuse_in_flight(entry)
        if not forced and not (entry.pr or {}).get("proved"):
            merged_proof(workspace, entry)
    document: dict[str, Any] = {
        "ok": True,
        "dry_run": True,
        "forced": forced,
        "plan": plan(workspace, entry, forced),
    }
    if isinstance(entry, UnreadableRecord):
        document["named"] = named_targets(entry)
    return document


def _refuse_in_flight(record: UnitRecord) -> None:
    refuse_in_flight(record, what="dismantling (refused even with --force)")


def merged_proof(workspace: Workspace, record: UnitRecord) -> PullRequest:
    """The merged PR that proves the unit's work landed, or the `no-merged-pr` refusal.

    The PR must be merged with a head equal to the local branch head; once the local branch is
    gone (a resumed dismantle), any merged PR of the branch on the recorded base proves it.
    """
    forge = open_forge(workspace)
    pulls = forge.pulls_for_branch(record.branch) if forge is not None else []
    local_head = git.resolve_commit(f"refs/heads/{record.branch}", cwd=workspace.toplevel)
    for pull in pulls:
        if pull.state != "merged":
            continue
        if (local_head and pull.head_sha == local_head) or (
            local_head is None and pull.base == record.base and merged_since_created(record, pull)
        ):
            return pull
    why = "" if forge is not None else " (GitHub is not configured)"
    raise StateError(
        "no-merged-pr",
        f"unit {record.unit_id} has no proved merged PR; abandoned cleanup requires --force "
        f"{record.unit_id}{why}",
        detail={"local_head": local_head, "pulls": [pull.to_json() for pull in pulls]},
        next_step=dismantle_label(record.unit_id),
    )


def recover_with(branch: str, abandoned: dict[str, Any]) -> list[str]:
    """Every command that brings abandoned work back (SPEC 3.9): the local branch and, while
    the remote branch is to be (or was) deleted, the remote one."""
    commands = []
    if abandoned.get("head"):
        commands.append(f"git branch {branch} {abandoned['head']}")
    if abandoned.get("remote_head"):
        commands.append(f"git push origin {abandoned['remote_head']}:refs/heads/{branch}")
    return commands


def _stand_in(workspace: Workspace, entry: UnreadableRecord) -> UnitRecord:
    """The record a forced dismantle of an unreadable one journals on: its id only; nothing it
    names is trusted (SPEC 2.2)."""
    return UnitRecord(
        unit_id=entry.unit_id,
        worktree="",
        branch="",
        base="",
        lifecycle="dismantling",
        task_file=str(workspace.registry.manifest_path(entry.unit_id)),
    )


class Dismantler:
    def __init__(
        self, workspace: Workspace, entry: UnitRecord | UnreadableRecord, *, forced: bool
    ) -> None:
        self.workspace = workspace
        self.registry = workspace.registry
        self.forced = forced
        self.unreadable = isinstance(entry, UnreadableRecord)
        # Read before the `record` step moves the file into the archive.
        self.named = named_targets(entry) if isinstance(entry, UnreadableRecord) else None
        self.record = _stand_in(workspace, entry) if isinstance(entry, UnreadableRecord) else entry
        self.journal = Journal(self.registry, self.record, "dismantle", field="cleanup")
        self.journal.persist = not self.unreadable
        self.cwd = workspace.toplevel
        self.interrupted_worktree = False

    def run(self) -> dict[str, Any]:
        record = self.record
        if not self.unreadable:
            _refuse_in_flight(record)
            if not self.forced and not (record.pr or {}).get("proved"):
                proof = merged_proof(self.workspace, record)
                record.pr = {**proof.to_json(), "proved": True}
            if self.forced and record.abandoned is None:
                record.abandoned = self._abandoned()
                self.registry.append_event(
                    {
                        "command": "dismantle",
                        "step": "abandon",
                        "status": "done",
                        "unit": record.unit_id,
                        "detail": record.abandoned,
                    }
                )
            record.lifecycle = "dismantling"
            record.error = None
            self.registry.write(record)
        # Read before this run journals its own `started`: a killed earlier run left one.
        self.interrupted_worktree = self.journal.last_started("worktree") is not None
        StepRunner(self.journal).run(
            self._torn_steps() if self.unreadable else self._steps(),
            on_failure=self._failure,
            before=self._announce,
            after=self._delete_record,
        )
        document: dict[str, Any] = {
            "ok": True,
            "status": "dismantled",
            "unit_id": record.unit_id,
            "merged_pr": record.pr if (record.pr or {}).get("proved") else None,
            "forced": self.forced,
            "archive": record.archive,
        }
        if record.abandoned is not None:
            document["abandoned"] = record.abandoned
        if self.named is not None:
            document["named"] = {**self.named, "untouched": True}
        document["done"] = [
            entry for entry in record.cleanup if entry.get("status") in ("done", "skipped")
        ]
        url = (document["merged_pr"] or {}).get("url")
        notify.announce(self.workspace, "dismantled", record.unit_id, url=url)
        return document

    def _steps(self) -> dict[str, Handler | Step]:
        return {
            "end-pair": self._end_pair,
            "reap": self._reap,
            "archive": self._archive,
            "worktree": self._worktree,
            "local-branch": self._local_branch,
            "remote-branch": self._remote_branch,
            "manifest": self._manifest,
            "record": Step(handler=None),
        }

    def _torn_steps(self) -> dict[str, Handler | Step]:
        """An unreadable record: every target it names is skipped; the record and the unit's
        manifest (both the registry's own, found by the id) move into the archive."""
        steps: dict[str, Handler | Step] = {
            step: Step(skip=UNTRUSTED_SKIP) for step in DISMANTLE_STEPS
        }
        steps["manifest"] = lambda outcome: self._move_to_archive(
            self.registry.manifest_path(self.record.unit_id), "manifest.md", outcome
        )
        steps["record"] = lambda outcome: self._move_to_archive(
            self.registry.record_path(self.record.unit_id), "record.json", outcome
        )
        return steps

    def _move_to_archive(self, source: Path, name: str, outcome: StepOutcome) -> None:
        if not os.path.lexists(source):
            outcome.skip(f"no {name.split('.', maxsplit=1)[0]}")
            return
        destination = self._archive_destination() / name
        os.replace(source, destination)  # both under orchestrate/: one filesystem
        outcome["moved"] = {"from": str(source), "to": str(destination)}

    def _archive_destination(self, *, fresh: bool = False) -> Path:
        """The unit's archive dir: the one an earlier, interrupted attempt made (kept in the
        record before anything was copied, so a repeat rewrites the same files), else (or
        `fresh`) a new one."""
        recorded = self.record.archive
        if not fresh and own_archive(self.registry, self.record.unit_id, recorded):
            assert recorded is not None
            return Path(recorded)  # never another unit's: `record.archive` is the executor's too
        destination = new_archive_dir(self.registry, self.record.unit_id)
        self.record.archive = str(destination)
        if self.journal.persist:
            self.registry.write(self.record)
        return destination

    def _announce(self, step: str) -> None:
        if step != "record":
            progress(f"unit dismantle {self.record.unit_id}: {step}")

    def _delete_record(self, step: str) -> None:
        """The last step deletes the record; its `done` then goes to events.jsonl only."""
        if step == "record":
            from unitmgr.feedback_store import LedgerSeal

            # The ledger's seal goes first: a unit re-created under this id starts afresh.
            LedgerSeal(self.workspace.common_git_dir, self.record.unit_id).remove()
            if not self.unreadable:  # an unreadable one was moved into the archive
                self.registry.delete(self.record.unit_id)
            self.journal.persist = False

    def _failure(self, error: ToolError, step: str | None) -> ToolError:
        """A failed step is journaled on the record; the same command resumes after it."""
        record = self.record
        why = error.reason.removeprefix(f"{step} failed: ")
        self._failed(step, why)
        failure = RetryableError if isinstance(error, RetryableError) else StateError
        reason = f"dismantle step {step} failed: {why}"
        # The failed step's own next step; the same dismantle resumes once it is done.
        next_step = error.next_step or f"unit status --unit {record.unit_id}"
        if failure is StateError:
            notify.announce(
                self.workspace,
                "dismantle-failed",
                record.unit_id,
                code=error.code,
                reason=reason,
                next=next_step,
            )
        return failure(
            error.code,
            reason,
            detail={"step": step, "cleanup": record.cleanup, "cause": error.detail},
            next_step=next_step,
            next_command=error.next_command,
        )

    def _failed(self, step: str | None, reason: str) -> None:
        if self.unreadable:
            return
        self.record.lifecycle = "dismantle-failed"
        self.record.error = f"dismantle step {step} failed: {reason}"
        self.registry.write(self.record)

    # -- what a forced dismantle abandons ------------------------------------------------------

    def _abandoned(self) -> dict[str, Any]:
        record = self.record
        worktree = Path(record.worktree)
        present = worktree.is_dir()
        head = (
            git.head_commit(worktree)
            if present
            else git.resolve_commit(f"refs/heads/{record.branch}", cwd=self.cwd)
        )
        counts = None
        if present and record.base_ref:
            counts = git.ahead_behind(record.base_ref, worktree=worktree)
        entries = git.status_porcelain(worktree) if present else None
        remote_head = None
        remote_unread = False
        if git.has_remote(self.cwd):
            try:
                remote_head = git.remote_branch_head(record.branch, cwd=self.cwd)
            except ToolError:
                remote_unread = True  # leased on the head first read at `remote-branch`
        abandoned: dict[str, Any] = {
            "head": head,
            "ahead_of_base": counts[0] if counts else None,
            "dirty_files": len(entries) if entries is not None else None,
            "dirty_sample": entries[:5] if entries is not None else None,
            "remote_head": remote_head,
        }
        if remote_unread:
            abandoned["remote_head_unread"] = True
        abandoned["recover_with"] = recover_with(record.branch, abandoned)
        return abandoned

    # -- steps ---------------------------------------------------------------------------------

    def _lead_moves(self, ref: str) -> None:
        """Say in the ref ledger, before moving it, that this dismantle moves `ref`."""
        record_lead_moves(
            self.workspace.common_git_dir, [ref], command="dismantle", unit=self.record.unit_id
        )

    def _ownership(self) -> Ownership:
        """What git proves right now (SPEC 2.5), asked afresh before every destructive step."""
        return Ownership(self.workspace, self.record, others_of(self.workspace, self.record))

    def _end_pair(self, outcome: StepOutcome) -> None:
        if end_proven_pair(self._ownership(), outcome, skipped="no pair session"):
            self.record.resources.pair = False

    def _reap(self, outcome: StepOutcome) -> None:
        ownership = self._ownership()
        report = ownership.reap(ownership.worktree())
        if report is None:
            outcome.skip("worktree missing")
            return
        outcome["processes"] = report["processes"]
        if report["processes"]:
            outcome["killed"] = report["killed"]

    def _archive(self, outcome: StepOutcome) -> None:
        ownership = self._ownership()
        proven = ownership.worktree()
        state_dir = ownership.pair_state_dir(proven)
        has_state = state_dir is not None and state_dir.is_dir()
        # A forced dismantle keeps what the `worktree` step will discard (SPEC 3.9).
        keeps = (
            self.forced and self.record.abandoned is not None and bool(proven and proven.present)
        )
        if not has_state and not keeps:
            outcome.skip("no pair state")
            return
        destination = self._archive_destination()
        if has_state:
            assert state_dir is not None
            try:
                archive_pair_state(
                    self.registry, self.record.unit_id, state_dir, destination=destination
                )
            except OSError as error:
                # A link planted in the recorded archive (never followed): a fresh one instead.
                outcome["refused_archive"] = {"path": str(destination), "why": str(error)}
                destination = self._archive_destination(fresh=True)
                archive_pair_state(
                    self.registry, self.record.unit_id, state_dir, destination=destination
                )
        outcome["archive"] = self.record.archive
        if keeps:
            assert proven is not None and self.record.abandoned is not None
            saved = save_discarded(Path(proven.path), destination)
            self.record.abandoned["saved"] = saved
            outcome["saved"] = saved

    def _worktree(self, outcome: StepOutcome) -> None:
        record = self.record
        proven = self._ownership().worktree()
        if proven is None:
            outcome.skip("worktree already gone")
            record.resources.worktree = False
            return
        # A repeated dismantle whose `git worktree remove` was killed half-way finds the
        # worktree partly deleted (so "dirty"): finishing that removal is not discarding work,
        # the journal says it was already decided.
        force = self.forced or self.interrupted_worktree
        result = git.remove_worktree(proven.path, force=force, cwd=self.cwd)
        if result.returncode != 0 and force:
            import shutil  # only here: off the dry run's start-up (SPEC 7)

            shutil.rmtree(proven.path, ignore_errors=True)  # proven linked worktree only
            result = git.remove_worktree(proven.path, force=True, cwd=self.cwd)
        if result.returncode != 0:
            raise StateError(
                "worktree-remove-failed",
                f"git worktree remove {proven.path} failed: {result.stderr.strip()}",
                next_step=dismantle_label(record.unit_id, forced=True),
            )
        record.resources.worktree = False
        outcome["removed"] = proven.path

    def _local_branch(self, outcome: StepOutcome) -> None:
        record = self.record
        if not record.branch:
            outcome.skip("no branch confirmed for this record")
            return
        if not git.ref_exists(f"refs/heads/{record.branch}", cwd=self.cwd):
            outcome.skip("no local branch")
            record.resources.local_branch = False
            return
        self._ownership().branch()
        self._lead_moves(f"refs/heads/{record.branch}")
        git.delete_local_branch(record.branch, cwd=self.cwd)
        outcome["deleted"] = record.branch
        record.resources.local_branch = False

    def _remote_branch(self, outcome: StepOutcome) -> None:
        record = self.record
        if not record.branch:
            outcome.skip("no branch confirmed for this record")
            return
        if not git.has_remote(self.cwd):
            outcome.skip("no origin")
            return
        current = git.remote_branch_head(record.branch, cwd=self.cwd)
        if current is None:
            outcome.skip("no remote branch")
            return
        self._ownership().branch()
        abandoned = record.abandoned
        if self.forced and abandoned is not None and abandoned.pop("remote_head_unread", False):
            # origin could not be read before the steps ran: the first head read now is what
            # is abandoned (and leased on), and what `recover_with` brings back.
            abandoned["remote_head"] = current
            abandoned["recover_with"] = recover_with(record.branch, abandoned)
        lease = self._lease()
        if lease is None:
            outcome.skip(
                f"no lease: origin/{record.branch} is at {current} and no proved head was "
                "recorded to compare it with"
            )
            return
        if current == lease:  # the push deletes the remote-tracking ref too
            self._lead_moves(f"refs/remotes/origin/{record.branch}")
        moved = (
            current
            if current != lease
            else git.delete_remote_branch(record.branch, expected_sha=lease, cwd=self.cwd)
        )
        if moved is not None:
            outcome.skip(f"remote moved from {lease} to {moved}")
            if record.abandoned is not None:
                # The remote branch stays: only the local one needs bringing back.
                kept = {**record.abandoned, "remote_head": None}
                record.abandoned["recover_with"] = recover_with(record.branch, kept)
            return
        outcome["deleted"] = f"origin/{record.branch}"
        outcome["lease"] = lease

    def _lease(self) -> str | None:
        """The sha origin's branch must still have: the proved merged head, or (forced) the
        remote head recorded before any step ran."""
        if self.forced:
            return (self.record.abandoned or {}).get("remote_head")
        head = (self.record.pr or {}).get("head_sha")
        return head if isinstance(head, str) and head else None

    def _manifest(self, outcome: StepOutcome) -> None:
        path = self.registry.manifest_path(self.record.unit_id)
        if remove_file(path):
            outcome["deleted"] = str(path)
        else:
            outcome.skip("no manifest")
        self.record.resources.task_file = False
