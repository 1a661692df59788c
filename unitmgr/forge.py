"""What unitmgr needs from a forge (GitHub), as plain values and one small interface.

The lifecycle code (intake, admission, merge, dismantle's proof) depends on `Forge`, never on
PyGithub; `unitmgr.forge_github` is the real adapter and holds the only retry policy. Nothing here
imports `github`.
"""

from __future__ import annotations

from registry.light_dataclass import dataclass, field

# Re-exported: where a repository's forge is (unitmgr/github_remote.py, kept light).
from unitmgr.github_remote import configured_repository, github_hosts, repository_from  # noqa: F401

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, Protocol
else:
    Protocol = object  # a structural type for mypy only: no `typing` at run time (SPEC 7)


@dataclass(frozen=True)
class PullRequest:
    number: int
    url: str
    state: str  # "open" | "closed" | "merged"
    draft: bool
    head_sha: str
    head_ref: str
    base: str
    author: str | None
    merged_at: str | None = None
    merge_commit_sha: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "url": self.url,
            "state": self.state,
            "draft": self.draft,
            "head_sha": self.head_sha,
            "base": self.base,
            "merged_at": self.merged_at,
        }


@dataclass(frozen=True)
class Issue:
    number: int
    title: str
    url: str
    body: str
    labels: list[str]
    milestone: str | None
    state: str  # "open" | "closed"
    state_reason: str | None = None
    is_pull_request: bool = False
    repository: str = ""  # owner/name, from the issue's own `repository_url`
    # `issue_dependencies_summary.total_blocked_by`; None when GitHub did not say (older servers)
    blocked_by_count: int | None = None


WRITE_ACCESS = ("OWNER", "MEMBER", "COLLABORATOR")
"""The `author_association` values of an account with write access: only their approvals count
(GitHub's own rule); CONTRIBUTOR, FIRST_TIMER, FIRST_TIME_CONTRIBUTOR, MANNEQUIN and NONE do not."""


@dataclass(frozen=True)
class Review:
    id: int
    user: str | None  # None: a deleted account (GitHub answers `user: null`)
    state: str  # APPROVED | CHANGES_REQUESTED | COMMENTED | PENDING | DISMISSED
    commit_id: str | None
    submitted_at: str | None
    author_association: str = "NONE"

    @property
    def reviewer(self) -> str:
        """Who the review speaks for. Deleted accounts cannot be told apart, so each of their
        reviews is its own reviewer: one never replaces another's verdict."""
        return self.user if self.user is not None else f"a deleted user (review {self.id})"

    @property
    def has_write_access(self) -> bool:
        return self.author_association in WRITE_ACCESS


@dataclass(frozen=True)
class Check:
    name: str
    kind: str  # "status" | "check_run"
    state: str  # status: success/failure/error/pending; check run: its conclusion or status
    at: str | None
    id: int = 0  # breaks ties between runs stamped in the same second
    app_id: int | None = None  # check runs: the GitHub App that reported it
    app: str | None = None  # its slug (or name), for people
    suite_id: int | None = None  # check runs: one suite per app per commit, per workflow in Actions

    @property
    def key(self) -> tuple[str, int | None, int | None, str]:
        """What a later report replaces: the same context (statuses), or the same name from the
        same app and check suite (check runs) — never a run of the same name from another app
        or workflow."""
        return (self.kind, self.app_id, self.suite_id, self.name)

    @property
    def label(self) -> str:
        if self.kind == "check_run" and self.app:
            return f"{self.name} by {self.app} ({self.state})"
        return f"{self.name} ({self.state})"


PASSING_CHECK_RUN = ("success", "neutral", "skipped")


def latest_checks(checks: list[Check]) -> list[Check]:
    """The latest report of each check (`Check.key`): what a gate or a dashboard judges."""
    latest: dict[tuple[str, int | None, int | None, str], Check] = {}
    for check in checks:
        seen = latest.get(check.key)
        if seen is None or (check.at or "", check.id) >= (seen.at or "", seen.id):
            latest[check.key] = check
    return list(latest.values())


def is_passing(check: Check) -> bool:
    return check.state == "success" or (
        check.kind == "check_run" and check.state in PASSING_CHECK_RUN
    )


@dataclass(frozen=True)
class Dependency:
    repository: str  # owner/name: a dependency lives in its own repository
    number: int
    state: str  # "open" | "closed" | "merged" | "unknown"
    merged: bool
    satisfied: bool
    state_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "number": self.number,
            "state": self.state,
            "state_reason": self.state_reason,
            "merged": self.merged,
            "satisfied": self.satisfied,
        }


SATISFYING_REASONS = (None, "completed")
"""A closed issue is done when closed as completed (or with no reason: old issues). `not_planned`
and `duplicate` are not done: depend on the original instead."""


def unknown_dependency(repository: str, number: int) -> Dependency:
    return Dependency(repository, number, "unknown", False, False)


@dataclass(frozen=True)
class RequiredCheck:
    context: str
    app_id: int | None = None  # None (or -1): any app may report it
    source: str = "branch protection"  # or "rulesets"

    @property
    def label(self) -> str:
        return self.context if self.app_id in (None, -1) else f"{self.context} (app {self.app_id})"

    def met_by(self, check: Check) -> bool:
        if check.name != self.context:
            return False
        return self.app_id in (None, -1) or (
            check.kind == "check_run" and check.app_id == self.app_id
        )


@dataclass
class RequiredChecks:
    checks: list[RequiredCheck] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)  # "branch protection", "rulesets"


class Forge(Protocol):
    repository: str  # owner/name

    def pulls_for_branch(self, branch: str) -> list[PullRequest]: ...

    def labelled_issues(
        self, label: str, milestone: str | None, limit: int
    ) -> tuple[list[Issue], bool]:
        """Open issues (pull requests left out) with the label, oldest first, at most `limit`
        (paging stops there); `True` when more were left."""
        ...

    def dependency(self, repository: str, number: int) -> Dependency:
        """Issue or pull request `number` of `repository`; `unknown` when it cannot be read."""
        ...

    def blocked_by(self, issue: Issue) -> list[Dependency]:
        """GitHub's native blocked-by list of `issue`, each item as GitHub returned it."""
        ...

    def reviews(self, number: int) -> list[Review]: ...

    def checks(self, sha: str) -> list[Check]: ...

    def required_checks(self, base: str) -> RequiredChecks:
        """What classic branch protection and the rulesets require on `base`."""
        ...

    def merge(self, number: int, *, sha: str, method: str) -> str | None:
        """Merge at exactly `sha`; returns the merge commit sha."""
        ...

    def pull(self, number: int) -> PullRequest: ...

    def ci_feedback(self, sha: str) -> CiReport:
        """The failed check runs (with output and up to 10 failure annotations) and failed
        statuses of `sha`, and what still runs there (SPEC 3.17)."""
        ...

    def review_feedback(self, number: int) -> list[FeedbackItem]:
        """Reviews `CHANGES_REQUESTED` or `COMMENTED` with a body, review comments and
        conversation comments of PR `number`, each with its author's association."""
        ...

    def settled_review_comments(self, number: int) -> set[int]:
        """Ids of PR `number`'s review comments in resolved or outdated threads."""
        ...

    def viewer(self) -> str | None:
        """The login the token speaks for (this tool's own identity), None when unknown."""
        ...


# -- configuration ------------------------------------------------------------------------------

NOT_CONFIGURED = "needs a GitHub repository: set GITHUB_REPOSITORY or an origin on GitHub"


# -- feedback (SPEC 3.17) -----------------------------------------------------------------------

FAILED_CONCLUSIONS = ("failure", "timed_out", "cancelled", "action_required", "startup_failure")
"""A completed check run with one of these conclusions failed (SPEC 3.17)."""


@dataclass(frozen=True)
class FeedbackItem:
    """One piece of feedback as GitHub reported it: a failed check run or status, a review, a
    review comment or a conversation comment. `body` is GitHub's text, untouched (hostile: the
    renderer fences, strips and bounds it); `key` names it in the ledger (SPEC 3.17)."""

    kind: str  # "check" | "status" | "review" | "review-comment" | "thread" | "comment"
    key: str
    url: str
    at: str | None
    body: str
    login: str | None = None  # None for CI: a check run or status speaks for its app or context
    association: str = "NONE"
    where: str = ""  # "path:line", or the check's name
    title: str = ""  # a check's conclusion and app, a review's state
    log: bool = False  # a log excerpt's bounds apply (check output), not a comment's
    excerpt: str | None = None  # an Actions job log's last lines (hostile, like `body`)
    log_note: str = ""  # the tool's own words on that log: where it is saved, or why it is not
    reply_to: int | None = None  # a review comment's `in_reply_to_id`: its thread's first comment
    parts: tuple[FeedbackItem, ...] = ()  # a review thread's comments, oldest first

    @property
    def ci(self) -> bool:
        return self.kind in ("check", "status")


@dataclass(frozen=True)
class CiReport:
    """What CI says about one head: the failures, and whether anything still runs."""

    failures: list[FeedbackItem]
    running: list[str]  # names of checks queued or in progress (statuses: pending)
