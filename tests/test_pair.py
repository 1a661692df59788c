"""The `pair` CLI with the script partner: real supervisor, real process groups, real files."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import Sandbox, git, wait_until


def init_script(sandbox: Sandbox, model: str, repo: Path | None = None, *extra: str) -> dict:
    result = sandbox.pair(
        "init", "--partner", "script", "--model", model, "--role", "executor", *extra, repo=repo
    )
    assert result.code == 0, result.stdout
    return result.document


def body(sandbox: Sandbox, text: str = "please do the thing") -> str:
    path = sandbox.root / "body.md"
    path.write_text(text + "\n")
    return str(path)


def test_init_creates_then_resumes(sandbox: Sandbox) -> None:
    created = init_script(sandbox, "cat")
    assert created["status"] == "created"
    assert created["sid"].startswith("script-")
    assert created["seq"] == 0
    assert created["state_dir"] == str(sandbox.repo / ".git" / "pair")
    again = sandbox.pair("init", "--partner", "script", "--model", "cat")
    assert again.code == 0 and again["status"] == "resumed" and again["sid"] == created["sid"]
    other = sandbox.pair("init", "--partner", "claude", "--effort", "high")
    assert other.code == 1 and other["code"] == "pair-exists"


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ([], "script-needs-model"),
        (["--model", "no-such-command-xyz --flag"], "script-command-not-found"),
        (["--model", "cat", "--effort", "high"], "effort-refused"),
        (["--model", "cat", "--identity", "work"], "identity-refused"),
        (["--model", "cat", "--role", "boss"], "unknown-role"),
    ],
)
def test_init_refuses_bad_script_staffing(sandbox: Sandbox, args: list[str], code: str) -> None:
    result = sandbox.pair("init", "--partner", "script", *args)
    assert result.code == 2, result.stdout
    assert result["code"] == code
    assert not (sandbox.repo / ".git" / "pair" / "session.json").exists()


def test_send_runs_the_script_with_the_prompt_on_stdin(sandbox: Sandbox) -> None:
    session = init_script(sandbox, "cat; echo progress >&2")
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox, "  do it  \n\n"))
    assert receipt.code == 0, receipt.stdout
    doc = receipt.document
    header = f"[agent lead -> script kind=task sid={session['sid']}]"
    assert doc["status"] == "replied" and doc["ok"] is True
    assert doc["reply"] == f"{header}\n\n  do it"
    assert doc["seq"] == 1 and doc["kind"] == "task" and doc["write"] is True
    assert doc["command"] == ["sh", "-c", "cat; echo progress >&2"]
    assert Path(doc["reply_file"]).read_text() == doc["reply"] + "\n"
    assert Path(doc["prompt_file"]).read_text() == f"{header}\n\n  do it\n"
    transcript = Path(doc["transcript"]).read_text()
    assert "progress" in transcript and "do it" in transcript
    for path in (doc["transcript"], doc["receipt_file"], doc["prompt_file"]):
        assert os.stat(path).st_mode & 0o777 == 0o600
    status = sandbox.pair("status").document
    assert status["seq"] == 1 and status["in_flight"] is None
    assert status["latest_receipt"]["status"] == "replied"


def test_lease_flags_and_lead_name_reach_the_receipt_and_header(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat")
    read_only = sandbox.pair(
        "send", "--kind", "question", "--body-file", body(sandbox), "--read-only", "--lead", "codex"
    )
    assert read_only["write"] is False
    assert read_only["reply"].startswith("[agent codex -> script kind=question")
    both = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--write", "--read-only"
    )
    assert both.code == 2 and both["code"] == "write-and-read-only"
    assert sandbox.pair("status")["seq"] == 1  # a refused send spends no sequence number


@pytest.mark.parametrize(
    ("model", "status", "reason_part"),
    [
        ("cat >/dev/null; echo oops; exit 3", "failed", "exited 3"),
        ("cat >/dev/null", "empty-reply", "no reply"),
    ],
)
def test_failed_and_empty_turns(
    sandbox: Sandbox, model: str, status: str, reason_part: str
) -> None:
    init_script(sandbox, model)
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert result.code == 1
    assert result["status"] == status and reason_part in result["reason"]
    assert result["ok"] is False


def test_hang_is_killed_with_its_whole_process_group(sandbox: Sandbox) -> None:
    pids = sandbox.root / "pids"
    model = (
        f"cat >/dev/null; echo partial; sleep 300 & echo $! > {pids}; "
        f"setsid sleep 301 & echo $! >> {pids}; wait"
    )
    init_script(sandbox, model)
    started = time.monotonic()
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--idle-min", "0.02"
    )
    assert result.code == 1
    assert result["status"] == "hang-killed"
    assert result["reason"].startswith("hang: no output for")
    assert result["partial_reply"] is True and result["reply"] == "partial"
    assert time.monotonic() - started < 20
    for pid in map(int, pids.read_text().split()):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not (sandbox.repo / ".git" / "pair" / "in-flight.json").exists()


def test_total_budget(sandbox: Sandbox) -> None:
    init_script(sandbox, "while true; do echo tick; sleep 0.2; done")
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--total-min", "0.03"
    )
    assert result["status"] == "hang-killed", result.stdout
    assert "total budget" in result["reason"]


def test_background_send_then_wait_and_one_turn_at_a_time(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    init_script(
        sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo released"
    )
    running = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), "--background")
    assert running.code == 0 and running["status"] == "running"
    assert psutil.pid_exists(running["partner_pid"])
    busy = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert busy.code == 1 and busy["code"] == "turn-in-flight"
    status = sandbox.pair("status").document
    assert status["in_flight"]["seq"] == 1 and status["in_flight"]["alive"] is True
    gate.write_text("go")
    receipt = sandbox.pair("wait", "--timeout-min", "1")
    assert receipt.code == 0 and receipt["reply"] == "released"
    assert sandbox.pair("status")["in_flight"] is None


def test_wait_timeout(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    init_script(sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo ok")
    sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), "--background")
    result = sandbox.pair("wait", "--timeout-min", "0.01")
    assert result.code == 1 and result["status"] == "wait-timeout"
    gate.write_text("go")
    assert sandbox.pair("wait", "--timeout-min", "1")["status"] == "replied"


def test_killed_supervisor_is_worker_lost_and_clear_recovers(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    init_script(sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo late")
    running = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--background"
    ).document
    os.kill(running["supervisor_pid"], signal.SIGKILL)
    lost = sandbox.pair("wait", "--timeout-min", "1")
    assert lost.code == 1 and lost["status"] == "worker-lost"
    assert str(running["supervisor_pid"]) in lost["reason"]
    # The partner still runs: clear refuses until it is gone, and nothing is taken over.
    refused = sandbox.pair("clear")
    assert refused.code == 1 and refused["code"] == "turn-in-flight"
    blocked = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert blocked.code == 1 and blocked["code"] == "turn-in-flight"
    os.killpg(running["partner_pid"], signal.SIGKILL)
    wait_until(lambda: sandbox.pair("clear").code == 0)
    assert sandbox.pair("clear")["status"] == "already-cleared"
    gate.write_text("go")
    again = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert again.code == 0 and again["seq"] == 2 and again["reply"] == "late"


def test_linked_worktrees_keep_separate_pair_state(sandbox: Sandbox) -> None:
    other = sandbox.root / "other"
    git(sandbox.repo, "worktree", "add", "-q", "-b", "other", str(other))
    main_session = init_script(sandbox, "cat >/dev/null; echo main")
    other_session = init_script(sandbox, "cat >/dev/null; echo other", repo=other)
    assert main_session["state_dir"] != other_session["state_dir"]
    assert other_session["state_dir"].endswith("/.git/worktrees/other/pair")
    assert sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))["reply"] == "main"
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), repo=other)
    assert result["reply"] == "other" and result["seq"] == 1
    assert sandbox.pair("status")["seq"] == 1


def test_end_keeps_the_transcripts_and_allows_a_fresh_init(sandbox: Sandbox) -> None:
    first = init_script(sandbox, "cat")
    sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    ended = sandbox.pair("end")
    assert ended.code == 0 and ended["status"] == "ended"
    ended_dir = Path(ended["ended_dir"])
    assert (ended_dir / "session.json").exists()
    assert (ended_dir / "transcripts" / "0001-task-receipt.json").exists()
    assert sandbox.pair("status").code == 1
    second = init_script(sandbox, "cat")
    assert second["sid"] != first["sid"] and second["seq"] == 0


def test_tokens_never_reach_transcript_reply_or_receipt(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "ghp_" + "S3cretTokenValue1234567890"
    monkeypatch.setenv("GH_TOKEN", token)
    init_script(
        sandbox,
        'cat >/dev/null; echo "token=$GH_TOKEN"; echo "url https://bot:pw@example.com/x" >&2',
    )
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert receipt.code == 0
    state = sandbox.repo / ".git" / "pair"
    for path in state.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(errors="replace"), path
    assert token not in receipt.stdout and "bot:pw" not in receipt.stdout
    assert receipt["reply"] == "token=***"
    assert "https://***@example.com/x" in Path(receipt["transcript"]).read_text()


def test_receipt_json_is_complete(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; echo 'HTTP 429 Too Many Requests, retry in 5s'")
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox)).document
    for key in (
        "seq",
        "kind",
        "sid",
        "partner",
        "write",
        "command",
        "ok",
        "status",
        "reason",
        "exit_code",
        "seconds",
        "reply",
        "partial_reply",
        "heavy_queue",
        "throttle_signals",
        "rate_limits",
        "retry_after_seconds",
        "model",
        "effort",
        "leftovers",
        "foreign_ref_changes",
        "receipt_file",
        "transcript",
    ):
        assert key in receipt
    assert receipt["throttle_signals"]["rate_limit_lines"] == 1
    assert json.loads(Path(receipt["receipt_file"]).read_text()) == receipt
