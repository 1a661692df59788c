"""`unit config` (SPEC 3.16): the effective project settings and where each comes from.

Reads the two config files; writes nothing, takes no lock, runs no command.
"""

from __future__ import annotations

import json
from typing import Any

from unitmgr.config import load_config
from unitmgr.options import ConfigOptions
from unitmgr.workspace import Workspace


def run(repo: str, options: ConfigOptions) -> dict[str, Any]:
    workspace = Workspace.open(repo)
    config = load_config(workspace.toplevel, workspace.common_git_dir)
    return {"ok": True, "repository": str(workspace.toplevel), **config.describe()}


def table(document: dict[str, Any]) -> str:
    """One line per key: key, value, source (with the file for a key a file sets)."""
    files = document["files"]
    lines = [
        f"repository file: {files['repository']['path']}"
        + ("" if files["repository"]["present"] else " (absent)"),
        f"local file:      {files['local']['path']}"
        + ("" if files["local"]["present"] else " (absent)"),
        "",
    ]
    settings = document["settings"]
    width = max(len(key) for key in settings)
    for key, setting in settings.items():
        value = json.dumps(setting["value"], ensure_ascii=False)
        lines.append(f"{key.ljust(width)}  {value}  ({setting['source']})")
    return "\n".join(lines) + "\n"
