"""A stateful fake GitHub REST API, served over real HTTP by pytest-httpserver.

The real `unit` CLI reaches it through PyGithub (`GITHUB_API_URL`), exactly as it reaches
GitHub: nothing is patched. It keeps issues and pull requests in one numbering space (pull
requests show up in the issue listing, as on GitHub), milestones, reviews, combined statuses,
check runs, branch protection, native blocked-by lists, and a merge that refuses a moved head.
`fail(...)` injects error responses (500s, 429s with headers) ahead of real ones.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from werkzeug import Request, Response

NOW = "2026-11-29T09:00:00Z"


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
class FakeGitHub:
    base_url: str = ""
    repository: str = "acme/widgets"
    next_number: int = 1
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    milestones: list[dict[str, Any]] = field(default_factory=list)
    reviews: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    check_runs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    protection: dict[str, Any] = field(default_factory=dict)  # branch -> contexts | "forbidden"
    blocked_by: dict[int, list[int]] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    move_head_on_merge: str | None = None  # a push lands between the gate check and the merge
    authorization: list[str | None] = field(default_factory=list)

    # -- setting up state --------------------------------------------------------------------

    def _number(self) -> int:
        number = self.next_number
        self.next_number += 1
        return number

    def add_issue(
        self,
        title: str,
        *,
        body: str = "",
        labels: tuple[str, ...] = ("ready",),
        state: str = "open",
        state_reason: str | None = None,
        milestone: int | None = None,
    ) -> int:
        number = self._number()
        self.issues[number] = {
            "number": number,
            "title": title,
            "body": body,
            "labels": list(labels),
            "state": state,
            "state_reason": state_reason,
            "milestone": milestone,
        }
        return number

    def add_milestone(self, title: str) -> int:
        number = len(self.milestones) + 1
        self.milestones.append({"number": number, "title": title, "state": "open"})
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
        }
        return number

    def review(self, number: int, user: str, state: str, commit_id: str) -> None:
        reviews = self.reviews.setdefault(number, [])
        reviews.append(
            {
                "id": len(reviews) + 1,
                "user": {"login": user},
                "state": state,
                "commit_id": commit_id,
                "submitted_at": f"2026-11-29T09:{len(reviews):02d}:00Z",
            }
        )

    def status(self, sha: str, context: str, state: str, at: str = NOW) -> None:
        self.statuses.setdefault(sha, []).append(
            {"context": context, "state": state, "updated_at": at}
        )

    def check_run(
        self,
        sha: str,
        name: str,
        status: str = "completed",
        conclusion: str | None = "success",
        at: str = NOW,
    ) -> None:
        self.check_runs.setdefault(sha, []).append(
            {
                "id": len(self.check_runs.get(sha, [])) + 1,
                "name": name,
                "status": status,
                "conclusion": conclusion,
                "completed_at": at,
                "started_at": at,
            }
        )

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
            Fault(method, re.compile(pattern), status, headers or {}, times, {"message": message})
        )

    # -- JSON shapes -------------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self.base_url}/repos/{self.repository}/{path}"

    def _html(self, kind: str, number: int) -> str:
        return f"https://github.example/{self.repository}/{kind}/{number}"

    def pull_json(self, pull: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self._url(f"pulls/{pull['number']}"),
            "html_url": self._html("pull", pull["number"]),
            "number": pull["number"],
            "title": pull["title"],
            "state": pull["state"],
            "draft": pull["draft"],
            "merged_at": pull["merged_at"],
            "merge_commit_sha": pull["merge_commit_sha"],
            "user": {"login": pull["author"]},
            "head": {
                "ref": pull["head_ref"],
                "sha": pull["head_sha"],
                "label": f"{self.repository.split('/')[0]}:{pull['head_ref']}",
            },
            "base": {"ref": pull["base"]},
        }

    def issue_json(self, number: int) -> dict[str, Any]:
        if number in self.pulls:
            pull = self.pulls[number]
            return {
                "url": self._url(f"issues/{number}"),
                "html_url": self._html("pull", number),
                "number": number,
                "title": pull["title"],
                "body": "",
                "state": pull["state"],
                "state_reason": None,
                "labels": [{"name": name} for name in pull["labels"]],
                "milestone": None,
                "pull_request": {
                    "url": self._url(f"pulls/{number}"),
                    "merged_at": pull["merged_at"],
                },
            }
        issue = self.issues[number]
        milestone = next((m for m in self.milestones if m["number"] == issue["milestone"]), None)
        return {
            "url": self._url(f"issues/{number}"),
            "html_url": self._html("issues", number),
            "number": number,
            "title": issue["title"],
            "body": issue["body"],
            "state": issue["state"],
            "state_reason": issue["state_reason"],
            "labels": [{"name": name} for name in issue["labels"]],
            "milestone": milestone,
        }

    # -- the server ----------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        path = request.path.removeprefix("/api/v3")
        self.requests.append((request.method, path))
        self.authorization.append(request.headers.get("Authorization"))
        for fault in self.faults:
            if (
                fault.remaining > 0
                and fault.method == request.method
                and fault.pattern.search(path)
            ):
                fault.remaining -= 1
                return self._json(fault.body, fault.status, fault.headers)
        prefix = f"/repos/{self.repository}"
        if not path.startswith(prefix):
            return self._json({"message": "Not Found"}, 404)
        route = path[len(prefix) :]
        args = request.args
        if request.method == "GET" and route == "/pulls":
            head = args.get("head", "")
            branch = head.split(":", 1)[1] if ":" in head else None
            state = args.get("state", "open")
            pulls = [
                self.pull_json(p)
                for p in self.pulls.values()
                if (branch is None or p["head_ref"] == branch)
                and (state == "all" or p["state"] == state)
            ]
            return self._json(pulls)
        match = re.fullmatch(r"/pulls/(\d+)", route)
        if request.method == "GET" and match:
            pull = self.pulls.get(int(match.group(1)))
            return (
                self._json(self.pull_json(pull))
                if pull
                else self._json({"message": "Not Found"}, 404)
            )
        match = re.fullmatch(r"/pulls/(\d+)/merge", route)
        if request.method == "PUT" and match:
            return self._merge(int(match.group(1)), json.loads(request.data or b"{}"))
        match = re.fullmatch(r"/pulls/(\d+)/reviews", route)
        if request.method == "GET" and match:
            return self._json(self.reviews.get(int(match.group(1)), []))
        if request.method == "GET" and route == "/issues":
            labels = set(filter(None, args.get("labels", "").split(",")))
            milestone = args.get("milestone")
            state = args.get("state", "open")
            found = []
            for number in sorted({*self.issues, *self.pulls}):
                item = self.issue_json(number)
                if state != "all" and item["state"] != state:
                    continue
                if labels and not labels <= {label["name"] for label in item["labels"]}:
                    continue
                if milestone and (item.get("milestone") or {}).get("number") != int(milestone):
                    continue
                found.append(item)
            return self._json(found)
        match = re.fullmatch(r"/issues/(\d+)", route)
        if request.method == "GET" and match:
            number = int(match.group(1))
            if number not in self.issues and number not in self.pulls:
                return self._json({"message": "Not Found"}, 404)
            return self._json(self.issue_json(number))
        match = re.fullmatch(r"/issues/(\d+)/dependencies/blocked_by", route)
        if request.method == "GET" and match:
            number = int(match.group(1))
            if number not in self.blocked_by:
                return self._json({"message": "Not Found"}, 404)
            return self._json([self.issue_json(n) for n in self.blocked_by[number]])
        if request.method == "GET" and route == "/milestones":
            return self._json(self.milestones)
        match = re.fullmatch(r"/commits/([0-9a-f]+)/status", route)
        if request.method == "GET" and match:
            sha = match.group(1)
            latest: dict[str, dict[str, Any]] = {}
            for status in self.statuses.get(sha, []):
                latest[status["context"]] = status
            return self._json(
                {
                    "sha": sha,
                    "state": "success",
                    "statuses": list(latest.values()),
                    "total_count": len(latest),
                }
            )
        match = re.fullmatch(r"/commits/([0-9a-f]+)/check-runs", route)
        if request.method == "GET" and match:
            runs = self.check_runs.get(match.group(1), [])
            return self._json({"total_count": len(runs), "check_runs": runs})
        match = re.fullmatch(r"/branches/([^/]+)/protection/required_status_checks", route)
        if request.method == "GET" and match:
            protection = self.protection.get(match.group(1))
            if protection == "forbidden":
                return self._json({"message": "Resource not accessible by integration"}, 403)
            if protection is None:
                return self._json({"message": "Branch not protected"}, 404)
            return self._json({"strict": False, "contexts": list(protection)})
        match = re.fullmatch(r"/branches/([^/]+)", route)
        if request.method == "GET" and match:
            protection = self.protection.get(match.group(1))
            if protection == "forbidden":
                return self._json({"name": match.group(1), "protected": True})
            return self._json(
                {
                    "name": match.group(1),
                    "protected": protection is not None,
                    "protection": {"required_status_checks": {"contexts": list(protection or [])}},
                }
            )
        return self._json({"message": "Not Found"}, 404)

    def _merge(self, number: int, body: dict[str, Any]) -> Response:
        pull = self.pulls.get(number)
        if pull is None:
            return self._json({"message": "Not Found"}, 404)
        if self.move_head_on_merge:
            pull["head_sha"], self.move_head_on_merge = self.move_head_on_merge, None
        if pull["merged_at"]:
            return self._json({"message": "Pull Request is not mergeable"}, 405)
        if body.get("sha") and body["sha"] != pull["head_sha"]:
            return self._json(
                {"message": "Head branch was modified. Review and try the merge again."}, 409
            )
        pull.update(state="closed", merged_at=_now(), merge_commit_sha="e" * 40)
        self.last_merge_method = body.get("merge_method")
        return self._json(
            {"sha": "e" * 40, "merged": True, "message": "Pull Request successfully merged"}
        )

    @staticmethod
    def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        return Response(
            json.dumps(data), status=status, headers=headers or {}, content_type="application/json"
        )
