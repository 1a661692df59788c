"""`unit feedback`'s conditional polling and Actions job logs (SPEC 3.17, 7), through the real CLI
against the fake GitHub (which serves ETags, 304s, and job logs behind a 302).

An idle poll must cost only 304s; what a poll keeps between runs (ETags, answers, logs) lives in
the user's private state directory, and a planted or mangled copy can only cost a refetch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import Sandbox
from tests.test_feedback import HEAD, feedback, working_unit


def etag_file(unit_id: str = "u1") -> Path:
    found = list((Path.home() / ".local/state/unitmgr/feedback").glob(f"*/{unit_id}/etags.json"))
    assert len(found) == 1, found
    return found[0]


def statuses_since(github: Any, start: int) -> list[int]:
    return [exchange.status for exchange in github.exchanges[start:]]


def test_an_idle_poll_costs_only_304s(sandbox: Sandbox, github: Any) -> None:
    working_unit(sandbox)
    number = github.add_pull("feat/u1", HEAD)
    github.check_run(HEAD, "tests", conclusion="failure", title="1 failed")
    github.comment(number, "alice", "a first point")
    first = feedback(sandbox, "--all")
    assert first.code == 0, first.stdout
    start = len(github.exchanges)
    idle = feedback(sandbox, "--all")
    assert idle.code == 0, idle.stdout
    statuses = statuses_since(github, start)
    assert statuses and set(statuses) == {304}, statuses
    assert idle["units"] == first["units"]  # the cached answers read as the fresh ones did

    github.comment(number, "alice", "a second point")
    start = len(github.exchanges)
    moved = feedback(sandbox, "--all")
    changed = [e.path for e in github.exchanges[start:] if e.status == 200]
    assert changed == [f"/repos/{github.repository}/issues/{number}/comments"], changed
    bodies = [item["key"] for item in moved["units"][0]["pending"]]
    assert len(bodies) == 3, moved.stdout


def test_a_mangled_or_planted_etag_file_only_costs_a_refetch(sandbox: Sandbox, github: Any) -> None:
    working_unit(sandbox)
    number = github.add_pull("feat/u1", HEAD)
    github.comment(number, "alice", "the real point")
    assert feedback(sandbox, "--unit", "u1").code == 0
    path = etag_file()
    cached = json.loads(path.read_text())
    for entry in cached["entries"].values():
        # A header injection and a replayed answer: neither may reach GitHub or the executor.
        entry["etag"] = 'W/"x"\r\nX-Injected: 1'
        entry["data"] = []
    path.write_text(json.dumps(cached))
    start = len(github.exchanges)
    read = feedback(sandbox, "--unit", "u1")
    assert read.code == 0, read.stdout
    assert set(statuses_since(github, start)) == {200}
    assert [item["kind"] for item in read["pending"]] == ["comment"]

    path.write_text("{" * 100_000)  # unreadable: a miss, not a failure
    start = len(github.exchanges)
    again = feedback(sandbox, "--unit", "u1")
    assert again.code == 0 and set(statuses_since(github, start)) == {200}, again.stdout
    assert json.loads(etag_file().read_text())["entries"]  # rewritten whole


def test_a_dry_run_keeps_no_etags(sandbox: Sandbox, github: Any) -> None:
    working_unit(sandbox)
    number = github.add_pull("feat/u1", HEAD)
    github.comment(number, "alice", "a point")
    assert feedback(sandbox, "--unit", "u1", "--send", "--dry-run").code == 0
    assert not list(Path.home().glob(".local/state/unitmgr/feedback/*/u1/etags.json"))


def actions_log(lines: int, *, error_at: int | None = None) -> str:
    stamp = "2026-12-02T03:00:00.1234567Z "
    body = [
        stamp + ("##[error]Process completed with exit code 1." if i == error_at else f"step {i}")
        for i in range(lines)
    ]
    return "\n".join(body) + "\n"


def test_a_failed_actions_job_quotes_its_log_and_saves_it_whole(
    sandbox: Sandbox, github: Any
) -> None:
    working_unit(sandbox)
    github.add_pull("feat/u1", HEAD)
    run = github.check_run(HEAD, "tests", conclusion="failure", title="1 test failed")
    big = actions_log(260_000, error_at=259_950)  # over 10 MiB: streamed, saved, cut at the cap
    github.job_logs[run] = big
    read = feedback(sandbox, "--unit", "u1")
    assert read.code == 0, read.stdout
    text = read["addendum"]["text"]
    assert "1 test failed" in text
    assert "##[error]Process completed with exit code 1." in text
    # From 30 lines before the last error, 60 lines: the end is past the cap, still quoted.
    assert "step 259920\n" in text and "step 259919\n" not in text
    assert "step 259979\n" in text and "step 259980" not in text
    assert "2026-12-02T03:00:00" not in text  # timestamps stripped
    saved = list(Path.home().glob(f".local/state/unitmgr/feedback/*/u1/logs/{run}.log"))
    assert len(big) > 10 * 1024 * 1024
    assert len(saved) == 1 and saved[0].stat().st_size == 10 * 1024 * 1024
    assert f"saved at {saved[0]}, cut at 10 MiB" in text
    # Followed to the short-lived URL the route redirected to.
    assert [e.status for e in github.exchanges if "job-logs" in e.path or "/logs" in e.path] == [
        302,
        200,
    ]
    again = feedback(sandbox, "--unit", "u1")  # a completed job's log is read once
    assert again["addendum"]["text"] == text
    assert sum("/logs" in e.path or "job-logs" in e.path for e in github.exchanges) == 2


def test_a_gone_log_says_so_and_still_forwards_the_output(sandbox: Sandbox, github: Any) -> None:
    working_unit(sandbox)
    github.add_pull("feat/u1", HEAD)
    expired = github.check_run(HEAD, "tests", conclusion="failure", summary="test_a failed")
    never = github.check_run(HEAD, "lint", conclusion="failure", summary="lint failed")
    github.job_logs[expired] = 410
    sent = feedback(sandbox, "--unit", "u1", "--send")
    assert sent.code == 0 and sorted(sent["sent"]) == sorted(
        [f"check:{HEAD}:{expired}", f"check:{HEAD}:{never}"]
    ), sent.stdout
    text = (sandbox.registry / "tasks" / "u1.md").read_text()
    assert "test_a failed" in text and "lint failed" in text
    assert "the job log is gone (HTTP 410)" in text and "the job log is gone (HTTP 404)" in text


def test_resolved_and_outdated_review_threads_are_not_forwarded(
    sandbox: Sandbox, github: Any
) -> None:
    working_unit(sandbox)
    number = github.add_pull("feat/u1", HEAD)
    open_one = github.comment(number, "alice", "still open", path="a.py", line=1)
    resolved = github.comment(number, "alice", "already resolved", path="a.py", line=2)
    outdated = github.comment(number, "alice", "on old code", path="a.py", line=3)
    github.resolved_threads.add(resolved)
    github.outdated_threads.add(outdated)
    sent = feedback(sandbox, "--unit", "u1", "--send")
    assert sent.code == 0 and sent["sent"] == [f"thread:{open_one}:{open_one}"], sent.stdout
    text = (sandbox.registry / "tasks" / "u1.md").read_text()
    assert "still open" in text and "already resolved" not in text and "on old code" not in text
    # Nothing new to forward: the next poll does not ask GraphQL (it has no ETags).
    asked = github.requests.count(("POST", "/graphql"))
    assert asked == 1, github.requests
    assert feedback(sandbox, "--unit", "u1").code == 0
    assert github.requests.count(("POST", "/graphql")) == asked
