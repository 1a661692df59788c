"""Which config-file commands may run (SPEC 8 "Config files"): approvals, and the one-time move
of the machine's config out of the git common dir.

A `setup` or `notify.command` a config file gives (unitmgr/config.py `COMMAND_KEYS`) runs only
once the user approved that exact command: `unit config --approve` stores its sha256 in
`$XDG_CONFIG_HOME/unitmgr/approvals/<repository id>.json` (0600, written atomically), outside
everything an executor can write. A new or changed command is exit 1 `config-unapproved` for a
create (`require_approved`); for a notification it is not run (`notify-unapproved`, see
unitmgr/notify.py). A `--setup` on the command line is the lead's own and needs no approval.

The old machine file, `<common-dir>/orchestrate/config.toml`, sat where an executor can write:
`migrate_legacy` moves it once to the new place with every line commented out (none of it is
known to be the user's), says so on stderr and in the command's document, and renames the old
file `config.toml.migrated`. Once the new file exists the old place is never looked at again.

This module writes only the approvals file, the migrated file and that rename; it runs nothing.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from registry import layout, userdirs
from registry.atomic import write_text_atomic
from registry.errors import StateError
from registry.redact import redact
from registry.timeutil import iso_z
from registry.userdirs import sha256  # not hashlib: its OpenSSL costs start-up (SPEC 7)
from unitmgr.config import COMMAND_KEYS, ProjectConfig, machine_file

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

LEGACY_FILE = "config.toml"  # in <common-dir>/orchestrate/, before revision 3
LEGACY_MOVED = "config.toml.migrated"
APPROVALS_VERSION = 1


# -- approvals ------------------------------------------------------------------------------


def approvals_file(common_dir: Path) -> Path:
    return userdirs.config_home() / "approvals" / f"{userdirs.repository_id(common_dir)}.json"


def digest(command: str) -> str:
    return sha256(command.encode("utf-8", "surrogateescape")).hexdigest()


def read_approvals(common_dir: Path) -> dict[str, dict[str, Any]]:
    """key -> {sha256, value, file, approved_at}. A missing, unreadable or malformed file
    approves nothing (the safe direction: the user approves again)."""
    from unitmgr.validation import BoundedReadRefused, read_bounded

    try:
        document = json.loads(read_bounded(str(approvals_file(common_dir))))
    except (BoundedReadRefused, ValueError):
        return {}
    approved = document.get("approved") if isinstance(document, dict) else None
    if not isinstance(approved, dict):
        return {}
    return {
        key: entry
        for key, entry in approved.items()
        if key in COMMAND_KEYS and isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
    }


def is_approved(approvals: dict[str, dict[str, Any]], key: str, command: str) -> bool:
    entry = approvals.get(key)
    return entry is not None and entry.get("sha256") == digest(command)


def states(config: ProjectConfig, approvals: dict[str, dict[str, Any]]) -> dict[str, str]:
    """For each command key a file sets: `approved` or `unapproved` (for `unit config`)."""
    found = {}
    for key in COMMAND_KEYS:
        command = config.command_from_file(key)
        if command is not None:
            found[key] = "approved" if is_approved(approvals, key, command) else "unapproved"
    return found


def entry_for(config: ProjectConfig, key: str, command: str) -> dict[str, Any]:
    """What `unit config --approve` reports (and stores) for one command."""
    file = config.file_of(key)
    return {
        "key": key,
        "value": command,
        "sha256": digest(command),
        "source": config.source(key),
        "file": str(file) if file else None,
    }


def pending(
    config: ProjectConfig, approvals: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The command keys a file sets, split into (not yet approved, already approved)."""
    waiting: list[dict[str, Any]] = []
    approved: list[dict[str, Any]] = []
    for key in COMMAND_KEYS:
        command = config.command_from_file(key)
        if command is not None:
            entry = entry_for(config, key, command)
            (approved if is_approved(approvals, key, command) else waiting).append(entry)
    return waiting, approved


def store(common_dir: Path, entries: list[dict[str, Any]]) -> Path:
    """Record `entries` as approved (each replaces its key's earlier approval)."""
    path = approvals_file(common_dir)
    userdirs.private_dir(path.parent)
    approved = read_approvals(common_dir)
    at = iso_z()
    for entry in entries:
        approved[entry["key"]] = {
            "sha256": entry["sha256"],
            "value": entry["value"],  # for people: the hash is what is compared
            "file": entry["file"],
            "approved_at": at,
        }
    document = {
        "version": APPROVALS_VERSION,
        "common_dir": os.path.realpath(common_dir),
        "approved": approved,
    }
    write_text_atomic(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", mode=0o600)
    return path


def require_approved(config: ProjectConfig, key: str, *, common_dir: Path, toplevel: Path) -> None:
    """Refuse (exit 1 `config-unapproved`) a command key a file sets that the user has not
    approved as it now reads."""
    command = config.command_from_file(key)
    if command is None:
        return
    approvals = read_approvals(common_dir)
    if is_approved(approvals, key, command):
        return
    earlier = approvals.get(key)
    file = config.file_of(key)
    state = "has changed since it was approved" if earlier else "is not approved"
    why = (
        "a cluster address from a config file is used only once approved (the lead runs what "
        "that cluster returns: review it, then approve it)"
        if key == "ray.address"
        else "a command from a config file runs only once approved (review it, then approve "
        "it; given as a flag — --setup, --validation, --model — it needs none)"
    )
    raise StateError(
        "config-unapproved",
        f"{key} from {file} {state}: {command!r} — {why}",
        detail={
            "key": key,
            "file": str(file) if file else None,
            "source": config.source(key),
            "value": command,
            "sha256": digest(command),
            "approved_sha256": earlier.get("sha256") if earlier else None,
        },
        next_step=shlex.join(["unit", "config", "--approve", "--repo", str(toplevel)]),
    )


# -- the old machine file ---------------------------------------------------------------------


def legacy_file(common_dir: Path) -> Path:
    return layout.registry_root(common_dir) / LEGACY_FILE


def migrate_legacy(common_dir: Path, *, dry_run: bool) -> dict[str, Any] | None:
    """Move an old `<common-dir>/orchestrate/config.toml` to the machine file, inert, once.

    Nothing happens (None) when the machine file exists — from then on the old place is never
    looked at — or when there is no old file. Otherwise the document's `config_migration`:
    `{from, to, keys, migrated}` (`migrated: false` on a dry run, which writes nothing)."""
    target = machine_file(common_dir)
    source = legacy_file(common_dir)
    if os.path.lexists(target) or not os.path.lexists(source):
        return None
    from unitmgr.validation import BoundedReadRefused, read_bounded

    text, unreadable = "", None
    if os.path.islink(source):  # an executor's link could name any file the user can read
        unreadable = f"{source} is a symbolic link (not followed)"
    else:
        try:
            text = read_bounded(str(source)).decode("utf-8", "replace")
        except BoundedReadRefused as refused:
            unreadable = f"{source} {refused}"
    keys = _keys(text)
    notice: dict[str, Any] = {
        "from": str(source),
        "to": str(target),
        "keys": keys,
        "migrated": False,
        "why": "the git common dir is writable by every executor; none of its lines is in "
        "effect until you uncomment it in the new file (setup and notify.command then also "
        "need: unit config --approve)",
    }
    if unreadable:
        notice["unreadable"] = unreadable
    if dry_run:
        return notice
    header = (
        f"# Moved here by unitmgr at {iso_z()} from {source}.\n"
        "# That file sat in the git common dir, which an executor can write, so none of it is\n"
        "# in effect: review each line and uncomment only what you set yourself. A setup or\n"
        "# notify.command then runs only after: unit config --approve\n"
        f"# Keys it carried: {', '.join(keys) or '(none)'}\n#\n"
    )
    body = "".join(f"# {line}\n" for line in text.splitlines())
    try:
        userdirs.private_dir(target.parent)
        write_text_atomic(target, header + body, mode=0o600)
    except OSError as error:
        notice["error"] = f"could not write {target}: {error.strerror}"
        _warn(notice)
        return notice  # the old file still is not read: nothing of it takes effect
    try:
        os.replace(source, source.with_name(LEGACY_MOVED))
    except OSError:
        pass  # the machine file now exists: the old place is never looked at again
    notice["migrated"] = True
    _warn(notice)
    return notice


def _keys(text: str) -> list[str]:
    """The keys the old file carried (`notify.command` flattened), for the warning; every
    line is moved whatever this finds."""
    import tomllib

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return []
    keys: list[str] = []
    for key, value in document.items():
        if isinstance(value, dict):
            keys += [f"{key}.{inner}" for inner in value]
        else:
            keys.append(key)
    return keys


def _warn(notice: dict[str, Any]) -> None:
    done = "moved" if notice["migrated"] else "could not move"
    print(
        redact(
            f"unit: warning: {done} this machine's config {notice['from']} to {notice['to']} "
            f"with every line commented out ({notice['why']}); keys it carried: "
            f"{', '.join(notice['keys']) or '(none)'}"
        ),
        file=sys.stderr,
    )
