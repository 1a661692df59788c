"""The GitHub forge: PyGithub underneath, one retry layer (tenacity) on top (SPEC 5).

Configuration: the token from `GH_TOKEN` or `GITHUB_TOKEN` (else `gh auth token` when gh is
installed); the API base from `GITHUB_API_URL` (GitHub Enterprise, and the tests' loopback server);
the repository from `GITHUB_REPOSITORY` or the `origin` URL. The client is built with PyGithub's
own retry and pacing off (`retry=None`, `seconds_between_requests=None`,
`seconds_between_writes=None`), so this module's policy is the only one: 5xx, 429, secondary and
primary rate limits, connection errors and timeouts are retried, waiting `Retry-After`, else
until `X-RateLimit-Reset`, else exponentially from 1 s, until the next wait would end more than
`UNITMGR_GITHUB_RETRY_SECONDS` (default 60) after the first attempt: then exit 75,
`retryable: true`. A list is walked page by page (`Link` headers) inside one retry (PyGithub's
lists are lazy, so the retry must wrap the iteration, not the call that returns it), and stops
once it has what was asked for. Branch names are percent-encoded into paths; dependencies are read
in their own repository.

`import github` costs ~230 ms: it happens only when a command actually talks to GitHub.

Over ~400 lines on purpose: it is the one adapter that touches PyGithub (and the one place the
retry policy lives, SPEC 5); the Forge Protocol it implements is unitmgr/forge.py.
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from collections.abc import Callable

from registry import light_dataclass as dataclasses
from registry.errors import RetryableError, Rewrite, StateError
from registry.redact import gh_auth_token
from registry.timeutil import seconds_from_env
from unitmgr.forge import (
    FAILED_CONCLUSIONS,
    SATISFYING_REASONS,
    Check,
    CiReport,
    Dependency,
    FeedbackItem,
    Issue,
    PullRequest,
    RequiredCheck,
    RequiredChecks,
    Review,
    unknown_dependency,
)
from unitmgr.workspace import Workspace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, TypeVar

    from unitmgr.feedback_store import EtagCache

if TYPE_CHECKING:
    T = TypeVar("T")
REVIEW_THREADS = """
query($owner: String!, $name: String!, $number: Int!, $cursor: String) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      reviewThreads(first: 100, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes { isResolved isOutdated comments(first: 100) { nodes { databaseId } } }
      }
    }
  }
}
"""
PER_PAGE = 100
MAX_PAGES = 50


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
            next_step="GH_TOKEN=… (a token that can read it), GITHUB_REPOSITORY and GITHUB_API_URL",
        )
        self.status = status
        self.message = message  # GitHub's own words: a 405 has many causes


def open_forge(workspace: Workspace) -> GitHubForge | None:
    """The repository's forge, or None when GitHub is not configured for it (the callers that
    do not need this module otherwise use unitmgr/github_remote.py's, which imports it only
    for a repository on GitHub)."""
    from unitmgr import github_remote

    return github_remote.open_forge(workspace)


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
        # Set by `unit feedback`: its GETs become conditional (SPEC 7: an idle poll costs 304s).
        self.cache: EtagCache | None = None
        # Set by `unit feedback`: where a failed Actions job's log is saved (None: not read).
        self.logs: Path | None = None

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
                next_step=f"sleep 60 && UNITMGR_GITHUB_RETRY_SECONDS={int(bound) * 2 + 60} unit …",
                next_command=Rewrite(
                    environment={"UNITMGR_GITHUB_RETRY_SECONDS": str(int(bound) * 2 + 60)}
                ),
            ) from None

    def _fetch(self, url: str, parameters: dict[str, Any] | None) -> tuple[dict[str, Any], Any]:
        """One GET: conditional when a cache is set and holds an ETag for it (a 304 answers
        with the cached copy), else plain."""
        if self.cache is None:
            return self.requester.requestJsonAndCheck("GET", url, parameters=parameters)
        import json

        from unitmgr.feedback_store import cache_key

        key = cache_key(url, parameters)
        cached = self.cache.lookup(key)
        headers = {"If-None-Match": str(cached["etag"])} if cached else None
        self.cache.conditional += bool(cached)
        status, answered, output = self.requester.requestJson(
            "GET", url, dict(parameters) if parameters else None, headers
        )
        if status == 304 and cached is not None:
            self.cache.not_modified += 1
            return ({"link": cached["link"]} if cached["link"] else {}), cached["data"]
        try:
            data = json.loads(output) if output else None
        except ValueError:
            data = {"data": output}
        if status >= 400:
            raise self.requester.createException(
                status, answered, data if isinstance(data, dict) else {}
            )
        self.cache.store(key, _header(answered, "etag"), _header(answered, "link"), data)
        return answered, data

    def _get(self, path: str, parameters: dict[str, Any] | None = None) -> Any:
        def request() -> Any:
            _, data = self._fetch(path, parameters)
            return data

        return self._retried(f"GET {path}", request)

    def _list(
        self,
        path: str,
        parameters: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        limit: int | None = None,
        keep: Callable[[dict[str, Any]], bool] | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """The items of a paginated list that `keep` accepts (one retry around the whole walk),
        and whether more were left. With a `limit`, paging stops as soon as it has enough: the
        flag is then True when the page held more or a next page exists."""

        def walk() -> tuple[list[dict[str, Any]], bool]:
            items: list[dict[str, Any]] = []
            url: str | None = path
            params: dict[str, Any] | None = {**(parameters or {}), "per_page": PER_PAGE}
            for _ in range(MAX_PAGES):
                assert url is not None
                headers, data = self._fetch(url, params)
                page = data.get(key, []) if key and isinstance(data, dict) else data
                for item in page or []:
                    if not isinstance(item, dict) or (keep is not None and not keep(item)):
                        continue
                    if limit is not None and len(items) >= limit:
                        return items, True
                    items.append(item)
                url = _next_link(_header(headers, "link"))
                params = None  # the next link carries them
                if url is None:
                    return items, False
                if limit is not None and len(items) >= limit:
                    return items, True
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
        # Oldest first: the queue is worked in the order it was filed (GitHub lists newest
        # first unless told otherwise).
        parameters: dict[str, Any] = {
            "state": "open",
            "labels": label,
            "sort": "created",
            "direction": "asc",
        }
        if milestone is not None:
            parameters["milestone"] = self._milestone_number(milestone)
        items, capped = self._list(
            f"{self.prefix}/issues",
            parameters,
            limit=limit,
            keep=lambda item: not _is_pull_request(item),
        )
        return [_issue(item, self.repository) for item in items], capped

    def _milestone_number(self, milestone: str) -> str:
        if milestone.isdigit():
            return milestone
        items, _ = self._list(f"{self.prefix}/milestones", {"state": "all"})
        for item in items:
            if item.get("title") == milestone:
                return str(item.get("number"))
        raise StateError(
            "no-such-milestone",
            f"no milestone titled {milestone!r} in {self.repository}",
            next_step="--milestone: a milestone's exact title, or its number",
        )

    def dependency(self, repository: str, number: int) -> Dependency:
        if any(part in (".", "..") for part in repository.split("/")):
            # An issue body is anyone's text: `../..#2` names no repository, and must not
            # become a request elsewhere on the API host.
            return unknown_dependency(repository, number)
        try:
            raw = self._get(f"/repos/{repository}/issues/{number}")
        except GitHubRefused:  # not found, or a repository this token cannot read
            return unknown_dependency(repository, number)
        return _dependency(raw, repository)

    def blocked_by(self, issue: Issue) -> list[Dependency]:
        if issue.blocked_by_count == 0:  # the issue itself says it has no blockers
            return []
        try:
            items, _ = self._list(f"{self.prefix}/issues/{issue.number}/dependencies/blocked_by")
        except GitHubRefused as error:
            if error.status in (404, 410):
                return []
            raise
        # Full issue objects, each with its own repository and state: used as returned, never
        # re-read by number (the same number in this repository is another issue).
        return [
            _dependency(item, self.repository)
            for item in items
            if isinstance(item.get("number"), int)
        ]

    def reviews(self, number: int) -> list[Review]:
        items, _ = self._list(f"{self.prefix}/pulls/{number}/reviews")
        return [
            Review(
                id=int(item.get("id") or 0),
                user=_login(item.get("user")),
                state=str(item.get("state")),
                commit_id=item.get("commit_id"),
                submitted_at=item.get("submitted_at"),
                author_association=str(item.get("author_association") or "NONE"),
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
                id=int(item.get("id") or 0),
            )
            for item in statuses
        ]
        for run in runs:
            status = str(run.get("status"))
            app = run.get("app") or {}
            found.append(
                Check(
                    name=str(run.get("name")),
                    kind="check_run",
                    state=str(run.get("conclusion")) if status == "completed" else status,
                    at=run.get("completed_at") or run.get("started_at"),
                    id=int(run.get("id") or 0),
                    app_id=app.get("id"),
                    app=app.get("slug") or app.get("name"),
                    suite_id=(run.get("check_suite") or {}).get("id"),
                )
            )
        return found

    def required_checks(self, base: str) -> RequiredChecks:
        branch = urllib.parse.quote(base, safe="")  # `release/1.x`, `fix#2` are one path segment
        required = RequiredChecks()
        classic = self._protection_checks(branch)
        rules = self._ruleset_checks(branch)
        for source, found in (("branch protection", classic), ("rulesets", rules)):
            if found is None:
                required.unreadable.append(source)
            else:
                required.checks += [check for check in found if check not in required.checks]
        return required

    def _protection_checks(self, branch: str) -> list[RequiredCheck] | None:
        """Classic protection's required checks; None when it cannot be read (403/404)."""
        try:
            policy = self._get(f"{self.prefix}/branches/{branch}/protection/required_status_checks")
            return _policy_checks(policy, "branch protection")
        except GitHubRefused as error:
            if error.status not in (403, 404):
                raise
        # 404 is also "not protected", and reading protection needs admin: the branch itself
        # says whether it is protected, and (to anyone who can read it) what it requires.
        try:
            found = self._get(f"{self.prefix}/branches/{branch}")
        except GitHubRefused as error:
            if error.status not in (403, 404):
                raise
            return None
        if not found.get("protected"):
            return []
        policy = (found.get("protection") or {}).get("required_status_checks")
        if not isinstance(policy, dict):
            return None
        return _policy_checks(policy, "branch protection")

    def _ruleset_checks(self, branch: str) -> list[RequiredCheck] | None:
        """The `required_status_checks` rules of every ruleset on the branch; None when the
        rules cannot be read (403/404, e.g. a server without rulesets)."""
        try:
            rules, _ = self._list(f"{self.prefix}/rules/branches/{branch}")
        except GitHubRefused as error:
            if error.status not in (403, 404):
                raise
            return None
        found: list[RequiredCheck] = []
        for rule in rules:
            if rule.get("type") != "required_status_checks":
                continue
            for check in (rule.get("parameters") or {}).get("required_status_checks") or []:
                if isinstance(check, dict) and check.get("context"):
                    found.append(
                        RequiredCheck(
                            str(check["context"]), check.get("integration_id"), "rulesets"
                        )
                    )
        return found

    # -- feedback (SPEC 3.17) -------------------------------------------------------------------

    def ci_feedback(self, sha: str) -> CiReport:
        status, _ = self._list(f"{self.prefix}/commits/{sha}/status", key="statuses")
        runs, _ = self._list(f"{self.prefix}/commits/{sha}/check-runs", key="check_runs")
        failures: list[FeedbackItem] = []
        running: list[str] = []
        for item in status:
            context, state = str(item.get("context")), str(item.get("state"))
            if state == "pending":
                running.append(context)
            elif state in ("failure", "error"):
                failures.append(
                    FeedbackItem(
                        kind="status",
                        key=f"status:{sha}:{context}:{state}",
                        url=str(item.get("target_url") or ""),
                        at=item.get("updated_at"),
                        body=str(item.get("description") or ""),
                        where=context,
                        title=state,
                    )
                )
        for run in runs:
            name = str(run.get("name"))
            if run.get("status") != "completed":
                running.append(name)
            elif run.get("conclusion") in FAILED_CONCLUSIONS:
                failures.append(self._failed_run(sha, run))
        return CiReport(failures, running)

    def _failed_run(self, sha: str, run: dict[str, Any]) -> FeedbackItem:
        output = run.get("output") or {}
        parts = [str(output.get(part)) for part in ("title", "summary") if output.get(part)]
        if int(output.get("annotations_count") or 0) > 0:
            found, _ = self._list(
                f"{self.prefix}/check-runs/{int(run['id'])}/annotations",
                limit=10,
                keep=lambda note: note.get("annotation_level") == "failure",
            )
            parts += [
                f"{note.get('path')}:{note.get('start_line')} {note.get('message') or ''}"
                for note in found
            ]
        app = run.get("app") or {}
        excerpt, note = None, ""
        if self.logs is not None and app.get("slug") == "github-actions":
            excerpt, note = self._job_log(int(run.get("id") or 0))
        return FeedbackItem(
            kind="check",
            key=f"check:{sha}:{int(run.get('id') or 0)}",
            url=str(run.get("html_url") or ""),
            at=run.get("completed_at"),
            body="\n".join(parts),
            where=str(run.get("name")),
            title=f"{run.get('conclusion')} by {app.get('slug') or app.get('name') or 'an app'}",
            log=True,
            excerpt=excerpt,
            log_note=note,
        )

    def _job_log(self, job_id: int) -> tuple[str | None, str]:
        """An Actions job's log (a check run's id is its job's): the route answers 302 to a
        short-lived URL, followed and streamed into the unit's log directory; then its excerpt.
        Gone (404, 410: logs expire) or unreadable: no excerpt, and a note saying so."""
        # `tail` holds the stream's last bytes, so `partial` is whether it starts mid-line.
        from requests import exceptions as http

        from unitmgr.feedback import LOG_BYTES, LOG_LINES
        from unitmgr.feedback_store import (
            log_excerpt,
            read_log_summary,
            save_log,
            write_log_summary,
        )

        assert self.logs is not None
        url = f"{self.prefix}/actions/jobs/{job_id}/logs"
        path = self.logs / f"{job_id}.log"
        summary = self.logs / f"{job_id}.json"
        earlier = read_log_summary(summary)
        if earlier is not None:  # read once: an idle poll fetches no log again
            return earlier

        def fetch() -> tuple[int, bool, bytes]:
            try:
                _, _, chunks = self.requester.getStream(url, chunk_size=65536)
                return save_log(path, chunks)
            except http.HTTPError as error:
                answer = error.response
                status = answer.status_code if answer is not None else 0
                headers = dict(answer.headers) if answer is not None else {}
                raise self.requester.createException(status, headers, {}) from None

        try:
            kept, cut, tail = self._retried(f"GET {url}", fetch)
        except GitHubRefused as error:
            if error.status not in (404, 410):
                return None, f"the job log could not be read (HTTP {error.status})"
            gone = f"the job log is gone (HTTP {error.status}): only the output is quoted"
            write_log_summary(summary, None, gone)
            return None, gone
        note = f"job log, last lines (the whole log, {kept} bytes, is saved at {path}"
        note += ", cut at 10 MiB)" if cut else ")"
        partial = kept > len(tail) or cut
        excerpt = log_excerpt(tail, partial=partial, max_lines=LOG_LINES, max_bytes=LOG_BYTES)
        write_log_summary(summary, excerpt, note)
        return excerpt, note

    def review_feedback(self, number: int) -> list[FeedbackItem]:
        reviews, _ = self._list(f"{self.prefix}/pulls/{number}/reviews")
        found = [
            _feedback("review", f"review:{int(item['id'])}", item, title=str(item.get("state")))
            for item in reviews
            if item.get("state") in ("CHANGES_REQUESTED", "COMMENTED")
            and str(item.get("body") or "").strip()
        ]
        comments, _ = self._list(f"{self.prefix}/pulls/{number}/comments")
        for item in comments:
            line = item.get("line") or item.get("original_line")
            where = f"{item.get('path')}:{line}" if line else str(item.get("path") or "")
            key = f"review-comment:{int(item['id'])}"
            comment = _feedback("review-comment", key, item, where=where)
            reply_to = item.get("in_reply_to_id")
            if isinstance(reply_to, int) and not isinstance(reply_to, bool):
                comment = dataclasses.replace(comment, reply_to=reply_to)
            found.append(comment)
        conversation, _ = self._list(f"{self.prefix}/issues/{number}/comments")
        found += [_feedback("comment", f"comment:{int(item['id'])}", item) for item in conversation]
        return found

    def settled_review_comments(self, number: int) -> set[int]:
        """The ids of review comments in threads that are resolved or outdated (GraphQL
        `reviewThreads`: REST has no resolved state), at most 50 pages of 100 threads."""
        owner, name = self.repository.split("/", 1)
        settled: set[int] = set()
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            variables = {"owner": owner, "name": name, "number": number, "cursor": cursor}

            def request(variables: dict[str, Any] = variables) -> Any:
                return self.requester.graphql_query(REVIEW_THREADS, variables)[1]

            data = self._retried("POST /graphql reviewThreads", request)
            pull = ((data.get("data") or {}).get("repository") or {}).get("pullRequest") or {}
            threads = pull.get("reviewThreads") or {}
            for thread in threads.get("nodes") or []:
                if isinstance(thread, dict) and (
                    thread.get("isResolved") or thread.get("isOutdated")
                ):
                    for comment in (thread.get("comments") or {}).get("nodes") or []:
                        if isinstance(comment, dict) and isinstance(comment.get("databaseId"), int):
                            settled.add(comment["databaseId"])
            page = threads.get("pageInfo") or {}
            cursor = page.get("endCursor")
            if not page.get("hasNextPage") or not isinstance(cursor, str):
                break
        return settled

    def viewer(self) -> str | None:
        try:
            return _login(self._get("/user"))
        except GitHubRefused:  # a token that may not read its own user: no identity to skip
            return None

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


def _feedback(
    kind: str, key: str, item: dict[str, Any], *, where: str = "", title: str = ""
) -> FeedbackItem:
    return FeedbackItem(
        kind=kind,
        key=key,
        url=str(item.get("html_url") or ""),
        at=item.get("updated_at") or item.get("submitted_at") or item.get("created_at"),
        body=str(item.get("body") or ""),
        login=_login(item.get("user")),
        association=str(item.get("author_association") or "NONE"),
        where=where,
        title=title,
    )


def _is_pull_request(item: dict[str, Any]) -> bool:
    return item.get("pull_request") is not None


def _login(user: Any) -> str | None:
    return str(user["login"]) if isinstance(user, dict) and user.get("login") else None


def _repository_of(item: dict[str, Any]) -> str | None:
    """`owner/name` from an issue's `repository_url` (`…/repos/owner/name`)."""
    match = re.search(r"/repos/([^/]+/[^/]+?)/?$", str(item.get("repository_url") or ""))
    return match.group(1) if match else None


def _dependency(item: dict[str, Any], fallback_repository: str) -> Dependency:
    repository = _repository_of(item) or fallback_repository
    number = int(item["number"])
    state = str(item.get("state"))
    if _is_pull_request(item):
        # The issue view of a pull request carries `merged_at`: no second request.
        merged = bool((item.get("pull_request") or {}).get("merged_at"))
        return Dependency(repository, number, "merged" if merged else state, merged, merged)
    reason = item.get("state_reason")
    satisfied = state == "closed" and reason in SATISFYING_REASONS
    return Dependency(repository, number, state, False, satisfied, reason)


def _policy_checks(policy: dict[str, Any], source: str) -> list[RequiredCheck]:
    """A status-check policy: `checks` carry an `app_id`; `contexts` repeats their names (and
    older servers send only `contexts`)."""
    found = [
        RequiredCheck(str(check["context"]), check.get("app_id"), source)
        for check in policy.get("checks") or []
        if isinstance(check, dict) and check.get("context")
    ]
    named = {check.context for check in found}
    found += [
        RequiredCheck(str(context), None, source)
        for context in policy.get("contexts") or []
        if context not in named
    ]
    return found


def _issue(item: dict[str, Any], fallback_repository: str) -> Issue:
    milestone = item.get("milestone") or None
    summary = item.get("issue_dependencies_summary")
    blocked_by_count = summary.get("total_blocked_by") if isinstance(summary, dict) else None
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
        is_pull_request=_is_pull_request(item),
        repository=_repository_of(item) or fallback_repository,
        blocked_by_count=blocked_by_count if isinstance(blocked_by_count, int) else None,
    )
