"""GitHub: intake with dependencies, admission on live PR state, the merge hold, and the merged-PR
proof of dismantle — the real CLI against a stateful fake GitHub over real HTTP (no patching)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import pytest

from tests.conftest import GITHUB_TOKEN, Sandbox, git, lead_signatures, write_record


def intake(sandbox: Sandbox, *extra: str, **env: str):
    environment = {**os.environ, **env} if env else None
    return sandbox.unit("intake", "--label", "ready", *extra, env=environment)


def dependency(
    number: int,
    state: str,
    *,
    merged: bool = False,
    satisfied: bool = False,
    reason: str | None = None,
    repository: str = "acme/widgets",
) -> dict[str, object]:
    """One `depends_on` entry as intake prints it."""
    return {
        "repository": repository,
        "number": number,
        "state": state,
        "state_reason": reason,
        "merged": merged,
        "satisfied": satisfied,
    }


def test_intake_slots_on_mixed_pr_states(sandbox: Sandbox, github) -> None:
    write_record(sandbox, "draft-pr")
    write_record(sandbox, "ready-pr")
    write_record(sandbox, "merged-pr")
    write_record(sandbox, "no-pr")
    write_record(sandbox, "recovering", lifecycle="setting-up")
    github.add_pull("feat/draft-pr", "a" * 40, draft=True)
    github.add_pull("feat/ready-pr", "b" * 40)
    github.add_pull("feat/merged-pr", "c" * 40, state="merged")
    github.add_pull("feat/recovering", "d" * 40)  # a non-working unit is active whatever its PR
    result = intake(sandbox, "--max-active", "6", "--max-held", "6")
    assert result.code == 0, result.stdout
    capacity = result["capacity"]
    states = {unit["unit_id"]: unit["state"] for unit in capacity["units"]}
    assert states == {
        "draft-pr": "active",
        "ready-pr": "held",
        "merged-pr": "merged",
        "no-pr": "active",
        "recovering": "active",
    }
    assert (capacity["active"], capacity["held"], capacity["pr_state"]) == (3, 1, "live")
    assert capacity["slots"] == min(6 - 3, 6 - 1 - 3) == 2
    assert next(u for u in capacity["units"] if u["unit_id"] == "ready-pr")["pr"].endswith(
        "/pull/2"
    )


def test_a_held_pr_fills_the_review_queue(sandbox: Sandbox, github) -> None:
    write_record(sandbox, "u1")
    write_record(sandbox, "u2")
    github.add_pull("feat/u1", "a" * 40)  # ready for review: held
    result = intake(sandbox, "--max-active", "4", "--max-held", "2")
    assert result["capacity"]["held"] == 1 and result["capacity"]["active"] == 1
    assert result["capacity"]["slots"] == 0


def test_two_open_prs_for_one_branch_pause_admission(sandbox: Sandbox, github) -> None:
    write_record(sandbox, "u1")
    github.add_pull("feat/u1", "a" * 40)
    github.add_pull("feat/u1", "b" * 40)
    result = intake(sandbox)
    assert result.code == 1 and result["code"] == "admission-paused"
    assert "2 open PRs for branch feat/u1" in result["reason"]
    create = sandbox.create("u2")
    assert create.code == 1 and create["code"] == "admission-paused"


def test_candidates_and_dependency_readiness(sandbox: Sandbox, github) -> None:
    done = github.add_issue("done", state="closed", state_reason="completed", labels=())
    dropped = github.add_issue("dropped", state="closed", state_reason="not_planned", labels=())
    open_dep = github.add_issue("still open", labels=())
    merged = github.add_pull("feat/x", "a" * 40, state="merged")
    closed_pr = github.add_pull("feat/y", "b" * 40, state="closed")
    ready_one = github.add_issue("ready", body=f"Depends on #{done}, #{merged}")
    blocked = github.add_issue("blocked", body=f"Some text.\nblocked by #{open_dep}")
    not_planned = github.add_issue("not planned dep", body=f"- [ ] #{dropped}\n- [x] #{done}")
    unmerged = github.add_issue("closed PR dep", body=f"DEPENDS ON #{closed_pr}")
    native = github.add_issue("native", body="no references")
    github.blocked_by[native] = [open_dep]
    missing = github.add_issue("unknown dep", body="Depends on #999")
    github.add_pull("feat/z", "c" * 40, labels=("ready",))  # a labelled PR is not a candidate
    recorded = github.add_issue("already a unit")
    write_record(sandbox, "u1", issue=recorded)
    result = intake(sandbox, "--max-active", "5", "--max-held", "5")
    assert result.code == 0, result.stdout
    by_number = {c["number"]: c for c in result["candidates"]}
    assert set(by_number) == {ready_one, blocked, not_planned, unmerged, native, missing}
    assert result["ready"] == [ready_one]
    assert by_number[ready_one]["depends_on"] == [
        dependency(done, "closed", satisfied=True, reason="completed"),
        dependency(merged, "merged", merged=True, satisfied=True),
    ]
    assert by_number[blocked]["depends_on"] == [dependency(open_dep, "open")]
    assert [(d["number"], d["satisfied"]) for d in by_number[not_planned]["depends_on"]] == [
        (dropped, False),
        (done, True),
    ]
    assert by_number[unmerged]["depends_on"][0]["state"] == "closed"
    assert by_number[native]["depends_on"] == by_number[blocked]["depends_on"]
    assert by_number[missing]["depends_on"] == [dependency(999, "unknown")]
    # Each dependency is read once per intake, a PR dependency without a second request.
    reads = [path for method, path in github.requests if "/issues/" in path or "/pulls/" in path]
    dependency_reads = [p for p in reads if "dependencies" not in p]
    assert len(dependency_reads) == len(set(dependency_reads))
    assert not any(p.endswith(f"/pulls/{merged}") for p in reads)
    assert by_number[ready_one]["title"] == "ready" and by_number[ready_one]["labels"] == ["ready"]
    assert result["capped"] is False
    assert GITHUB_TOKEN not in result.stdout + result.stderr


def test_limit_caps_and_milestones_filter(sandbox: Sandbox, github) -> None:
    sprint = github.add_milestone("Sprint 9")
    for index in range(4):
        github.add_issue(f"issue {index}", milestone=sprint if index < 2 else None)
    capped = intake(sandbox, "--limit", "3")
    assert len(capped["candidates"]) == 3 and capped["capped"] is True
    by_title = intake(sandbox, "--milestone", "Sprint 9")
    assert [c["title"] for c in by_title["candidates"]] == ["issue 0", "issue 1"]
    assert by_title["candidates"][0]["milestone"] == "Sprint 9"
    by_number = intake(sandbox, "--milestone", str(sprint))
    assert len(by_number["candidates"]) == 2
    table = intake(sandbox, "--format", "table")
    assert table.code == 0 and "slot(s) free" in table.stdout
    assert max(len(line) for line in table.stdout.splitlines()) <= 80


def test_transient_errors_are_retried_transparently(sandbox: Sandbox, github) -> None:
    github.add_issue("one")
    github.fail("GET", r"/issues$", 500, times=3, headers={"Retry-After": "0"})
    result = intake(sandbox)
    assert result.code == 0, result.stdout
    assert [c["title"] for c in result["candidates"]] == ["one"]
    assert [p for m, p in github.requests if p.endswith("/issues")].__len__() == 4


def test_a_rate_limit_that_outlasts_the_bound_exits_75(sandbox: Sandbox, github) -> None:
    write_record(sandbox, "u1")
    github.fail(
        "GET", r"/pulls$", 429, times=50, headers={"Retry-After": "120"}, message="slow down"
    )
    started = time.monotonic()
    result = intake(sandbox)
    assert result.code == 75, result.stdout
    assert result["retryable"] is True and result["code"] == "admission-paused"
    assert result["reason"] == "admission paused: cannot read live PR state"
    assert time.monotonic() - started < 10  # the wait would outlast the bound: give up at once


def test_a_secondary_rate_limit_is_waited_out(sandbox: Sandbox, github) -> None:
    github.add_issue("one")
    github.fail(
        "GET",
        r"/issues$",
        403,
        times=1,
        headers={"Retry-After": "1"},
        message="You have exceeded a secondary rate limit",
    )
    started = time.monotonic()
    result = intake(sandbox)
    assert result.code == 0, result.stdout
    assert 0.9 < time.monotonic() - started < 15


def test_intake_needs_github(sandbox: Sandbox) -> None:
    result = sandbox.unit("intake", "--label", "ready")
    assert result.code == 1 and result["code"] == "github-not-configured"
    assert "set GITHUB_REPOSITORY or an origin on GitHub" in result["reason"]


def test_github_pacing_is_off(sandbox: Sandbox, github) -> None:
    for index in range(20):
        write_record(sandbox, f"u{index:02d}")
        github.add_issue(f"issue {index}")
    started = time.monotonic()
    result = intake(sandbox, "--max-active", "50", "--max-held", "50", "--limit", "50")
    elapsed = time.monotonic() - started
    assert result.code == 0 and result["capacity"]["active"] == 20
    assert len(github.requests) >= 21
    # PyGithub's default pacing (0.25 s between requests) alone would take over 5 s here.
    assert elapsed < 5.0, f"{elapsed:.1f}s"


def test_admission_in_create_counts_merged_units_out(sandbox: Sandbox, github) -> None:
    write_record(sandbox, "old")
    github.add_pull("feat/old", "a" * 40, state="merged")
    created = sandbox.create("u1", max_active="1")
    assert created.code == 0, created.stdout
    assert created["unit"]["journal"] == [] and created["unit"]["lifecycle"] == "working"
    full = sandbox.create("u2", max_active="1")
    assert full.code == 1 and full["detail"]["pr_state"] == "live"
    assert {u["unit_id"]: u["state"] for u in full["detail"]["units"]} == {
        "old": "merged",
        "u1": "active",
    }


# -- merge -------------------------------------------------------------------------------------

COMMIT = (
    "cat > /dev/null; echo hi > GREETING.md; git add -A; git commit -qm g; "
    "git push -q origin HEAD; echo ok"
)


def deliverable(sandbox: Sandbox, github) -> tuple[int, str]:
    """A unit whose PR passes every gate: returns (PR number, head)."""
    created = sandbox.create("u1", model=COMMIT, validation="test -f GREETING.md")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    head = git(sandbox.worktree("u1"), "rev-parse", "HEAD")
    number = github.add_pull("feat/u1", head)
    assert sandbox.unit("scope", "--unit", "u1", "--approve", "--allow-outside").code == 0
    assert sandbox.unit("verify", "--unit", "u1").code == 0
    github.review(number, "alice", "APPROVED", head)
    github.status(head, "ci/tests", "success")
    github.check_run(head, "lint")
    github.protection["main"] = ["ci/tests"]
    return number, head


def test_a_passing_pr_is_merged_at_the_head_and_the_branch_stays(sandbox: Sandbox, github) -> None:
    number, head = deliverable(sandbox, github)
    dry = sandbox.unit("merge", "--unit", "u1", "--head", head, "--dry-run")
    assert dry.code == 0, dry.stdout
    assert [g["gate"] for g in dry["gates"]] == [
        "single_open_pr",
        "not_draft",
        "base",
        "head_matches",
        "scope_approval",
        "review_approved",
        "checks_green",
        "verification",
    ]
    assert all(g["ok"] for g in dry["gates"])
    assert github.pulls[number]["merged_at"] is None  # a dry run merges nothing
    merged = sandbox.unit("merge", "--unit", "u1", "--head", head, "--method", "squash")
    assert merged.code == 0, merged.stdout
    assert merged["status"] == "merged"
    assert merged["pr"] == {
        "number": number,
        "url": f"https://github.example/acme/widgets/pull/{number}",
        "head": head,
        "merge_commit_sha": "e" * 40,
        "method": "squash",
    }
    assert github.last_merge_method == "squash"
    assert ("PUT", f"/repos/acme/widgets/pulls/{number}/merge") in github.requests
    assert git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1")  # never deleted
    assert git(sandbox.repo, "branch", "--list", "feat/u1")
    assert sandbox.record("u1")["pr"]["number"] == number
    again = sandbox.unit("merge", "--unit", "u1", "--head", head)
    assert again.code == 0 and again["status"] == "already-merged"


def _rewrite_as_the_lead(sandbox: Sandbox, change: Callable[[str], str]) -> None:
    """Change the record as `unit` itself would have, signatures and all (a gate that is
    merely forged fails as unsigned: tests/test_signed_fields.py)."""
    record_file = sandbox.registry / "units" / "u1.json"
    record = json.loads(change(record_file.read_text()))
    record.pop("signatures", None)
    record["signatures"] = lead_signatures(sandbox, record)
    record_file.write_text(json.dumps(record, indent=2) + "\n")


@pytest.mark.parametrize(
    ("breakage", "gate", "why_part"),
    [
        ("draft", "not_draft", "draft"),
        ("base", "base", "not main"),
        ("head", "head_matches", "not --head"),
        ("scope", "scope_approval", "head moved from"),
        ("author-approval", "review_approved", "no approval"),
        ("changes-requested", "review_approved", "changes requested by bob"),
        ("stale-approval", "review_approved", "earlier head"),
        ("pending-check", "checks_green", "lint by github-actions (in_progress)"),
        ("failed-status", "checks_green", "ci/tests (failure)"),
        ("missing-required", "checks_green", "required but missing: ci/e2e"),
        ("verification", "verification", "failed: exit 1"),
        ("two-prs", "single_open_pr", "2 open PRs"),
    ],
)
def test_each_failing_gate_is_named(
    sandbox: Sandbox, github, breakage: str, gate: str, why_part: str
) -> None:
    number, head = deliverable(sandbox, github)
    pull = github.pulls[number]
    if breakage == "draft":
        pull["draft"] = True
    elif breakage == "base":
        pull["base"] = "release"
    elif breakage == "head":
        pull["head_sha"] = "0" * 40
    elif breakage == "scope":
        _rewrite_as_the_lead(sandbox, lambda text: text.replace(head, "1" * 40))
    elif breakage == "author-approval":
        github.reviews[number] = []
        github.review(number, "executor-bot", "APPROVED", head)
    elif breakage == "changes-requested":
        github.review(number, "bob", "CHANGES_REQUESTED", head)
    elif breakage == "stale-approval":
        github.reviews[number] = []
        github.review(number, "alice", "APPROVED", "9" * 40)
    elif breakage == "pending-check":
        github.check_run(
            head, "lint", status="in_progress", conclusion=None, at="2026-11-29T10:00:00Z"
        )
    elif breakage == "failed-status":
        github.status(head, "ci/tests", "failure", at="2026-11-29T10:00:00Z")
    elif breakage == "missing-required":
        github.protection["main"] = ["ci/tests", "ci/e2e"]
    elif breakage == "verification":
        _rewrite_as_the_lead(sandbox, lambda text: text.replace('"exit_code": 0', '"exit_code": 1'))
    elif breakage == "two-prs":
        github.add_pull("feat/u1", head)
    held = sandbox.unit("merge", "--unit", "u1", "--head", head)
    assert held.code == 1 and held["code"] == "held", held.stdout
    failing = {g["gate"]: g["why"] for g in held["detail"]["gates"] if not g["ok"]}
    assert gate in failing and why_part in failing[gate], failing
    assert held["reason"].startswith("held: ")
    assert not any(method == "PUT" for method, _ in github.requests)


def test_unreadable_protection_counts_only_reported_checks(sandbox: Sandbox, github) -> None:
    _, head = deliverable(sandbox, github)
    github.protection["main"] = "forbidden"
    dry = sandbox.unit("merge", "--unit", "u1", "--head", head, "--dry-run")
    checks = next(g for g in dry["gates"] if g["gate"] == "checks_green")
    assert checks["ok"] is True and "branch protection cannot be read" in checks["why"]
    assert "only reported" not in checks["why"]  # the rulesets were read
    github.rulesets_readable = False
    dry = sandbox.unit("merge", "--unit", "u1", "--head", head, "--dry-run")
    checks = next(g for g in dry["gates"] if g["gate"] == "checks_green")
    assert checks["ok"] is True and "only reported statuses and checks count" in checks["why"]
    assert "branch protection and rulesets cannot be read (403/404)" in checks["why"]


def test_a_head_that_moves_between_check_and_merge_is_refused(sandbox: Sandbox, github) -> None:
    number, head = deliverable(sandbox, github)
    github.move_head_on_merge = "7" * 40
    refused = sandbox.unit("merge", "--unit", "u1", "--head", head)
    assert refused.code == 1 and refused["code"] == "merge-refused", refused.stdout
    assert "7" * 40 in refused["reason"]
    assert github.pulls[number]["merged_at"] is None


# -- dismantle's proof ---------------------------------------------------------------------------


def test_dismantle_needs_a_merged_pr_at_the_local_head(sandbox: Sandbox, github) -> None:
    created = sandbox.create("u1", model=COMMIT)
    assert created.code == 0
    sandbox.wait_turn("u1")
    head = git(sandbox.worktree("u1"), "rev-parse", "HEAD")
    refused = sandbox.unit("dismantle", "--unit", "u1")
    assert refused.code == 1 and refused["code"] == "no-merged-pr"
    github.add_pull("feat/u1", "3" * 40, state="merged")  # merged, but not this head
    still = sandbox.unit("dismantle", "--unit", "u1")
    assert still.code == 1 and still["code"] == "no-merged-pr"
    number = github.add_pull("feat/u1", head, state="merged")
    gone = sandbox.unit("dismantle", "--unit", "u1")
    assert gone.code == 0, gone.stdout
    assert gone["forced"] is False and gone["merged_pr"]["number"] == number
    assert "abandoned" not in gone.document
    assert not sandbox.worktree("u1").exists()
    assert git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1") == ""


def test_status_unit_lists_the_pull_requests(sandbox: Sandbox, github) -> None:
    assert sandbox.create("u1").code == 0
    number = github.add_pull("feat/u1", "a" * 40, draft=True)
    status = sandbox.unit("status", "--unit", "u1")
    assert status["unit"]["observed"]["pull_requests"] == [
        {
            "number": number,
            "url": f"https://github.example/acme/widgets/pull/{number}",
            "state": "open",
            "draft": True,
            "head_sha": "a" * 40,
            "base": "main",
            "merged_at": None,
        }
    ]
    listed = sandbox.unit("list", "--prs")
    assert listed["units"][0]["observed"]["pull_requests"][0]["number"] == number
    offline = sandbox.unit("list")
    assert "pull_requests" not in offline["units"][0]["observed"]
    assert all(auth == f"token {GITHUB_TOKEN}" for auth in github.authorization)


def test_a_pr_merged_before_the_unit_began_does_not_free_its_slot(sandbox: Sandbox, github) -> None:
    # An earlier unit used the same branch name and was merged long ago; the name came back.
    assert sandbox.create("u1").code == 0
    github.add_pull("feat/u1", "3" * 40, state="merged", merged_at="2020-01-01T00:00:00Z")
    counted = intake(sandbox)
    assert counted.code == 0 and counted["capacity"]["active"] == 1, counted.stdout
    github.add_pull("feat/u1", "4" * 40, state="merged")  # merged now: the unit's own PR
    assert intake(sandbox)["capacity"]["active"] == 0


def test_a_refusal_from_github_is_not_retried(sandbox: Sandbox, github) -> None:
    write_record(sandbox, "u1")
    github.fail("GET", r"/pulls$", 404, times=5, message="Not Found")
    started = time.monotonic()
    result = sandbox.unit("merge", "--unit", "u1", "--head", "a" * 40)
    assert result.code == 1 and result["code"] == "github-refused", result.stdout
    assert result["detail"] == {"status": 404} and "HTTP 404" in result["reason"]
    assert [path for method, path in github.requests if path.endswith("/pulls")].__len__() == 1
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("head", ["abc1234", "A" * 39, "g" * 40, ""])
def test_merge_needs_a_full_head_sha(sandbox: Sandbox, github, head: str) -> None:
    write_record(sandbox, "u1")
    result = sandbox.unit("merge", "--unit", "u1", "--head", head)
    assert result.code == 2, result.stdout
    assert result["code"] in ("invalid-head", "missing-option")
    assert github.requests == []


def test_an_unreachable_dependency_is_retryable_not_unready(sandbox: Sandbox, github) -> None:
    dependency = github.add_issue("dependency", labels=())
    github.add_issue("candidate", body=f"Depends on #{dependency}")
    github.fail("GET", rf"/issues/{dependency}$", 429, times=50, headers={"Retry-After": "120"})
    result = intake(sandbox)
    assert result.code == 75 and result["code"] == "github-unavailable", result.stdout


@pytest.mark.parametrize(
    ("origin", "repository"),
    [
        ("https://github.com/acme/widgets.git", "acme/widgets"),
        ("git@github.com:acme/widgets.git", "acme/widgets"),
        ("ssh://git@github.com/acme/widgets", "acme/widgets"),
        ("https://gitlab.example.com/acme/widgets.git", None),
        ("git@bitbucket.org:acme/widgets.git", None),
        ("ssh://git@git.corp:2222/acme/widgets", None),
    ],
)
def test_only_an_origin_on_github_names_the_repository(
    origin: str, repository: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from unitmgr.forge import configured_repository

    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    monkeypatch.delenv("GITHUB_API_URL", raising=False)
    assert configured_repository(lambda: origin) == repository
    monkeypatch.setenv("GITHUB_API_URL", "https://git.corp/api/v3")  # GitHub Enterprise
    assert configured_repository(lambda: "git@git.corp:acme/widgets.git") == "acme/widgets"
