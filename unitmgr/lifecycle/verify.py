"""`unit verify --unit ID` (SPEC 3.12): make "the tests pass" a fact recorded against a commit.

Under the unit lock: refuse an in-flight turn and a dirty worktree; record HEAD; run the recorded
`--validation` in the worktree (`sh -c`, streamed to stderr, timeout `UNITMGR_VERIFY_TIMEOUT`,
process-group kill); then check HEAD and the tracked files again — if either changed, record
nothing (`head moved during verification`). Otherwise journal `verification {sha, command,
exit_code, seconds, output_tail, at}` whatever the exit code.

The running validation's identity is recorded in `verification_child` before anyone waits on it,
with the token its environment carries, so a verify killed with the lead is stopped by the next
one (SPEC 8) — and a planted identity, which carries no such token, is `record-untrusted`.

The command runs only when it carries the lead's MAC (SPEC 8: an executor can rewrite the
record): an unsigned or forged `validation` is `record-untrusted`, and `--validation` supplies it
again (recorded, and so signed, before it runs). An unsigned `verification_child` is ignored.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from registry.errors import Rewrite, StateError
from registry.output import progress
from registry.processes import ChildTimeout, ProcessIdentity, run_streamed
from registry.proof import child_proof, new_child_token
from registry.records import UnitRecord
from registry.timeutil import iso_z, seconds_from_env
from unitmgr import baseline, git, port_leases, validation
from unitmgr.lifecycle.runner import dry_run_aware
from unitmgr.options import VerifyOptions
from unitmgr.ownership import stop_journaled_child
from unitmgr.units import load, locked, refuse_in_flight, require_signed, unsigned_fields
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

TAIL_CHARACTERS = 4000


def _preconditions(
    workspace: Workspace, record: UnitRecord, *, supplied: bool = False, tracked: bool = False
) -> tuple[str, str]:
    """HEAD, once verify may run, and with `tracked` the tracked changes the drift check
    compares after the validation (`git.head_and_tracked`: one git call for both); `supplied`:
    the lead passed `--validation` just now."""
    worktree = Path(record.worktree)
    if not worktree.is_dir():
        raise StateError("worktree-missing", f"unit {record.unit_id} worktree is missing")
    if not record.validation.strip():
        raise StateError(
            "no-validation",
            f"unit {record.unit_id} has no recorded --validation",
            next_step="--validation: the command that proves the work (verify records it)",
        )
    if not supplied:
        require_signed(
            workspace,
            record,
            "validation",
            next_step=f"unit verify --unit {record.unit_id} --validation 'COMMAND'",
        )
    refuse_in_flight(record, what="verifying")
    from registry.threads import Pool

    with Pool(2) as pool:  # two git reads side by side (SPEC 7), answered in the old order
        facts = pool.submit(git.head_and_tracked, worktree) if tracked else None
        dirty_read = pool.submit(baseline.dirty_entries, record, worktree)
        dirty = dirty_read.result()  # setup's leftovers do not count
        if facts is not None and not dirty:
            facts.result()  # its failure is raised here, as it was after the dirty check
    if dirty:
        raise StateError(
            "worktree-dirty",
            f"unit {record.unit_id} worktree has uncommitted changes — a verification must "
            "run on a commit",
            detail={"dirty": dirty[:20]},
            next_step=f"git -C {shlex.quote(str(worktree))} status --short",
        )
    head, changes = facts.result() if facts is not None else (git.head_commit(worktree), "")
    if head is None:
        raise StateError("no-head", f"unit {record.unit_id} worktree has no HEAD commit")
    return head, changes


@dry_run_aware
def run(repo: str, options: VerifyOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    seconds = validation.lock_timeout(options.lock_timeout)
    record = load(workspace, unit_id)
    if options.validation is not None:
        validation.required(options.validation, "--validation", "verify")
        record.validation = options.validation  # the lead's own word (signed when written)
    if options.dry_run:
        head, _ = _preconditions(workspace, record, supplied=options.validation is not None)
        return {"ok": True, "dry_run": True, "command": record.validation, "head": head}
    with locked(workspace, unit_id, command=f"unit verify --unit {unit_id}", seconds=seconds):
        record = load(workspace, unit_id)
        _stop_earlier_run(workspace, record)
        if options.validation is not None:
            record.validation = options.validation
            workspace.registry.write(record)  # signs it: the next verify needs no flag
        head, tracked = _preconditions(workspace, record, tracked=True)
        worktree = Path(record.worktree)
        progress(f"unit verify {unit_id}: {record.validation}")

        def journal_child(child: ProcessIdentity) -> None:
            record.verification_child = {**child.to_json(), "sha": head}
            workspace.registry.write(record)

        try:
            result = run_streamed(
                ["sh", "-c", record.validation],
                cwd=worktree,
                timeout_seconds=seconds_from_env("UNITMGR_VERIFY_TIMEOUT", 1800.0),
                sink=sys.stderr.buffer,
                on_start=journal_child,
                child_token=new_child_token(unit_id),  # journaled with it: its proof (SPEC 8)
                env=port_leases.unit_environment(record.ports),  # SPEC 3.19
            )
            exit_code, seconds_taken, tail = result.exit_code, result.seconds, result.output_tail
        except ChildTimeout as timeout:
            record.verification_child = None
            workspace.registry.write(record)
            raise StateError(
                "timeout",
                f"validation timed out after {int(timeout.seconds)}s",
                detail={"output_tail": timeout.output_tail[-TAIL_CHARACTERS:]},
                next_command=Rewrite(
                    environment={"UNITMGR_VERIFY_TIMEOUT": str(max(int(timeout.seconds * 2), 60))}
                ),
            ) from None
        record.verification_child = None
        head_after, tracked_after = git.head_and_tracked(worktree)
        if head_after != head or tracked_after != tracked:
            workspace.registry.write(record)
            raise StateError(
                "head-moved",
                "head moved during verification — nothing was recorded",
                detail={"head_before": head, "head_after": head_after},
                next_step="make sure nothing commits in the worktree while it is verified, then "
                "verify again",
            )
        verification = {
            "sha": head,
            "command": record.validation,
            "exit_code": exit_code,
            "seconds": seconds_taken,
            "output_tail": tail[-TAIL_CHARACTERS:],
            "at": iso_z(),
        }
        record.verification = verification
        workspace.registry.write(record)
        workspace.registry.append_event(
            {
                "command": "verify",
                "step": "verification",
                "status": "done",
                "at": iso_z(),
                "unit": unit_id,
                "detail": {k: v for k, v in verification.items() if k != "output_tail"},
            }
        )
    if exit_code != 0:
        raise StateError(
            "validation-failed",
            f"validation failed: exit {exit_code}",
            detail={"verification": verification},
            # The validation by hand, where it failed: its whole output, not a tail.
            next_step=f"cd {shlex.quote(str(worktree))} && {record.validation}",
        )
    return {"ok": True, "verification": verification}


def _stop_earlier_run(workspace: Workspace, record: UnitRecord) -> None:
    """A verify killed with its lead leaves its validation running: stop that exact process.
    An identity without the lead's MAC names a process the lead never started: left alone;
    a signed one is still stopped only once proven the verify's (its token)."""
    if unsigned_fields(workspace, record, "verification_child"):
        progress(f"unit verify {record.unit_id}: an unsigned verification_child is ignored")
        return
    child = ProcessIdentity.from_json(record.verification_child)
    proof = child_proof(child.token if child else None, record.unit_id)
    what = f"unit verify {record.unit_id}: stopping the earlier validation"
    stop_journaled_child(record, "verification_child", child, proof, what=what)
