"""What unitmgr needs from a forge (GitHub), as plain values and one small interface.

The lifecycle code (intake, admission, merge, dismantle's proof) depends on `Forge`, never on
PyGithub; `unitmgr.forge_github` is the real adapter and holds the only retry policy. Nothing here
imports `github`.
"""

from __future__ import annotations

import os
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from registry.errors import StateError


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


@dataclass(frozen=True)
class Review:
    user: str
    state: str  # APPROVED | CHANGES_REQUESTED | COMMENTED | PENDING | DISMISSED
    commit_id: str | None
    submitted_at: str | None


@dataclass(frozen=True)
class Check:
    name: str
    kind: str  # "status" | "check_run"
    state: str  # status: success/failure/error/pending; check run: its conclusion or status
    at: str | None


@dataclass(frozen=True)
class Dependency:
    number: int
    state: str  # "open" | "closed" | "merged" | "unknown"
    merged: bool
    satisfied: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "state": self.state,
            "merged": self.merged,
            "satisfied": self.satisfied,
        }


@dataclass
class RequiredChecks:
    contexts: list[str] = field(default_factory=list)
    readable: bool = True
    why: str | None = None


class Forge(Protocol):
    repository: str  # owner/name

    def pulls_for_branch(self, branch: str) -> list[PullRequest]: ...

    def labelled_issues(
        self, label: str, milestone: str | None, limit: int
    ) -> tuple[list[Issue], bool]:
        """Open issues (pull requests left out) with the label; `True` when `limit` was hit."""
        ...

    def dependency(self, number: int) -> Dependency: ...

    def blocked_by(self, number: int) -> list[int]: ...

    def reviews(self, number: int) -> list[Review]: ...

    def checks(self, sha: str) -> list[Check]: ...

    def required_checks(self, base: str) -> RequiredChecks: ...

    def merge(self, number: int, *, sha: str, method: str) -> str | None:
        """Merge at exactly `sha`; returns the merge commit sha."""
        ...

    def pull(self, number: int) -> PullRequest: ...


# -- configuration ------------------------------------------------------------------------------

_REMOTE = re.compile(
    r"^(?:https://(?:[^@/]+@)?(?P<h1>[^/:]+)(?::\d+)?/|ssh://(?:[^@/]+@)?(?P<h2>[^/:]+)(?::\d+)?/"
    r"|[^@:/\s]+@(?P<h3>[^:/\s]+):)"
    r"(?P<owner>[A-Za-z0-9_.-]+)/(?P<name>[A-Za-z0-9_.-]+?)(?:\.git)?/?$"
)


def github_hosts() -> set[str]:
    """github.com, plus the host of `GITHUB_API_URL` (GitHub Enterprise) when set."""
    hosts = {"github.com"}
    api = urllib.parse.urlsplit(os.environ.get("GITHUB_API_URL", "").strip())
    if api.hostname:
        hosts.add(api.hostname.lower().removeprefix("api."))
    return hosts


def repository_from(origin_url: str | None) -> str | None:
    """`owner/name` from an origin URL on GitHub (https://, ssh://, or user@host:), else None.

    An origin on another host (GitLab, Bitbucket, a plain git server) is not GitHub: reading
    a same-named repository there would count someone else's pull requests."""
    if not origin_url:
        return None
    match = _REMOTE.match(origin_url.strip())
    if match is None:
        return None
    host = (match.group("h1") or match.group("h2") or match.group("h3")).lower()
    if host not in github_hosts():
        return None
    return f"{match.group('owner')}/{match.group('name')}"


def configured_repository(read_origin_url: Callable[[], str | None]) -> str | None:
    """`GITHUB_REPOSITORY`, else the origin's repository on GitHub (read only when needed)."""
    explicit = os.environ.get("GITHUB_REPOSITORY", "").strip()
    if explicit:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", explicit):
            raise StateError(
                "github-not-configured", f"GITHUB_REPOSITORY must be owner/name, got {explicit!r}"
            )
        return explicit
    return repository_from(read_origin_url())


NOT_CONFIGURED = "needs a GitHub repository: set GITHUB_REPOSITORY or an origin on GitHub"
