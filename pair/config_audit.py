"""The config audit (SPEC 8): what in a repository can make git run something, and whether the
lead accepted it.

An executor can write the shared `.git/config` (and what it includes), every worktree's
`config.worktree`, the hooks directory and `info/attributes`. The lead's own git is neutralized
(command-line pins), but the executors' git still runs what is planted there. This module takes
a *snapshot* of it — the executable keys repository files set (pair/gitconfig.py's catalogue),
every entry of the hooks directories, the attributes and `config.worktree` files — compares two
snapshots, and keeps the lead's accepted one (the *baseline*) outside the common dir, in the
user's state dir, where no executor writes.

It runs no git: callers pass `git config --list` output (and a function that lists one config
file) from their package's one git layer (pair/git.py, unitmgr/git.py). Every read is bounded: a
hooks directory with 10,000 entries or a 1 GB hook costs a capped scan and a capped hash. It
stays free of heavy imports (`unit status --all` takes one snapshot).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from pair.gitconfig import LIST_ARGS, ConfigEntry, parse_listing
from registry.redact import redact
from registry.userdirs import (
    private_dir,
    repository_id,
    sha256,  # not hashlib: its OpenSSL costs start-up (SPEC 7)
    state_home,
)

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

MAX_HOOK_ENTRIES = 256  # per hooks directory; more is one `overflow` item, never a longer scan
HASH_BYTES = 1 << 20  # a hook's fingerprint: its size and the sha256 of its first MiB
MAX_WORKTREE_CONFIGS = 64  # `config.worktree` files listed one by one; more is one item
MAX_CHANGES = 50  # in a receipt or a refusal
VALUE_CHARS = 200
BASELINE_BYTES = 1 << 20
KINDS = ("config", "hook", "attributes")


def listing_args(file: Path | None = None) -> list[str]:
    """`git config --list` with scopes and origins, of what git reads or of one `file`."""
    if file is None:
        return [*LIST_ARGS]
    return [*LIST_ARGS[:2], "--file", str(file), *LIST_ARGS[2:]]


class Item:
    """One thing that can make git run something: a key set in a file, a hook, a file git
    reads. `value` is a fingerprint (the key's values, a hook's mode, size and sha256)."""

    __slots__ = ("file", "key_or_path", "kind", "scope", "value")

    def __init__(
        self, kind: str, key_or_path: str, file: str, value: str, scope: str = "local"
    ) -> None:
        self.kind = kind
        self.key_or_path = key_or_path
        self.file = file
        self.value = value
        self.scope = scope

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.kind, self.key_or_path, self.file)

    def to_json(self) -> dict[str, str]:
        return {
            "kind": self.kind,
            "key_or_path": self.key_or_path,
            "file": self.file,
            "value": self.value,
            "scope": self.scope,
        }

    @classmethod
    def from_json(cls, data: object) -> Item | None:
        if not isinstance(data, dict):
            return None
        fields = [data.get(name) for name in ("kind", "key_or_path", "file", "value")]
        if not all(isinstance(field, str) for field in fields) or fields[0] not in KINDS:
            return None
        kind, key_or_path, file, value = (str(field) for field in fields)
        return cls(kind, key_or_path, file, value, str(data.get("scope") or "local"))


def shown(value: str | None) -> str | None:
    """A value as a receipt or refusal shows it: redacted and bounded."""
    if value is None:
        return None
    value = redact(value)
    return value if len(value) <= VALUE_CHARS else value[: VALUE_CHARS - 1] + "…"


def _file_of(entry: ConfigEntry, cwd: Path) -> str:
    file = entry.file
    if file is None:
        return entry.origin
    return str(Path(file) if os.path.isabs(file) else cwd / file)


def config_items(entries: Iterable[ConfigEntry], cwd: Path) -> dict[tuple[str, str, str], Item]:
    """The executable keys repository files set, one item per (key, file); a key set several
    times in one file keeps every value, in order."""
    items: dict[tuple[str, str, str], Item] = {}
    for entry in entries:
        if not (entry.from_repository or entry.scope == "command") or not entry.executable:
            continue
        if entry.scope == "command" and entry.file is None:
            continue  # `-c` pins of the lead's own neutral git, not a file anyone wrote
        file = _file_of(entry, cwd)
        value = entry.value if entry.value is not None else "(true)"
        item = Item("config", entry.key, file, value, entry.scope)
        found = items.get(item.identity)
        if found is None:
            items[item.identity] = item
        else:
            found.value += "\n" + value
    return items


def _fingerprint(path: Path, entry: os.DirEntry[str]) -> str:
    info = entry.stat(follow_symlinks=False)
    if stat.S_ISLNK(info.st_mode):
        try:
            return f"symlink -> {os.readlink(path)}"
        except OSError:
            return "symlink (unreadable)"
    if stat.S_ISDIR(info.st_mode):
        return "directory"
    if not stat.S_ISREG(info.st_mode):
        return f"special file (mode {stat.S_IFMT(info.st_mode):o})"
    mode = f"mode {stat.S_IMODE(info.st_mode):o}"
    return f"{mode} bytes {info.st_size} sha256 {_hash_head(path)}"


def _hash_head(path: Path) -> str:
    """sha256 of the file's first HASH_BYTES, opened without following a link or blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return f"unreadable ({error.strerror})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
        digest = sha256()
        left = HASH_BYTES
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        return digest.hexdigest()
    except OSError as error:
        return f"unreadable ({error.strerror})"
    finally:
        os.close(fd)


def hook_items(directory: Path) -> dict[tuple[str, str, str], Item]:
    """Every entry of a hooks directory but git's `*.sample` files; past MAX_HOOK_ENTRIES the
    directory is one `overflow` item (no entry of it is hashed)."""
    items: dict[tuple[str, str, str], Item] = {}
    try:
        scan = os.scandir(directory)
    except OSError:
        return items
    with scan:
        entries = []
        for entry in scan:
            if entry.name.endswith(".sample"):
                continue
            entries.append(entry)
            if len(entries) > MAX_HOOK_ENTRIES:
                item = Item(
                    "hook",
                    str(directory),
                    str(directory),
                    f"overflow: more than {MAX_HOOK_ENTRIES} entries",
                )
                return {item.identity: item}
        for entry in entries:
            path = directory / entry.name
            try:
                value = _fingerprint(path, entry)
            except OSError as error:
                value = f"unreadable ({error.strerror})"
            item = Item("hook", str(path), str(path), value)
            items[item.identity] = item
    return items


def _file_item(kind: str, path: Path) -> Item | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        try:
            value = f"symlink -> {os.readlink(path)}"
        except OSError:
            value = "symlink (unreadable)"
    elif stat.S_ISREG(info.st_mode):
        value = f"bytes {info.st_size} sha256 {_hash_head(path)}"
    else:
        value = f"special file (mode {stat.S_IFMT(info.st_mode):o})"
    return Item(kind, str(path), str(path), value)


def worktree_config_files(common_dir: Path) -> list[Path]:
    """Every `config.worktree` present: the main worktree's and each linked one's (bounded)."""
    main = common_dir / "config.worktree"
    found = [main] if os.path.lexists(main) else []
    try:
        scan = os.scandir(common_dir / "worktrees")
    except OSError:
        return found
    with scan:
        for count, entry in enumerate(scan):
            if count >= MAX_WORKTREE_CONFIGS * 4:
                break
            candidate = common_dir / "worktrees" / entry.name / "config.worktree"
            if os.path.lexists(candidate):
                found.append(candidate)
    return sorted(found)


def snapshot(
    listing: str,
    *,
    cwd: Path,
    common_dir: Path,
    list_file: Callable[[Path], str | None],
) -> dict[tuple[str, str, str], Item]:
    """What can make git run something in this repository, by identity.

    `listing` is `git config` with pair/gitconfig.py's `LIST_ARGS` run in `cwd`; `list_file(p)`
    is the same listing of one file (`--file p`), called once per `config.worktree` present
    (whether or not `extensions.worktreeConfig` makes git read it: the key that would is one
    `git config` away)."""
    entries = parse_listing(listing)
    items = config_items(entries, cwd)
    worktree_configs = worktree_config_files(common_dir)
    for path in worktree_configs[:MAX_WORKTREE_CONFIGS]:
        listed = list_file(path)
        if listed is None:
            item = _file_item("config", path)
            if item is not None:
                items[item.identity] = item
            continue
        for found in config_items(parse_listing(listed), path.parent).values():
            found.scope = "worktree"
            items.setdefault(found.identity, found)
    if len(worktree_configs) > MAX_WORKTREE_CONFIGS:
        item = Item(
            "config",
            str(common_dir / "worktrees"),
            str(common_dir / "worktrees"),
            f"overflow: more than {MAX_WORKTREE_CONFIGS} config.worktree files",
        )
        items[item.identity] = item
    items.update(hook_items(common_dir / "hooks"))
    for entry in entries:
        if entry.key == "core.hookspath" and entry.from_repository and entry.value:
            directory = Path(entry.value).expanduser()
            directory = directory if directory.is_absolute() else cwd / directory
            if directory.resolve() != (common_dir / "hooks").resolve():
                items.update(hook_items(directory))
    attributes = _file_item("attributes", common_dir / "info" / "attributes")
    if attributes is not None:
        items[attributes.identity] = attributes
    return items


# -- comparing --------------------------------------------------------------------------------


def _change(
    identity: tuple[str, str, str], before: str | None, after: str | None
) -> dict[str, str | None]:
    kind, key_or_path, file = identity
    return {
        "kind": kind,
        "key_or_path": key_or_path,
        "file": file,
        "before": shown(before),
        "after": shown(after),
    }


def changes(
    before: dict[tuple[str, str, str], Item],
    after: dict[tuple[str, str, str], Item],
    *,
    accepted: dict[tuple[str, str, str], Item] | None = None,
) -> list[dict[str, str | None]]:
    """`[{kind, key_or_path, file, before, after}]` for what differs between two snapshots,
    sorted and bounded; a difference that ends in the `accepted` state (the baseline: unitmgr
    installed it, or the lead removed a plant) is no one's fault and is left out."""
    found: list[dict[str, str | None]] = []
    for identity in sorted(set(before) | set(after)):
        old, new = before.get(identity), after.get(identity)
        old_value = old.value if old else None
        new_value = new.value if new else None
        if old_value == new_value:
            continue
        if accepted is not None:
            trusted = accepted.get(identity)
            if (trusted.value if trusted else None) == new_value:
                continue
        found.append(_change(identity, old_value, new_value))
    return found[:MAX_CHANGES]


def foreign(
    current: dict[tuple[str, str, str], Item], baseline: dict[tuple[str, str, str], Item]
) -> list[dict[str, str | None]]:
    """What is in force now that the baseline does not hold as it is (a removal runs nothing
    and is not listed)."""
    found: list[dict[str, str | None]] = []
    for identity in sorted(current):
        trusted, item = baseline.get(identity), current[identity]
        if trusted is not None and trusted.value == item.value:
            continue
        found.append(_change(identity, trusted.value if trusted else None, item.value))
    return found[:MAX_CHANGES]


# -- the trusted baseline ---------------------------------------------------------------------


def baseline_file(common_dir: Path) -> Path:
    """`$XDG_STATE_HOME/unitmgr/config-audit/<repository id>.json`: outside the common dir."""
    return state_home() / "config-audit" / f"{repository_id(common_dir)}.json"


def read_baseline(common_dir: Path) -> dict[tuple[str, str, str], Item] | None:
    """The accepted snapshot, or None when there is none yet. An unreadable baseline is an
    empty one: everything is foreign until the person trusts it again (`unit doctor --trust`)."""
    path = baseline_file(common_dir)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError:
        return {}
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > BASELINE_BYTES:
            return {}
        data = json.loads(os.read(fd, BASELINE_BYTES + 1).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    items: dict[tuple[str, str, str], Item] = {}
    for raw in data.get("items") or [] if isinstance(data, dict) else []:
        item = Item.from_json(raw)
        if item is not None:
            items[item.identity] = item
    return items


def write_baseline(
    common_dir: Path, items: dict[tuple[str, str, str], Item], *, reason: str
) -> Path:
    """Store `items` as the accepted state (atomic, 0600, in a 0700 directory)."""
    from registry.atomic import write_text_atomic
    from registry.timeutil import iso_z

    path = baseline_file(common_dir)
    private_dir(path.parent)
    document = {
        "version": 1,
        "repository": str(common_dir),
        "accepted_at": iso_z(),
        "reason": reason,
        "items": [items[identity].to_json() for identity in sorted(items)],
    }
    write_text_atomic(path, json.dumps(document, indent=2) + "\n")
    return path
