"""What a failed `unit create` does (SPEC 3.3): a new create rolls back everything it made —
pair (archived first), the `/PR_BODY.md` exclude line it added, worktree, local branch,
manifest, record — each proven the unit's own by git first (SPEC 2.5); a resumed create, or one
that only has to wait, keeps its journal so that repeating the command finishes it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pair import api as pair_api
from registry.atomic import remove_file, write_text_atomic
from registry.errors import (
    RetryableError,
    StateError,
    ToolError,
)
from registry.ref_ledger import record_lead_moves
from registry.timeutil import iso_z
from unitmgr import git, notify
from unitmgr.lifecycle.archive import archive_pair_state
from unitmgr.lifecycle.create_request import command_label
from unitmgr.lifecycle.create_steps import PR_BODY_PATTERN, CreateSteps
from unitmgr.ownership import Ownership, others_of
from unitmgr.workspace import dismantle_label

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

PAIR_STEPS = ("pair-init", "pair-verify", "first-task")


class CreateRollback(CreateSteps):
    """The steps, and what their failure undoes."""

    def _added_exclude(self) -> bool:
        """Whether this create's `pr-body-exclude` step added the line (not found it there)."""
        return any(
            entry.get("step") == "pr-body-exclude"
            and entry.get("status") == "done"
            and (entry.get("detail") or {}).get("added") is True
            for entry in self.journal.entries
        )

    def _undo_exclude(self) -> bool:
        """Remove the `/PR_BODY.md` line this create added, unless another recorded unit still
        relies on it (every unit's worktree reads the one shared `info/exclude`)."""
        exclude = git.exclude_file(cwd=self.workspace.toplevel)
        lock = self.registry.registry_lock(command=command_label(self.record.unit_id))
        with lock.hold(self.deadline):
            others = [u for u in self.registry.unit_ids() if u != self.record.unit_id]
            try:
                text = exclude.read_text(encoding="utf-8")
                mode = exclude.stat().st_mode & 0o777
            except FileNotFoundError:
                return False
            lines = text.splitlines(keepends=True)
            kept = [line for line in lines if line.rstrip("\n") != PR_BODY_PATTERN]
            if others or len(kept) == len(lines):
                return False
            write_text_atomic(exclude, "".join(kept), mode=mode)
            return True

    # -- failure -------------------------------------------------------------------------------

    def _fail(
        self, error: ToolError, *, new: bool, resumed_from: str | None, step: str | None
    ) -> ToolError:
        """The error a failed step ends the create with: a new create rolls back what it made;
        a resumed one, or one that only has to wait, keeps its journal for the repeat."""
        failure = self._failure(error, new=new, resumed_from=resumed_from, step=step)
        if not isinstance(failure, RetryableError):  # one that only has to wait is no news
            notify.announce(
                self.workspace,
                "create-failed",
                self.record.unit_id,
                code=failure.code,
                reason=failure.reason,
                next=failure.next_step,
            )
        return failure

    def _failure(
        self, error: ToolError, *, new: bool, resumed_from: str | None, step: str | None
    ) -> ToolError:
        record = self.record
        record_file = str(self.registry.record_path(record.unit_id))
        retryable = isinstance(error, RetryableError)
        if not new or retryable:
            # A resumed create keeps what the journal reached; so does a new one that only has
            # to wait (a busy lock, GitHub rate limits): repeating the command finishes it.
            record.error = error.reason
            self.registry.write(record)
            failure = RetryableError if retryable else StateError
            return failure(
                error.code,
                error.reason,
                detail={
                    "recovery_record": record_file,
                    "resumed_from": resumed_from,
                    "step": step,
                    "cause": error.detail,
                },
                # The step's own next step; the same create resumes once it is done.
                next_step=error.next_step,
                next_command=error.next_command,
            )
        rollback, archive = self._rollback(error.reason)
        recovered = all(entry["ok"] for entry in rollback)
        reason = error.reason
        if archive and step in PAIR_STEPS:
            reason += f" — the pair's transcripts are archived at {archive}"
        return StateError(
            error.code,
            reason + ("" if recovered else " (rollback incomplete)"),
            detail={
                "step": step,
                "cause": error.detail,
                "rollback": rollback,
                "recovery_record": None if recovered else record_file,
                "archive": str(archive) if archive else None,
            },
            next_step=error.next_step if recovered else dismantle_label(record.unit_id),
            next_command=error.next_command if recovered else None,
        )

    def _rollback(self, reason: str) -> tuple[list[dict[str, Any]], Path | None]:
        record = self.record
        record.lifecycle = "create-failed"
        record.error = reason
        self.registry.write(record)
        cwd = self.workspace.toplevel
        results: list[dict[str, Any]] = []
        archive: Path | None = None

        @contextmanager
        def attempt(resource: str) -> Iterator[dict[str, Any]]:
            entry: dict[str, Any] = {"resource": resource, "ok": True, "error": None}
            try:
                yield entry
            except Exception as failure:
                entry.update(ok=False, error=str(failure))
            results.append(entry)
            self.registry.append_event(
                {
                    "command": "create",
                    "step": f"rollback:{resource}",
                    "status": "done" if entry["ok"] else "failed",
                    "at": iso_z(),
                    "unit": record.unit_id,
                    "detail": entry,
                }
            )

        def ownership() -> Ownership:
            return Ownership(self.workspace, record, others_of(self.workspace, record))

        if record.resources.pair or (record.pair and record.pair.state_dir):
            with attempt("pair") as entry:
                proven_pair = ownership()
                state_dir = proven_pair.pair_state_dir(proven_pair.worktree())
                if state_dir is not None:
                    try:
                        pair_api.close_state(state_dir)  # a dead bootstrap's marker goes too
                    finally:
                        # Archived even when ending failed: the worktree removal that follows
                        # deletes the pair state with it.
                        archive = archive_pair_state(self.registry, record.unit_id, state_dir)
                        record.archive = str(archive) if archive else None
                        entry["archive"] = record.archive
                record.resources.pair = False
        if self._added_exclude():
            with attempt("pr-body-exclude") as entry:
                entry["removed"] = self._undo_exclude()
        worktree_started = any(e.get("step") == "worktree" for e in self.journal.entries)
        if record.resources.worktree or worktree_started:
            with attempt("worktree") as entry:
                proven_worktree = ownership()
                proven = proven_worktree.worktree()
                # A setup command's background children must not outlive their worktree.
                reaped = proven_worktree.reap(proven)
                if reaped and reaped["processes"]:
                    entry["reaped"] = reaped
                if proven is not None:
                    result = git.remove_worktree(proven.path, force=True, cwd=cwd)
                    if result.returncode != 0 and proven.present:
                        import shutil  # only on a rollback (SPEC 7: off create's start-up)

                        shutil.rmtree(proven.path)  # a proven linked worktree only
                        result = git.remove_worktree(proven.path, force=True, cwd=cwd)
                    if result.returncode != 0:
                        raise RuntimeError(result.stderr.strip() or "git worktree remove failed")
                record.resources.worktree = False
            with attempt("local-branch") as entry:
                deleted = False
                if git.ref_exists(f"refs/heads/{record.branch}", cwd=cwd):
                    ownership().branch()
                    record_lead_moves(
                        Path(record.common_git_dir),
                        [f"refs/heads/{record.branch}"],
                        command="create",
                        unit=record.unit_id,
                    )
                    deleted = git.delete_local_branch(record.branch, cwd=cwd)
                entry["deleted"] = deleted
                record.resources.local_branch = False
        if record.resources.task_file or Path(record.task_file).exists():
            with attempt("task-file") as entry:
                remove_file(Path(record.task_file))
                record.resources.task_file = False
        record.rollback = results
        if all(entry["ok"] for entry in results):
            self.registry.delete(record.unit_id)
        else:
            self.registry.write(record)
        return results, archive
