"""The bodies of the read commands that must start fast: `unit status --all` and `unit list`.

They are plain functions, free of Typer, so that `unitmgr/entry.py` can answer a simple command
line without building the Typer app (SPEC 7: start-up at most 5x `python -c pass`), and
`unitmgr/cli.py` calls the very same functions for every other spelling. This module must not
import typer, rich, github or git at module level.

An empty registry (no record file at all) is answered here, from one `git rev-parse` and a
directory listing: loading the views, the record types and `dataclasses` would cost more than
the whole answer. The documents are the ones unitmgr/views/observe.py builds for no units, and
the project config is still read (a problem in it is reported as `config_warning`, as with
units);
tests/test_entry.py checks both paths give the same bytes.
"""

from __future__ import annotations

from registry.errors import Rewrite, UsageError
from registry.output import Rendered

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from unitmgr.git import RepositoryPaths


def output_format(value: str) -> str:
    if value not in ("json", "table"):
        raise UsageError(
            "invalid-format",
            f"--format must be json or table, got {value!r}",
            next_command=Rewrite(set_options={"--format": "json"}),
        )
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
    fmt = output_format(format_name)
    paths, empty = _resolve(repo)
    if empty and not prs:  # `--prs` still opens GitHub, and refuses as it would
        from unitmgr.config import reads_warning, warning_field

        warning = reads_warning(paths.common_text)  # a config problem is reported, not refused
        document: dict[str, Any] = {
            "ok": True,
            "repository": paths.toplevel_text,
            "units": [],
            **warning_field(warning),
        }
    else:
        from unitmgr.views import observe
        from unitmgr.workspace import Workspace

        document = observe.list_units(Workspace.at(paths), with_pulls=prs)
    if fmt == "table":
        from unitmgr.views import table

        return Rendered(table.list_units(document))
    return document


def status_all(*, repo: str, lock_timeout: str, format_name: str) -> dict[str, Any] | Rendered:
    lock_free(lock_timeout)
    fmt = output_format(format_name)
    paths, empty = _resolve(repo)
    if empty:
        import time

        from registry.timeutil import iso_from_epoch
        from unitmgr.config import reads_warning, warning_field

        observed_at = iso_from_epoch(time.time(), milliseconds=True)
        warning = reads_warning(paths.common_text)  # a config problem is reported, not refused
        document: dict[str, Any] = {
            "ok": True,
            "repository": paths.toplevel_text,
            "observed_at": observed_at,
            "units": [],
            "overlaps": [],
            "unattributed_ref_changes": [],
            **warning_field(warning),
        }
    else:
        listing = EarlyListing(paths.toplevel)  # runs while the views are imported
        from unitmgr.views import observe
        from unitmgr.workspace import Workspace

        document = observe.status_all(Workspace.at(paths), listing=listing.rows)
    if fmt == "table":
        from unitmgr.views import table

        return Rendered(table.status_all(document))
    return document


class EarlyListing:
    """`git worktree list` started in a thread before `status --all` imports its views (about
    40 ms of imports that the listing, and the config listing its pins need, now run beside);
    `rows()` waits for it and answers as `git.list_worktrees` does, raising what it raised."""

    def __init__(self, toplevel: Path) -> None:
        import threading

        self._found: list[Any] = []
        self._thread = threading.Thread(target=self._list, args=(toplevel,), daemon=True)
        self._thread.start()

    def _list(self, toplevel: Path) -> None:
        from unitmgr import git

        try:
            self._found.append(("rows", git.list_worktrees(cwd=toplevel)))
        except BaseException as error:  # raised again in the thread that asks
            self._found.append(("error", error))

    def rows(self) -> list[Any]:
        self._thread.join()
        kind, value = self._found[0]
        if kind == "error":
            raise value
        return list(value)


def _resolve(repo: str) -> tuple[RepositoryPaths, bool]:
    """The repository's paths, and whether its registry holds no record file at all (a missing
    or non-git `repo` is refused here, as opening a workspace refuses it)."""
    from registry import crashlog, layout
    from unitmgr import git

    paths = git.resolve_repository(repo)  # its Paths are made only if a view needs them
    crashlog.remember(layout.registry_root_text(paths.common_text))  # as opening the registry does
    return paths, not layout.unit_ids(layout.units_dir_text(paths.common_text))
