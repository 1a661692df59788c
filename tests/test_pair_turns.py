"""Turn mechanics through the real `pair` CLI and the script partner: honest receipts, cancel,
the subreaper, the start-up handshake, sequence numbers, a broken supervisor, the ref audit."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import psutil
import pytest

from tests.conftest import Sandbox, git, gone, wait_until
from tests.test_pair import body, init_script


def leftover_argv(entry: dict) -> list[str]:
    """A leftover's command line, as it ran: one described between `setsid`'s fork and its exec
    of the command is still `setsid sleep N` (seen under load at `-n 4`), the same process."""
    argv: list[str] = entry["argv"]
    return argv[1:] if argv[:1] == ["setsid"] else argv


def running_with(word: str) -> list[int]:
    """Live (non-zombie) processes whose argv holds `word`: what a test's partner left behind."""
    found = []
    for process in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if process.info["status"] != psutil.STATUS_ZOMBIE and word in (
                process.info["cmdline"] or []
            ):
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def state(sandbox: Sandbox, repo: Path | None = None) -> Path:
    return Path(sandbox.pair("status", repo=repo)["state_dir"])


# -- honest receipts ----------------------------------------------------------------------------


def test_a_failed_receipt_has_the_universal_failure_shape(sandbox: Sandbox) -> None:
    model = "cat >/dev/null; echo oops >&2; exit 3"
    init_script(sandbox, model)
    result = sandbox.pair("send", "--kind", "review", "--body-file", body(sandbox))
    assert result.code == 1
    receipt = result.document
    assert receipt["ok"] is False and receipt["status"] == "failed"
    assert receipt["code"] == "failed"
    assert receipt["reason"] and receipt["next"] == f"tail -n 40 {receipt['transcript']}"
    assert receipt["model"] == model and receipt["effort"] is None
    assert receipt["retry_after_seconds"] is None and receipt["leftovers"] == []
    assert json.loads(Path(receipt["receipt_file"]).read_text()) == receipt


def test_a_replied_receipt_has_no_failure_fields(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; echo fine")
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox)).document
    assert receipt["ok"] is True and "code" not in receipt and "next" not in receipt


def test_wait_timeout_and_worker_lost_carry_code_and_next(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    init_script(sandbox, f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; echo ok")
    running = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), "--background")
    timeout = sandbox.pair("wait", "--timeout-min", "0.005")
    assert timeout.code == 1 and timeout["code"] == "wait-timeout"
    assert timeout["next"] == f"pair wait --repo {sandbox.repo} --seq 1"
    os.kill(running["supervisor_pid"], signal.SIGKILL)
    lost = sandbox.pair("wait", "--timeout-min", "1")
    assert lost["code"] == "worker-lost" and f"pair clear --repo {sandbox.repo}" in lost["next"]
    os.killpg(running["partner_pid"], signal.SIGKILL)


# -- cancel -----------------------------------------------------------------------------------


def test_cancel_stops_the_whole_turn_and_repeats_its_receipt(sandbox: Sandbox) -> None:
    started = sandbox.root / "started"
    init_script(
        sandbox,
        f"cat >/dev/null; echo partial; (setsid sleep 3013 &); touch {started}; sleep 300",
    )
    running = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), "--background")
    assert running.code == 0, running.stdout
    wait_until(started.exists)
    busy = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert busy["code"] == "turn-in-flight" and f"pair cancel --repo {sandbox.repo}" in busy["next"]
    cancelled = sandbox.pair("cancel", "--reason", "wrong task")
    assert cancelled.code == 0, cancelled.stdout
    assert cancelled["status"] == "cancelled" and cancelled["repeated"] is False
    receipt = cancelled["receipt"]
    assert receipt["status"] == "cancelled" and receipt["code"] == "cancelled"
    assert "wrong task" in receipt["reason"] and receipt["next"]
    assert receipt["reply"] == "partial"
    # Returned only once everything of the turn is dead, the escaped grandchild included.
    assert gone(running["partner_pid"]) and gone(running["supervisor_pid"])
    assert running_with("3013") == []
    assert any("3013" in entry["argv"] for entry in receipt["leftovers"])
    assert sandbox.pair("status")["in_flight"] is None
    assert sandbox.pair("wait")["status"] == "cancelled"
    again = sandbox.pair("cancel")
    assert again.code == 0 and again["repeated"] is True and again["receipt"] == receipt
    assert (
        sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), "--background")["seq"]
        == 2
    )
    sandbox.pair("cancel", "--seq", "2")


def test_cancel_with_nothing_in_flight(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; echo fine")
    nothing = sandbox.pair("cancel")
    assert nothing.code == 1 and nothing["code"] == "no-turn-in-flight" and nothing["next"]
    sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    finished = sandbox.pair("cancel", "--seq", "1")
    assert finished.code == 1 and finished["code"] == "no-turn-in-flight"
    assert "already ended replied" in finished["reason"]
    assert sandbox.pair("cancel", "--seq", "0").code == 2


def test_cancel_finishes_a_turn_whose_supervisor_is_gone(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; sleep 300")
    running = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--background"
    ).document
    os.kill(running["supervisor_pid"], signal.SIGKILL)
    wait_until(lambda: gone(running["supervisor_pid"]))
    cancelled = sandbox.pair("cancel", "--reason", "stuck")
    assert cancelled.code == 0, cancelled.stdout
    assert cancelled["receipt"]["status"] == "cancelled" and "stuck" in cancelled["reason"]
    assert gone(running["partner_pid"])
    assert sandbox.pair("status")["in_flight"] is None
    assert sandbox.pair("wait")["status"] == "cancelled"


# -- no process outlives its turn -----------------------------------------------------------------


def test_a_double_forked_child_dies_with_a_hung_turn(sandbox: Sandbox) -> None:
    started = sandbox.root / "started"
    init_script(sandbox, f"cat >/dev/null; (setsid sleep 3011 &); touch {started}; sleep 300")
    result = sandbox.pair(
        "send", "--kind", "task", "--body-file", body(sandbox), "--idle-min", "0.01"
    )
    assert result["status"] == "hang-killed", result.stdout
    assert started.exists() and running_with("3011") == []
    assert [leftover_argv(entry) for entry in result["leftovers"]] == [["sleep", "3011"]]


def test_a_double_forked_child_of_a_replied_turn_is_a_leftover(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; (setsid sleep 3012 >/dev/null 2>&1 &); echo done")
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert result.code == 0 and result["status"] == "replied", result.stdout
    assert [leftover_argv(entry) for entry in result["leftovers"]] == [["sleep", "3012"]]
    assert running_with("3012") == []


# -- the start-up handshake, sequence numbers, a broken supervisor ------------------------------


def test_a_supervisor_that_misses_its_handshake_is_stopped(sandbox: Sandbox) -> None:
    ran, gate = sandbox.root / "ran", sandbox.root / "gate"
    # The turn cannot end before the handshake's deadline (its gate stays shut until after
    # the refusal), so a receipt could only come from a supervisor that outlived its stop.
    init_script(
        sandbox,
        f"cat >/dev/null; while [ ! -f {gate} ]; do sleep 0.05; done; touch {ran}; echo late",
    )
    late = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        env={**os.environ, "UNITMGR_PAIR_HANDSHAKE_SECONDS": "0.001"},
    )
    assert late.code == 1 and late["code"] == "supervisor-failed", late.stdout
    assert late["next"] and gone(late["detail"]["supervisor_pid"])
    pair_dir = state(sandbox)
    assert not (pair_dir / "in-flight.json").exists()
    assert not (pair_dir / "transcripts" / "0001-task-receipt.json").exists()
    gate.write_text("open\n")
    again = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert again.code == 0 and again["seq"] == 2 and again["reply"] == "late"


def test_a_send_killed_after_taking_the_marker_never_reuses_its_number(sandbox: Sandbox) -> None:
    init_script(sandbox, "cat >/dev/null; echo fine")
    killed = sandbox.pair(
        "send",
        "--kind",
        "task",
        "--body-file",
        body(sandbox),
        env={
            **os.environ,
            "UNITMGR_TEST_HOOKS": "1",
            "UNITMGR_TEST_CRASH_AFTER": "pair-send:marker:done",
        },
    )
    assert killed.code == -signal.SIGKILL
    assert sandbox.pair("status")["seq"] == 1
    assert sandbox.pair("clear")["status"] == "cleared"
    again = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert again.code == 0 and again["seq"] == 2


def test_a_supervisor_that_cannot_write_the_reply_still_leaves_a_failed_receipt(
    sandbox: Sandbox,
) -> None:
    init_script(sandbox, "cat >/dev/null; echo a reply")
    transcripts = state(sandbox) / "transcripts"
    (transcripts / "0001-task-reply.md").mkdir(parents=True)  # the reply cannot be written
    result = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))
    assert result.code == 1, result.stdout
    assert result["status"] == "failed" and result["code"] == "failed"
    assert result["reason"].startswith("supervisor error:") and result["next"]
    assert json.loads((transcripts / "0001-task-receipt.json").read_text()) == result.document
    assert sandbox.pair("status")["in_flight"] is None
    assert sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox))["seq"] == 2


# -- the ref audit ------------------------------------------------------------------------------


@pytest.fixture
def linked(sandbox: Sandbox) -> Path:
    """A linked worktree on branch `work`, and a second branch `other`."""
    worktree = sandbox.root / "work"
    git(sandbox.repo, "worktree", "add", "-q", "-b", "work", str(worktree))
    git(sandbox.repo, "branch", "other")
    return worktree


def test_a_turn_that_moves_foreign_refs_is_reported(sandbox: Sandbox, linked: Path) -> None:
    main_before = git(sandbox.repo, "rev-parse", "main")
    model = (
        "cat >/dev/null; echo x > x.txt; git add x.txt; git commit -qm x; "
        "git tag v1; git update-ref refs/remotes/origin/work HEAD; "
        "git update-ref refs/heads/main HEAD; git update-ref refs/heads/other HEAD; echo done"
    )
    init_script(sandbox, model, repo=linked)
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), repo=linked)
    assert receipt.code == 0, receipt.stdout
    head = git(linked, "rev-parse", "HEAD")
    assert receipt["foreign_ref_changes"] == [
        {"ref": "refs/heads/main", "before": main_before, "after": head},
        {"ref": "refs/heads/other", "before": main_before, "after": head},
    ]
    read_only = sandbox.pair(
        "send", "--kind", "question", "--body-file", body(sandbox), "--read-only", repo=linked
    )
    assert read_only["foreign_ref_changes"] is None


def test_a_turn_that_keeps_to_its_branch_has_no_foreign_changes(
    sandbox: Sandbox, linked: Path
) -> None:
    init_script(
        sandbox, "cat >/dev/null; git commit -q --allow-empty -m mine; echo done", repo=linked
    )
    receipt = sandbox.pair("send", "--kind", "task", "--body-file", body(sandbox), repo=linked)
    assert receipt["foreign_ref_changes"] == []
