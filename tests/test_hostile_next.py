"""An executor's text never reaches the lead's terminal or its next command raw (SPEC 3.0, 8).

Found by an attacker's review: a `next` built with an f-string from a path the executor can
write ran the executor's command when pasted; JSON documents carried 8-bit escapes raw; an
over-long number crashed the plain argument parser with a traceback instead of JSON.
"""

from __future__ import annotations

import json
import shlex

from tests.conftest import Sandbox

PLANTED_PATH = "/tmp/unitmgr-planted; touch /tmp/unitmgr-pwned #"


def _git_dir_pair(sandbox: Sandbox) -> dict[str, object]:
    session_file = sandbox.repo / ".git" / "pair" / "session.json"
    return {"file": session_file, "session": json.loads(session_file.read_text())}


def test_a_planted_session_worktree_reaches_next_quoted(sandbox: Sandbox) -> None:
    init = sandbox.pair("init", "--partner", "script", "--model", "cat", "--role", "executor")
    assert init.code == 0, init.stdout
    found = _git_dir_pair(sandbox)
    session = found["session"]
    assert isinstance(session, dict)
    session["worktree"] = PLANTED_PATH
    found["file"].write_text(json.dumps(session))  # type: ignore[attr-defined]
    cancelled = sandbox.pair("cancel")
    assert cancelled.code != 0, cancelled.stdout
    words = shlex.split(cancelled["next"])
    # One command, its --repo the planted text as one word: pasting it runs nothing planted.
    assert words[:2] == ["pair", "status"], cancelled["next"]
    assert ";" not in words and "touch" not in words, words


def test_json_output_escapes_8_bit_controls_and_keeps_the_values(sandbox: Sandbox) -> None:
    events = sandbox.registry / "events.jsonl"
    events.parent.mkdir(parents=True)
    step = "y\u009b2J\u009d0;title\u009c\u2028"
    event = {"command": "create", "step": step, "status": "done", "at": "2026-01-01T00:00:00Z"}
    events.write_text(json.dumps(event) + "\n")
    logged = sandbox.unit("log")
    assert logged.code == 0, logged.stdout
    raw = logged.stdout
    assert not any(0x80 <= ord(char) <= 0x9F or char in "\u2028\u2029" for char in raw), raw
    assert logged["events"][0]["step"] == step  # the same value, escaped only on the wire


def test_an_over_long_number_is_a_usage_error_not_a_traceback(sandbox: Sandbox) -> None:
    refused = sandbox.unit("serve", "--port", "9" * 5000)
    assert refused.code == 2, refused.stdout
    assert refused["ok"] is False and "Traceback" not in refused.stdout
