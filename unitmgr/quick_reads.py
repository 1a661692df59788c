"""The bodies of the read commands that must start fast: `unit status --all` and `unit list`.

They are plain functions, free of Typer, so that `unitmgr/entry.py` can answer a simple command
line without building the Typer app (SPEC 7: start-up at most 5x `python -c pass`), and
`unitmgr/cli.py` calls the very same functions for every other spelling. This module must not
import typer, rich, github or git at module level.
"""

from __future__ import annotations

from typing import Any

from registry.errors import UsageError
from registry.output import Rendered


def output_format(value: str) -> str:
    if value not in ("json", "table"):
        raise UsageError("invalid-format", f"--format must be json or table, got {value!r}")
    return value


def lock_free(lock_timeout: str) -> None:
    """A command that never waits for a lock still takes `--lock-timeout` (a lead passes it to
    every command), and still refuses a bad value."""
    from unitmgr import validation

    validation.lock_timeout(lock_timeout)


def list_units(
    *, prs: bool, repo: str, lock_timeout: str, format_name: str
) -> dict[str, Any] | Rendered:
    lock_free(lock_timeout)
    from unitmgr.views import observe
    from unitmgr.workspace import Workspace

    fmt = output_format(format_name)
    document = observe.list_units(Workspace.open(repo), with_pulls=prs)
    if fmt == "table":
        from unitmgr.views import table

        return Rendered(table.list_units(document))
    return document


def status_all(*, repo: str, lock_timeout: str, format_name: str) -> dict[str, Any] | Rendered:
    lock_free(lock_timeout)
    fmt = output_format(format_name)
    from unitmgr.views import observe
    from unitmgr.workspace import Workspace

    document = observe.status_all(Workspace.open(repo))
    if fmt == "table":
        from unitmgr.views import table

        return Rendered(table.status_all(document))
    return document
