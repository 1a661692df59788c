"""Paths the lead follows from a pair file are derived, never read (SPEC 8: "Paths that can be
derived are never read from a record").

A receipt, the in-flight marker and the session are the executor's to write: a receipt's
`receipt_file`, a marker's `kind` (which names the files a lost turn's receipt is written to)
and the session's `sid` (which names the directory `pair end` moves the transcripts into) must
not steer where the lead reads or writes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tests.conftest import Sandbox


def _state_dir(sandbox: Sandbox, worktree: Path | None = None) -> Path:
    return Path(sandbox.pair("status", repo=worktree)["state_dir"])


def test_a_receipt_naming_another_file_never_reaches_the_record(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    receipt = sandbox.wait_turn("u1")
    derived = receipt["receipt_file"]
    planted = str(sandbox.root / "home" / ".ssh" / "authorized_keys")
    document = json.loads(Path(derived).read_text())
    document["receipt_file"] = planted
    Path(derived).write_text(json.dumps(document))
    status = sandbox.pair("status", repo=sandbox.worktree("u1"))
    assert status["latest_receipt"]["receipt_file"] == derived
    assert sandbox.unit("status", "--unit", "u1").code == 0  # its write-back runs here
    assert sandbox.record("u1")["pair"]["latest_receipt_file"] == derived


def test_a_planted_marker_kind_writes_no_receipt_outside_the_transcripts(
    sandbox: Sandbox,
) -> None:
    init = sandbox.pair("init", "--partner", "script", "--model", "cat", "--role", "executor")
    assert init.code == 0, init.stdout
    state_dir = _state_dir(sandbox)
    transcripts = state_dir / "transcripts"
    (transcripts / "0001-x").mkdir(parents=True)  # so `0001-x/..` resolves
    target = sandbox.root / "escaped"
    climb = os.path.relpath(target, transcripts / "0001-x")
    marker = {
        "seq": 1,
        "kind": f"x/{climb}",
        "owner_token": "f" * 32,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 600)),
        "partner": {"pid": 4_000_000, "create_time": 1.0},
    }
    (state_dir / "in-flight.json").write_text(json.dumps(marker))
    for command in ("cancel", "clear"):  # cancel writes a dead turn's receipt itself
        sandbox.pair(command)
    assert not Path(f"{target}-receipt.json").exists()
    assert not list(sandbox.root.glob("escaped*"))


def test_a_planted_sid_keeps_pair_end_inside_ended(sandbox: Sandbox) -> None:
    init = sandbox.pair("init", "--partner", "script", "--model", "cat", "--role", "executor")
    assert init.code == 0, init.stdout
    state_dir = _state_dir(sandbox)
    session_file = state_dir / "session.json"
    session = json.loads(session_file.read_text())
    session["sid"] = "../../../../../../../" + str(sandbox.root / "moved").lstrip("/")
    session_file.write_text(json.dumps(session))
    ended = sandbox.pair("end")
    assert ended.code == 0, ended.stdout
    assert Path(ended["ended_dir"]).parent == state_dir / "ended"
    assert not (sandbox.root / "moved").exists()


def test_pair_status_looks_up_no_store_a_planted_session_names(sandbox: Sandbox) -> None:
    init = sandbox.pair("init", "--partner", "script", "--model", "cat", "--role", "executor")
    assert init.code == 0, init.stdout
    home = sandbox.root / "planted-home"
    (home / "sessions").mkdir(parents=True)  # a readable store without the sid: "unknown"
    session_file = _state_dir(sandbox) / "session.json"
    session = json.loads(session_file.read_text())
    session.update({"partner": "codex", "identity_home": str(home)})
    session_file.write_text(json.dumps(session))
    status = sandbox.pair("status")
    assert status.code == 0, status.stdout
    assert status["session_known"] is True  # nothing looked up where the planted path points
