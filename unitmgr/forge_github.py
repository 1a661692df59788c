"""The GitHub forge: PyGithub underneath, one retry layer (tenacity) on top (SPEC 5).

Configuration: the token from `GH_TOKEN` or `GITHUB_TOKEN` (else `gh auth token` when gh is
installed); the API base from `GITHUB_API_URL` (GitHub Enterprise, and the tests' loopback server);
the repository from `GITHUB_REPOSITORY` or the `origin` URL. The client is built with PyGithub's
own retry and pacing off (`retry=None`, `seconds_between_requests=None`,
`seconds_between_writes=None`), so this module's policy is the only one: 5xx, 429, secondary and
primary rate limits, connection errors and timeouts are retried, waiting `Retry-After`, else
until `X-RateLimit-Reset`, else exponentially from 1 s, until the next wait would end more than
`UNITMGR_GITHUB_RETRY_SECONDS` (default 60) after the first attempt: then exit 75,
`retryable: true`. A list is fetched whole inside one retry (PyGithub's lists are lazy, so the
retry must wrap the iteration, not the call that returns it).

`import github` costs ~230 ms: it happens only when a command actually talks to GitHub.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any, TypeVar

from registry.errors import RetryableError, StateError
from registry.redact import gh_auth_token
from registry.timeutil import seconds_from_env
from unitmgr import git
from unitmgr.forge import (
    Check,
    Dependency,
    Issue,
    PullRequest,
    RequiredChecks,
    Review,
    configured_repository,
)
from unitmgr.workspace import Workspace

T = TypeVar("T")
PER_PAGE = 100
MAX_PAGES = 50
NOT_PLANNED = "not_planned"


def github_token() -> str | None:
    for variable in ("GH_TOKEN", "GITHUB_TOKEN"):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return gh_auth_token()


class GitHubRefused(StateError):
    """GitHub answered with an error that waiting will not fix (401, 403, 404, 422, ...)."""

    def __init__(self, what: str, status: int | None, message: str) -> None:
        super().__init__(
            "github-refused",
            f"GitHub refused {what}: HTTP {status}" + (f" ({message})" if message else ""),
            detail={"status": status},
            next_step="check GH_TOKEN / GITHUB_TOKEN, GITHUB_REPOSITORY and GITHUB_API_URL",
        )
        self.status = status


def open_forge(workspace: Workspace) -> GitHubForge | None:
    """The repository's forge, or None when GitHub is not configured for it."""
    repository = configured_repository(lambda: git.remote_url(workspace.toplevel))
    return GitHubForge(repository) if repository else None


def _header(headers: Any, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if str(key).lower() == name:
            return str(value)
    return None


class GitHubForge:
    def __init__(self, repository: str) -> None:
        from github import Auth, Github

        token = github_token()
        self.repository = repository
        self.client = Github(
            auth=Auth.Token(token) if token else None,
            base_url=os.environ.get("GITHUB_API_URL", "").strip() or "https://api.github.com",
            retry=None,
            timeout=10,
            seconds_between_requests=None,
            seconds_between_writes=None,
        )
        self.requester = self.client.requester
        self.prefix = f"/repos/{repository}"

    # -- the retry layer -----------------------------------------------------------------------

    def _transient(self, error: BaseException) -> bool:
        from github import GithubException
        from requests import exceptions as http

        if isinstance(error, http.ConnectionError | http.Timeout):
            return True
        if isinstance(error, GithubException):
            status = error.status or 0
            if status >= 500 or status == 429:
                return True
            if status == 403 and (
                _header(error.headers, "retry-after") is not None
                or _header(error.headers, "x-ratelimit-remaining") == "0"
                or "rate limit" in str(error.data).lower()
            ):
                return True
        return False

    @staticmethod
    def _wait_seconds(error: BaseException | None, attempt: int) -> float:
        headers = getattr(error, "headers", None)
        retry_after = _header(headers, "retry-after")
        if retry_after is not None:
            try:
                return max(0.0, float(retry_after))
            except ValueError:
                pass
        reset = _header(headers, "x-ratelimit-reset")
        if reset is not None and _header(headers, "x-ratelimit-remaining") == "0":
            try:
                return max(0.0, float(reset) - time.time())
            except ValueError:
                pass
        return float(2 ** (attempt - 1))  # 1, 2, 4, ... seconds

    def _retried(self, what: str, action: Callable[[], T]) -> T:
        from tenacity import RetryCallState, Retrying, retry_if_exception

        bound = seconds_from_env("UNITMGR_GITHUB_RETRY_SECONDS", 60.0, allow_zero=True)

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            return self._wait_seconds(error, state.attempt_number)

        def stop(state: RetryCallState) -> bool:
            return (state.seconds_since_start or 0.0) + wait(state) > bound

        retrying = Retrying(
            retry=retry_if_exception(self._transient), wait=wait, stop=stop, reraise=True
        )
        from github import GithubException

        try:
            return retrying(action)
        except Exception as error:
            if not self._transient(error):
                if isinstance(error, GithubException):
                    data = error.data if isinstance(error.data, dict) else {}
                    raise GitHubRefused(
                        what, error.status, str(data.get("message") or "")
                    ) from None
                raise
            raise RetryableError(
                "github-unavailable",
                f"GitHub did not answer {what} within the retry bound ({int(bound)}s): "
                f"{_describe(error)}",
                detail={"retry_seconds": bound},
                next_step="try again later (UNITMGR_GITHUB_RETRY_SECONDS raises the bound)",
            ) from None

    def _get(self, path: str, parameters: dict[str, Any] | None = None) -> Any:
        def request() -> Any:
            _, data = self.requester.requestJsonAndCheck("GET", path, parameters=parameters)
            return data

        return self._retried(f"GET {path}", request)

    def _list(
        self,
        path: str,
        parameters: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        limit: int | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Every item of a paginated list (one retry around the whole walk); capped flag."""

        def walk() -> tuple[list[dict[str, Any]], bool]:
            items: list[dict[str, Any]] = []
            url: str | None = path
            params: dict[str, Any] | None = {**(parameters or {}), "per_page": PER_PAGE}
            for _ in range(MAX_PAGES):
                assert url is not None
                headers, data = self.requester.requestJsonAndCheck("GET", url, parameters=params)
                page = data.get(key, []) if key and isinstance(data, dict) else data
                items.extend(item for item in (page or []) if isinstance(item, dict))
                if limit is not None and len(items) >= limit:
                    return items[:limit], True
                url = _next_link(_header(headers, "link"))
                params = None  # the next link carries them
                if url is None:
                    return items, False
            return items, True

        return self._retried(f"GET {path}", walk)

    # -- reads ---------------------------------------------------------------------------------

    def pulls_for_branch(self, branch: str) -> list[PullRequest]:
        owner = self.repository.split("/")[0]
        items, _ = self._list(f"{self.prefix}/pulls", {"state": "all", "head": f"{owner}:{branch}"})
        return [_pull(item) for item in items if (item.get("head") or {}).get("ref") == branch]

    def pull(self, number: int) -> PullRequest:
        return _pull(self._get(f"{self.prefix}/pulls/{number}"))

    def labelled_issues(
        self, label: str, milestone: str | None, limit: int
    ) -> tuple[list[Issue], bool]:
        parameters: dict[str, Any] = {"state": "open", "labels": label}
        if milestone is not None:
            parameters["milestone"] = self._milestone_number(milestone)
        issues: list[Issue] = []
        capped = False
        page_items, more = self._list(f"{self.prefix}/issues", parameters, limit=None)
        for item in page_items:
            issue = _issue(item)
            if issue.is_pull_request:
                continue
            if len(issues) == limit:
                capped = True
                break
            issues.append(issue)
        return issues, capped or more

    def _milestone_number(self, milestone: str) -> str:
        if milestone.isdigit():
            return milestone
        items, _ = self._list(f"{self.prefix}/milestones", {"state": "all"})
        for item in items:
            if item.get("title") == milestone:
                return str(item.get("number"))
        raise StateError(
            "no-such-milestone", f"no milestone titled {milestone!r} in {self.repository}"
        )

    def dependency(self, number: int) -> Dependency:
        try:
            raw = self._get(f"{self.prefix}/issues/{number}")
        except GitHubRefused:
            return Dependency(number, "unknown", False, False)
        issue = _issue(raw)
        if issue.is_pull_request:
            # The issue view of a pull request carries `merged_at`: no second request.
            merged = bool((raw.get("pull_request") or {}).get("merged_at"))
            return Dependency(number, "merged" if merged else issue.state, merged, merged)
        satisfied = issue.state == "closed" and issue.state_reason != NOT_PLANNED
        return Dependency(number, issue.state, False, satisfied)

    def blocked_by(self, number: int) -> list[int]:
        try:
            items, _ = self._list(f"{self.prefix}/issues/{number}/dependencies/blocked_by")
        except GitHubRefused as error:
            if error.status in (404, 410):
                return []
            raise
        return [int(item["number"]) for item in items if isinstance(item.get("number"), int)]

    def reviews(self, number: int) -> list[Review]:
        items, _ = self._list(f"{self.prefix}/pulls/{number}/reviews")
        return [
            Review(
                user=str((item.get("user") or {}).get("login")),
                state=str(item.get("state")),
                commit_id=item.get("commit_id"),
                submitted_at=item.get("submitted_at"),
            )
            for item in items
        ]

    def checks(self, sha: str) -> list[Check]:
        statuses, _ = self._list(f"{self.prefix}/commits/{sha}/status", key="statuses")
        runs, _ = self._list(f"{self.prefix}/commits/{sha}/check-runs", key="check_runs")
        found = [
            Check(
                name=str(item.get("context")),
                kind="status",
                state=str(item.get("state")),
                at=item.get("updated_at") or item.get("created_at"),
            )
            for item in statuses
        ]
        for run in runs:
            status = str(run.get("status"))
            state = str(run.get("conclusion")) if status == "completed" else status
            found.append(
                Check(
                    name=str(run.get("name")),
                    kind="check_run",
                    state=state,
                    at=run.get("completed_at") or run.get("started_at"),
                )
            )
        return found

    def required_checks(self, base: str) -> RequiredChecks:
        try:
            data = self._get(f"{self.prefix}/branches/{base}/protection/required_status_checks")
            contexts = list(data.get("contexts") or [])
            contexts += [c["context"] for c in data.get("checks") or [] if c.get("context")]
            return RequiredChecks(sorted(set(contexts)))
        except GitHubRefused as error:
            if error.status not in (403, 404):
                raise
        try:
            branch = self._get(f"{self.prefix}/branches/{base}")
        except GitHubRefused:
            return RequiredChecks(
                [], readable=False, why="branch protection cannot be read (403/404)"
            )
        protection = branch.get("protection") or {}
        required = protection.get("required_status_checks") or {}
        contexts = list(required.get("contexts") or [])
        if branch.get("protected") and not contexts and not required:
            return RequiredChecks(
                [], readable=False, why="branch protection cannot be read (403/404)"
            )
        return RequiredChecks(sorted(set(contexts)))

    # -- the one write -------------------------------------------------------------------------

    def merge(self, number: int, *, sha: str, method: str) -> str | None:
        def request() -> Any:
            _, data = self.requester.requestJsonAndCheck(
                "PUT",
                f"{self.prefix}/pulls/{number}/merge",
                input={"sha": sha, "merge_method": method},
            )
            return data

        data = self._retried(f"PUT pulls/{number}/merge", request)
        return data.get("sha") if isinstance(data, dict) else None


def _next_link(link: str | None) -> str | None:
    if not link:
        return None
    for part in link.split(","):
        match = re.search(r'<([^>]+)>\s*;\s*rel="next"', part)
        if match:
            return match.group(1)
    return None


def _describe(error: BaseException) -> str:
    status = getattr(error, "status", None)
    return f"HTTP {status}" if status else type(error).__name__


def _pull(item: dict[str, Any]) -> PullRequest:
    head = item.get("head") or {}
    merged_at = item.get("merged_at")
    return PullRequest(
        number=int(item["number"]),
        url=str(item.get("html_url") or item.get("url") or ""),
        state="merged" if merged_at else str(item.get("state")),
        draft=bool(item.get("draft")),
        head_sha=str(head.get("sha")),
        head_ref=str(head.get("ref")),
        base=str((item.get("base") or {}).get("ref")),
        author=(item.get("user") or {}).get("login"),
        merged_at=merged_at,
        merge_commit_sha=item.get("merge_commit_sha"),
    )


def _issue(item: dict[str, Any]) -> Issue:
    milestone = item.get("milestone") or None
    return Issue(
        number=int(item["number"]),
        title=str(item.get("title") or ""),
        url=str(item.get("html_url") or item.get("url") or ""),
        body=str(item.get("body") or ""),
        labels=[
            str(label.get("name")) for label in item.get("labels") or [] if isinstance(label, dict)
        ],
        milestone=str(milestone.get("title")) if isinstance(milestone, dict) else None,
        state=str(item.get("state")),
        state_reason=item.get("state_reason"),
        is_pull_request="pull_request" in item and item["pull_request"] is not None,
    )
