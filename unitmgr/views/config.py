"""`unit config` (SPEC 3.16): the effective project settings and where each comes from, and
whether each configured command (`setup`, `notify.command`) is approved to run (SPEC 8).

Reads the two config files and the approvals; writes nothing, takes no lock, runs no command.
An old machine file still in the common dir is reported (`config_migration`, `migrated:
false`), never read as config: `unit create` or `unit config --approve` moves it.
"""

from __future__ import annotations

import json

from unitmgr import config_trust
from unitmgr.config import load_naming_every_problem
from unitmgr.options import ConfigOptions
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def run(repo: str, options: ConfigOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    migration = config_trust.migrate_legacy(workspace.common_git_dir, dry_run=True)
    config = load_naming_every_problem(workspace.common_git_dir)
    approvals = config_trust.read_approvals(workspace.common_git_dir)
    document = {
        "ok": True,
        "repository": str(workspace.toplevel),
        **config.describe(config_trust.states(config, approvals)),
        "approvals_file": str(config_trust.approvals_file(workspace.common_git_dir)),
    }
    if migration is not None:
        document["config_migration"] = migration
    return document


def table(document: dict[str, Any]) -> str:
    """One line per key: key, value, source (and the approval of a configured command)."""
    files = document["files"]
    repository = files["repository"]
    lines = [
        f"repository file: {repository['path'] or '(none: no main worktree)'}"
        + ("" if repository["present"] or not repository["path"] else " (absent)"),
        f"local file:      {files['local']['path']}"
        + ("" if files["local"]["present"] else " (absent)"),
        "",
    ]
    settings = document["settings"]
    width = max(len(key) for key in settings)
    for key, setting in settings.items():
        value = json.dumps(setting["value"], ensure_ascii=False)
        approval = f", {setting['approval']}" if "approval" in setting else ""
        lines.append(f"{key.ljust(width)}  {value}  ({setting['source']}{approval})")
    lines += _migration_lines(document)
    return "\n".join(lines) + "\n"


def approved_table(document: dict[str, Any]) -> str:
    """`unit config --approve --format table`: one line per command."""
    verb = "would approve" if document.get("dry_run") else "approved"
    lines = [
        f"{verb}: {entry['key']} = {json.dumps(entry['value'], ensure_ascii=False)}"
        f"  ({entry['file']})"
        for entry in document.get("would_approve" if document.get("dry_run") else "approved", [])
    ]
    lines += [
        f"already approved: {entry['key']} = {json.dumps(entry['value'], ensure_ascii=False)}"
        for entry in document["already_approved"]
    ]
    return "\n".join((lines or ["nothing to approve"]) + _migration_lines(document)) + "\n"


def _migration_lines(document: dict[str, Any]) -> list[str]:
    migration = document.get("config_migration")
    if migration is None:
        return []
    done = "moved" if migration["migrated"] else "to be moved (by unit create or --approve)"
    return [
        "",
        f"! old machine config {migration['from']} {done} to {migration['to']}, every line "
        f"commented out; keys: {', '.join(migration['keys']) or '(none)'}",
    ]
