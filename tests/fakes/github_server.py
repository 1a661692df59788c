"""A stateful fake GitHub REST API, served over real HTTP by pytest-httpserver.

The real `unit` CLI reaches it through PyGithub (`GITHUB_API_URL`), exactly as it reaches
GitHub: nothing is patched. It answers as GitHub does — tests/test_github_schema.py validates its
responses against GitHub's own OpenAPI description (`@octokit/openapi`):

- full objects (users, repositories, apps, check suites, `author_association`,
  `repository_url`, `issue_dependencies_summary`), built by the helpers at the bottom;
- pagination with `per_page`/`page` and a `Link` header (`max_per_page` lowers GitHub's cap of
  100 so a test can cross a page boundary with a handful of items);
- issues and pull requests listed newest first unless `sort`/`direction` say otherwise, reviews
  oldest first, the combined status computed from the latest status per context, check runs
  filtered to the latest per (suite, name) unless `filter=all`;
- `[]` for an issue without blockers, a branch name as one path segment (an unencoded `/` or `#`
  in it is not found), issues of other repositories (`add_issue(repository=...)`) and
  repositories this token cannot read (`unreadable_repositories`: 404, as GitHub hides them);
- a merge that refuses a moved head (409), a method the repository does not allow (405 with
  GitHub's message) and a merged PR (405).

`fail(...)` injects error responses (500s, 429s with headers) ahead of real ones. Every answer is
kept in `exchanges` (method, decoded path, query, status, body) for the schema test.
"""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from werkzeug import Request, Response

NOW = "2026-11-29T09:00:00Z"
DOCS = "https://docs.github.com/rest"
APP_IDS = {"github-actions": 15368, "ci-bot": 4242, "other-ci": 7777}
WEB = "https://github.example"
NOT_ALLOWED = {
    "merge": "Merge commits are not allowed on this repository.",
    "squash": "Squash merges are not allowed on this repository.",
    "rebase": "Rebase merges are not allowed on this repository.",
}


REPOSITORY_ID = 42


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    remaining: int
    body: dict[str, Any]


@dataclass
class Exchange:
    method: str
    path: str  # decoded, without the /api/v3 prefix
    query: dict[str, list[str]]
    status: int
    body: Any
    headers: dict[str, str]
    request_body: Any = None
    raw_path: str = ""  # as sent: a percent-encoded `/` stays inside its segment


@dataclass
class FakeGitHub:
    base_url: str = ""
    repository: str = "acme/widgets"
    next_number: int = 1
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    foreign_issues: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    unreadable_repositories: set[str] = field(default_factory=set)
    milestones: list[dict[str, Any]] = field(default_factory=list)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # branch -> required contexts (names, or (name, app_id) pairs) | "forbidden"
    protection: dict[str, Any] = field(default_factory=dict)
    # branch -> required_status_checks rules' checks ((name, integration_id | None) pairs)
    rulesets: dict[str, list[tuple[str, int | None]]] = field(default_factory=dict)
    rulesets_readable: bool = True
    # issue -> blockers: a number in this repository, or (owner/name, number)
    blocked_by: dict[int, list[int | tuple[str, int]]] = field(default_factory=dict)
    dependency_summaries: bool = True  # older servers send no issue_dependencies_summary
    allowed_methods: set[str] = field(default_factory=lambda: {"merge", "squash", "rebase"})
    max_per_page: int = 100
    # GitHub names a list's later pages by the repository's id (`/repositories/42/…`), not its
    # name; the fake does so when this is set and serves those paths as the named ones
    links_by_id: bool = False
    by_id_requests: int = 0
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    move_head_on_merge: str | None = None  # a push lands between the gate check and the merge
    authorization: list[str | None] = field(default_factory=list)
    last_merge_method: str | None = None
    clock: int = 0
    # feedback (SPEC 3.17): PR number -> comments; check run id -> annotations; the token's user
    review_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    issue_comments: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    annotations: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    viewer: str = "lead-tool"
    # check run (= Actions job) id -> its log text, or the status its logs route answers
    # (404: never kept, 410: expired)
    job_logs: dict[int, str | int] = field(default_factory=dict)
    # review comment ids whose thread is resolved, or outdated (each review comment starts its
    # own thread here); GraphQL's `reviewThreads` is the only place GitHub says so
    resolved_threads: set[int] = field(default_factory=set)
    outdated_threads: set[int] = field(default_factory=set)
    # (method, path pattern, action): run once, when a matching request arrives (a push or a
    # merge that lands while the product is reading)
    hooks: list[tuple[str, re.Pattern[str], Any]] = field(default_factory=list)
    next_comment_id: int = 7000

    # -- setting up state --------------------------------------------------------------------

    def _number(self) -> int:
        number = self.next_number
        self.next_number += 1
        return number

    def _tick(self) -> str:
        """Creation times that grow with every object, so newest-first is well defined."""
        self.clock += 1
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1795942800 + self.clock))

    def add_issue(
        self,
        title: str,
        *,
        body: str = "",
        labels: tuple[str, ...] = ("ready",),
        state: str = "open",
        state_reason: str | None = None,
        milestone: int | None = None,
        repository: str | None = None,
        number: int | None = None,
    ) -> int:
        """An issue of this repository, or (with `repository` and `number`) of another one."""
        foreign = repository is not None and repository != self.repository
        if foreign:
            assert number is not None, "an issue of another repository needs its number"
        else:
            number = self._number()
        assert number is not None
        issue = {
            "number": number,
            "title": title,
            "body": body,
            "labels": list(labels),
            "state": state,
            "state_reason": state_reason,
            "milestone": milestone,
            "created_at": self._tick(),
            "author": "reporter",
        }
        if foreign:
            assert repository is not None
            self.foreign_issues[(repository, number)] = issue
        else:
            self.issues[number] = issue
        return number

    def add_milestone(self, title: str) -> int:
        number = len(self.milestones) + 1
        self.milestones.append(
            {"number": number, "title": title, "state": "open", "created_at": self._tick()}
        )
        return number

    def add_pull(
        self,
        branch: str,
        head_sha: str,
        *,
        base: str = "main",
        draft: bool = False,
        author: str = "executor-bot",
        state: str = "open",
        labels: tuple[str, ...] = (),
        merged_at: str | None = None,
    ) -> int:
        number = self._number()
        self.pulls[number] = {
            "number": number,
            "title": f"work on {branch}",
            "state": "closed" if state == "merged" else state,
            "draft": draft,
            "head_ref": branch,
            "head_sha": head_sha,
            "base": base,
            "author": author,
            # A merge happens now unless told otherwise: a unit counts a merged PR only when it
            # was merged after the unit was created.
            "merged_at": (merged_at or _now()) if state == "merged" else None,
            "merge_commit_sha": "f" * 40 if state == "merged" else None,
            "labels": list(labels),
            "created_at": self._tick(),
        }
        return number

    def review(
        self,
        number: int,
        user: str | None,
        state: str,
        commit_id: str,
        *,
        association: str = "COLLABORATOR",
        body: str = "",
    ) -> int:
        """A review; `user=None` is a deleted account (GitHub answers `user: null`)."""
        reviews = self.reviews.setdefault(number, [])
        review_id = 100 * number + len(reviews) + 1
        reviews.append(
            {
                "id": review_id,
                "user": user,
                "state": state,
                "commit_id": commit_id,
                "submitted_at": f"2026-11-29T09:{len(reviews):02d}:00Z",
                "author_association": association,
                "body": body,
            }
        )
        return review_id

    def comment(
        self,
        number: int,
        user: str,
        body: str,
        *,
        association: str = "COLLABORATOR",
        path: str | None = None,
        line: int | None = None,
        reply_to: int | None = None,
    ) -> int:
        """A conversation comment on PR `number`, or with `path` a review comment on a line;
        `reply_to` (a review comment's id) replies in that comment's thread, on its line."""
        if reply_to is not None:
            root = next(c for c in self.review_comments[number] if c["id"] == reply_to)
            path, line = root["path"], root["line"]
            reply_to = root.get("in_reply_to") or reply_to  # GitHub names the first comment
        self.next_comment_id += 1
        at = self._tick()
        comment = {
            "id": self.next_comment_id,
            "user": user,
            "body": body,
            "association": association,
            "path": path,
            "line": line,
            "in_reply_to": reply_to,
            "created_at": at,
            "updated_at": at,
        }
        target = self.review_comments if path is not None else self.issue_comments
        target.setdefault(number, []).append(comment)
        return int(comment["id"])

    def edit_comment(self, comment_id: int, body: str) -> None:
        for comments in (*self.issue_comments.values(), *self.review_comments.values()):
            for comment in comments:
                if comment["id"] == comment_id:
                    comment.update(body=body, updated_at=self._tick())

    def status(
        self,
        sha: str,
        context: str,
        state: str,
        at: str = NOW,
        *,
        description: str | None = None,
        target_url: str | None = None,
    ) -> None:
        statuses = self.statuses.setdefault(sha, [])
        statuses.append(
            {
                "id": len(statuses) + 1,
                "context": context,
                "state": state,
                "updated_at": at,
                "description": description,
                "target_url": target_url,
            }
        )

    def check_run(
        self,
        sha: str,
        name: str,
        status: str = "completed",
        conclusion: str | None = "success",
        at: str = NOW,
        *,
        app: str = "github-actions",
        suite: int | None = None,
        title: str | None = None,
        summary: str | None = None,
        annotations: tuple[tuple[str, int, str, str], ...] = (),
    ) -> int:
        """A check run; each app has one check suite per commit unless `suite` says otherwise
        (GitHub Actions makes one per workflow). `annotations` are (path, line, level,
        message)."""
        runs = self.check_runs.setdefault(sha, [])
        run_id = 1000 + sum(len(r) for r in self.check_runs.values())
        self.annotations[run_id] = [
            {
                "path": path,
                "blob_href": f"{WEB}/{self.repository}/blob/{sha}/{path}",
                "start_line": line,
                "end_line": line,
                "start_column": None,
                "end_column": None,
                "annotation_level": level,
                "title": None,
                "message": message,
                "raw_details": None,
            }
            for path, line, level, message in annotations
        ]
        runs.append(
            {
                "id": run_id,
                "title": title,
                "summary": summary,
                "name": name,
                "status": status,
                "conclusion": conclusion,
                "completed_at": at if status == "completed" else None,
                "started_at": at,
                "app": app,
                "suite": suite if suite is not None else APP_IDS[app] * 10,
                "head_sha": sha,
            }
        )
        return run_id

    def fail(
        self,
        method: str,
        pattern: str,
        status: int,
        *,
        times: int = 1,
        headers: dict[str, str] | None = None,
        message: str = "injected",
    ) -> None:
        self.faults.append(
            Fault(
                method, re.compile(pattern), status, headers or {}, times, _error(message, status)
            )
        )

    # -- JSON shapes -------------------------------------------------------------------------

    @property
    def api(self) -> str:
        return self.base_url or "http://localhost/api/v3"

    def _url(self, path: str, repository: str | None = None) -> str:
        return f"{self.api}/repos/{repository or self.repository}/{path}"

    def _html(self, kind: str, number: int, repository: str | None = None) -> str:
        return f"{WEB}/{repository or self.repository}/{kind}/{number}"

    def pull_json(self, pull: dict[str, Any], *, full: bool = False) -> dict[str, Any]:
        number = pull["number"]
        owner = self.repository.split("/")[0]
        repository = _repository(self.api, self.repository)
        item = {
            "url": self._url(f"pulls/{number}"),
            "id": 5000 + number,
            "node_id": f"PR_{number}",
            "html_url": self._html("pull", number),
            "diff_url": self._html("pull", number) + ".diff",
            "patch_url": self._html("pull", number) + ".patch",
            "issue_url": self._url(f"issues/{number}"),
            "commits_url": self._url(f"pulls/{number}/commits"),
            "review_comments_url": self._url(f"pulls/{number}/comments"),
            "review_comment_url": self._url("pulls/comments{/number}"),
            "comments_url": self._url(f"issues/{number}/comments"),
            "statuses_url": self._url(f"statuses/{pull['head_sha']}"),
            "number": number,
            "state": pull["state"],
            "locked": False,
            "title": pull["title"],
            "user": _user(self.api, pull["author"]),
            "body": None,
            "labels": [_label(self.api, self.repository, name) for name in pull["labels"]],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": pull["created_at"],
            "updated_at": pull["created_at"],
            "closed_at": pull["merged_at"] if pull["state"] == "closed" else None,
            "merged_at": pull["merged_at"],
            "merge_commit_sha": pull["merge_commit_sha"],
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": {
                "label": f"{owner}:{pull['head_ref']}",
                "ref": pull["head_ref"],
                "sha": pull["head_sha"],
                "user": _user(self.api, owner),
                "repo": repository,
            },
            "base": {
                "label": f"{owner}:{pull['base']}",
                "ref": pull["base"],
                "sha": "0" * 40,
                "user": _user(self.api, owner),
                "repo": repository,
            },
            "_links": {
                name: {"href": href}
                for name, href in {
                    "self": self._url(f"pulls/{number}"),
                    "html": self._html("pull", number),
                    "issue": self._url(f"issues/{number}"),
                    "comments": self._url(f"issues/{number}/comments"),
                    "review_comments": self._url(f"pulls/{number}/comments"),
                    "review_comment": self._url("pulls/comments{/number}"),
                    "commits": self._url(f"pulls/{number}/commits"),
                    "statuses": self._url(f"statuses/{pull['head_sha']}"),
                }.items()
            },
            "author_association": "CONTRIBUTOR",
            "auto_merge": None,
            "draft": pull["draft"],
        }
        if full:
            item.update(
                merged=pull["merged_at"] is not None,
                mergeable=pull["merged_at"] is None,
                rebaseable=pull["merged_at"] is None,
                mergeable_state="clean" if pull["merged_at"] is None else "unknown",
                merged_by=_user(self.api, "maintainer") if pull["merged_at"] else None,
                comments=0,
                review_comments=0,
                maintainer_can_modify=False,
                commits=1,
                additions=1,
                deletions=0,
                changed_files=1,
            )
        return item

    def issue_json(self, number: int, repository: str | None = None) -> dict[str, Any]:
        repository = repository or self.repository
        if repository == self.repository and number in self.pulls:
            pull = self.pulls[number]
            item = self._issue_shape(
                number,
                repository,
                {**pull, "body": "", "state_reason": None, "milestone": None},
                kind="pull",
            )
            item["pull_request"] = {
                "url": self._url(f"pulls/{number}"),
                "html_url": self._html("pull", number),
                "diff_url": self._html("pull", number) + ".diff",
                "patch_url": self._html("pull", number) + ".patch",
                "merged_at": pull["merged_at"],
            }
            item["draft"] = pull["draft"]
            return item
        if repository == self.repository:
            issue = self.issues[number]
        else:
            issue = self.foreign_issues[(repository, number)]
        item = self._issue_shape(number, repository, issue, kind="issues")
        if self.dependency_summaries and repository == self.repository:
            blockers = [self._blocker(entry) for entry in self.blocked_by.get(number, [])]
            item["issue_dependencies_summary"] = {
                "blocked_by": sum(1 for b in blockers if b and b["state"] == "open"),
                "blocking": 0,
                "total_blocked_by": len(blockers),
                "total_blocking": 0,
            }
        return item

    def _blocker(self, entry: int | tuple[str, int]) -> dict[str, Any] | None:
        repository, number = entry if isinstance(entry, tuple) else (self.repository, entry)
        if repository == self.repository:
            known = number in self.issues or number in self.pulls
        else:
            known = (repository, number) in self.foreign_issues
        return self.issue_json(number, repository) if known else None

    def _issue_shape(
        self, number: int, repository: str, issue: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        milestone = next(
            (m for m in self.milestones if m["number"] == issue.get("milestone")), None
        )
        closed = issue["state"] == "closed"
        return {
            "url": self._url(f"issues/{number}", repository),
            "repository_url": f"{self.api}/repos/{repository}",
            "labels_url": self._url(f"issues/{number}/labels{{/name}}", repository),
            "comments_url": self._url(f"issues/{number}/comments", repository),
            "events_url": self._url(f"issues/{number}/events", repository),
            "html_url": self._html(kind, number, repository),
            "id": 9000 + number,
            "node_id": f"I_{number}",
            "number": number,
            "title": issue["title"],
            "user": _user(self.api, issue["author"]),
            "labels": [_label(self.api, repository, name) for name in issue["labels"]],
            "state": issue["state"],
            "state_reason": issue["state_reason"],
            "locked": False,
            "assignee": None,
            "assignees": [],
            "milestone": self.milestone_json(milestone) if milestone else None,
            "comments": 0,
            "created_at": issue["created_at"],
            "updated_at": issue["created_at"],
            "closed_at": issue["created_at"] if closed else None,
            "author_association": "MEMBER",
            "body": issue["body"],
        }

    def milestone_json(self, milestone: dict[str, Any]) -> dict[str, Any]:
        number = milestone["number"]
        return {
            "url": self._url(f"milestones/{number}"),
            "html_url": f"{WEB}/{self.repository}/milestone/{number}",
            "labels_url": self._url(f"milestones/{number}/labels"),
            "id": 700 + number,
            "node_id": f"MI_{number}",
            "number": number,
            "state": milestone["state"],
            "title": milestone["title"],
            "description": None,
            "creator": _user(self.api, "maintainer"),
            "open_issues": 0,
            "closed_issues": 0,
            "created_at": milestone["created_at"],
            "updated_at": milestone["created_at"],
            "closed_at": None,
            "due_on": None,
        }

    def review_json(self, number: int, review: dict[str, Any]) -> dict[str, Any]:
        html = f"{self._html('pull', number)}#pullrequestreview-{review['id']}"
        return {
            "id": review["id"],
            "node_id": f"PRR_{review['id']}",
            "user": _user(self.api, review["user"]) if review["user"] else None,
            "body": review.get("body", ""),
            "state": review["state"],
            "html_url": html,
            "pull_request_url": self._url(f"pulls/{number}"),
            "_links": {
                "html": {"href": html},
                "pull_request": {"href": self._url(f"pulls/{number}")},
            },
            "submitted_at": review["submitted_at"],
            "commit_id": review["commit_id"],
            "author_association": review["author_association"],
        }

    def status_json(self, status: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": status["id"],
            "node_id": f"SC_{status['id']}",
            "url": self._url(f"statuses/{status['id']}"),
            "avatar_url": None,
            "state": status["state"],
            "description": status.get("description"),
            "target_url": status.get("target_url"),
            "context": status["context"],
            "created_at": status["updated_at"],
            "updated_at": status["updated_at"],
        }

    def check_run_json(self, run: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": run["id"],
            "node_id": f"CR_{run['id']}",
            "head_sha": run["head_sha"],
            "external_id": None,
            "url": self._url(f"check-runs/{run['id']}"),
            "html_url": f"{WEB}/{self.repository}/runs/{run['id']}",
            "details_url": None,
            "status": run["status"],
            "conclusion": run["conclusion"],
            "started_at": run["started_at"],
            "completed_at": run["completed_at"],
            "output": {
                "title": run.get("title"),
                "summary": run.get("summary"),
                "text": None,
                "annotations_count": len(self.annotations.get(run["id"], [])),
                "annotations_url": self._url(f"check-runs/{run['id']}/annotations"),
            },
            "name": run["name"],
            "check_suite": {"id": run["suite"]},
            "app": _app(self.api, run["app"]),
            "pull_requests": [],
        }

    def comment_json(self, number: int, comment: dict[str, Any]) -> dict[str, Any]:
        """A conversation comment (issue-comment), or a review comment when it has a path."""
        comment_id = comment["id"]
        found: dict[str, Any] = {
            "id": comment_id,
            "node_id": f"IC_{comment_id}",
            "user": _user(self.api, comment["user"]),
            "body": comment["body"],
            "created_at": comment["created_at"],
            "updated_at": comment["updated_at"],
            "author_association": comment["association"],
        }
        if comment["path"] is None:
            html = f"{self._html('pull', number)}#issuecomment-{comment_id}"
            found.update(
                url=self._url(f"issues/comments/{comment_id}"),
                html_url=html,
                issue_url=self._url(f"issues/{number}"),
            )
            return found
        html = f"{self._html('pull', number)}#discussion_r{comment_id}"
        url = self._url(f"pulls/comments/{comment_id}")
        head = self.pulls[number]["head_sha"]
        found.update(
            node_id=f"PRRC_{comment_id}",
            url=url,
            html_url=html,
            pull_request_review_id=None,
            diff_hunk="@@ -1 +1 @@",
            path=comment["path"],
            commit_id=head,
            original_commit_id=head,
            pull_request_url=self._url(f"pulls/{number}"),
            line=comment["line"],
            original_line=comment["line"],
            side="RIGHT",
            **({"in_reply_to_id": comment["in_reply_to"]} if comment.get("in_reply_to") else {}),
            _links={
                "self": {"href": url},
                "html": {"href": html},
                "pull_request": {"href": self._url(f"pulls/{number}")},
            },
        )
        return found

    def viewer_json(self) -> dict[str, Any]:
        """GET /user: the private user the token authenticates as."""
        found = _user(self.api, self.viewer)
        found.update(
            {
                "name": None,
                "company": None,
                "blog": "",
                "location": None,
                "email": None,
                "hireable": None,
                "bio": None,
                "public_repos": 0,
                "public_gists": 0,
                "followers": 0,
                "following": 0,
                "created_at": NOW,
                "updated_at": NOW,
                "private_gists": 0,
                "total_private_repos": 0,
                "owned_private_repos": 0,
                "disk_usage": 0,
                "collaborators": 0,
                "two_factor_authentication": True,
            }
        )
        return found

    def _comments(
        self, request: Request, number: int, comments: dict[int, list[dict[str, Any]]]
    ) -> Response:
        if number not in self.pulls:
            return self._not_found()
        since = request.args.get("since")
        found = [
            self.comment_json(number, c)
            for c in comments.get(number, [])
            if since is None or c["updated_at"] >= since
        ]
        return self._page(request, found)  # oldest first, as GitHub lists comments

    # -- the server ----------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        raw = _raw_path(request).removeprefix("/api/v3")
        if raw.startswith(f"/repositories/{REPOSITORY_ID}/"):
            self.by_id_requests += 1
            raw = f"/repos/{self.repository}/" + raw.removeprefix(f"/repositories/{REPOSITORY_ID}/")
        path = urllib.parse.unquote(raw)
        self.requests.append((request.method, path))
        self.authorization.append(request.headers.get("Authorization"))
        response = _conditional(request, self._answer(request, raw, path))
        try:
            body = json.loads(response.get_data() or b"null")
        except ValueError:
            body = None
        self.exchanges.append(
            Exchange(
                request.method,
                path,
                {key: request.args.getlist(key) for key in request.args},
                response.status_code,
                body,
                dict(response.headers),
                json.loads(request.data) if request.data else None,
                raw,
            )
        )
        return response

    def handle_graphql(self, request: Request) -> Response:
        """A minimal `/graphql`: the one query unitmgr sends (a PR's `reviewThreads`)."""
        self.requests.append((request.method, "/graphql"))
        asked = json.loads(request.data or b"{}")
        variables = asked.get("variables") or {}
        if "reviewThreads" not in str(asked.get("query")):
            return self._json({"errors": [{"message": "this fake answers reviewThreads only"}]})
        number = int(variables.get("number") or 0)
        if number not in self.pulls:
            error = {"type": "NOT_FOUND", "message": f"no pull request {number}"}
            return self._json({"data": {"repository": {"pullRequest": None}}, "errors": [error]})
        by_root: dict[int, list[int]] = {}  # a thread is its first comment and the replies
        for comment in self.review_comments.get(number, []):
            by_root.setdefault(comment.get("in_reply_to") or comment["id"], []).append(
                comment["id"]
            )
        nodes = [
            {
                "id": f"PRRT_{root}",
                "isResolved": root in self.resolved_threads,
                "isOutdated": root in self.outdated_threads,
                "comments": {"nodes": [{"databaseId": i} for i in ids]},
            }
            for root, ids in by_root.items()
        ]
        threads = {"pageInfo": {"hasNextPage": False, "endCursor": None}, "nodes": nodes}
        return self._json({"data": {"repository": {"pullRequest": {"reviewThreads": threads}}}})

    def when(self, method: str, pattern: str, action: Any) -> None:
        """Run `action()` once, as the first request matching `method` and `pattern` arrives."""
        self.hooks.append((method, re.compile(pattern), action))

    def _answer(self, request: Request, raw: str, path: str) -> Response:
        for hook in list(self.hooks):
            if hook[0] == request.method and hook[1].search(path):
                self.hooks.remove(hook)
                hook[2]()
        for fault in self.faults:
            if (
                fault.remaining > 0
                and fault.method == request.method
                and fault.pattern.search(path)
            ):
                fault.remaining -= 1
                return self._json(fault.body, fault.status, fault.headers)
        # Path segments as sent: an encoded `/` stays inside its segment, as on GitHub.
        segments = [urllib.parse.unquote(part) for part in raw.split("/")[1:]]
        if request.method == "GET" and segments == ["user"]:
            return self._json(self.viewer_json())
        if request.method == "GET" and segments[:2] == ["_blobs", "job-logs"]:
            # The short-lived URL a job's logs route redirects to (blob storage on GitHub).
            log = self.job_logs.get(int(segments[2]))
            if not isinstance(log, str):
                return Response("expired", status=404, content_type="text/plain")
            return Response(log, content_type="text/plain")
        if len(segments) < 3 or segments[0] != "repos":
            return self._not_found()
        repository = f"{segments[1]}/{segments[2]}"
        route = tuple(segments[3:])
        if repository != self.repository:
            return self._foreign(request, repository, route)
        method = request.method
        args = request.args
        if method == "GET" and route == ("pulls",):
            return self._pulls(request)
        if method == "GET" and len(route) == 4 and route[:2] == ("actions", "jobs"):
            log = self.job_logs.get(int(route[2]))
            if log is None or isinstance(log, int):
                status = log or 404
                return self._json(_error("Gone" if status == 410 else "Not Found", status), status)
            return Response(
                status=302, headers={"Location": f"{self.api}/_blobs/job-logs/{int(route[2])}"}
            )
        if method == "GET" and len(route) == 2 and route[0] == "pulls" and route[1].isdigit():
            pull = self.pulls.get(int(route[1]))
            return self._json(self.pull_json(pull, full=True)) if pull else self._not_found()
        if method == "PUT" and len(route) == 3 and route[::2] == ("pulls", "merge"):
            return self._merge(int(route[1]), json.loads(request.data or b"{}"))
        if method == "GET" and len(route) == 3 and route[::2] == ("pulls", "reviews"):
            number = int(route[1])
            if number not in self.pulls:
                return self._not_found()
            reviews = [self.review_json(number, r) for r in self.reviews.get(number, [])]
            return self._page(request, reviews)  # oldest first, as GitHub lists reviews
        if method == "GET" and len(route) == 3 and route[::2] == ("pulls", "comments"):
            return self._comments(request, int(route[1]), self.review_comments)
        if method == "GET" and len(route) == 3 and route[::2] == ("issues", "comments"):
            return self._comments(request, int(route[1]), self.issue_comments)
        if method == "GET" and len(route) == 3 and route[::2] == ("check-runs", "annotations"):
            return self._page(request, self.annotations.get(int(route[1]), []))
        if method == "GET" and route == ("issues",):
            return self._issues(request)
        if method == "GET" and len(route) == 2 and route[0] == "issues":
            number = int(route[1])
            if number not in self.issues and number not in self.pulls:
                return self._not_found()
            return self._json(self.issue_json(number))
        if (
            method == "GET"
            and route[:1] == ("issues",)
            and route[2:]
            == (
                "dependencies",
                "blocked_by",
            )
        ):
            number = int(route[1])
            if number not in self.issues and number not in self.pulls:
                return self._not_found()
            blockers = [self._blocker(entry) for entry in self.blocked_by.get(number, [])]
            return self._page(request, [b for b in blockers if b is not None])
        if method == "GET" and route == ("milestones",):
            state = args.get("state", "open")
            found = [
                self.milestone_json(m)
                for m in self.milestones
                if state == "all" or m["state"] == state
            ]
            return self._page(request, found)
        if method == "GET" and len(route) == 3 and route[::2] == ("commits", "status"):
            return self._combined_status(request, route[1])
        if method == "GET" and len(route) == 3 and route[::2] == ("commits", "check-runs"):
            return self._check_runs(request, route[1])
        if method == "GET" and route[:1] == ("branches",) and len(route) in (2, 4):
            if len(route) == 4 and route[2:] != ("protection", "required_status_checks"):
                return self._not_found()
            return self._branch(route[1], policy_only=len(route) == 4)
        if method == "GET" and len(route) == 3 and route[:2] == ("rules", "branches"):
            if not self.rulesets_readable:
                return self._not_found()
            return self._page(request, self._rules(route[2]))
        return self._not_found()

    def _foreign(self, request: Request, repository: str, route: tuple[str, ...]) -> Response:
        """Another repository: only its issues are served; an unreadable one is hidden (404)."""
        if repository in self.unreadable_repositories:
            return self._not_found()
        if request.method == "GET" and len(route) == 2 and route[0] == "issues":
            key = (repository, int(route[1]))
            if key in self.foreign_issues:
                return self._json(self.issue_json(key[1], repository))
        return self._not_found()

    def _pulls(self, request: Request) -> Response:
        args = request.args
        head = args.get("head", "")
        branch = head.split(":", 1)[1] if ":" in head else None
        state = args.get("state", "open")
        base = args.get("base")
        pulls = [
            p
            for p in self.pulls.values()
            if (branch is None or p["head_ref"] == branch)
            and (state == "all" or p["state"] == state)
            and (base is None or p["base"] == base)
        ]
        pulls = _ordered(pulls, args)
        return self._page(request, [self.pull_json(p) for p in pulls])

    def _issues(self, request: Request) -> Response:
        args = request.args
        labels = set(filter(None, args.get("labels", "").split(",")))
        milestone = args.get("milestone")
        state = args.get("state", "open")
        found = []
        for number in {*self.issues, *self.pulls}:
            record = self.issues.get(number) or self.pulls[number]
            if state != "all" and record["state"] != state:
                continue
            if labels and not labels <= set(record["labels"]):
                continue
            if milestone == "none" and record.get("milestone") is not None:
                continue
            if milestone == "*" and record.get("milestone") is None:
                continue
            if milestone and milestone.isdigit() and record.get("milestone") != int(milestone):
                continue
            found.append(record)
        found = _ordered(found, args)
        return self._page(request, [self.issue_json(record["number"]) for record in found])

    def _combined_status(self, request: Request, sha: str) -> Response:
        latest: dict[str, dict[str, Any]] = {}
        for status in self.statuses.get(sha, []):  # the latest per context, as GitHub reports
            latest[status["context"]] = status
        states = [status["state"] for status in latest.values()]
        if any(state in ("error", "failure") for state in states):
            combined = "failure"
        elif not states or "pending" in states:
            combined = "pending"
        else:
            combined = "success"
        statuses = [self.status_json(s) for s in reversed(list(latest.values()))]
        return self._page(
            request,
            statuses,
            wrap=lambda page: {
                "state": combined,
                "statuses": page,
                "sha": sha,
                "total_count": len(statuses),
                "repository": _repository(self.api, self.repository),
                "commit_url": self._url(f"commits/{sha}"),
                "url": self._url(f"commits/{sha}/status"),
            },
        )

    def _check_runs(self, request: Request, sha: str) -> Response:
        runs = sorted(self.check_runs.get(sha, []), key=lambda run: run["id"], reverse=True)
        if request.args.get("filter", "latest") == "latest":
            seen: set[tuple[int, str]] = set()
            latest = []
            for run in runs:  # newest first: keep the first of each (suite, name)
                if (run["suite"], run["name"]) not in seen:
                    seen.add((run["suite"], run["name"]))
                    latest.append(run)
            runs = latest
        found = [self.check_run_json(run) for run in runs]
        return self._page(
            request, found, wrap=lambda page: {"total_count": len(found), "check_runs": page}
        )

    def _branch(self, branch: str, *, policy_only: bool) -> Response:
        protection = self.protection.get(branch)
        url = self._url(f"branches/{urllib.parse.quote(branch, safe='')}")
        checks = [
            {"context": c, "app_id": None}
            if isinstance(c, str)
            else {"context": c[0], "app_id": c[1]}
            for c in (protection if isinstance(protection, list) else [])
        ]
        policy = {
            "url": f"{url}/protection/required_status_checks",
            "contexts_url": f"{url}/protection/required_status_checks/contexts",
            "strict": False,
            "contexts": [check["context"] for check in checks],
            "checks": checks,
        }
        if policy_only:
            if protection == "forbidden":
                return self._json(_error("Resource not accessible by integration", 403), 403)
            if protection is None:
                return self._json(_error("Branch not protected", 404), 404)
            return self._json(policy)
        found: dict[str, Any] = {
            "name": branch,
            "commit": _commit(self.api, self.repository, "0" * 40),
            "_links": {"html": f"{WEB}/{self.repository}/tree/{branch}", "self": url},
            "protected": protection is not None,
            "protection": {"enabled": protection is not None},
            "protection_url": f"{url}/protection",
        }
        if isinstance(protection, list):
            found["protection"]["required_status_checks"] = {
                "enforcement_level": "non_admins",
                "contexts": policy["contexts"],
                "checks": checks,
            }
        return self._json(found)

    def _rules(self, branch: str) -> list[dict[str, Any]]:
        checks = self.rulesets.get(branch)
        rules: list[dict[str, Any]] = [
            {"type": "deletion", "ruleset_source_type": "Repository", "ruleset_id": 1}
        ]
        if checks:
            rules.append(
                {
                    "type": "required_status_checks",
                    "ruleset_source_type": "Repository",
                    "ruleset_source": self.repository,
                    "ruleset_id": 2,
                    "parameters": {
                        "strict_required_status_checks_policy": False,
                        "required_status_checks": [
                            {"context": name}
                            if integration is None
                            else {"context": name, "integration_id": integration}
                            for name, integration in checks
                        ],
                    },
                }
            )
        return rules

    def _merge(self, number: int, body: dict[str, Any]) -> Response:
        pull = self.pulls.get(number)
        if pull is None:
            return self._not_found()
        if self.move_head_on_merge:
            pull["head_sha"], self.move_head_on_merge = self.move_head_on_merge, None
        if pull["merged_at"]:
            return self._json(_error("Pull Request is not mergeable", 405), 405)
        method = body.get("merge_method") or "merge"
        if method not in self.allowed_methods:
            return self._json(_error(NOT_ALLOWED[method], 405), 405)
        if body.get("sha") and body["sha"] != pull["head_sha"]:
            return self._json(
                _error("Head branch was modified. Review and try the merge again.", 409), 409
            )
        pull.update(state="closed", merged_at=_now(), merge_commit_sha="e" * 40)
        self.last_merge_method = method
        return self._json(
            {"sha": "e" * 40, "merged": True, "message": "Pull Request successfully merged"}
        )

    def _page(self, request: Request, items: list[Any], *, wrap: Any = None) -> Response:
        """One page of `items` (GitHub's `per_page`, default 30, capped), with a `Link` header
        naming the next, last, first and previous pages as GitHub does."""
        args = request.args
        per_page = max(1, min(int(args.get("per_page", 30)), 100, self.max_per_page))
        page = max(1, int(args.get("page", 1)))
        last = max(1, -(-len(items) // per_page))
        chunk = items[(page - 1) * per_page : page * per_page]
        links = []

        def link(number: int, rel: str) -> str:
            query = {key: request.args.getlist(key) for key in request.args}
            query["page"] = [str(number)]
            query["per_page"] = [str(per_page)]
            root = self.api.removesuffix("/api/v3")
            path = _raw_path(request)
            if self.links_by_id:
                path = path.replace(f"/repos/{self.repository}/", f"/repositories/{REPOSITORY_ID}/")
            target = root + path + "?" + urllib.parse.urlencode(query, doseq=True)
            return f'<{target}>; rel="{rel}"'

        if page < last:
            links += [link(page + 1, "next"), link(last, "last")]
        if page > 1:
            links += [link(1, "first"), link(page - 1, "prev")]
        headers = {"Link": ", ".join(links)} if links else {}
        return self._json(wrap(chunk) if wrap else chunk, headers=headers)

    def _not_found(self) -> Response:
        return self._json(_error("Not Found", 404), 404)

    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(
            json.dumps(data), status=status, headers=headers or {}, content_type="application/json"
        )


def _conditional(request: Request, response: Response) -> Response:
    """GitHub's ETags: every 200 to a GET names its body; a GET whose `If-None-Match` names the
    body it would get is answered 304 with no body (and GitHub does not count it against the
    rate limit)."""
    if request.method != "GET" or response.status_code != 200:
        return response
    import hashlib

    etag = 'W/"' + hashlib.sha256(response.get_data()).hexdigest()[:40] + '"'
    response.headers["ETag"] = etag
    asked = [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]
    if etag in asked:
        return Response(status=304, headers={"ETag": etag})
    return response


# -- GitHub's objects ----------------------------------------------------------------------------


def _raw_path(request: Request) -> str:
    """The path as the client sent it (werkzeug's `request.path` has `%2F` decoded already)."""
    return urllib.parse.urlsplit(request.environ.get("RAW_URI") or request.full_path).path


def _ordered(records: list[dict[str, Any]], args: Any) -> list[dict[str, Any]]:
    """GitHub's default order for issues and pulls: newest first."""
    newest_first = args.get("direction", "desc") != "asc"
    return sorted(records, key=lambda r: (r["created_at"], r["number"]), reverse=newest_first)


def _error(message: str, status: int) -> dict[str, Any]:
    return {"message": message, "documentation_url": DOCS, "status": str(status)}


def _user_id(login: str) -> int:
    return 1 + sum(ord(c) * (i + 1) for i, c in enumerate(login)) % 1_000_000


def _user(api: str, login: str) -> dict[str, Any]:
    url = f"{api}/users/{login}"
    return {
        "login": login,
        "id": _user_id(login),
        "node_id": f"U_{login}",
        "avatar_url": f"{WEB}/avatars/{login}",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{WEB}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": "Bot" if login.endswith("-bot") else "User",
        "site_admin": False,
    }


def _label(api: str, repository: str, name: str) -> dict[str, Any]:
    return {
        "id": 300 + sum(map(ord, name)),
        "node_id": f"LA_{name}",
        "url": f"{api}/repos/{repository}/labels/{urllib.parse.quote(name)}",
        "name": name,
        "description": None,
        "color": "ededed",
        "default": False,
    }


def _app(api: str, slug: str) -> dict[str, Any]:
    return {
        "id": APP_IDS[slug],
        "slug": slug,
        "node_id": f"A_{slug}",
        "owner": _user(api, "github" if slug == "github-actions" else f"{slug}-owner"),
        "name": slug.replace("-", " ").title(),
        "description": None,
        "external_url": f"{WEB}/apps/{slug}",
        "html_url": f"{WEB}/apps/{slug}",
        "created_at": NOW,
        "updated_at": NOW,
        "permissions": {"checks": "write"},
        "events": ["check_run"],
    }


_REPOSITORY_URLS = (
    "archive_url:/{archive_format}{/ref}",
    "assignees_url:/assignees{/user}",
    "blobs_url:/git/blobs{/sha}",
    "branches_url:/branches{/branch}",
    "collaborators_url:/collaborators{/collaborator}",
    "comments_url:/comments{/number}",
    "commits_url:/commits{/sha}",
    "compare_url:/compare/{base}...{head}",
    "contents_url:/contents/{+path}",
    "contributors_url:/contributors",
    "deployments_url:/deployments",
    "downloads_url:/downloads",
    "events_url:/events",
    "forks_url:/forks",
    "git_commits_url:/git/commits{/sha}",
    "git_refs_url:/git/refs{/sha}",
    "git_tags_url:/git/tags{/sha}",
    "hooks_url:/hooks",
    "issue_comment_url:/issues/comments{/number}",
    "issue_events_url:/issues/events{/number}",
    "issues_url:/issues{/number}",
    "keys_url:/keys{/key_id}",
    "labels_url:/labels{/name}",
    "languages_url:/languages",
    "merges_url:/merges",
    "milestones_url:/milestones{/number}",
    "notifications_url:/notifications{?since,all,participating}",
    "pulls_url:/pulls{/number}",
    "releases_url:/releases{/id}",
    "stargazers_url:/stargazers",
    "statuses_url:/statuses/{sha}",
    "subscribers_url:/subscribers",
    "subscription_url:/subscription",
    "tags_url:/tags",
    "teams_url:/teams",
    "trees_url:/git/trees{/sha}",
)


def _repository(api: str, full_name: str) -> dict[str, Any]:
    owner, name = full_name.split("/")
    url = f"{api}/repos/{full_name}"
    found: dict[str, Any] = {
        key: url + suffix for key, suffix in (entry.split(":", 1) for entry in _REPOSITORY_URLS)
    }
    found.update(
        {
            "id": REPOSITORY_ID,
            "node_id": f"R_{REPOSITORY_ID}",
            "name": name,
            "full_name": full_name,
            "owner": _user(api, owner),
            "private": False,
            "html_url": f"{WEB}/{full_name}",
            "description": None,
            "fork": False,
            "url": url,
            "clone_url": f"{WEB}/{full_name}.git",
            "git_url": f"git://github.example/{full_name}.git",
            "ssh_url": f"git@github.example:{full_name}.git",
            "svn_url": f"{WEB}/{full_name}",
            "mirror_url": None,
            "homepage": None,
            "language": "Python",
            "forks": 0,
            "forks_count": 0,
            "stargazers_count": 0,
            "watchers": 0,
            "watchers_count": 0,
            "size": 1,
            "default_branch": "main",
            "open_issues": 0,
            "open_issues_count": 0,
            "has_issues": True,
            "has_projects": False,
            "has_wiki": False,
            "has_pages": False,
            "has_downloads": False,
            "archived": False,
            "disabled": False,
            "license": None,
            "pushed_at": NOW,
            "created_at": NOW,
            "updated_at": NOW,
        }
    )
    return found


def _commit(api: str, repository: str, sha: str) -> dict[str, Any]:
    url = f"{api}/repos/{repository}/commits/{sha}"
    person = {"name": "Unit Test", "email": "unit@test.invalid", "date": NOW}
    return {
        "sha": sha,
        "node_id": f"C_{sha[:7]}",
        "url": url,
        "html_url": f"{WEB}/{repository}/commit/{sha}",
        "comments_url": f"{url}/comments",
        "commit": {
            "url": f"{api}/repos/{repository}/git/commits/{sha}",
            "author": person,
            "committer": person,
            "message": "initial",
            "comment_count": 0,
            "tree": {"sha": sha, "url": f"{api}/repos/{repository}/git/trees/{sha}"},
        },
        "author": _user(api, "maintainer"),
        "committer": _user(api, "maintainer"),
        "parents": [],
    }
