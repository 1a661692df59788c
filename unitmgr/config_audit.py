"""The lead's side of the config audit (SPEC 8): the repository's executable git config, hooks
and attributes, against the baseline the lead accepted.

Every mutating `unit` command (create, restaff, addendum, scope --approve, verify, merge,
dismantle, cancel — their `--dry-run` alike) calls `require_trusted` once, before anything
else: a key, hook or file the baseline does not hold refuses it `repo-config-untrusted`, with
the exact removal in `next`. The first such command in a repository accepts what is there
(trust on first use, said in its output); `unit doctor --trust` accepts a deliberate change;
unitmgr accepts what it installs itself (the ref guard hook, `accept_paths`). Reads show the
difference (`status --all`/`list` `config_changes`) and refuse nothing: the lead's own git is
neutralized, so a planted key runs only in the executors' git.

The snapshot and the baseline file are pair/config_audit.py's; the one git call is
unitmgr/git.py's `config_listing`. This module never writes inside the common dir.
"""

from __future__ import annotations

import contextlib
import shlex
from pathlib import Path

from pair import config_audit
from registry.errors import StateError
from unitmgr import git

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

    from pair.config_audit import Item

    Items = dict[tuple[str, str, str], Item]

NAMED_IN_REASON = 8


def snapshot(toplevel: Path, common_dir: Path) -> Items:
    """The repository's snapshot now (one `git config --list`, one per `config.worktree`)."""
    listing = git.config_listing(cwd=toplevel)
    if listing is None:
        raise StateError(
            "git-failed",
            f"git config --list fails in {toplevel}: the repository's config is unreadable",
            next_step=f"git -C {shlex.quote(str(toplevel))} config --list",
        )
    return config_audit.snapshot(
        listing,
        cwd=toplevel,
        common_dir=common_dir,
        list_file=lambda path: git.config_listing(cwd=toplevel, file=path),
    )


def untrusted(found: list[dict[str, Any]], common_dir: Path) -> StateError:
    """`repo-config-untrusted`: every foreign item named, its removal the `next` step."""
    names = [
        f"{change['key_or_path']} in {change['file']}"
        if change["kind"] == "config"
        else str(change["key_or_path"])
        for change in found
    ]
    shown = ", ".join(names[:NAMED_IN_REASON])
    if len(names) > NAMED_IN_REASON:
        shown += f" and {len(names) - NAMED_IN_REASON} more"
    return StateError(
        "repo-config-untrusted",
        f"the repository's git config, hooks or attributes changed since the lead accepted "
        f"them (an executor can write them): {shown}",
        next_step=removals(found),
        detail={
            "changes": found,
            "baseline": str(config_audit.baseline_file(common_dir)),
            "trust": "unit doctor --trust accepts the current state instead",
        },
    )


def require_trusted(repo: str, *, command: str, dry_run: bool) -> dict[str, Any] | None:
    """Refuse when the repository holds a foreign key, hook or file; on first use accept what
    is there (not under `--dry-run`, which writes nothing) and return what was accepted."""
    try:
        paths = git.resolve_repository(repo)
    except StateError:
        return None  # not a repository: the command refuses it in its own words
    current = snapshot(paths.toplevel, paths.common_git_dir)
    baseline = config_audit.read_baseline(paths.common_git_dir)
    if baseline is None:
        reason = f"trust on first use: {command}"
        file = config_audit.baseline_file(paths.common_git_dir)
        if not dry_run:
            config_audit.write_baseline(paths.common_git_dir, current, reason=reason)
        return {
            "taken": not dry_run,
            "file": str(file),
            "why": "the first mutating unit command in this repository accepts the git config, "
            "hooks and attributes it finds; later changes are refused (unit doctor)",
            "accepted": [_summary(item) for _, item in sorted(current.items())],
        }
    found = config_audit.foreign(current, _with_own_hook(current, baseline, paths.common_git_dir))
    if found:
        raise untrusted(found, paths.common_git_dir)
    return None


def _with_own_hook(current: Items, baseline: Items, common_dir: Path) -> Items:
    """The baseline, plus unitmgr's own `reference-transaction` hook wherever it is found as
    this lead writes it (`ref_guard.own_hook_fingerprint`): concurrent creates install it while
    others audit, and one must not refuse the hook another has written but not yet accepted."""
    from unitmgr import ref_guard

    own = [
        identity
        for identity, item in current.items()
        if item.kind == "hook"
        and Path(item.key_or_path).name == ref_guard.HOOK_NAME
        and getattr(baseline.get(identity), "value", None) != item.value
    ]
    if not own:
        return baseline
    expected = ref_guard.own_hook_fingerprint(common_dir)
    trusted = dict(baseline)
    for identity in own:
        if current[identity].value == expected:
            trusted[identity] = current[identity]
    return trusted


def forget_first_use(first_use: dict[str, Any]) -> None:
    """Undo `require_trusted`'s first-use baseline (the command was refused as bad input)."""
    import os

    with contextlib.suppress(FileNotFoundError):
        os.unlink(first_use["file"])


def changes_now(toplevel: Path, common_dir: Path) -> list[dict[str, Any]] | None:
    """What `status --all` and `list` show: the foreign items in force now (None before the
    first use, or when git cannot list the config — a read still answers)."""
    baseline = config_audit.read_baseline(common_dir)
    if baseline is None:
        return None
    try:
        current = snapshot(toplevel, common_dir)
    except StateError as error:
        return [
            {
                "kind": "config",
                "key_or_path": "(the whole config)",
                "file": str(common_dir / "config"),
                "before": None,
                "after": error.reason,
            }
        ]
    return config_audit.foreign(current, _with_own_hook(current, baseline, common_dir))


def accept_paths(toplevel: Path, common_dir: Path, paths: list[Path]) -> None:
    """Record what unitmgr itself just installed at `paths` (a hook) as accepted, leaving the
    rest of the baseline as it was. Without a baseline nothing is written: the first use
    accepts everything."""
    baseline = config_audit.read_baseline(common_dir)
    if baseline is None:
        return
    import os

    current = snapshot(toplevel, common_dir)
    for given in paths:
        path = Path(os.path.realpath(given.parent)) / given.name  # as the snapshot names it
        for identity in [key for key in (*baseline, *current) if key[1] == str(path)]:
            baseline.pop(identity, None)
            if identity in current:
                baseline[identity] = current[identity]
    config_audit.write_baseline(common_dir, baseline, reason="installed by unitmgr")


def _summary(item: Item) -> dict[str, str | None]:
    shown = config_audit.changes({}, {item.identity: item})
    return {
        "kind": item.kind,
        "key_or_path": item.key_or_path,
        "file": item.file,
        "value": shown[0]["after"] if shown else None,
    }


def removal(change: dict[str, str | None]) -> str:
    """The one shell line that removes a foreign item."""
    path = str(change["key_or_path"])
    if change["kind"] == "config":
        file = str(change["file"])
        if path == file:  # a whole file git cannot list (an unreadable config.worktree)
            return f"rm -f {shlex.quote(path)}"
        return f"git config --file {shlex.quote(file)} --unset-all {shlex.quote(path)}"
    if (change.get("after") or "") == "directory" or (change.get("after") or "").startswith(
        "overflow"
    ):
        return f"rm -rf {shlex.quote(path)}"
    return f"rm -f {shlex.quote(path)}"


def removals(found: list[dict[str, str | None]]) -> str:
    lines: list[str] = []
    for change in found:
        line = removal(change)
        if line not in lines:
            lines.append(line)
    return " && ".join(lines)


# -- unit doctor --------------------------------------------------------------------------------


def doctor(repo: str, *, trust: bool) -> dict[str, Any]:
    """`unit doctor`: everything that can make git run something, who set it, whether the lead
    accepted it and how to remove it; `--trust` accepts the current state."""
    from pair.gitconfig import parse_listing

    paths = git.resolve_repository(repo)
    toplevel, common_dir = paths.toplevel, paths.common_git_dir
    current = snapshot(toplevel, common_dir)
    baseline = config_audit.read_baseline(common_dir)
    listing = git.config_listing(cwd=toplevel) or ""
    user_keys = [
        {
            "kind": "config",
            "key_or_path": entry.key,
            "file": entry.file or entry.origin,
            "scope": entry.scope,
            "value": config_audit.shown(entry.value),
            "trust": "user",
            "why": f"{entry.scope} scope: the user's own file, which the audit does not police",
        }
        for entry in parse_listing(listing)
        if entry.executable and entry.scope in ("global", "system")
    ]
    found = {
        (change["kind"], change["key_or_path"], change["file"]): change
        for change in (config_audit.foreign(current, baseline) if baseline is not None else [])
    }
    listed: dict[str, list[dict[str, Any]]] = {"config": user_keys, "hook": [], "attributes": []}
    for identity, item in sorted(current.items()):
        entry: dict[str, Any] = {**_summary(item), "scope": item.scope}
        if baseline is None:
            entry.update(trust="first-use", why="no baseline yet: the next write accepts it")
        elif identity in found:
            before = found[identity]["before"]
            entry.update(
                trust="foreign",
                why="not in the accepted state" if before is None else f"was: {before}",
                remove=removal(found[identity]),
            )
        else:
            entry.update(trust="trusted", why="in the accepted state")
        listed[item.kind].append(entry)
    document: dict[str, Any] = {
        "ok": True,
        "repository": str(toplevel),
        "baseline": {
            "file": str(config_audit.baseline_file(common_dir)),
            "exists": baseline is not None,
        },
        "keys": listed["config"],
        "hooks": listed["hook"],
        "attributes": listed["attributes"],
        "foreign": list(found.values()),
    }
    if found and not trust:
        document["next"] = removals(list(found.values()))
    if trust:
        file = config_audit.write_baseline(common_dir, current, reason="unit doctor --trust")
        document["trusted"] = {
            "file": str(file),
            "accepted": [_summary(item) for _, item in sorted(current.items())],
            "was_foreign": list(found.values()),
        }
        document["baseline"]["exists"] = True
        document["foreign"] = []
        for group in (listed["config"], listed["hook"], listed["attributes"]):
            for entry in group:
                if entry["trust"] in ("foreign", "first-use"):
                    entry.update(trust="trusted", why="accepted now (--trust)")
                    entry.pop("remove", None)
    return document
