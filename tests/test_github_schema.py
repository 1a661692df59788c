"""The fake GitHub answers as GitHub does (SPEC 5), judged by GitHub's own OpenAPI description.

`@octokit/openapi` (pinned in package.json, installed by `npm ci`) is the yardstick. The product's
forge (`unitmgr.forge_github.GitHubForge`) is driven in-process against the fake over real HTTP
through every path it can take; then:

- every path the product's source names resolves to an operation of the description, and every
  one of them was exercised here;
- every request's path, method, query parameters (and their enums) and the merge's body exist
  in the description;
- every response the fake gave is valid against that operation's response schema for its status
  (required fields, types, enums; OpenAPI 3.0's `nullable` honoured);
- and the check has teeth: removing a required field from a copy of each response fails it.

Without the description installed the test skips, loudly; `UNITMGR_REQUIRE_REAL_CLIS=1` (CI)
turns that skip into a failure. The description is 70 MB: it is parsed once, and the subset the
test needs is kept in pytest's cache, keyed by the file's size and mtime.
"""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from registry import light_dataclass as dataclasses

ROOT = Path(__file__).resolve().parent.parent
DESCRIPTION = ROOT / "node_modules/@octokit/openapi/generated/api.github.com.deref.json"
REQUIRED = os.environ.get("UNITMGR_REQUIRE_REAL_CLIS") == "1"  # read before isolation clears it
REPOSITORY_PATHS = "/repos/{owner}/{repo}/"
OTHER_PATHS = ("/user",)  # the token's own login: feedback never forwards the tool's identity


def _cache_key() -> str:
    stat = DESCRIPTION.stat()
    return f"github-openapi-subset-2/{stat.st_size}-{int(stat.st_mtime)}"


def missing_description(path: Path, *, required: bool) -> None:
    """Skip, loudly; fail instead where the description must be there (CI)."""
    message = (
        f"GitHub's OpenAPI description is not installed ({path}): the fake GitHub is NOT "
        "being validated against GitHub. Run `npm ci`."
    )
    if required:
        pytest.fail(message + " (UNITMGR_REQUIRE_REAL_CLIS=1)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def description(request: pytest.FixtureRequest) -> dict[str, Any]:
    """`{template: {method: {parameters, responses, body}}}` for the repository paths."""
    if not DESCRIPTION.exists():
        missing_description(DESCRIPTION, required=REQUIRED)
    key = _cache_key()
    cache = getattr(request.config, "cache", None)  # None under -p no:cacheprovider
    cached = cache.get(key, None) if cache is not None else None
    if cached is not None:
        return dict(cached)
    document = json.loads(DESCRIPTION.read_text())
    shapes = {as_template(path) for path in product_paths()} | set(OTHER_PATHS)
    subset: dict[str, Any] = {}
    for template, operations in document["paths"].items():
        if not template.startswith(REPOSITORY_PATHS) and template not in OTHER_PATHS:
            continue
        subset[template] = {}  # every template competes when a path is matched
        if shape_of(template) not in shapes:
            continue  # ... but only the product's operations are kept
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            subset[template][method.upper()] = {
                "parameters": [
                    {"name": p["name"], "in": p["in"], "schema": p.get("schema", {})}
                    for p in operation.get("parameters", [])
                ],
                "responses": {
                    status: ((answer.get("content") or {}).get("application/json") or {}).get(
                        "schema"
                    )
                    for status, answer in operation["responses"].items()
                },
                "body": (
                    ((operation.get("requestBody") or {}).get("content") or {}).get(
                        "application/json"
                    )
                    or {}
                ).get("schema"),
            }
    del document
    if cache is not None:
        cache.set(key, subset)
    return subset


# -- OpenAPI 3.0 -> JSON Schema ------------------------------------------------------------------


def json_schema(schema: Any) -> Any:
    """OpenAPI 3.0's `nullable: true` is `anyOf [null, ...]` in JSON Schema (an `enum` of a
    nullable field does not list null, so a type list alone would not do)."""
    if isinstance(schema, list):
        return [json_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted = {
        key: (
            {name: json_schema(sub) for name, sub in value.items()}
            if key == "properties"
            else json_schema(value)
        )
        for key, value in schema.items()
        if key not in ("nullable", "example", "examples", "description", "discriminator")
    }
    if schema.get("nullable"):
        return {"anyOf": [{"type": "null"}, converted]}
    return converted


_validators: dict[int, Any] = {}


def problems(schema: Any, instance: Any) -> list[str]:
    from jsonschema import Draft4Validator

    validator = _validators.get(id(schema))
    if validator is None:
        validator = _validators[id(schema)] = Draft4Validator(json_schema(schema))
    return [
        f"{'/'.join(map(str, error.absolute_path)) or '(top)'}: {error.message[:200]}"
        for error in validator.iter_errors(instance)
    ]


def template_of(path: str, description: dict[str, Any]) -> str | None:
    """The description's template for a concrete path (a literal segment beats a parameter)."""
    best: tuple[int, str] | None = None
    parts = path.strip("/").split("/")
    for template in description:
        pieces = template.strip("/").split("/")
        if len(pieces) != len(parts):
            continue
        literal = 0
        for piece, part in zip(pieces, parts, strict=True):
            if piece.startswith("{") and piece.endswith("}"):
                continue
            if piece != part:
                break
            literal += 1
        else:
            if best is None or literal > best[0]:
                best = (literal, template)
    return best[1] if best else None


def product_paths() -> list[str]:
    """Every API path the product's forge names, as written in its source."""
    source = (ROOT / "unitmgr/forge_github.py").read_text()
    found = re.findall(r'f"((?:\{self\.prefix\}|/repos/\{repository\})/[^"]*)"', source)
    return sorted(set(found))


def as_template(source_path: str) -> str:
    path = source_path.replace("{self.prefix}", "/repos/{owner}/{repo}").replace(
        "/repos/{repository}", "/repos/{owner}/{repo}"
    )
    return shape_of(path)


def shape_of(template: str) -> str:
    """A path template with every parameter alike: `/repos/{x}/{x}/pulls/{x}`."""
    return re.sub(r"\{[^}]+\}", "{x}", template)


# -- driving the product through every path ------------------------------------------------------


def drive(github: Any) -> None:
    """Every forge call, through each of its branches, against a rich fake."""
    from unitmgr.forge_github import GitHubForge, GitHubRefused

    github.max_per_page = 2  # lists cross page boundaries with a handful of items
    sprint = github.add_milestone("Sprint 9")
    done = github.add_issue("done", labels=(), state="closed", state_reason="completed")
    github.add_issue("lib blocker", repository="other-org/lib", number=2)
    github.unreadable_repositories.add("secret-org/private")
    candidates = [github.add_issue(f"issue {n}", milestone=sprint) for n in range(3)]
    github.blocked_by[candidates[0]] = [done, ("other-org/lib", 2)]
    head = "a" * 40
    merged = github.add_pull("feat/old", "b" * 40, state="merged")
    number = github.add_pull("feat/x", head)
    github.add_pull("feat/x", "c" * 40, state="closed")
    github.review(number, "alice", "APPROVED", head, association="MEMBER")
    github.review(number, "drive-by", "APPROVED", head, association="CONTRIBUTOR")
    github.review(number, None, "COMMENTED", head, association="NONE")
    github.status(head, "ci/tests", "pending", at="2026-11-29T09:00:00Z")
    github.status(head, "ci/tests", "success", at="2026-11-29T09:05:00Z")
    github.status(head, "ci/docs", "failure")
    github.status(head, "ci/lint", "success")
    github.check_run(head, "build", conclusion="failure", app="ci-bot")
    github.check_run(head, "build", app="github-actions")
    github.check_run(head, "lint", status="in_progress", conclusion=None)
    github.protection["main"] = ["ci/tests", ("build", 15368)]
    github.protection["release/1.x"] = "forbidden"
    github.rulesets["main"] = [("e2e", None), ("build", 4242)]

    forge = GitHubForge(github.repository)
    issues, capped = forge.labelled_issues("ready", "Sprint 9", 2)
    assert capped and len(issues) == 2
    all_issues, _ = forge.labelled_issues("ready", None, 30)
    assert [i.number for i in all_issues] == candidates  # asked oldest first
    first = next(i for i in all_issues if i.number == candidates[0])
    assert {(d.repository, d.number) for d in forge.blocked_by(first)} == {
        (github.repository, done),
        ("other-org/lib", 2),
    }
    nobody = dataclasses.replace(first, number=candidates[1], blocked_by_count=None)
    assert forge.blocked_by(nobody) == []  # GitHub answers [] for an issue without blockers
    assert forge.dependency(github.repository, done).satisfied
    assert forge.dependency(github.repository, merged).merged
    assert forge.dependency("other-org/lib", 2).state == "open"
    assert forge.dependency("secret-org/private", 1).state == "unknown"
    assert forge.dependency(github.repository, 999).state == "unknown"
    pulls = forge.pulls_for_branch("feat/x")
    assert [p.state for p in pulls] == ["closed", "open"]  # GitHub's default: newest first
    assert forge.pull(number).head_sha == head
    reviews = forge.reviews(number)
    assert [r.user for r in reviews] == ["alice", "drive-by", None]
    checks = forge.checks(head)
    combined = next(e.body for e in github.exchanges if e.path.endswith("/status"))
    assert combined["state"] == "failure"  # computed: ci/docs failed
    assert {(c.name, c.app) for c in checks if c.kind == "check_run"} == {
        ("build", "ci-bot"),
        ("build", "github-actions"),
        ("lint", "github-actions"),
    }
    required = forge.required_checks("main")
    assert {(c.context, c.app_id, c.source) for c in required.checks} == {
        ("ci/tests", None, "branch protection"),
        ("build", 15368, "branch protection"),
        ("e2e", None, "rulesets"),
        ("build", 4242, "rulesets"),
    }
    assert forge.required_checks("release/1.x").unreadable == ["branch protection"]
    assert forge.required_checks("unprotected").checks == []
    github.allowed_methods = {"squash"}
    with pytest.raises(GitHubRefused) as refused:
        forge.merge(number, sha=head, method="merge")
    assert refused.value.status == 405 and "not allowed" in refused.value.message
    with pytest.raises(GitHubRefused) as moved:
        forge.merge(number, sha="d" * 40, method="squash")
    assert moved.value.status == 409
    assert forge.merge(number, sha=head, method="squash") == "e" * 40
    drive_feedback(github, forge)


def drive_feedback(github: Any, forge: Any) -> None:
    """The feedback reads (SPEC 3.17), each list across a page boundary."""
    head = "f" * 40
    number = github.add_pull("feat/fb", head)
    run = github.check_run(
        head,
        "tests",
        conclusion="failure",
        title="2 failed",
        summary="see below",
        annotations=(
            ("a.py", 3, "failure", "boom"),
            ("b.py", 4, "warning", "meh"),
            *((f"c{n}.py", n, "failure", "again") for n in range(3)),
        ),
    )
    github.check_run(head, "slow", status="queued", conclusion=None)
    github.status(head, "ci/docs", "error", description="docs broke", target_url=f"{head}.log")
    github.review(number, "alice", "CHANGES_REQUESTED", head, body="fix", association="OWNER")
    github.review(number, "bob", "COMMENTED", head, body="a thought")
    github.review(number, "carol", "APPROVED", head, body="fine")
    for n in range(3):
        github.comment(number, "dave", f"line note {n}", path="a.py", line=n + 1)
        github.comment(number, "erin", f"talk {n}", association="NONE")
    github.job_logs[run] = "2026-12-02T03:00:00.1Z step\n2026-12-02T03:00:01.2Z ##[error]boom\n"
    import tempfile

    with tempfile.TemporaryDirectory() as logs:
        forge.logs = Path(logs)  # the job's log: a 302 to blob storage, followed
        report = forge.ci_feedback(head)
        forge.logs = None
    (check,) = [item for item in report.failures if item.kind == "check"]
    assert check.excerpt == "step\n##[error]boom", check.excerpt
    assert check.body.splitlines() == ["2 failed", "see below", "a.py:3 boom"] + [
        f"c{n}.py:{n} again" for n in range(3)
    ]
    assert report.running == ["slow"]
    assert [item.key for item in report.failures if item.kind == "status"] == [
        f"status:{head}:ci/docs:error"
    ]
    items = forge.review_feedback(number)
    assert [item.kind for item in items] == ["review"] * 2 + ["review-comment"] * 3 + [
        "comment"
    ] * 3
    assert items[2].where == "a.py:1" and items[-1].association == "NONE"
    assert forge.viewer() == github.viewer


def test_the_fake_answers_as_githubs_description_says(
    github: Any, description: dict[str, Any]
) -> None:
    drive(github)
    exchanges = github.exchanges
    assert any("link" in {k.lower() for k in e.headers} for e in exchanges), "no page crossed"

    # The product's paths exist, and every one of them was exercised.
    exercised = {(e.method, template_of(e.raw_path, description)) for e in exchanges}
    named = product_paths()
    assert len(named) >= 12, named
    for source_path in named:
        shape = as_template(source_path)
        matching = [t for t in description if shape_of(t) == shape]
        assert matching, f"{source_path} is not a path of GitHub's API"
        assert set(matching) & {template for _, template in exercised}, (
            f"{source_path} was never exercised by the schema test"
        )

    failures: list[str] = []
    undocumented: set[tuple[str, str, str]] = set()
    basic_error = description["/repos/{owner}/{repo}/pulls/{pull_number}"]["GET"]["responses"][
        "404"
    ]
    proved: set[tuple[str, str, str]] = set()
    for exchange in exchanges:
        if exchange.path.startswith("/_blobs/"):
            continue  # a job log's short-lived URL: blob storage, not GitHub's API
        template = template_of(exchange.raw_path, description)
        operation = (description.get(template) or {}).get(exchange.method) if template else None
        if operation is None:
            failures.append(f"{exchange.method} {exchange.path}: not in GitHub's API")
            continue
        where = f"{exchange.method} {template} -> {exchange.status}"
        allowed = {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}
        for name, values in exchange.query.items():
            if name not in allowed:
                failures.append(f"{where}: unknown query parameter {name!r}")
                continue
            for value in values:
                schema = allowed[name]["schema"]
                instance: Any = int(value) if schema.get("type") == "integer" else value
                failures += [f"{where}: ?{name}={value}: {p}" for p in problems(schema, instance)]
        if exchange.request_body is not None:
            failures += [
                f"{where} request: {p}" for p in problems(operation["body"], exchange.request_body)
            ]
        status = str(exchange.status)
        schema = operation["responses"].get(status)
        if status not in operation["responses"]:
            # GitHub answers some statuses its description does not list (a 403 on protection
            # to a token without admin): they still carry a Basic Error.
            undocumented.add((exchange.method, template, status))
            schema = basic_error
        if schema is None:
            continue
        found = problems(schema, exchange.body)
        failures += [f"{where}: {p}" for p in found]
        key = (exchange.method, template, status)
        if not found and key not in proved:
            proved.add(key)
            damaged = _without_a_required_field(schema, exchange.body)
            if damaged is not None:
                removed, body = damaged
                assert problems(schema, body), f"{where}: removing {removed} went unnoticed"
    assert not failures, "\n".join(failures[:40])
    # Every success the product reads was validated and shown to fail without a required field.
    successes = {(m, t) for m, t, s in proved if s.startswith("2")}
    assert len(successes) >= 12, sorted(successes)
    assert undocumented <= {
        ("GET", "/repos/{owner}/{repo}/branches/{branch}/protection/required_status_checks", "403"),
        ("GET", "/repos/{owner}/{repo}/issues/{issue_number}", "404"),
    }, undocumented


def _without_a_required_field(schema: Any, body: Any) -> tuple[str, Any] | None:
    """A copy of `body` with the first required field of its first object removed."""
    target_schema, target = schema, body
    if target_schema.get("type") == "array":
        if not target:
            return None
        target_schema, target = target_schema["items"], target[0]
    required = target_schema.get("required") or []
    if not required or not isinstance(target, dict):
        return None
    damaged = copy.deepcopy(body)
    holder = damaged[0] if isinstance(damaged, list) else damaged
    del holder[required[0]]
    return required[0], damaged


def test_the_check_has_teeth(github: Any, description: dict[str, Any]) -> None:
    """On copies of the fake's own answers: a removed `author_association`, an `app` of the
    wrong type and a state outside the enum are each caught."""
    head = "a" * 40
    number = github.add_pull("feat/x", head)
    github.review(number, "alice", "APPROVED", head)
    github.check_run(head, "build")
    from unitmgr.forge_github import GitHubForge

    forge = GitHubForge(github.repository)
    forge.reviews(number)
    forge.checks(head)
    by_path = {e.path: e.body for e in github.exchanges}
    reviews_schema = description["/repos/{owner}/{repo}/pulls/{pull_number}/reviews"]["GET"][
        "responses"
    ]["200"]
    runs_schema = description["/repos/{owner}/{repo}/commits/{ref}/check-runs"]["GET"]["responses"][
        "200"
    ]
    reviews = by_path[f"/repos/acme/widgets/pulls/{number}/reviews"]
    runs = by_path[f"/repos/acme/widgets/commits/{head}/check-runs"]
    assert problems(reviews_schema, reviews) == []
    assert problems(runs_schema, runs) == []
    no_association = copy.deepcopy(reviews)
    del no_association[0]["author_association"]
    assert any("author_association" in p for p in problems(reviews_schema, no_association))
    bad_state = copy.deepcopy(reviews)
    bad_state[0]["author_association"] = "FRIEND"
    assert problems(reviews_schema, bad_state)
    bad_app = copy.deepcopy(runs)
    bad_app["check_runs"][0]["app"] = "github-actions"
    assert problems(runs_schema, bad_app)
    null_app = copy.deepcopy(runs)
    null_app["check_runs"][0]["app"] = None  # nullable: GitHub may send null
    assert problems(runs_schema, null_app) == []


def test_a_missing_description_skips_loudly_or_fails_in_ci(tmp_path: Path) -> None:
    absent = tmp_path / "api.github.com.deref.json"
    with pytest.raises(pytest.skip.Exception, match="NOT being validated"):
        missing_description(absent, required=False)
    with pytest.raises(pytest.fail.Exception, match="UNITMGR_REQUIRE_REAL_CLIS=1"):
        missing_description(absent, required=True)
