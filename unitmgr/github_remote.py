"""Which GitHub repository a workspace's forge is, and opening it only when there is one.

`GITHUB_REPOSITORY`, else the origin's `owner/name` when the origin is on GitHub. Kept apart from
unitmgr/forge.py (its value types are dataclasses) and unitmgr/forge_github.py (the adapter), so
a command that only asks "is GitHub configured?" — `status --unit` without an origin on GitHub,
for one — pays for neither (SPEC 7 start-up); unitmgr/forge.py re-exports these names.
"""

from __future__ import annotations

import os
import re
import urllib.parse

from registry.errors import StateError
from registry.lazy_re import lazy

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable

    from unitmgr.forge_github import GitHubForge
    from unitmgr.workspace import Workspace

_REMOTE = lazy(  # compiled for an origin URL only (SPEC 7)
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


def open_forge(workspace: Workspace) -> GitHubForge | None:
    """The repository's forge, or None when GitHub is not configured for it (the adapter is
    imported only for a repository on GitHub)."""
    from unitmgr import git

    repository = configured_repository(lambda: git.remote_url(workspace.toplevel))
    if not repository:
        return None
    from unitmgr.forge_github import GitHubForge

    return GitHubForge(repository)
