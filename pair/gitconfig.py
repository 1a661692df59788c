"""Which git config keys make git run something, and where each setting came from (SPEC 8).

An executor can write the shared `.git/config`, every worktree's `config.worktree`, and any file
an `include.path` or `includeIf` names. Git runs commands named by some keys (a filter's
`clean`, `core.fsmonitor`, a remote's `uploadpack`, ...), follows others to more config or to
another transport, and writes files named by others (`trace2.*`). This module is the one
catalogue of those keys and the one parser of `git config --list --show-scope --show-origin`,
shared by the neutral git invocation (what the lead's own git calls pin) and the config audit
(what an executor added since the lead last looked). It runs no git itself: callers pass the
listing's raw output, so the one git layer of each package stays the only place git runs.
"""

from __future__ import annotations

import re

# `git config --list -z --show-scope --show-origin`: one record per entry,
# `scope NUL origin NUL key LF value NUL` (a key set without `=` has no LF and no value).
LIST_ARGS = ("config", "--list", "-z", "--show-scope", "--show-origin")

# Scopes an executor can write: the repository's own config files and what they include.
# `system` (root's /etc/gitconfig) and `global` (the user's ~/.gitconfig) are the user's.
REPOSITORY_SCOPES = frozenset({"local", "worktree"})

# Keys git executes, follows or writes through. Matched against the lower-cased key; `<x>`
# stands for a subsection (a driver, remote, URL or tool name, which may hold dots).
_EXECUTABLE = (
    r"core\.fsmonitor",
    r"core\.hookspath",
    r"core\.pager",
    r"core\.editor",
    r"core\.askpass",
    r"core\.sshcommand",
    r"core\.gitproxy",
    r"core\.alternaterefscommand",
    r"core\.worktree",
    r"core\.attributesfile",
    r"core\.excludesfile",
    r"sequence\.editor",
    r"pager\..+",
    r"diff\.external",
    r"diff\..+\.(textconv|command)",
    r"merge\..+\.driver",
    r"filter\..+\.(clean|smudge|process|required)",
    r"remote\..+\.(uploadpack|receivepack|vcs|proxy)",
    r"credential\.helper",
    r"credential\..+\.helper",
    r"gpg\.program",
    r"gpg\..+\.program",
    r"gpg\.ssh\.defaultkeycommand",
    r"url\..+\.(insteadof|pushinsteadof)",
    r"protocol\.allow",
    r"protocol\..+\.allow",
    r"include\.path",
    r"includeif\..+\.path",
    r"extensions\.worktreeconfig",
    r"uploadpack\.packobjectshook",
    r"trace2\..+",
    r"ssh\.variant",
    r"submodule\..+\.update",
    r"(difftool|mergetool)\..+\.cmd",
    r"(browser|man)\..+\.(cmd|path)",
    r"web\.browser",
    r"sendemail\..+",
    r"alias\..+",
)
_EXECUTABLE_KEY = re.compile("|".join(f"(?:{pattern})" for pattern in _EXECUTABLE))


def is_executable_key(key: str) -> bool:
    """Whether git may run a command, follow a path or transport, or write a file for `key`."""
    return _EXECUTABLE_KEY.fullmatch(key.lower()) is not None


class ConfigEntry:
    """One setting as git reads it: where it is in force and which file (or command line) set
    it. `origin` is git's own text: `file:<path>` (relative paths are relative to the git dir
    git ran in), `command line:`, `blob:…`, `standard input:`.

    A plain class, not a dataclass: every git call of the fast reads may build these, and
    `dataclasses` costs them ~10 ms of imports (SPEC 7)."""

    __slots__ = ("key", "origin", "scope", "value")

    def __init__(self, scope: str, origin: str, key: str, value: str | None) -> None:
        self.scope = scope
        self.origin = origin
        self.key = key  # as git prints it: section and variable lower-cased, subsection as is
        self.value = value  # None for a key set without `=` (a boolean true)

    def __repr__(self) -> str:
        return f"ConfigEntry({self.scope!r}, {self.origin!r}, {self.key!r}, {self.value!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigEntry):
            return NotImplemented
        return (self.scope, self.origin, self.key, self.value) == (
            other.scope, other.origin, other.key, other.value,
        )  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.scope, self.origin, self.key, self.value))

    @property
    def from_repository(self) -> bool:
        """Set by a file an executor can write (the repository's config or an include of it)."""
        return self.scope in REPOSITORY_SCOPES

    @property
    def executable(self) -> bool:
        return is_executable_key(self.key)

    @property
    def file(self) -> str | None:
        return self.origin.removeprefix("file:") if self.origin.startswith("file:") else None


def parse_listing(output: str) -> list[ConfigEntry]:
    """The entries of one `git config` run with `LIST_ARGS`, in git's order (last one wins)."""
    fields = output.split("\0")
    entries: list[ConfigEntry] = []
    index = 0
    while index + 2 < len(fields):
        scope, origin, item = fields[index], fields[index + 1], fields[index + 2]
        index += 3
        key, newline, value = item.partition("\n")
        entries.append(ConfigEntry(scope, origin, key, value if newline else None))
    return entries
