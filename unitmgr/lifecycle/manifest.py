"""The task manifest (`tasks/<id>.md`): the task, then each addendum under its exact header.

Create writes it, addendum appends to it and restores it, and both check it: a manifest is
"ok" when it is the recorded task optionally followed by addenda, "differs" when anything else
changed it, and is never overwritten then.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from registry import bounded
from registry.atomic import write_text_atomic
from registry.errors import StateError
from registry.output import progress
from registry.records import MAX_RECORD_BYTES, UnitRecord
from registry.userdirs import sha256  # not hashlib: its OpenSSL costs start-up (SPEC 7)

HEADER = "\n## Addendum — {at}\n"
ADDENDUM_MARKER = HEADER.split("{at}", maxsplit=1)[0]


def digest(text: str) -> str:
    return sha256(text.encode("utf-8")).hexdigest()


def block(at: str, text: str) -> str:
    return HEADER.format(at=at) + text + "\n"


def manifest_text(record: UnitRecord) -> str:
    """What the manifest must hold: the task, then every recorded addendum in order."""
    addenda = record.addenda
    return record.task + "\n" + "".join(block(a["at"], a["text"]) for a in addenda)


def read_manifest(path: Path) -> str:
    """The manifest's text through the bounded reader (SPEC 8): a regular file, never through a
    symlink, no bigger than the record holding the same task and addenda may be.
    `FileNotFoundError` when missing, `ValueError` when unusable."""
    return bounded.read_bytes(path, MAX_RECORD_BYTES).decode("utf-8")


def manifest_state(record: UnitRecord) -> str:
    """ "missing", "ok" (the task, optionally followed by addenda), or "differs"."""
    try:
        text = read_manifest(Path(record.task_file))
    except FileNotFoundError:
        return "missing"
    except ValueError:  # not a regular file, over the bound, not UTF-8: rewritten like a diff
        return "differs"
    body = record.task + "\n"
    if text == body or (text.startswith(body) and text[len(body) :].startswith(ADDENDUM_MARKER)):
        return "ok"
    return "differs"


def move_aside(task_file: str) -> str:
    """`manifest-differs`' next step: keep the edited manifest beside it; the command that
    refused then writes the manifest again from the recorded task (and addenda)."""
    return shlex.join(["mv", task_file, task_file + ".moved"])


def ensure_manifest(record: UnitRecord) -> None:
    """Write a missing manifest from the task; refuse one that is not the task (+ addenda)."""
    state = manifest_state(record)
    if state == "differs":
        raise StateError(
            "manifest-differs",
            f"unit {record.unit_id} manifest differs from its recorded task",
            detail={"task_file": record.task_file},
            next_step=move_aside(record.task_file),
        )
    if state == "missing":
        progress(f"unit create {record.unit_id}: writing the manifest {record.task_file}")
        write_text_atomic(Path(record.task_file), record.task + "\n")
