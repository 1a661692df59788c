"""`unit feedback` (SPEC 3.17): a unit's CI failures and review reach its executor, once.

Just over 400 lines: the read, the four journaled steps and the `--all` loop share one ledger
and its invariants, kept in one place on purpose.

Read-only without `--send`: what is pending, the addendum it would make, what is withheld and
why, the round counters. With `--send`, under the unit lock, one journaled run of four steps:

1. `journal`: the exact text, its sha256 and the keys it carries go into the ledger's
   `pending_send` (the record's `feedback`);
2. `append` and 3. `notify`: addendum's own steps (`unitmgr/lifecycle/addendum.py`), so the
   text reaches the manifest and the executor exactly as an addendum would;
4. `ledger`: the keys move into `sent`, the rounds count, `pending_send` is cleared.

A crash anywhere leaves `pending_send` (and the journal): the repeat delivers that stored text,
never a new gathering, so exactly one addendum is appended. Items withheld, left out by
`--max-bytes`, or refused (a turn in flight without `--queue`) are never recorded as sent.
It never writes to GitHub.
"""

from __future__ import annotations

import re
from pathlib import Path

from registry.errors import StateError, UsageError
from registry.light_dataclass import dataclass
from registry.records import UnitRecord
from registry.timeutil import iso_z
from unitmgr import feedback as fb
from unitmgr import validation
from unitmgr.config import load_config
from unitmgr.lifecycle.addendum import append_step, notify, refuse_append
from unitmgr.lifecycle.journal import Journal
from unitmgr.lifecycle.manifest import digest
from unitmgr.lifecycle.runner import Step, StepRunner, dry_run_aware
from unitmgr.options import FeedbackOptions
from unitmgr.units import load, locked, turn_in_flight
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

MAX_BYTES_RANGE = (1024, 1_048_576)


def _max_bytes(value: str, target: str) -> int:
    low, high = MAX_BYTES_RANGE
    if not re.fullmatch(r"[0-9]{1,8}", value) or not low <= int(value) <= high:
        raise UsageError(
            "invalid-max-bytes",
            f"--max-bytes must be a number of bytes from {low} to {high}, got {value!r}",
            next_step=f"unit feedback {target} --max-bytes 16384",
        )
    return int(value)


def _check(options: FeedbackOptions) -> int:
    if (options.unit is None) == (not options.all):
        raise UsageError("usage", "feedback needs exactly one of --unit ID or --all")
    if (options.queue or options.auto) and not options.send:
        raise UsageError("usage", "--queue and --auto go with --send")
    if options.unit is not None:
        validation.unit_id(options.unit)
    target = f"--unit {options.unit}" if options.unit else "--all"
    if options.only is not None and options.only not in fb.ONLY:
        raise UsageError(
            "invalid-only",
            f"--only must be ci, reviews or comments, got {options.only!r}",
            next_step=f"unit feedback {target} --only ci",
        )
    return _max_bytes(options.max_bytes, target)


@dry_run_aware
def run(repo: str, options: FeedbackOptions) -> dict[str, Any]:
    max_bytes = _check(options)
    workspace = Workspace.open(repo)
    seconds = validation.lock_timeout(options.lock_timeout)
    from unitmgr.forge import NOT_CONFIGURED
    from unitmgr.github_remote import open_forge  # the adapter only for GitHub (SPEC 7)

    forge = open_forge(workspace)
    if forge is None:
        raise StateError(
            "github-not-configured",
            f"feedback {NOT_CONFIGURED}",
        )
    config = load_config(workspace.toplevel, workspace.common_git_dir)
    settings = Settings(
        allow=list(config.value("feedback.allow")),
        ci_rounds=int(config.value("feedback.ci_rounds")),
        review_rounds=int(config.value("feedback.review_rounds")),
        max_bytes=max_bytes,
        seconds=seconds,
    )
    if options.unit is not None:
        return _one(workspace, forge, options.unit, options, settings)
    units = []
    for unit_id in sorted(workspace.registry.unit_ids()):
        try:
            units.append(_one(workspace, forge, unit_id, options, settings))
        except (StateError, UsageError) as error:  # one unit's refusal is its entry
            units.append({**error.document(), "unit_id": unit_id})
    return {"ok": True, "units": units}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The config's `[feedback]` and the command line's bounds, read once per run."""

    allow: list[str]
    ci_rounds: int
    review_rounds: int
    max_bytes: int
    seconds: float


def ledger_of(record: UnitRecord) -> dict[str, Any]:
    ledger = record.feedback if isinstance(record.feedback, dict) else {}
    for name, empty in (("sent", {}), ("rounds", {"ci": 0, "review": 0}), ("round_heads", {})):
        if not isinstance(ledger.get(name), dict):  # hostile input: a wrong shape is reset
            ledger[name] = empty
    ledger.setdefault("pending_send", None)
    return ledger


UNTRUSTED_LEDGER = (
    "feedback: the ledger (sent, rounds) is not the one this lead wrote — an executor can write "
    "the registry; nothing is sent automatically until an explicit --send starts it again"
)


def _seal(workspace: Workspace, unit_id: str) -> Any:
    from unitmgr.feedback_store import LedgerSeal

    return LedgerSeal(workspace.common_git_dir, unit_id)


def trust_ledger(workspace: Workspace, record: UnitRecord) -> bool:
    """Whether the record's ledger is the one this lead last wrote (its seal, outside the
    common dir); when not, its `sent`, `rounds` and `round_heads` are set aside in memory, so
    nothing planted decides what is sent, and the caller says so."""
    from unitmgr.feedback_store import empty_ledger

    ledger = ledger_of(record)
    if _seal(workspace, record.unit_id).trusted(ledger):
        return True
    ledger.update(empty_ledger())
    record.feedback = ledger
    return False


def _plan(
    record: UnitRecord, gathered: fb.Gathered, settings: Settings
) -> tuple[dict[str, Any], fb.Sorted, fb.Rendered]:
    ledger = ledger_of(record)
    own = dict(gathered.own)
    found = fb.sort_items(gathered.items, sent=ledger["sent"], allow=settings.allow, own=own)
    rendered = fb.render(
        gathered.pr,
        found.pending,
        found.edited,
        max_bytes=settings.max_bytes,
        unit_id=record.unit_id,
    )
    return ledger, found, rendered


def _document(
    record: UnitRecord, gathered: fb.Gathered, found: fb.Sorted, rendered: fb.Rendered
) -> dict[str, Any]:
    ledger = ledger_of(record)
    by_key = {item.key: item for item in found.pending}
    return {
        "unit_id": record.unit_id,
        "pr": gathered.pr.to_json(),
        "pending": [
            {
                "key": key,
                "kind": by_key[key].kind,
                "login": by_key[key].login,
                "url": by_key[key].url,
                "edited": key in found.edited,
                "fits": key in rendered.keys,
            }
            for key in by_key
        ],
        "withheld": found.withheld,
        "already_sent": found.sent,
        "left_out": rendered.left,
        "checks_running": gathered.running,
        "rounds": ledger["rounds"],
        "addendum": {"bytes": len(rendered.text.encode()), "text": rendered.text}
        if rendered.keys
        else None,
    }


def _kinds(keys: dict[str, str]) -> tuple[bool, bool]:
    """Whether a send carries CI items, and review items (comments count as review)."""
    ci = any(key.startswith(("check:", "status:")) for key in keys)
    return ci, any(not key.startswith(("check:", "status:")) for key in keys)


def _automatic_refusal(
    record: UnitRecord,
    gathered: fb.Gathered,
    ledger: dict[str, Any],
    settings: Settings,
    keys: dict[str, str],
) -> str | None:
    """Why `--auto` does not send now (SPEC 3.17), or None."""
    if record.lifecycle != "working":
        return f"lifecycle {record.lifecycle}: feedback is sent automatically only while working"
    if gathered.pr.draft:
        return f"PR #{gathered.pr.number} is a draft"
    if gathered.running:
        return "checks still run: " + ", ".join(gathered.running[:5])
    ci, review = _kinds(keys)
    head = gathered.pr.head_sha
    for kind, carried, cap in (
        ("ci", ci, settings.ci_rounds),
        ("review", review, settings.review_rounds),
    ):
        new_round = carried and ledger["round_heads"].get(kind) != head
        if new_round and int(ledger["rounds"].get(kind) or 0) >= cap:
            what = "CI still failing" if kind == "ci" else "review still open"
            return f"feedback: {what} after {ledger['rounds'].get(kind)} rounds"
    return None


def _one(
    workspace: Workspace, forge: Any, unit_id: str, options: FeedbackOptions, settings: Settings
) -> dict[str, Any]:
    record = load(workspace, unit_id)
    if options.send and ledger_of(record)["pending_send"] and not options.dry_run:
        return _send(workspace, unit_id, options, settings, gathered=None)
    trusted = trust_ledger(workspace, record)
    gathered = _gather(workspace, forge, record, options, settings.allow)
    ledger, found, rendered = _plan(record, gathered, settings)
    document = {"ok": True, "status": "read", **_document(record, gathered, found, rendered)}
    document["ledger"] = {"trusted": trusted}
    if not trusted:
        document["ledger"]["why"] = UNTRUSTED_LEDGER.removeprefix("feedback: ")
    if ledger["pending_send"]:
        from registry.signing import verified

        stored = ledger["pending_send"]
        document["pending_send"] = {
            "sha256": stored.get("sha256") if isinstance(stored, dict) else None,
            "signed": verified(workspace.registry.signer, record, "feedback.pending_send"),
        }
    if not options.send:
        return document
    if gathered.moved:
        raise StateError(
            "feedback-stale",
            f"{gathered.moved} — nothing was sent",
            detail={"pr": gathered.pr.to_json()},
            next_step=f"unit feedback --unit {unit_id}",
        )
    if gathered.pr.draft and not options.auto:
        raise StateError(
            "feedback-not-sendable",
            f"PR #{gathered.pr.number} is a draft: its feedback is never sent",
            detail={"pr": gathered.pr.to_json()},
            next_step=f"unit status --unit {unit_id}",
        )
    if not rendered.keys:
        if any(entry.get("command") == "feedback" for entry in record.journal):
            # A send killed after its ledger step: nothing is left to deliver, but its
            # journal is, and `unit list` names this command until it is cleared.
            return _send(
                workspace, unit_id, options, settings, gathered=gathered, document=document
            )
        return {**document, "status": "nothing-to-send"}
    if options.auto:
        why = (
            _automatic_refusal(record, gathered, ledger, settings, rendered.keys)
            if trusted
            else UNTRUSTED_LEDGER
        )
        if why is not None:
            if why.startswith("feedback:") and not options.dry_run:
                _mark_capped(workspace, unit_id, settings, why, gathered.pr.head_sha)
            return {**document, "status": "not-sent", "why": why}
    if options.dry_run:
        refuse_append(record, options.queue, False)
        journal = Journal(workspace.registry, record, "feedback")
        return {**document, "ok": True, "dry_run": True, "plan": journal.plan(resuming=False)}
    return _send(workspace, unit_id, options, settings, gathered=gathered, document=document)


def _gather(
    workspace: Workspace,
    forge: Any,
    record: UnitRecord,
    options: FeedbackOptions,
    allow: list[str],
) -> fb.Gathered:
    """`fb.gather` with this unit's ETags (what did not change since the last poll is answered
    304, SPEC 7, and read from the cache) and its job-log directory. A dry run keeps no new
    ETag and no log: it reads the logs into a directory removed after it."""
    import tempfile

    from unitmgr.feedback_store import etag_cache, logs_dir

    with tempfile.TemporaryDirectory(prefix="unitmgr-feedback-") as scratch:
        forge.cache = etag_cache(workspace.common_git_dir, record.unit_id)
        forge.logs = (
            Path(scratch) if options.dry_run else logs_dir(workspace.common_git_dir, record.unit_id)
        )
        try:
            before = dict(forge.cache.settled)
            gathered = fb.gather(forge, record, options.only, forge.cache.settled, allow)
            forge.cache.changed |= forge.cache.settled != before
        finally:
            cache, forge.cache, forge.logs = forge.cache, None, None
    if not options.dry_run:
        cache.save()
    return gathered


def _mark_capped(
    workspace: Workspace, unit_id: str, settings: Settings, why: str, head: str
) -> None:
    """A cap reached: the ledger says so, and attention turns `failed` with the reason."""
    command = f"unit feedback --unit {unit_id} --send --auto"
    with locked(workspace, unit_id, command=command, seconds=settings.seconds):
        record = load(workspace, unit_id)
        ledger = ledger_of(record)
        if (ledger.get("capped") or {}).get("why") != why:
            ledger["capped"] = {"why": why, "at": iso_z(), "head_sha": head}
            record.feedback = ledger
            workspace.registry.write(record)


def _send(
    workspace: Workspace,
    unit_id: str,
    options: FeedbackOptions,
    settings: Settings,
    *,
    gathered: fb.Gathered | None,
    document: dict[str, Any] | None = None,
) -> dict[str, Any]:
    command = f"unit feedback --unit {unit_id} --send"
    with locked(workspace, unit_id, command=command, seconds=settings.seconds):
        record = load(workspace, unit_id)
        seal = _seal(workspace, unit_id)
        if not trust_ledger(workspace, record) and options.auto:
            # Planted since this command looked (or a resumed send): never automatically.
            record = load(workspace, unit_id)
            ledger = ledger_of(record)
            ledger["capped"] = {"why": UNTRUSTED_LEDGER, "at": iso_z(), "head_sha": None}
            record.feedback = ledger
            workspace.registry.write(record)
            return {
                **(document or {"unit_id": unit_id}),
                "status": "not-sent",
                "why": UNTRUSTED_LEDGER,
            }
        ledger = ledger_of(record)
        journal = Journal(workspace.registry, record, "feedback")
        resumed = bool(ledger["pending_send"])
        if not resumed:
            # Another `--send` may have sent some of it while this one waited for the lock.
            rendered = _plan(record, gathered, settings)[2] if gathered else None
            journal.clear()
            if rendered is None or not rendered.keys:
                workspace.registry.write(record)
                seal.settle(ledger)
                return {
                    **(document or {"unit_id": unit_id}),
                    "ok": True,
                    "status": "nothing-to-send",
                }
            assert gathered is not None
            ci, review = _kinds(rendered.keys)
            pending: dict[str, Any] = {
                "text": rendered.text,
                "sha256": digest(rendered.text.rstrip()),
                "keys": rendered.keys,
                "pr": gathered.pr.number,
                "branch": record.branch,
                "head_sha": gathered.pr.head_sha,
                "ci": ci,
                "review": review,
            }
        else:
            pending = _trusted_pending(workspace, record, ledger, journal)
        text = str(pending["text"]).rstrip()
        refuse_append(record, options.queue, journal.is_done("append"))
        sent: dict[str, Any] = {"status": "sent", "seq": None}

        def journal_step(outcome: dict[str, Any]) -> None:
            ledger["pending_send"] = pending
            record.feedback = ledger
            outcome.update(sha256=pending["sha256"], keys=len(pending["keys"]))

        def notify_step(outcome: dict[str, Any]) -> None:
            sent["status"], sent["seq"] = notify(record, journal)

        def ledger_step(outcome: dict[str, Any]) -> None:
            _record_sent(ledger, pending)
            if document is not None:
                ledger["counts"] = _counts(document, pending)
            record.feedback = ledger
            outcome.update(keys=len(pending["keys"]))

        import copy  # only when a send changes the ledger (SPEC 7)

        after = copy.deepcopy(ledger)
        _record_sent(after, pending)
        seal.expect(ledger, after)  # both are the lead's until the record is written
        StepRunner(journal).run(
            {
                "journal": journal_step,
                "append": append_step(record, journal, text),
                "notify": Step(handler=notify_step, journals_itself=True),
                "ledger": ledger_step,
            },
            on_failure=lambda error, step: error,
        )
        journal.clear()
        workspace.registry.write(record)
        seal.settle(ledger)
        result: dict[str, Any] = {
            **(document or {"unit_id": unit_id}),
            "ok": True,
            "status": sent["status"],
            "resumed": resumed,
            "sent": sorted(pending["keys"]),
            "manifest": record.task_file,
            "rounds": ledger["rounds"],
        }
        if sent["seq"] is not None:
            result["notice_seq"] = sent["seq"]
        if turn_in_flight(record) is not None and sent["status"] == "queued":
            result["why"] = "a turn is in flight: the notice waits for it"
        return result


def _trusted_pending(
    workspace: Workspace, record: UnitRecord, ledger: dict[str, Any], journal: Journal
) -> dict[str, Any]:
    """The stored `pending_send`, only when the lead's MAC covers it for this unit and it was
    gathered for the unit's branch. An executor can write the registry: a planted or moved one
    is discarded (with its journal), never delivered, and the next send gathers afresh."""
    from registry.signing import verified

    pending = ledger["pending_send"]
    signed = verified(workspace.registry.signer, record, "feedback.pending_send")
    if signed and isinstance(pending, dict) and pending.get("branch") == record.branch:
        return pending
    why = "is not signed by this lead" if not signed else "was not gathered for its branch"
    ledger["pending_send"] = None
    record.feedback = ledger
    journal.clear()
    workspace.registry.write(record)
    raise StateError(
        "feedback-untrusted",
        f"unit {record.unit_id}'s stored feedback addendum (feedback.pending_send) {why} "
        "(an executor can write the registry) — it was discarded, not delivered",
        detail={"field": "feedback.pending_send", "signed": signed},
        next_step=f"unit feedback --unit {record.unit_id}",
    )


def _counts(document: dict[str, Any], pending: dict[str, Any]) -> dict[str, Any]:
    """What the ledger shows `status --all`, `watch` and `serve` without asking GitHub: the
    items still pending after this send, and how many were withheld."""
    left = [item for item in document.get("pending") or [] if item["key"] not in pending["keys"]]
    ci = sum(1 for item in left if item["kind"] in ("check", "status"))
    return {
        "ci": ci,
        "review": len(left) - ci,
        "withheld": len(document.get("withheld") or []),
        "at": iso_z(),
    }


def _record_sent(ledger: dict[str, Any], pending: dict[str, Any]) -> None:
    at = iso_z()
    head = str(pending.get("head_sha") or "")
    for kind in ("ci", "review"):
        if pending.get(kind) and ledger["round_heads"].get(kind) != head:
            ledger["rounds"][kind] = int(ledger["rounds"].get(kind) or 0) + 1
            ledger["round_heads"][kind] = head
    for key, sig in dict(pending.get("keys") or {}).items():
        round_number = ledger["rounds"]["ci" if key.startswith(("check:", "status:")) else "review"]
        ledger["sent"][key] = {"sig": sig, "at": at, "round": round_number}
    ledger["pr"], ledger["head_sha"] = pending.get("pr"), head
    ledger["pending_send"] = None
    ledger.pop("capped", None)  # a send went out: the cap's attention is answered
