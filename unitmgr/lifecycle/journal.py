"""Journal, then act, then journal: how every multi-step command records its progress.

Each step appends `{command, step, status, at, detail?}` to the record (in `journal`, or `cleanup`
for dismantle) before and after it acts, writing the record each time, and the same object plus
`unit` to `events.jsonl`. A repeated command resumes at the first step without a `done` entry.

The only test hook in product code lives here (SPEC 8): with `UNITMGR_TEST_HOOKS=1`,
`UNITMGR_TEST_CRASH_AFTER=<command>:<step>:<started|done>` makes the process SIGKILL itself right
after writing that entry.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager

from registry.errors import ToolError
from registry.processes import ProcessIdentity
from registry.records import UnitRecord
from registry.store import Registry
from registry.timeutil import iso_z
from unitmgr.steps import STEPS_BY_COMMAND

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _crash_hook(command: str, step: str, status: str) -> None:
    if os.environ.get("UNITMGR_TEST_HOOKS") != "1":
        return
    if status == "skipped":
        status = "done"  # a skipped step is finished: its crash point is `<step>:done`
    if os.environ.get("UNITMGR_TEST_CRASH_AFTER") == f"{command}:{step}:{status}":
        os.kill(os.getpid(), signal.SIGKILL)


class StepOutcome(dict["str", "Any"]):  # quoted: `Any` is for mypy only
    """What a step found, journaled as its `done` (or `skipped`) entry's detail.

    Only the step decides that it was skipped, by calling `skip(reason)`: a key that happens to
    be named `skipped` (copy-files lists the files it left out under that name) never turns a
    step that acted into a skipped one.
    """

    skipped_reason: str | None = None

    def skip(self, reason: str) -> None:
        """This step found nothing to do: journal it `skipped`, with `detail.skipped = reason`
        (SPEC 3.0: a skipped dismantle step carries the reason there)."""
        self.skipped_reason = reason
        self["skipped"] = reason


class Journal:
    """The journal of one command over one record."""

    def __init__(
        self, registry: Registry, record: UnitRecord, command: str, *, field: str = "journal"
    ) -> None:
        if command not in STEPS_BY_COMMAND:
            raise ValueError(f"unknown journaled command {command}")
        self.registry = registry
        self.record = record
        self.command = command
        self.field = field
        self.persist = True  # false for a record that must never be rewritten (unreadable)

    @property
    def entries(self) -> list[dict[str, Any]]:
        entries: list[dict[str, Any]] = getattr(self.record, self.field)
        return entries

    def is_done(self, step: str) -> bool:
        return any(
            entry.get("step") == step
            and entry.get("command") == self.command
            and entry.get("status") in ("done", "skipped")
            for entry in self.entries
        )

    def first_unfinished(self) -> str | None:
        for step in STEPS_BY_COMMAND[self.command]:
            if not self.is_done(step):
                return step
        return None

    def plan(self, *, resuming: bool = True) -> list[dict[str, Any]]:
        """A `--dry-run` plan over this command's steps: `skip` what is done, `resume` the first
        unfinished step, `run` the rest (all `run` when not `resuming`)."""
        # Nothing journaled yet by this command: the real run starts fresh, nothing resumes.
        started = any(entry.get("command") == self.command for entry in self.entries)
        first = self.first_unfinished() if resuming and started else None
        plan = []
        for step in STEPS_BY_COMMAND[self.command]:
            if resuming and self.is_done(step):
                action = "skip"
            elif resuming and step == first:
                action = "resume"
            else:
                action = "run"
            plan.append({"step": step, "action": action, "detail": None})
        return plan

    def last_started(self, step: str) -> dict[str, Any] | None:
        for entry in reversed(self.entries):
            if entry.get("step") == step and entry.get("command") == self.command:
                return entry if entry.get("status") == "started" else None
        return None

    def write(self, step: str, status: str, detail: dict[str, Any] | None = None) -> None:
        entry: dict[str, Any] = {
            "command": self.command,
            "step": step,
            "status": status,
            "at": iso_z(),
        }
        if detail:
            entry["detail"] = detail
        self.entries.append(entry)
        if self.persist:
            self.registry.write(self.record)
        self.registry.append_event({**entry, "unit": self.record.unit_id})
        _crash_hook(self.command, step, status)

    def note_child(self, step: str, child: ProcessIdentity) -> None:
        """Journal a child's identity in the running step before anyone waits on it (SPEC 8),
        with the lead's MAC beside it: a resume kills only an identity the lead journaled."""
        from registry import signing

        identity = child.to_json()
        mac = self.registry.signer.mac(
            self.record.unit_id, signing.child_field(self.command, step), identity
        )
        for entry in reversed(self.entries):
            if entry.get("step") == step and entry.get("status") == "started":
                detail = entry.setdefault("detail", {})
                detail["child"], detail[signing.CHILD_MAC_KEY] = identity, mac
                break
        if self.persist:
            self.registry.write(self.record)

    @contextmanager
    def step(self, step: str, detail: dict[str, Any] | None = None) -> Iterator[StepOutcome]:
        """Journal `step` as started, run the body, then journal done (or failed and re-raise).

        The body may fill the yielded dict; it becomes the `done` entry's detail.
        """
        self.write(step, "started", detail)
        outcome = StepOutcome()
        try:
            yield outcome
        except ToolError as error:
            self.write(step, "failed", {"code": error.code, "reason": error.reason})
            raise
        except BaseException as error:
            if isinstance(error, Exception):
                self.write(step, "failed", {"code": "internal", "reason": str(error)})
            raise
        skipped = outcome.skipped_reason is not None
        self.write(step, "skipped" if skipped else "done", dict(outcome) or None)

    def journaled_child(self, step: str) -> ProcessIdentity | None:
        """The child journaled in `step`'s last `started` entry, only when the lead's MAC covers
        it (a forged identity names a process the lead never started: never signalled)."""
        from registry import signing

        detail = (self.last_started(step) or {}).get("detail") or {}
        identity = detail.get("child")
        if identity is None or not self.registry.signer.verify(
            self.record.unit_id,
            signing.child_field(self.command, step),
            identity,
            detail.get(signing.CHILD_MAC_KEY),
        ):
            return None
        return ProcessIdentity.from_json(identity)

    def skip(self, step: str, reason: str) -> None:
        self.write(step, "skipped", {"skipped": reason})

    def clear(self) -> None:
        """Drop this command's entries (another command's unfinished journal stays)."""
        self.entries[:] = [e for e in self.entries if e.get("command") != self.command]
