"""`unit intake` (SPEC 3.2): which ready issues may start, and how many slots are free.

Read-only and lock-free. Capacity comes from the registry plus each unit's live PR state; the
candidates are the open issues carrying the label (and milestone), oldest first, pull requests
left out, minus the issues units already record. Each candidate lists its dependencies — `Depends
on #N`, `Blocked by #N` (comma lists allowed), task-list items `- [ ] #N` / `- [x] #N`, any of them
as `owner/repo#N` for another repository, and GitHub's native blocked-by list — each in its own
repository, with its state; a candidate is `ready` only when every dependency is satisfied: a
merged pull request, or an issue closed as completed (or with no reason). Native blocked-by items
are used as GitHub returned them; nothing here re-reads a dependency by number in the wrong
repository.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from registry.errors import StateError
from unitmgr import admission, validation
from unitmgr.config import flag_or_config, load_config
from unitmgr.forge import NOT_CONFIGURED, Dependency, Forge, Issue
from unitmgr.github_remote import open_forge  # GitHub's adapter only for a repo on it
from unitmgr.options import IntakeOptions
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

_REFERENCE = r"(?:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#\d+"
_DEPENDS = re.compile(
    rf"(?i)\b(?:depends\s+on|blocked\s+by)\b:?\s*((?:{_REFERENCE}(?:\s*(?:,|and|&)\s*)?)+)"
)
_TASK = re.compile(rf"(?m)^\s*[-*]\s+\[[ xX]\]\s+({_REFERENCE})\b")
_PARTS = re.compile(r"(?:([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+))?#(\d+)")

Key = tuple[str, int]  # (owner/name, number)


def referenced_dependencies(body: str, repository: str) -> list[Key]:
    """The references that declare a dependency, in order of first mention, each with its
    repository (`#N` is `repository`'s; `owner/repo#N` names its own)."""
    references: list[str] = []
    for match in _DEPENDS.finditer(body or ""):
        references += re.findall(_REFERENCE, match.group(1))
    references += _TASK.findall(body or "")
    keys: list[Key] = []
    for reference in references:
        parts = _PARTS.fullmatch(reference)
        if parts is None:
            continue
        keys.append((_same_or(parts.group(1) or repository, repository), int(parts.group(2))))
    return list(dict.fromkeys(keys))


def _same_or(named: str, repository: str) -> str:
    """GitHub names are case-insensitive: `Acme/Widgets#3` is `acme/widgets`'s #3."""
    return repository if named.lower() == repository.lower() else named


def run(repo: str, options: IntakeOptions) -> dict[str, Any]:
    label = validation.required(options.label, "--label", "intake")
    for flag, value in (("--max-active", options.max_active), ("--max-held", options.max_held)):
        if value is not None:  # a bad flag is refused before the repository is opened
            validation.limit(value, flag)
    limit = validation.limit(options.limit, "--limit")
    workspace = Workspace.open(repo)
    config = load_config(workspace.toplevel, workspace.common_git_dir)
    max_active = int(flag_or_config(options.max_active, config, "max_active"))
    max_held = int(flag_or_config(options.max_held, config, "max_held"))
    forge = open_forge(workspace)
    if forge is None:
        raise StateError("github-not-configured", f"intake {NOT_CONFIGURED}")
    entries = workspace.registry.scan()
    records = admission.refuse_unreadable(entries)
    pulls = admission.live_pr_state(forge, records)
    capacity = admission.compute(entries, max_active=max_active, max_held=max_held, pulls=pulls)
    issues, capped = forge.labelled_issues(label, options.milestone, limit)
    recorded = {record.issue for record in records if record.issue is not None}
    known: dict[Key, Dependency] = {}  # candidates often share dependencies: read each once

    def dependency(key: Key) -> Dependency:
        if key not in known:
            known[key] = forge.dependency(*key)
        return known[key]

    candidates = [
        candidate(forge, issue, dependency) for issue in issues if issue.number not in recorded
    ]
    return {
        "ok": True,
        "repository": forge.repository,
        "capacity": capacity,
        "candidates": candidates,
        "ready": [c["number"] for c in candidates if c["ready"]],
        "capped": capped,
    }


def candidate(
    forge: Forge, issue: Issue, dependency: Callable[[Key], Dependency]
) -> dict[str, Any]:
    from unitmgr.forge_github import GitHubRefused  # loaded with the forge itself

    keys = referenced_dependencies(issue.body, forge.repository)
    native: dict[Key, Dependency] = {}
    unreadable_native = False
    try:
        for item in forge.blocked_by(issue):
            native[(_same_or(item.repository, forge.repository), item.number)] = item
    except GitHubRefused:
        unreadable_native = True
    keys += [key for key in native if key not in keys]
    dependencies = [native[key] if key in native else dependency(key) for key in keys]
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
