"""`unit intake` (SPEC 3.2): which ready issues may start, and how many slots are free.

Read-only and lock-free. Capacity comes from the registry plus each unit's live PR state; the
candidates are the open issues carrying the label (and milestone), pull requests left out, minus
the issues units already record. Each candidate lists its dependencies — `Depends on #N`,
`Blocked by #N` (comma lists allowed), task-list items `- [ ] #N` / `- [x] #N`, and GitHub's
native blocked-by list — with their state; a candidate is `ready` only when every dependency is
satisfied: a merged pull request, or an issue closed for a reason other than `not_planned`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from registry.errors import StateError
from unitmgr import capacity, validation
from unitmgr.forge import NOT_CONFIGURED, Dependency, Forge, Issue
from unitmgr.forge_github import GitHubRefused, open_forge
from unitmgr.workspace import Workspace

_DEPENDS = re.compile(
    r"(?i)\b(?:depends\s+on|blocked\s+by)\b:?\s*((?:#\d+(?:\s*(?:,|and|&)\s*)?)+)"
)
_TASK = re.compile(r"(?m)^\s*[-*]\s+\[[ xX]\]\s+#(\d+)\b")


@dataclass(frozen=True)
class IntakeOptions:
    label: str | None = None
    milestone: str | None = None
    max_active: str = "2"
    max_held: str = "2"
    limit: str = "30"


def referenced_dependencies(body: str) -> list[int]:
    """`#N` references that declare a dependency, in order of first mention."""
    numbers: list[int] = []
    for match in _DEPENDS.finditer(body or ""):
        numbers += [int(n) for n in re.findall(r"#(\d+)", match.group(1))]
    numbers += [int(n) for n in _TASK.findall(body or "")]
    return list(dict.fromkeys(numbers))


def run(repo: str, options: IntakeOptions) -> dict[str, Any]:
    label = validation.required(options.label, "--label", "intake")
    max_active = validation.limit(options.max_active, "--max-active")
    max_held = validation.limit(options.max_held, "--max-held")
    limit = validation.limit(options.limit, "--limit")
    workspace = Workspace.open(repo)
    forge = open_forge(workspace)
    if forge is None:
        raise StateError("github-not-configured", f"intake {NOT_CONFIGURED}")
    entries = workspace.registry.scan()
    records = capacity.refuse_unreadable(entries)
    pulls = capacity.live_pr_state(forge, records)
    admission = capacity.compute(entries, max_active=max_active, max_held=max_held, pulls=pulls)
    issues, capped = forge.labelled_issues(label, options.milestone, limit)
    recorded = {record.issue for record in records if record.issue is not None}
    known: dict[int, Dependency] = {}  # candidates often share dependencies: read each once

    def dependency(number: int) -> Dependency:
        if number not in known:
            known[number] = forge.dependency(number)
        return known[number]

    candidates = [
        candidate(forge, issue, dependency) for issue in issues if issue.number not in recorded
    ]
    return {
        "ok": True,
        "repository": forge.repository,
        "capacity": admission,
        "candidates": candidates,
        "ready": [c["number"] for c in candidates if c["ready"]],
        "capped": capped,
    }


def candidate(
    forge: Forge, issue: Issue, dependency: Callable[[int], Dependency]
) -> dict[str, Any]:
    numbers = referenced_dependencies(issue.body)
    unreadable_native = False
    try:
        for number in forge.blocked_by(issue.number):
            if number not in numbers:
                numbers.append(number)
    except GitHubRefused:
        unreadable_native = True
    dependencies = [dependency(number) for number in numbers]
    document: dict[str, Any] = {
        "number": issue.number,
        "title": issue.title,
        "url": issue.url,
        "labels": issue.labels,
        "milestone": issue.milestone,
        "depends_on": [dependency.to_json() for dependency in dependencies],
        "ready": not unreadable_native and all(d.satisfied for d in dependencies),
    }
    if unreadable_native:
        document["depends_on_unreadable"] = "the native blocked-by list could not be read"
    return document
