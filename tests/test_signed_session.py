"""A pair session's staffing is the lead's (SPEC 8, "The lead runs nothing an executor planted").

The supervisor runs a script partner's model as a shell command and every partner from the
session's `partner_bin`, and the lead's `send` asks that binary its version: an executor that
rewrites its `session.json` would otherwise pick what the lead's next `pair send` or `unit
addendum` runs. The lead signs the session at `pair init` (pair/session_trust.py
`SIGNED_SESSION_FIELDS`) and every turn verifies it before anything runs.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from pair import api as pair_api
from pair.commands.send import grant_turn
from pair.runners import runner_for
from tests.conftest import Sandbox
from tests.test_runner_contract import RUNNERS, ray_options


def _session_file(sandbox: Sandbox, worktree: Path | None = None) -> Path:
    status = sandbox.pair("status", repo=worktree)
    return Path(status["state_dir"]) / "session.json"


def _plant(session_file: Path, **fields: Any) -> None:
    session = json.loads(session_file.read_text())
    session.update(fields)
    session_file.write_text(json.dumps(session, indent=2))


def _evil_binary(sandbox: Sandbox, marker: Path) -> str:
    script = sandbox.root / "evil-codex"
    script.write_text(f"#!/bin/sh\ntouch {marker}\necho 'codex-cli 0.0.1'\n")
    script.chmod(0o755)
    return str(script)


def _plants(sandbox: Sandbox, marker: Path) -> dict[str, dict[str, Any]]:
    return {
        "script command": {"model": f"touch {marker}; cat"},
        "partner binary": {
            "partner": "codex",
            "partner_bin": _evil_binary(sandbox, marker),
            "model_resolved": "gpt-5",
        },
        "an old unsigned session": {"signature": None, "model": f"touch {marker}; cat"},
    }


@pytest.mark.parametrize("plant", ["script command", "partner binary", "an old unsigned session"])
def test_a_planted_session_makes_pair_send_run_nothing(sandbox: Sandbox, plant: str) -> None:
    init = sandbox.pair("init", "--partner", "script", "--model", "cat", "--role", "executor")
    assert init.code == 0, init.stdout
    marker = sandbox.root / "planted-ran"
    session_file = _session_file(sandbox)
    _plant(session_file, **_plants(sandbox, marker)[plant])
    body = sandbox.root / "q.md"
    body.write_text("hello\n")
    sent = sandbox.pair("send", "--kind", "question", "--body-file", str(body))
    assert sent.code == 1, sent.stdout + sent.stderr
    assert sent["code"] == "session-untrusted", sent.stdout
    assert shlex.split(sent["next"]) == ["pair", "end", "--repo", str(sandbox.repo)]
    assert not marker.exists()
    assert json.loads(session_file.read_text())["seq"] == 0  # no turn was taken
    assert not (session_file.parent / "in-flight.json").exists()


def test_the_leads_own_session_still_runs_its_turns(sandbox: Sandbox) -> None:
    init = sandbox.pair("init", "--partner", "script", "--model", "cat", "--role", "executor")
    assert init.code == 0, init.stdout
    signature = json.loads(_session_file(sandbox).read_text())["signature"]
    assert signature["mac"].startswith("hmac-sha256:")
    body = sandbox.root / "q.md"
    body.write_text("hello\n")
    sent = sandbox.pair("send", "--kind", "question", "--body-file", str(body))
    assert sent.code == 0, sent.stdout + sent.stderr
    assert sent["status"] == "replied" and "hello" in sent["reply"]


def test_a_session_copied_from_another_pair_is_refused(sandbox: Sandbox) -> None:
    """The MAC is bound to the state dir: u1's signed session moved into u2 is not u2's (u1's
    command, say, is the lead's for u1 only)."""
    for name in ("u1", "u2"):
        assert sandbox.create(name).code == 0
        sandbox.wait_turn(name)
    one = _session_file(sandbox, sandbox.worktree("u1"))
    two = _session_file(sandbox, sandbox.worktree("u2"))
    two.write_text(one.read_text())
    refused = sandbox.unit("addendum", "--unit", "u2", "--text", "more work")
    assert refused.code == 1, refused.stdout + refused.stderr
    assert refused["code"] == "session-untrusted", refused.stdout


def test_unit_addendum_to_a_planted_session_runs_nothing(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    marker = sandbox.root / "planted-ran"
    _plant(_session_file(sandbox, sandbox.worktree("u1")), model=f"touch {marker}; cat")
    refused = sandbox.unit("addendum", "--unit", "u1", "--text", "more work")
    assert refused.code == 1, refused.stdout + refused.stderr
    assert refused["code"] == "session-untrusted", refused.stdout
    assert refused["next"], refused.stdout
    assert not marker.exists()


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_session_rewritten_after_send_checked_it_runs_nothing(
    sandbox: Sandbox, runner: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The supervisor verifies again: the file may change between `send` and the turn (on a
    Ray node too: the lead's supervisor sends the node nothing to run)."""
    extra = ray_options(request, monkeypatch) if runner == "ray" else []
    init = sandbox.pair(
        "init", "--partner", "script", "--model", "cat", "--role", "executor", *extra
    )
    assert init.code == 0, init.stdout
    marker = sandbox.root / "planted-ran"
    granted = grant_turn(sandbox.repo, kind="question", body="hello\n")
    _plant(granted.paths.session_file, model=f"touch {marker}; cat")
    runner_for(granted.paths.state_dir).start(granted.turn)
    receipt = pair_api.wait(sandbox.repo, seq=granted.turn.seq, timeout_min=1)
    assert receipt["status"] == "failed" and "not signed by this lead" in receipt["reason"]
    assert receipt["next"].startswith("pair end --repo "), receipt
    assert receipt["command"] == [] and receipt["partner_pid"] is None
    assert not marker.exists()
    assert not granted.paths.marker_file.exists()  # released: the next turn may start
