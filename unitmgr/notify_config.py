"""The `[notify]` table of the project config (SPEC 3.16), read until `unitmgr/config.py` lands.

`.unitmgr.toml` at the repository's top level, then `<git-common-dir>/orchestrate/config.toml`
(this machine's) over it, key by key. It reads only `[notify]`; a file that is absent, unreadable
or not TOML, and a value of the wrong type, count as not set here (the config loader refuses them
with `config-invalid`). It writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.notify import NotifySettings

REPOSITORY_FILE = ".unitmgr.toml"
LOCAL_FILE = "config.toml"
MAX_CONFIG_BYTES = 1024 * 1024


def read_notify(toplevel: Path, registry_root: Path) -> NotifySettings | None:
    merged: dict[str, Any] = {}
    for path in (toplevel / REPOSITORY_FILE, registry_root / LOCAL_FILE):
        merged.update(_notify_table(path))
    if not merged:
        return None  # and registry.notify is never imported
    from registry.notify import EVENTS, NotifySettings

    command, url, events = merged.get("command"), merged.get("url"), merged.get("events")
    return NotifySettings(
        command=command if isinstance(command, str) and command.strip() else None,
        url=url if isinstance(url, str) and url.strip() else None,
        events=tuple(name for name in events if name in EVENTS)
        if isinstance(events, list)
        else None,
    )


def _notify_table(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFIG_BYTES:
            return {}
        table = tomllib.loads(path.read_text(encoding="utf-8")).get("notify")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}
    return table if isinstance(table, dict) else {}
