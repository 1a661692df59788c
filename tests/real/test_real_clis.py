"""The real claude, codex and opencode through `pair` and `unit` (SPEC 4.2).

Each CLI runs against the scripted model server (tests/fakes/model_server.py), which picks its
answer from a marker in the prompt and logs every request, so these tests can prove what the
fakes cannot: the file a writable turn writes, the read-only turn that cannot, the model and
effort on the wire for every turn (resumes included), a 429 ending `rate-limited` with the CLI's
own message, a hang killed with nothing left running, cancel, restaff and a unit end to end.
"""

from __future__ import annotations

import itertools
import json
import os
import random

import psutil
import pytest

from registry.processes import group_members
from tests.conftest import Result, Sandbox, wait_until
from tests.fakes.model_server import RATE_LIMIT_MESSAGE, ModelServer
from tests.real.conftest import (
    EFFORT,
    MODELS,
    RESOLVED,
    WIRE_MODEL,
    WIRE_PATH,
    running,
    wire_effort,
)

# A CLI that boots slowly on a loaded machine (opencode) needs more than the suite default.
pytestmark = [pytest.mark.real, pytest.mark.timeout(400)]

PARTNERS = ("claude", "codex", "opencode")
VERSIONS = {
    "claude": "2.1.197 (Claude Code)",
    "codex": "codex-cli 0.171.0",
    "opencode": "1.18.33",
}
_bodies = itertools.count(1)


def send(sandbox: Sandbox, text: str, *options: str, kind: str = "task") -> Result:
    body = sandbox.root / f"body-{next(_bodies)}.md"
    body.write_text(text + "\n")
    return sandbox.pair("send", "--kind", kind, "--body-file", str(body), *options, timeout=180)


def init(sandbox: Sandbox, partner: str, *options: str) -> Result:
    return sandbox.pair(
        "init",
        "--partner",
        partner,
        "--lead",
        "human",
        "--model",
        MODELS[partner],
        "--effort",
        EFFORT,
        *options,
        timeout=180,
    )


def model_turns(server: ModelServer) -> list:
    return [call for call in server.turns() if call.script != "title"]


def assert_model_and_effort_on_every_call(server: ModelServer, partner: str) -> None:
    calls = model_turns(server)
    assert calls, "the CLI never reached the model server"
    seen = {(call.model, wire_effort(call.effort, call.api)) for call in calls}
    assert seen == {(WIRE_MODEL[partner], EFFORT)}, seen


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


# One session per CLI carries every turn kind, so the slow-starting CLIs start as few times as
# possible (opencode takes seconds to boot on a loaded machine).
@pytest.mark.parametrize("partner", PARTNERS)
def test_a_real_pair_turn_by_turn(sandbox: Sandbox, real_clis: ModelServer, partner: str) -> None:
    created = init(sandbox, partner, "--role", "executor")
    assert created.code == 0, created.stdout + created.stderr
    assert created["status"] == "created" and created["sid"]
    assert created["partner_bin_version"] == VERSIONS[partner]
    assert created["model_resolved"] == RESOLVED[partner]

    # A writable task: the real CLI runs the scripted shell command, which writes the file.
    wrote = send(sandbox, "MOCK:write PARTNER.md")  # an executor's turn is writable
    assert wrote["status"] == "replied", wrote.stdout
    assert wrote["write"] is True and wrote["reply"] == "wrote PARTNER.md"
    # The receipt says what the command line passed: opencode's resume keeps its session's model.
    assert wrote["effort"] == EFFORT
    assert wrote["model"] == (None if partner == "opencode" else WIRE_MODEL[partner])
    assert (sandbox.repo / "PARTNER.md").read_text() == "written by the partner\n"

    # A read-only turn asked to do the same writes nothing.
    blocked = send(sandbox, "MOCK:write BLOCKED.md", "--read-only", kind="question")
    assert blocked["status"] == "replied", blocked.stdout
    assert blocked["write"] is False
    assert not (sandbox.repo / "BLOCKED.md").exists(), "a read-only turn wrote a file"

    # HTTP 429: rate-limited, in the CLI's own words.
    limited = send(sandbox, "MOCK:429")
    assert limited.code == 1 and limited["status"] == "rate-limited", limited.stdout
    assert limited["code"] == "rate-limited" and limited["next"]
    reason = limited["reason"]
    assert "429" in reason and "read the transcript" not in reason
    # opencode's error event carries the server's `retry-after-ms: 20`; the others name no wait
    wait = limited["retry_after_seconds"]
    assert wait == pytest.approx(0.02) if partner == "opencode" else wait is None
    if partner != "codex":  # codex reports only the status line
        assert RATE_LIMIT_MESSAGE in reason
    else:  # an API key cannot read account limits: known after the first turn, never re-asked
        assert limited["rate_limits"]["available"] is False
        assert "authentication" in limited["rate_limits"]["why"]

    # A hang: the idle budget kills the partner and everything it started — for claude and
    # codex a tool command that sleeps and leaves a `setsid` grandchild, for opencode a stream
    # that stops.
    seconds = random.randint(3100, 3899)  # a command line no other test has
    script = "hang-stream" if partner == "opencode" else f"hang-tool {seconds}"
    # A hanging tool gets 6 s of silence: a CLI slowed by a busy machine must reach the tool
    # (and start its grandchild) before the budget ends; a stopped stream needs no more than 3.
    idle = "0.05" if partner == "opencode" else "0.1"
    hung = send(sandbox, f"MOCK:{script}", "--idle-min", idle)
    assert hung["status"] == "hang-killed", hung.stdout
    assert hung["reason"].startswith("hang: no output for")
    assert gone(hung["partner_pid"])
    assert not running(rf"sleep {seconds + 1}\b")
    assert not running(rf"sleep {seconds}\b"), "the setsid grandchild outlived its turn"
    if partner != "opencode":
        assert any(f"sleep {seconds}" in " ".join(item["argv"]) for item in hung["leftovers"])

    status = sandbox.pair("status")
    assert status["seq"] == 4 and status["session_known"] is True
    assert status["in_flight"] is None
    assert status["model_resolved"] == RESOLVED[partner]
    # Every request the session made — the bootstrap, the first turn and every resume — ran on
    # the requested model and effort (codex resumes used to fall back to the CLI default).
    assert len(model_turns(real_clis)) >= 5
    assert_model_and_effort_on_every_call(real_clis, partner)
    assert {call.path for call in real_clis.turns()} == {WIRE_PATH[partner]}
    assert real_clis.other == [], "the CLI called an endpoint besides its one API"

    # Cancel: the turn is stopped wherever it is (a slow CLI may still be starting).
    started = send(sandbox, "MOCK:hang-stream", "--background", kind="question")
    assert started["status"] == "running", started.stdout
    cancelled = sandbox.pair("cancel", "--reason", "the lead changed its mind")
    assert cancelled["status"] == "cancelled", cancelled.stdout
    assert "the lead changed its mind" in cancelled["reason"]
    assert gone(started["partner_pid"])
    waited = sandbox.pair("wait", "--seq", str(started["seq"]), "--timeout-min", "1")
    assert waited["status"] == "cancelled"
    # A cancelled receipt is a failure like any other: its code and the next step (SPEC 4.1).
    for receipt in (cancelled["receipt"], waited.document):
        assert receipt["code"] == "cancelled" and receipt["next"], receipt
    assert sandbox.pair("status")["in_flight"] is None
    assert sandbox.pair("end").code == 0


def test_a_unit_end_to_end_restaffed_across_the_real_clis(
    sandbox: Sandbox, real_clis: ModelServer
) -> None:
    sandbox.task.write_text("Add a greeting file. MOCK:write GREETING.md\n")
    created = sandbox.unit(
        *sandbox.create_args("u1", partner="claude", model=RESOLVED["claude"], effort=EFFORT),
        timeout=180,
    )
    assert created.code == 0, created.stdout + created.stderr
    assert created["unit"]["lifecycle"] == "working"
    worktree = sandbox.worktree("u1")
    first = sandbox.wait_turn("u1")
    assert first["status"] == "replied", first
    assert (worktree / "GREETING.md").read_text() == "written by the partner\n"
    status = sandbox.unit("status", "--unit", "u1")
    assert status.code == 0, status.stdout
    assert status["unit"]["observed"]["latest_receipt"]["status"] == "replied"

    # Restaffed to another real CLI. (Not on to opencode as well: each of its runs costs ~5 CPU-s
    # before its first request, and its init, resumes and writable turn are its own test's.)
    for partner in ("codex",):
        (worktree / "GREETING.md").unlink()
        restaffed = sandbox.unit(
            "restaff",
            "--unit",
            "u1",
            "--lead",
            "human",
            "--partner",
            partner,
            "--reason",
            "another CLI",
            "--model",
            RESOLVED[partner],
            "--effort",
            EFFORT,
            timeout=240,
        )
        assert restaffed.code == 0, restaffed.stdout + restaffed.stderr
        assert restaffed["unit"]["staffing"]["current"]["partner"] == partner
        handed = sandbox.wait_turn("u1")
        assert handed["status"] == "replied", handed
        assert handed["partner"] == partner
        # The new CLI read the handed-over task and wrote the file again.
        assert (worktree / "GREETING.md").read_text() == "written by the partner\n"
    wire = {
        (call.api, call.model, wire_effort(call.effort, call.api))
        for call in model_turns(real_clis)
    }
    assert wire == {
        ("anthropic", WIRE_MODEL["claude"], EFFORT),
        ("openai", WIRE_MODEL["codex"], EFFORT),
    }

    gone = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert gone.code == 0 and gone["status"] == "dismantled", gone.stdout
    assert not worktree.exists()
    assert not running(str(worktree))


def test_unit_cancel_stops_a_real_turn_then_dismantle_proceeds(
    sandbox: Sandbox, real_clis: ModelServer
) -> None:
    """`unit cancel` (SPEC 3.13) against a real claude whose first task hangs on the server."""
    sandbox.task.write_text("Add a greeting file. MOCK:hang-stream\n")
    created = sandbox.unit(
        *sandbox.create_args("u1", partner="claude", model=RESOLVED["claude"], effort=EFFORT),
        timeout=120,
    )
    assert created.code == 0, created.stdout + created.stderr
    worktree = sandbox.worktree("u1")
    # In flight: the real CLI's request hangs on the server, and the marker names its partner.
    wait_until(lambda: any(c.script == "hang-stream" for c in real_clis.turns()), timeout=60)

    def partner_started() -> dict | None:
        marker = sandbox.pair("status", repo=worktree)["in_flight"]
        return marker if marker and marker["partner_pid"] else None

    in_flight = wait_until(partner_started, interval=0.2)
    partner_pid, supervisor_pid = in_flight["partner_pid"], in_flight["supervisor_pid"]
    group = os.getpgid(partner_pid)
    assert group == partner_pid, "the partner does not lead its own process group"
    assert group_members(group), "the partner's group is not running"

    cancelled = sandbox.unit("cancel", "--unit", "u1", "--reason", "the task was wrong")
    assert cancelled.code == 0, cancelled.stdout + cancelled.stderr
    receipt = cancelled["receipt"]
    assert cancelled["status"] == "cancelled" and receipt["status"] == "cancelled"
    assert receipt["partner"] == "claude" and receipt["seq"] == in_flight["seq"]
    assert "the task was wrong" in receipt["reason"]
    assert receipt["code"] == "cancelled" and receipt["next"], receipt
    # Nothing of the turn is left running once cancel returns.
    assert receipt["partner_pid"] == partner_pid
    assert gone(partner_pid) and gone(supervisor_pid)
    assert group_members(group) == [], "the partner's process group outlived the cancel"
    assert not running(str(worktree))
    assert sandbox.pair("status", repo=worktree)["in_flight"] is None
    events = [
        json.loads(line) for line in (sandbox.registry / "events.jsonl").read_text().splitlines()
    ]
    logged = [event for event in events if event.get("step") == "cancelled"]
    assert [(e["command"], e["unit"], e["seq"]) for e in logged] == [("cancel", "u1", 1)]
    assert "the task was wrong" in logged[0]["reason"]

    dismantled = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert dismantled.code == 0 and dismantled["status"] == "dismantled", dismantled.stdout
    assert not worktree.exists()
