"""The feedback reads (SPEC 3.17) past GitHub's 100-item page, through the fake's `Link` headers
as GitHub sends them (later pages named by the repository's id), and through a 429 and a 403
secondary rate limit on each list: the forge's one retry layer waits them out. In process: the
forge is the thing tested, not the CLI.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

MANY = 105  # past one page of 100


@pytest.fixture
def forge(github: Any) -> Any:
    from unitmgr.feedback_store import EtagCache
    from unitmgr.forge_github import GitHubForge

    found = GitHubForge(github.repository)
    found.cache = EtagCache(None)  # conditional GETs, as `unit feedback` makes them
    return found


def test_every_feedback_list_is_read_past_100_and_rate_limits_are_waited_out(
    github: Any, forge: Any
) -> None:
    github.links_by_id = True
    head = "f" * 40
    number = github.add_pull("feat/pages", head)
    # The failing run is the oldest: GitHub lists check runs newest first, so it is on page 2;
    # its one failure annotation comes after 103 warnings, on the annotations' page 2.
    warnings = tuple((f"w{n}.py", n, "warning", "meh") for n in range(103))
    github.check_run(
        head, "tests", conclusion="failure", app="ci-bot",
        annotations=(*warnings, ("a.py", 7, "failure", "boom")),
    )  # fmt: skip
    for n in range(MANY):
        github.check_run(head, f"job {n}", conclusion="success")
        github.review(number, "alice", "COMMENTED", head, body=f"review {n}", association="OWNER")
        github.comment(number, "dave", f"line {n}", path="a.py", line=n + 1)
        github.comment(number, "erin", f"talk {n}")
    limited = {
        r"/check-runs$": (403, "0"),
        r"/annotations$": (429, "0"),
        r"/pulls/\d+/reviews$": (429, "0"),
        r"/pulls/\d+/comments$": (403, "0"),
        r"/issues/\d+/comments$": (429, "1"),  # one real wait: it must be waited, not refused
    }
    for pattern, (status, wait) in limited.items():
        message = "You have exceeded a secondary rate limit" if status == 403 else "slow down"
        github.fail("GET", pattern, status, headers={"Retry-After": wait}, message=message)

    started = time.monotonic()
    report = forge.ci_feedback(head)
    items = forge.review_feedback(number)
    elapsed = time.monotonic() - started

    (failed,) = report.failures
    assert failed.where == "tests" and failed.body.splitlines() == ["a.py:7 boom"]
    assert report.running == []
    kinds = [item.kind for item in items]
    assert kinds == ["review"] * MANY + ["review-comment"] * MANY + ["comment"] * MANY
    assert items[MANY - 1].body == f"review {MANY - 1}" and items[-1].body == f"talk {MANY - 1}"
    assert [fault.remaining for fault in github.faults] == [0] * len(limited)  # each one hit
    assert github.by_id_requests >= 5  # every list's page 2, named as GitHub names it
    assert elapsed >= 1.0  # the Retry-After was waited out

    # An idle second read of all of it, every page included, costs only 304s.
    start = len(github.exchanges)
    assert forge.review_feedback(number) == items
    assert forge.ci_feedback(head) == report
    assert {e.status for e in github.exchanges[start:]} == {304}


@pytest.mark.parametrize("status", [429, 403])
def test_a_rate_limited_job_log_is_waited_out(
    github: Any, forge: Any, tmp_path: Any, status: int
) -> None:
    head = "e" * 40
    run = github.check_run(head, "tests", conclusion="failure", title="1 failed")
    github.job_logs[run] = "2026-12-02T03:00:00.1Z step\n2026-12-02T03:00:01.2Z ##[error]boom\n"
    message = "You have exceeded a secondary rate limit" if status == 403 else "slow down"
    github.fail(
        "GET", r"/actions/jobs/\d+/logs$", status, headers={"Retry-After": "0"}, message=message
    )
    forge.logs = tmp_path
    (failed,) = forge.ci_feedback(head).failures
    assert failed.excerpt == "step\n##[error]boom", failed.log_note
    assert github.faults[0].remaining == 0
