"""`record.archive` is executor-writable (SPEC 2.5, 8): a dismantle writes only into an archive
of its own unit, and never through a link planted inside one.

The test plays the executor: it points its record's `archive` at another unit's archive, or at
an archive of its own name whose `ended/` is a link to a directory outside the registry,
and proves through the real CLI that neither is written.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tests.conftest import Sandbox


def edit_record(sandbox: Sandbox, unit_id: str, **fields: Any) -> None:
    record = sandbox.record(unit_id)
    record.update(fields)
    (sandbox.registry / "units" / f"{unit_id}.json").write_text(json.dumps(record))


def tree(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }


def unit_with_a_turn(sandbox: Sandbox, unit_id: str) -> None:
    created = sandbox.create(unit_id, model="cat > /dev/null; echo ok")
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn(unit_id)


def test_a_record_naming_another_units_archive_leaves_that_archive_alone(
    sandbox: Sandbox,
) -> None:
    unit_with_a_turn(sandbox, "u1")
    unit_with_a_turn(sandbox, "u2")
    gone = sandbox.unit("dismantle", "--unit", "u2", "--force", "u2")
    assert gone.code == 0, gone.stdout
    theirs = Path(gone["archive"])
    before = tree(theirs)
    assert before  # the other unit's session and transcripts
    edit_record(sandbox, "u1", archive=str(theirs))
    mine = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert mine.code == 0, mine.stdout
    assert tree(theirs) == before
    assert Path(mine["archive"]) != theirs
    assert Path(mine["archive"]).name.startswith("u1-")
    assert tree(Path(mine["archive"]))  # its own state went to its own archive


def test_a_link_planted_inside_the_recorded_archive_is_never_written_through(
    sandbox: Sandbox,
) -> None:
    unit_with_a_turn(sandbox, "u1")
    outside = sandbox.root / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("not unitmgr's\n")
    planted = sandbox.registry / "archive" / "u1-20200101T000000Z"
    planted.mkdir(parents=True)
    os.symlink(outside, planted / "ended")  # where the ended session goes
    edit_record(sandbox, "u1", archive=str(planted))
    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0, gone.stdout
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    archive = Path(gone["archive"])
    assert any(archive.glob("ended/*/transcripts/*-receipt.json"))
