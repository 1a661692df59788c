"""`unit addendum` (SPEC 3.6): steer a unit by appending to its manifest, then telling it.

Under the unit lock:

1. `append`: the text (trailing whitespace stripped) is appended to the manifest as
   `\\n## Addendum — <YYYY-MM-DDTHH:MM:SSZ>\\n<text>\\n`, atomically; `pending_notice
   {addendum_at, sha256}` is journaled, and the addendum is kept in the record's `addenda` so a
   lost manifest can be restored exactly (`--restore-manifest`).
2. `notify`: unless a turn is in flight, a `task` turn tells the executor to re-read the whole
   manifest (naming its path and carrying its full text); `pending_notice` is cleared.

With a turn in flight the addendum is refused, or with `--queue` only appended: the next
`unit status --unit ID` (or addendum) sends the notice. Repeating an addendum resumes it: the
journal (or a pending notice with the same sha256) says what was already done, so nothing is
appended or sent twice.
"""

from __future__ import annotations

from pathlib import Path

from pair import api as pair_api
from registry.atomic import write_text_atomic
from registry.errors import Rewrite, StateError, UsageError
from registry.records import UnitRecord
from registry.timeutil import iso_z
from unitmgr import validation
from unitmgr.lifecycle.journal import Journal
from unitmgr.lifecycle.manifest import (
    block,
    digest,
    manifest_state,
    manifest_text,
    move_aside,
    read_manifest,
)
from unitmgr.lifecycle.runner import Step, StepRunner, dry_run_aware
from unitmgr.options import AddendumOptions
from unitmgr.units import load, locked, turn_in_flight
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _text(options: AddendumOptions) -> str:
    if (options.text is None) == (options.file is None):
        raise UsageError(
            "usage", "addendum needs exactly one of --text T or --file F (or --restore-manifest)"
        )
    if options.file is not None:
        text = validation.read_input_file(options.file, "--file", missing_code="no-body-file")
    else:
        text = options.text or ""
    text = text.rstrip()
    if not text.strip():
        raise UsageError(
            "empty-body", "the addendum is empty", next_step="--text or --file: the addendum's text"
        )
    return text


@dry_run_aware
def run(repo: str, options: AddendumOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    seconds = validation.lock_timeout(options.lock_timeout)
    if options.restore_manifest:
        if options.text is not None or options.file is not None:
            raise UsageError("usage", "--restore-manifest takes no --text or --file")
        return _restore(workspace, unit_id, seconds, options.dry_run)
    text = _text(options)
    record = load(workspace, unit_id)
    if options.dry_run:
        appended = _already_appended(record, Journal(workspace.registry, record, "addendum"), text)
        refuse_append(record, options.queue, appended)
        return {
            "ok": True,
            "dry_run": True,
            "plan": [
                {"step": "append", "action": "skip" if appended else "run", "detail": None},
                {"step": "notify", "action": "run", "detail": None},
            ],
        }
    with locked(workspace, unit_id, command=f"unit addendum --unit {unit_id}", seconds=seconds):
        record = load(workspace, unit_id)
        journal = Journal(workspace.registry, record, "addendum")
        appended = _already_appended(record, journal, text)
        refuse_append(record, options.queue, appended)
        if not appended and _journal_sha(journal) != digest(text):
            journal.clear()  # a different addendum: start a journal of its own
        sent: dict[str, Any] = {
            "status": "sent",
            "seq": record.pair.latest_seq if record.pair else None,
        }

        def notify_step(outcome: dict[str, Any]) -> None:
            sent["status"], sent["seq"] = notify(record, journal)

        StepRunner(journal).run(
            {
                "append": Step(skip="already appended (same sha256)")
                if appended
                else append_step(record, journal, text),
                "notify": Step(handler=notify_step, journals_itself=True),
            },
            on_failure=lambda error, step: error,
        )
        status, seq = sent["status"], sent["seq"]
        journal.clear()
        workspace.registry.write(record)
        document: dict[str, Any] = {"ok": True, "status": status, "manifest": record.task_file}
        if seq is not None:
            document["notice_seq"] = seq
        from unitmgr.views.observe import describe, worktree_rows  # not for a dry run (SPEC 7)

        document["unit"] = describe(
            record, worktree_rows(workspace, settled_for=f"unit addendum --unit {record.unit_id}")
        )
        return document


def _journal_sha(journal: Journal) -> str | None:
    """The sha256 the unfinished addendum journal is about, if there is one."""
    for entry in journal.entries:
        if entry.get("command") == "addendum" and entry.get("step") == "append":
            sha = (entry.get("detail") or {}).get("sha256")
            if sha:
                return str(sha)
    return None


def _already_appended(record: UnitRecord, journal: Journal, text: str) -> bool:
    sha = digest(text)
    if _journal_sha(journal) == sha and journal.is_done("append"):
        return True
    return (record.pending_notice or {}).get("sha256") == sha


def refuse_append(record: UnitRecord, queue: bool, appended: bool) -> None:
    state = manifest_state(record)
    if state == "differs":
        raise StateError(
            "manifest-differs",
            f"unit {record.unit_id} manifest differs from its recorded task — nothing appended",
            detail={"task_file": record.task_file},
            next_step=move_aside(record.task_file),
        )
    if state == "missing":
        raise StateError(
            "manifest-missing",
            f"unit {record.unit_id} manifest is missing — nothing appended",
            detail={"task_file": record.task_file},
            next_step=f"unit addendum --unit {record.unit_id} --restore-manifest",
        )
    in_flight = turn_in_flight(record)
    if in_flight is not None and not queue and not appended:
        raise StateError(
            "turn-in-flight",
            f"unit {record.unit_id} has an in-flight turn (seq {in_flight.get('seq')}) — nothing "
            "was appended; wait for it, or pass --queue to append now and notify later",
            detail={"in_flight": in_flight},
            next_command=Rewrite(flags=("--queue",)),
        )


def append_step(record: UnitRecord, journal: Journal, text: str) -> Step:
    """The `append` step of `text`: at the time an earlier, cut-off attempt journaled for it."""
    sha = digest(text)
    earlier = journal.last_started("append")
    earlier_detail = (earlier or {}).get("detail") or {}
    at = earlier_detail.get("addendum_at") if earlier_detail.get("sha256") == sha else None
    at = at or iso_z()
    added = block(at, text)

    def handler(outcome: dict[str, Any]) -> None:
        manifest = Path(record.task_file)
        current = read_manifest(manifest)
        if not current.endswith(added):  # an append cut off after its write is not redone
            write_text_atomic(manifest, current + added)
        record.addenda.append({"at": at, "sha256": sha, "text": text})
        record.pending_notice = {"addendum_at": at, "sha256": sha}
        outcome.update(addendum_at=at, sha256=sha, bytes=len(added.encode()))

    # The text is journaled with the step, so `unit list` can print the exact command that
    # resumes an addendum cut off here.
    return Step(handler=handler, started={"sha256": sha, "addendum_at": at, "text": text})


def notice_body(record: UnitRecord) -> str:
    manifest = read_manifest(Path(record.task_file))
    at = (record.pending_notice or {}).get("addendum_at")
    return "\n".join(
        [
            f"The task manifest changed: an addendum was appended at {at}.",
            f"Re-read the whole manifest before you act: {record.task_file}",
            "Its full text follows, in case you cannot read that path.",
            "",
            manifest.rstrip(),
        ]
    )


def notify(record: UnitRecord, journal: Journal) -> tuple[str, int | None]:
    """Send the pending notice when nothing is in flight; ("sent"|"queued", seq)."""
    if record.lifecycle != "working" or record.pair is None or not record.pair.state_dir:
        journal.skip("notify", f"lifecycle {record.lifecycle}: the notice waits for the unit")
        return "queued", None
    status = pair_api.read_status(record.pair.state_dir)
    in_flight = status.get("in_flight") if status.get("ok") else None
    seq_now = max(int(status.get("seq") or 0), int((in_flight or {}).get("seq") or 0))
    earlier = journal.last_started("notify")
    seq_before = ((earlier or {}).get("detail") or {}).get("seq_before")
    # Adoption comes before the in-flight check: the turn in flight may be our own notice, sent
    # by an attempt killed before it could record it — queuing it again would send it twice.
    adopt = isinstance(seq_before, int) and seq_now > seq_before
    if adopt and pair_api.never_started(status):
        # That attempt took the turn and was killed before starting it: no notice reached the
        # executor. Release the dead lock; the notice is sent now.
        pair_api.clear_state(record.pair.state_dir)
        adopt, in_flight = False, None
    if not adopt and in_flight and in_flight.get("alive", True):
        journal.skip("notify", "a turn is in flight: the notice waits for it")
        return "queued", None
    with journal.step("notify", {"seq_before": seq_now}) as outcome:
        if adopt:
            # An earlier attempt sent the notice and was cut off before recording it.
            from unitmgr.lifecycle.pairing import receipt_path  # only here (SPEC 7)

            seq = seq_now
            outcome.update(adopted=True)
            record.pair.latest_receipt_file = receipt_path(status, seq)
        else:
            running = pair_api.send(
                record.worktree,
                kind="task",
                body=notice_body(record),
                lead=record.lead,
                background=True,
            )
            seq = int(running["seq"])
            record.pair.latest_receipt_file = running["receipt_file"]
        record.pair.latest_seq = seq
        record.pending_notice = None
        outcome.update(seq=seq)
    return "sent", seq


def _restore(workspace: Workspace, unit_id: str, seconds: float, dry_run: bool) -> dict[str, Any]:
    """Rewrite a missing manifest from the recorded task and addenda (never a differing one)."""
    record = load(workspace, unit_id)
    state = manifest_state(record)
    if state == "differs":
        raise StateError(
            "manifest-differs",
            f"unit {unit_id} manifest differs from its recorded task — it is not overwritten",
            detail={"task_file": record.task_file},
            next_step=move_aside(record.task_file),
        )
    if dry_run:
        return {"ok": True, "dry_run": True, "status": "present" if state == "ok" else "restore"}
    with locked(workspace, unit_id, command=f"unit addendum --unit {unit_id}", seconds=seconds):
        record = load(workspace, unit_id)
        manifest = Path(record.task_file)
        restored = not manifest.exists()
        if restored:
            write_text_atomic(manifest, manifest_text(record))
            workspace.registry.append_event(
                {
                    "command": "addendum",
                    "step": "restore-manifest",
                    "status": "done",
                    "at": iso_z(),
                    "unit": unit_id,
                }
            )
    return {
        "ok": True,
        "status": "restored" if restored else "present",
        "manifest": record.task_file,
        "addenda": len(record.addenda),
    }
