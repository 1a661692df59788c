"""Shell completion of option values (SPEC 3.18): recorded unit ids for `--unit`, and the allowed
values of `--partner`, `--lead`, `--format` and `--effort`.

Typer calls these while the shell asks (`_UNIT_COMPLETE=complete_bash ...`); each gets the
click context (the options parsed so far: `--repo`, `--partner`) and the word being completed.
The registry is executor-writable, so a unit id offered comes from a record file's *name* only —
never its contents — matching the id pattern in full (no newline, escape or space reaches the
shell), at most `MAX_IDS` of them from at most `MAX_SCANNED` directory entries; and a completion
never fails: any error offers nothing. Nothing here imports typer.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

UNIT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")  # SPEC 3.0, as validation.unit_id
MAX_IDS = 200
MAX_SCANNED = 5000
FORMATS = ("json", "table")


def _repo(ctx: Any) -> str:
    value = (getattr(ctx, "params", None) or {}).get("repo")
    return value if isinstance(value, str) and value else "."


def unit_ids(ctx: Any, incomplete: str) -> list[str]:
    """The recorded unit ids starting with `incomplete` (sorted, bounded)."""
    try:
        from registry import layout
        from unitmgr import git

        paths = git.resolve_repository(_repo(ctx))
        units = layout.units_dir(paths.common_git_dir)
        found = []
        with os.scandir(units) as entries:
            for scanned, entry in enumerate(entries):
                if scanned >= MAX_SCANNED:
                    break
                name = entry.name
                if not layout.is_record_name(name):
                    continue
                unit_id = name[: -len(layout.RECORD_SUFFIX)]
                if UNIT_ID.fullmatch(unit_id) and unit_id.startswith(incomplete):
                    found.append(unit_id)
        return sorted(found)[:MAX_IDS]
    except Exception:  # a completion offers nothing rather than break the shell's line
        return []


def _starting(values: tuple[str, ...], incomplete: str) -> list[str]:
    return [value for value in values if value.startswith(incomplete)]


def partners(incomplete: str) -> list[str]:
    from pair.partners import PARTNERS

    return _starting(PARTNERS, incomplete)


def leads(incomplete: str) -> list[str]:
    from pair.partners import LEADS

    return _starting(LEADS, incomplete)


def formats(incomplete: str) -> list[str]:
    return _starting(FORMATS, incomplete)


def efforts(ctx: Any, incomplete: str) -> list[str]:
    """The chosen `--partner`'s efforts, else every partner's (in the order the partners list
    them)."""
    try:
        from pair.partners import PARTNERS, adapter_for

        chosen = (getattr(ctx, "params", None) or {}).get("partner")
        names = [chosen] if chosen in PARTNERS else list(PARTNERS)
        levels: list[str] = []
        for name in names:
            levels += [level for level in adapter_for(name).efforts if level not in levels]
        return _starting(tuple(levels), incomplete)
    except Exception:
        return []


def for_flag(flag: str) -> Callable[..., list[str]] | None:
    """The completion of `flag`'s value, or None (the shell's own, e.g. a path)."""
    completions: dict[str, Callable[..., list[str]]] = {
        "--unit": unit_ids,
        "--force": unit_ids,
        "--partner": partners,
        "--lead": leads,
        "--format": formats,
        "--effort": efforts,
    }
    return completions.get(flag)
