"""The feedback ledger is executor-writable (SPEC 2.5, 3.17): only `pending_send` carries a MAC,
but `sent`, `rounds` and `round_heads` decide what the lead sends and when it stops.

The test plays the executor between the lead's polls, through the real CLI against the fake
GitHub: it rewinds its rounds (so `--auto` never reaches the cap and never tells the human), and
marks a reviewer's new comment as already sent (so it never arrives). Either way the lead must
notice the ledger is not the one it wrote: `--auto` sends nothing and turns attention `failed`;
an explicit `--send` starts the ledger again and delivers what is pending.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from tests.conftest import Sandbox

HEAD = "ab" * 20


def working_unit(sandbox: Sandbox) -> None:
    created = sandbox.create("u1", model="cat")
    assert created.code == 0, created.stdout + created.stderr
    sandbox.wait_turn("u1")


def manifest(sandbox: Sandbox) -> str:
    return (sandbox.registry / "tasks" / "u1.md").read_text()


def edit_ledger(sandbox: Sandbox, **fields: Any) -> None:
    path = sandbox.registry / "units" / "u1.json"
    record = json.loads(path.read_text())
    record["feedback"].update(fields)
    path.write_text(json.dumps(record))


def feedback(sandbox: Sandbox, *args: str) -> Any:
    return sandbox.unit("feedback", "--unit", "u1", *args)


def test_rewound_rounds_do_not_get_past_the_cap(sandbox: Sandbox, github: Any) -> None:
    working_unit(sandbox)
    sandbox.machine_config.write_text("[feedback]\nci_rounds = 1\n")
    number = github.add_pull("feat/u1", HEAD)
    github.check_run(HEAD, "tests", conclusion="failure", summary="round one")
    first = feedback(sandbox, "--send", "--auto")
    assert first["status"] == "sent", first.stdout
    sandbox.wait_turn("u1")
    moved = "ef" * 20
    github.pulls[number]["head_sha"] = moved
    github.check_run(moved, "tests", conclusion="failure", summary="round two")
    edit_ledger(sandbox, rounds={"ci": 0, "review": 0}, round_heads={})  # the executor
    capped = feedback(sandbox, "--send", "--auto")
    assert capped["status"] == "not-sent", capped.stdout
    assert "ledger" in capped["why"] and "round two" not in manifest(sandbox)
    status = sandbox.unit("status", "--unit", "u1")
    assert status["unit"]["attention"]["state"] == "failed", status.stdout
    explicit = feedback(sandbox, "--send")  # the human looked: an explicit send always works
    assert explicit["status"] == "sent" and "round two" in manifest(sandbox), explicit.stdout
    sandbox.wait_turn("u1")
    again = feedback(sandbox, "--send", "--auto")  # the ledger is the lead's again
    assert again["status"] == "nothing-to-send", again.stdout


def test_a_comment_marked_sent_by_the_executor_still_arrives(sandbox: Sandbox, github: Any) -> None:
    working_unit(sandbox)
    number = github.add_pull("feat/u1", HEAD)
    github.comment(number, "alice", "first point")
    assert feedback(sandbox, "--send")["status"] == "sent"
    sandbox.wait_turn("u1")
    body = "please also fix the second point"
    later = github.comment(number, "alice", body)
    (item,) = feedback(sandbox)["pending"]
    assert item["key"] == f"comment:{later}"
    # The executor wants silence, not "(edited)": it plants the item's own signature, a sha256
    # of what GitHub shows it too (for a conversation comment: no place, no title, the body).
    sent = dict(sandbox.record("u1")["feedback"]["sent"])
    signature = hashlib.sha256(f"\n\n{body}".encode()).hexdigest()
    sent[item["key"]] = {"sig": signature, "at": "2026-01-01T00:00:00Z", "round": 1}
    edit_ledger(sandbox, sent=sent)
    planted = feedback(sandbox)
    assert planted["ledger"]["trusted"] is False, planted.stdout
    # Nothing of the planted ledger counts: everything is pending again, for the human to judge.
    assert item["key"] in [i["key"] for i in planted["pending"]] and planted["already_sent"] == 0
    auto = feedback(sandbox, "--send", "--auto")
    assert auto["status"] == "not-sent" and "ledger" in auto["why"], auto.stdout
    assert "second point" not in manifest(sandbox)
    explicit = feedback(sandbox, "--send")
    assert explicit["status"] == "sent", explicit.stdout
    assert "second point" in manifest(sandbox)
    assert feedback(sandbox)["ledger"]["trusted"] is True
