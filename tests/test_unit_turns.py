"""A unit's turns: `unit cancel`, the first turn of `unit create`, the ref audit in `status`,
and the smaller pair fixes seen through `unit` and `pair` (real CLIs, script and fake partners)."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    FakePartners,
    Sandbox,
    git,
    git_waiting_for_the_first_receipt,
    gone,
    run_cli,
    wait_until,
)

GATE_MODEL = "cat >/dev/null; touch {started}; sleep 300"


def events(sandbox: Sandbox) -> list[dict]:
    path = sandbox.registry / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_unit_cancel_stops_the_turn_then_dismantle_proceeds(sandbox: Sandbox) -> None:
    started = sandbox.root / "started"
    created = sandbox.create("u1", model=GATE_MODEL.format(started=started))
    assert created.code == 0, created.stdout
    wait_until(started.exists)
    refused = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert refused.code == 1 and refused["code"] == "turn-in-flight"
    assert refused["next"].startswith("unit cancel --unit u1")
    plan = sandbox.unit("cancel", "--unit", "u1", "--dry-run")
    assert plan.code == 0 and plan["plan"][0]["action"] == "run"
    assert not any(event.get("command") == "cancel" for event in events(sandbox))
    cancelled = sandbox.unit("cancel", "--unit", "u1", "--reason", "task was wrong")
    assert cancelled.code == 0, cancelled.stdout
    receipt = cancelled["receipt"]
    assert cancelled["status"] == "cancelled" and receipt["status"] == "cancelled"
    assert "task was wrong" in receipt["reason"] and gone(receipt["partner_pid"])
    logged = [event for event in events(sandbox) if event.get("command") == "cancel"]
    assert [(event["unit"], event["seq"], event["step"]) for event in logged] == [
        ("u1", 1, "cancelled")
    ]
    again = sandbox.unit("cancel", "--unit", "u1")
    assert again.code == 0 and again["repeated"] is True and again["receipt"] == receipt
    assert len([event for event in events(sandbox) if event.get("command") == "cancel"]) == 1
    status = sandbox.unit("status", "--unit", "u1")
    assert status["unit"]["observed"]["latest_receipt"]["status"] == "cancelled"
    dismantled = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert dismantled.code == 0, dismantled.stdout


def test_unit_cancel_without_a_turn(sandbox: Sandbox) -> None:
    assert sandbox.create("u1", model="cat").code == 0
    sandbox.wait_turn("u1")
    for extra in ([], ["--dry-run"]):
        result = sandbox.unit("cancel", "--unit", "u1", *extra)
        assert result.code == 1 and result["code"] == "no-turn-in-flight", result.stdout
        assert result["next"] == "unit status --unit u1"
    assert sandbox.unit("cancel", "--unit", "nobody").code == 1
    assert sandbox.unit("cancel", "--unit", "bad id").code == 2


def test_restaff_after_a_cancel(sandbox: Sandbox) -> None:
    started = sandbox.root / "started"
    assert sandbox.create("u1", model=GATE_MODEL.format(started=started)).code == 0
    wait_until(started.exists)
    assert sandbox.unit("cancel", "--unit", "u1").code == 0
    restaffed = sandbox.unit(
        "restaff", "--unit", "u1", "--lead", "human", "--partner", "script",
        "--model", "cat >/dev/null; echo took over", "--reason", "the first one was stuck",
    )  # fmt: skip
    assert restaffed.code == 0, restaffed.stdout


def test_a_first_turn_that_already_failed_fails_the_create(sandbox: Sandbox) -> None:
    args = sandbox.create_args("u1", model="cat >/dev/null; exit 3")
    result = sandbox.unit(*args, env=git_waiting_for_the_first_receipt(sandbox, "u1"))
    assert result.code == 1, result.stdout
    assert result["code"] == "first-turn-failed"
    receipt = result["detail"]["receipt"]
    assert receipt["status"] == "failed" and receipt["seq"] == 1
    assert result["next"].startswith(f"pair send --repo {sandbox.worktree('u1')} --kind task")
    assert " — " not in result["next"]  # one command, no alternative after it (SPEC 3.0)
    assert sandbox.record("u1")["lifecycle"] == "working"  # kept, not rolled back
    listed = sandbox.unit("list")["units"][0]["recovery"]
    assert listed["needed"] is True and listed["why"] == "first turn failed"
    # The recovery command is exact: run as printed, it sends the task again.
    resent = run_cli(*shlex.split(listed["command"]), cwd=sandbox.root)
    assert resent.code == 0 and resent["seq"] == 2, resent.stdout
    assert sandbox.wait_turn("u1")["prompt_file"].endswith("0002-task-prompt.md")


def test_a_first_turn_that_already_replied_is_in_the_output(sandbox: Sandbox) -> None:
    args = sandbox.create_args("u1", model="cat >/dev/null; echo at once")
    result = sandbox.unit(*args, env=git_waiting_for_the_first_receipt(sandbox, "u1"))
    assert result.code == 0, result.stdout
    # Create returns once the partner started; a partner that exits at once has replied.
    assert result["first_turn"]["reply"] == "at once"
    assert sandbox.unit("list")["units"][0]["recovery"]["needed"] is False


def test_a_running_first_turn_is_not_waited_for(sandbox: Sandbox) -> None:
    started = sandbox.root / "started"
    result = sandbox.create("u1", model=GATE_MODEL.format(started=started))
    assert result.code == 0 and "first_turn" not in result.document
    assert sandbox.unit("cancel", "--unit", "u1").code == 0


def test_status_reports_refs_a_unit_moved_outside_its_branch(sandbox: Sandbox) -> None:
    assert sandbox.create("u2").code == 0  # another unit, whose branch u1 will move
    sandbox.wait_turn("u2")
    main_before = git(sandbox.repo, "rev-parse", "main")
    other_before = git(sandbox.repo, "rev-parse", "feat/u2")
    model = (
        "cat >/dev/null; git commit -q --allow-empty -m mine; git tag u1-done; "
        "git update-ref refs/heads/feat/u2 HEAD; git update-ref refs/heads/main HEAD; echo done"
    )
    assert sandbox.create("u1", model=model).code == 0
    receipt = sandbox.wait_turn("u1")
    assert sandbox.pair("status", repo=sandbox.worktree("u1"))["branch"] == "feat/u1"
    head = git(sandbox.worktree("u1"), "rev-parse", "HEAD")
    expected = [
        {"ref": "refs/heads/feat/u2", "before": other_before, "after": head},
        {"ref": "refs/heads/main", "before": main_before, "after": head},
    ]
    assert receipt["foreign_ref_changes"] == expected  # its own branch and new tag are allowed
    units = {unit["unit_id"]: unit for unit in sandbox.unit("status", "--all")["units"]}
    assert units["u1"]["pair"]["latest_receipt"]["foreign_ref_changes"] == expected
    assert units["u2"]["pair"]["latest_receipt"]["foreign_ref_changes"] == []
    unit = sandbox.unit("status", "--unit", "u1")["unit"]
    assert unit["observed"]["latest_receipt"]["foreign_ref_changes"] == expected


# -- smaller fixes ------------------------------------------------------------------------------


def test_the_script_partner_takes_a_quoted_first_word(sandbox: Sandbox) -> None:
    tools = sandbox.root / "my tools"
    tools.mkdir()
    script = tools / "executor"
    script.write_text('#!/bin/sh\ncat >/dev/null\necho "ran with $1"\n')
    script.chmod(0o755)
    init = sandbox.pair(
        "init", "--partner", "script", "--model", f"'{script}' first", "--role", "executor"
    )
    assert init.code == 0, init.stdout
    body = sandbox.root / "body.md"
    body.write_text("go\n")
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", str(body))
    assert receipt["reply"] == "ran with first"


def test_a_hanging_bootstrap_names_init_s_own_budget(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    result = sandbox.pair(
        "init", "--partner", "claude", "--effort", "high", "--lead", "human", "--idle-min", "0.01",
        env={**os.environ, "FAKE_SCENARIO": "hang"},
    )  # fmt: skip
    assert result.code == 1 and result["code"] == "bootstrap-hang", result.stdout
    assert "raise it with pair init --idle-min" in result["reason"]


@pytest.fixture
def refusing_codex(tmp_path: Path, fake_partners: FakePartners) -> Path:
    """The fake codex, except that its app-server refuses rate limits as an API-key account is
    refused, and logs every start."""
    starts = tmp_path / "app-server-starts"
    wrapper_dir = tmp_path / "refusing"
    wrapper_dir.mkdir()
    wrapper = wrapper_dir / "codex"
    wrapper.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys\n"
        "if sys.argv[1:2] == ['app-server']:\n"
        f"    open({str(starts)!r}, 'a').write('start\\n')\n"
        "    for line in sys.stdin:\n"
        "        message = json.loads(line)\n"
        "        if message.get('id') is None:\n"
        "            continue\n"
        "        if message['method'] == 'initialize':\n"
        "            answer = {'id': message['id'], 'result': {}}\n"
        "        else:\n"
        "            error = {'code': -32600, 'message': 'codex account authentication required'}\n"
        "            answer = {'id': message['id'], 'error': error}\n"
        "        print(json.dumps(answer), flush=True)\n"
        "    sys.exit(0)\n"
        f"os.execv({str(fake_partners.bin_dir / 'codex')!r}, "
        f"[{str(fake_partners.bin_dir / 'codex')!r}, *sys.argv[1:]])\n"
    )
    wrapper.chmod(0o755)
    return starts


def test_refused_rate_limits_are_remembered_per_identity(
    sandbox: Sandbox, refusing_codex: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNITMGR_CODEX_BIN", str(refusing_codex.parent / "refusing" / "codex"))
    init = sandbox.pair(
        "init", "--partner", "codex", "--effort", "high", "--lead", "human", "--role", "executor"
    )
    assert init.code == 0, init.stdout
    body = sandbox.root / "body.md"
    body.write_text("go\n")
    first = sandbox.pair("send", "--kind", "task", "--body-file", str(body))
    assert first["rate_limits"] == {
        "available": False,
        "why": "codex app-server refused account/rateLimits/read: codex account authentication "
        "required",
    }
    assert refusing_codex.read_text().count("start") == 1
    second = sandbox.pair("send", "--kind", "task", "--body-file", str(body))
    assert second["rate_limits"] == first["rate_limits"]
    assert refusing_codex.read_text().count("start") == 1  # not asked again
    session = json.loads((sandbox.repo / ".git" / "pair" / "session.json").read_text())
    assert session["rate_limits_refused"] == {"default": first["rate_limits"]["why"]}


def test_cancel_a_hanging_claude_turn(sandbox: Sandbox, fake_partners: FakePartners) -> None:
    init = sandbox.pair(
        "init", "--partner", "claude", "--effort", "high", "--lead", "human", "--role", "executor"
    )
    assert init.code == 0, init.stdout
    body = sandbox.root / "body.md"
    body.write_text("go\n")
    hanging = {**os.environ, "FAKE_SCENARIO": "hang"}
    running = sandbox.pair(
        "send", "--kind", "task", "--body-file", str(body), "--background", env=hanging
    )
    assert running.code == 0, running.stdout
    transcript = Path(running["transcript"])
    wait_until(lambda: transcript.exists() and "half done" in transcript.read_text())
    cancelled = sandbox.pair("cancel", "--reason", "no longer needed")
    assert cancelled.code == 0, cancelled.stdout
    receipt = cancelled["receipt"]
    assert receipt["status"] == "cancelled" and receipt["reply"] == "half done"
    assert init["model_resolved"] and receipt["model"] == init["model_resolved"]
    assert receipt["effort"] == "high"
    assert gone(running["partner_pid"]) and sandbox.pair("status")["in_flight"] is None


def test_claude_under_an_api_key_reports_no_rate_limits(
    sandbox: Sandbox, fake_partners: FakePartners, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-" + "x" * 40)
    init = sandbox.pair("init", "--partner", "claude", "--effort", "high", "--lead", "human")
    assert init.code == 0, init.stdout
    body = sandbox.root / "body.md"
    body.write_text("go\n")
    receipt = sandbox.pair("send", "--kind", "question", "--body-file", str(body))
    assert receipt["rate_limits"]["available"] is False
    assert "ANTHROPIC_API_KEY" in receipt["rate_limits"]["why"]
    limited = sandbox.pair(
        "send", "--kind", "question", "--body-file", str(body),
        env={**os.environ, "FAKE_SCENARIO": "rate-limited"},
    )  # fmt: skip
    assert limited["rate_limits"]["source"] == "claude rate_limit_event"
