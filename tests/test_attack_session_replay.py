"""An older session the lead signed is still the executor's to copy back (SPEC 8).

The session's MAC binds its fields to the pair's state dir, and a restaff starts the new pair in
the same state dir, filing the old session under `ended/`. The executor copies the old one back:
its MAC verifies, and the next turn would run the staffing the lead replaced (a script partner's
model is a shell command). The lead must refuse it: it is signed, but not the session the lead
signed last there.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.conftest import Sandbox

OLD = "cat > /dev/null; echo old-staffing-ran"
NEW = "cat > /dev/null; echo new-staffing"


def test_a_replayed_older_signed_session_runs_nothing(sandbox: Sandbox) -> None:
    created = sandbox.create("u1", model=OLD)
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn("u1")
    restaff = ["restaff", "--unit", "u1", "--lead", "human", "--partner", "script"]
    moved = sandbox.unit(*restaff, "--reason", "new model", "--model", NEW)
    assert moved.code == 0, moved.stdout
    assert sandbox.wait_turn("u1")["reply"].strip() == "new-staffing"
    state = sandbox.common_dir / "worktrees" / "u1" / "pair"
    (old,) = [
        path
        for path in (state / "ended").glob("*/session.json")
        if "old-staffing-ran" in path.read_text()
    ]
    shutil.copyfile(old, state / "session.json")  # the executor
    sent = sandbox.unit("addendum", "--unit", "u1", "--text", "one more thing")
    receipt = sandbox.wait_turn("u1") if sent.code == 0 else {}
    assert "old-staffing-ran" not in str(receipt.get("reply")), receipt
    assert "old-staffing-ran" not in "".join(
        path.read_text(errors="replace") for path in Path(state, "transcripts").glob("*.log")
    )


def test_a_variable_planted_in_the_sessions_environment_reaches_no_partner(
    sandbox: Sandbox,
) -> None:
    created = sandbox.create("u1", model='cat > /dev/null; echo "planted=${PLANTED_PROBE:-none}"')
    assert created.code == 0, created.stdout + created.stderr
    assert sandbox.wait_turn("u1")["reply"].strip() == "planted=none"
    session_file = sandbox.common_dir / "worktrees" / "u1" / "pair" / "session.json"
    session = json.loads(session_file.read_text())
    session["environment"] = {"PLANTED_PROBE": "1"}  # the executor (IS_SANDBOX, say)
    session_file.write_text(json.dumps(session))
    sent = sandbox.unit("addendum", "--unit", "u1", "--text", "one more thing")
    receipt = sandbox.wait_turn("u1") if sent.code == 0 else {}
    assert "planted=1" not in str(receipt.get("reply")), receipt
