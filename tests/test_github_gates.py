"""The merge hold and intake against GitHub as it really behaves (SPEC 3.2, 3.8, 5), through the
real `unit merge` / `unit intake` CLI and the stateful fake over real HTTP.

Each test is a way the real API differs from a naive reading of it: approvals without write
access, two apps' runs of one name, rulesets, GitHub's own refusal message, blockers in other
repositories, `duplicate`, deleted reviewers, branch names that need encoding, paging.
"""

from __future__ import annotations

import pytest

from tests.conftest import Sandbox, write_record

HEAD = "ab" * 20


def ready_unit(sandbox: Sandbox, github, *, base: str = "main") -> int:
    """A unit whose PR passes every gate at HEAD (a record, no worktree: merge needs none)."""
    write_record(
        sandbox,
        "u1",
        base=base,
        scope_approval={"sha": HEAD, "approved_at": "2026-11-29T08:00:00Z", "files": []},
        verification={"sha": HEAD, "exit_code": 0, "at": "2026-11-29T08:01:00Z"},
    )
    number = github.add_pull("feat/u1", HEAD, base=base)
    github.review(number, "alice", "APPROVED", HEAD, association="MEMBER")
    github.status(HEAD, "ci/tests", "success")
    return number


def merge(sandbox: Sandbox, *extra: str):
    return sandbox.unit("merge", "--unit", "u1", "--head", HEAD, *extra)


def gate(result, name: str) -> dict:
    gates = result["gates"] if result.code == 0 else result["detail"]["gates"]
    return next(g for g in gates if g["gate"] == name)


def test_the_ready_unit_passes(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github)
    dry = merge(sandbox, "--dry-run")
    assert dry.code == 0, dry.stdout
    assert gate(dry, "review_approved")["why"] == "approved on the head by alice (MEMBER)"


@pytest.mark.parametrize("association", ["CONTRIBUTOR", "FIRST_TIMER", "NONE"])
def test_an_approval_without_write_access_does_not_count(
    sandbox: Sandbox, github, association: str
) -> None:
    number = ready_unit(sandbox, github)
    github.reviews[number] = []
    github.review(number, "drive-by", "APPROVED", HEAD, association=association)
    held = merge(sandbox)
    assert held.code == 1 and held["code"] == "held", held.stdout
    why = gate(held, "review_approved")["why"]
    assert f"approved on the head only by drive-by ({association}), without write access" in why
    assert "OWNER, MEMBER or COLLABORATOR" in why
    assert not any(method == "PUT" for method, _ in github.requests)


@pytest.mark.parametrize("association", ["OWNER", "MEMBER", "COLLABORATOR"])
def test_an_approval_with_write_access_counts(sandbox: Sandbox, github, association: str) -> None:
    number = ready_unit(sandbox, github)
    github.reviews[number] = []
    github.review(number, "drive-by", "APPROVED", HEAD, association="CONTRIBUTOR")
    github.review(number, "maintainer", "APPROVED", HEAD, association=association)
    dry = merge(sandbox, "--dry-run")
    assert dry.code == 0, dry.stdout
    assert (
        gate(dry, "review_approved")["why"] == f"approved on the head by maintainer ({association})"
    )


def test_a_failing_run_of_one_app_is_not_hidden_by_anothers_pass(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github)
    github.check_run(HEAD, "build", conclusion="failure", app="ci-bot", at="2026-11-29T10:00:00Z")
    github.check_run(HEAD, "build", app="github-actions", at="2026-11-29T10:05:00Z")
    held = merge(sandbox)
    assert held.code == 1 and held["code"] == "held", held.stdout
    assert gate(held, "checks_green")["why"] == "not green: build by ci-bot (failure)"


def test_two_workflows_of_one_app_are_two_checks(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github)
    github.check_run(HEAD, "build", conclusion="failure", suite=1, at="2026-11-29T10:00:00Z")
    github.check_run(HEAD, "build", suite=2, at="2026-11-29T10:05:00Z")
    assert "build by github-actions (failure)" in gate(merge(sandbox), "checks_green")["why"]


def test_a_rerun_in_the_same_suite_replaces_the_failure(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github)
    github.check_run(HEAD, "build", conclusion="failure", at="2026-11-29T10:00:00Z")
    github.check_run(HEAD, "build", at="2026-11-29T10:05:00Z")
    dry = merge(sandbox, "--dry-run")
    assert dry.code == 0, dry.stdout
    assert gate(dry, "checks_green")["why"] == "2 check(s) green"


def test_a_check_a_ruleset_requires_must_report(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github)
    github.rulesets["main"] = [("ci/e2e", None)]
    held = merge(sandbox)
    assert held.code == 1, held.stdout
    assert gate(held, "checks_green")["why"] == "required but missing: ci/e2e"
    github.status(HEAD, "ci/e2e", "success")
    assert merge(sandbox, "--dry-run").code == 0


def test_a_required_check_from_a_named_app_needs_that_app(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github)
    github.rulesets["main"] = [("build", 4242)]  # the ruleset's integration_id: ci-bot
    github.check_run(HEAD, "build", app="github-actions")
    held = merge(sandbox)
    assert gate(held, "checks_green")["why"] == "required but missing: build (app 4242)"
    github.check_run(HEAD, "build", app="ci-bot")
    assert merge(sandbox, "--dry-run").code == 0
    # Classic protection names its app the same way (`checks[].app_id`).
    github.rulesets.clear()
    github.protection["main"] = [("lint", 7777)]
    github.check_run(HEAD, "lint", app="github-actions")
    assert gate(merge(sandbox), "checks_green")["why"] == "required but missing: lint (app 7777)"


def test_a_refused_merge_quotes_github_and_names_the_fix(sandbox: Sandbox, github) -> None:
    number = ready_unit(sandbox, github)
    github.allowed_methods = {"squash"}
    refused = merge(sandbox)
    assert refused.code == 1 and refused["code"] == "merge-refused", refused.stdout
    assert refused["reason"] == (
        f"GitHub refused the merge of #{number} at {HEAD}: "
        "Merge commits are not allowed on this repository."
    )
    assert f"unit merge --unit u1 --head {HEAD} --method squash" in refused["next"]
    assert refused["detail"]["status"] == 405
    assert github.pulls[number]["merged_at"] is None
    merged = merge(sandbox, "--method", "squash")
    assert merged.code == 0 and merged["status"] == "merged", merged.stdout


def test_a_refusal_after_the_head_moved_names_the_new_head(sandbox: Sandbox, github) -> None:
    number = ready_unit(sandbox, github)
    github.move_head_on_merge = "7" * 40
    refused = merge(sandbox)
    assert refused.code == 1 and refused["code"] == "merge-refused", refused.stdout
    assert "Head branch was modified. Review and try the merge again." in refused["reason"]
    assert f"(the head moved to {'7' * 40})" in refused["reason"]
    assert refused["next"] == "unit scope --unit u1 --approve"  # the new head's gates first
    assert github.pulls[number]["merged_at"] is None


def test_deleted_reviewers_are_each_their_own_reviewer(sandbox: Sandbox, github) -> None:
    number = ready_unit(sandbox, github)
    github.review(number, None, "CHANGES_REQUESTED", HEAD, association="NONE")
    github.review(number, None, "APPROVED", HEAD, association="NONE")  # another deleted account
    held = merge(sandbox)
    assert held.code == 1 and held["code"] == "held", held.stdout
    first = github.reviews[number][1]["id"]
    assert gate(held, "review_approved")["why"] == (
        f"changes requested by a deleted user (review {first})"
    )


def test_a_base_branch_name_is_one_path_segment(sandbox: Sandbox, github) -> None:
    ready_unit(sandbox, github, base="release/1.x")
    github.protection["release/1.x"] = ["ci/tests", "ci/e2e"]
    held = merge(sandbox)
    assert held.code == 1, held.stdout
    assert gate(held, "checks_green")["why"] == "required but missing: ci/e2e"
    raw = [e.raw_path for e in github.exchanges if "/branches/" in e.raw_path]
    assert "/repos/acme/widgets/branches/release%2F1.x/protection/required_status_checks" in raw
    assert "/repos/acme/widgets/rules/branches/release%2F1.x" in raw


def test_reviews_and_check_runs_are_read_past_the_first_page(sandbox: Sandbox, github) -> None:
    number = ready_unit(sandbox, github)
    github.max_per_page = 2
    github.review(number, "bob", "COMMENTED", HEAD)
    github.review(number, "carol", "CHANGES_REQUESTED", HEAD)  # on page 2
    github.check_run(HEAD, "c", conclusion="failure")  # the oldest: newest first puts it on page 2
    for name in ("a", "b"):
        github.check_run(HEAD, name)
    held = merge(sandbox)
    assert held.code == 1, held.stdout
    assert gate(held, "review_approved")["why"] == "changes requested by carol"
    assert gate(held, "checks_green")["why"] == "not green: c by github-actions (failure)"
    pages = [e.query.get("page") for e in github.exchanges if e.path.endswith("/reviews")]
    assert pages == [None, ["2"]]
    runs = [e for e in github.exchanges if e.path.endswith("/check-runs")]
    assert len(runs) == 2


# -- intake ------------------------------------------------------------------------------------


def intake(sandbox: Sandbox, *extra: str):
    return sandbox.unit("intake", "--label", "ready", "--max-active", "5", *extra)


def depends_on(result, number: int) -> list[dict]:
    return next(c for c in result["candidates"] if c["number"] == number)["depends_on"]


def test_a_blocker_in_another_repository_is_read_there(sandbox: Sandbox, github) -> None:
    github.add_issue("a candidate's neighbour")  # 1
    here = github.add_issue("#2 here", labels=(), state="closed", state_reason="completed")
    assert here == 2
    github.add_issue("lib's #2", repository="other-org/lib", number=2)  # open
    native = github.add_issue("natively blocked by other-org/lib#2")
    github.blocked_by[native] = [("other-org/lib", 2)]
    text = github.add_issue("refers to it", body="Depends on other-org/lib#2 and #2")
    hidden = github.add_issue("private", body="- [ ] secret-org/private#5\n- [ ] ../..#1")
    github.unreadable_repositories.add("secret-org/private")
    result = intake(sandbox)
    assert result.code == 0, result.stdout
    lib = {
        "repository": "other-org/lib",
        "number": 2,
        "state": "open",
        "state_reason": None,
        "merged": False,
        "satisfied": False,
    }
    assert depends_on(result, native) == [lib]
    done_here = {"repository": "acme/widgets", "state": "closed", "state_reason": "completed"}
    assert depends_on(result, text) == [lib, {**lib, **done_here, "satisfied": True}]
    assert depends_on(result, hidden) == [
        {**lib, "repository": "secret-org/private", "number": 5, "state": "unknown"},
        {**lib, "repository": "../..", "number": 1, "state": "unknown"},  # never requested
    ]
    assert native not in result["ready"] and text not in result["ready"]
    assert hidden not in result["ready"]
    # The native item is used as returned: other-org/lib#2 is read once (for the text
    # reference), never as this repository's #2 on behalf of the native list.
    assert not any(".." in path for _, path in github.requests)
    reads = [path for method, path in github.requests if path.endswith("/issues/2")]
    assert reads == ["/repos/other-org/lib/issues/2", "/repos/acme/widgets/issues/2"]
    table = intake(sandbox, "--format", "table")
    assert table.code == 0 and "other-org/lib#2" in table.stdout, table.stdout


@pytest.mark.parametrize(
    ("reason", "satisfied"),
    [("completed", True), (None, True), ("not_planned", False), ("duplicate", False)],
)
def test_a_dependency_closed_as_a_duplicate_is_not_done(
    sandbox: Sandbox, github, reason: str | None, satisfied: bool
) -> None:
    dependency = github.add_issue("dep", labels=(), state="closed", state_reason=reason)
    candidate = github.add_issue("candidate", body=f"Blocked by #{dependency}")
    result = intake(sandbox)
    assert result.code == 0, result.stdout
    assert depends_on(result, candidate)[0]["satisfied"] is satisfied
    assert depends_on(result, candidate)[0]["state_reason"] == reason
    assert (candidate in result["ready"]) is satisfied
    if not satisfied:
        table = intake(sandbox, "--format", "table").stdout
        assert f"#{dependency} {reason}" in table, table


def test_limit_stops_paging_once_it_has_enough(sandbox: Sandbox, github) -> None:
    github.max_per_page = 2
    for index in range(10):
        github.add_issue(f"issue {index}")
    capped = intake(sandbox, "--limit", "3")
    assert capped.code == 0, capped.stdout
    # Oldest first (GitHub lists newest first unless asked), and two pages, not five.
    assert [c["title"] for c in capped["candidates"]] == ["issue 0", "issue 1", "issue 2"]
    assert capped["capped"] is True
    listings = [path for method, path in github.requests if path.endswith("/issues")]
    assert len(listings) == 2
    github.requests.clear()
    everything = intake(sandbox, "--limit", "30")
    assert len(everything["candidates"]) == 10 and everything["capped"] is False
    assert len([p for _, p in github.requests if p.endswith("/issues")]) == 5


def test_the_blocked_by_list_is_read_only_when_the_summary_counts_blockers(
    sandbox: Sandbox, github
) -> None:
    blocker = github.add_issue("blocker", labels=())
    for index in range(3):
        github.add_issue(f"free {index}")
    blocked = github.add_issue("blocked")
    github.blocked_by[blocked] = [blocker]
    result = intake(sandbox)
    assert result.code == 0, result.stdout
    assert depends_on(result, blocked)[0]["number"] == blocker
    native = [p for _, p in github.requests if p.endswith("/dependencies/blocked_by")]
    assert native == [f"/repos/acme/widgets/issues/{blocked}/dependencies/blocked_by"]
    # A server that sends no summary: every candidate's list is read ([] when it has none).
    github.dependency_summaries = False
    github.requests.clear()
    again = intake(sandbox)
    assert again["ready"] == [2, 3, 4]
    assert len([p for _, p in github.requests if p.endswith("/blocked_by")]) == 4
