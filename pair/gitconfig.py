"""Which git config keys make git run something, and where each setting came from (SPEC 8).

An executor can write the shared `.git/config`, every worktree's `config.worktree`, and any file
an `include.path` or `includeIf` names. Git runs commands named by some keys (a filter's
`clean`, `core.fsmonitor`, a remote's `uploadpack`, ...), follows others to more config or to
another transport, and writes files named by others (`trace2.*`). This module is the one
catalogue of those keys and the one parser of `git config --list --show-scope --show-origin`,
shared by the neutral git invocation (what the lead's own git calls pin) and the config audit
(what an executor added since the lead last looked). It runs no git itself: callers pass the
listing's raw output, so the one git layer of each package stays the only place git runs.

It also derives what the lead's git calls pin from a listing (`neutral_pins`, `neutral_args`)
and memoizes the listing per repository (`ListingCache`). Over ~400 lines on purpose: the
catalogue, the pins and the memo must agree key for key, and both git layers (unitmgr's and
pair's, which may not import each other) share them from here.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

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
# Every pattern above starts with a literal section (or a group of them), and the `core` ones
# are whole keys: a key of another section is answered without a regex, a `core` key by name,
# and any other key by the patterns of its own section alone, compiled on first use. (The whole
# catalogue as one regex took ~3 ms to compile, a tenth of a fast command's start-up, SPEC 7,
# and nearly every repository has a `remote.*` key.) tests/test_neutral_git.py checks this
# against the whole catalogue's regex.


def _sections_of(pattern: str) -> list[str]:
    if pattern.startswith("("):
        return pattern[1 : pattern.index(")")].split("|")
    return [pattern.split("\\.", 1)[0]]


def _by_section() -> dict[str, list[str]]:
    patterns: dict[str, list[str]] = {}
    for pattern in _EXECUTABLE:
        for section in _sections_of(pattern):
            patterns.setdefault(section, []).append(pattern)
    return patterns


_PATTERNS_BY_SECTION = _by_section()
_EXECUTABLE_SECTIONS = frozenset(_PATTERNS_BY_SECTION)
_EXECUTABLE_CORE = frozenset(pattern.replace("\\", "") for pattern in _PATTERNS_BY_SECTION["core"])
_COMPILED: dict[str, re.Pattern[str]] = {}


def _executable_key(section: str) -> re.Pattern[str]:
    found = _COMPILED.get(section)
    if found is None:
        found = _COMPILED[section] = re.compile(
            "|".join(f"(?:{pattern})" for pattern in _PATTERNS_BY_SECTION[section])
        )
    return found


def is_executable_key(key: str) -> bool:
    """Whether git may run a command, follow a path or transport, or write a file for `key`."""
    lowered = key.lower()
    section = lowered.partition(".")[0]
    if section not in _EXECUTABLE_SECTIONS:
        return False
    if section == "core":
        return lowered in _EXECUTABLE_CORE
    return _executable_key(section).fullmatch(lowered) is not None


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


# -- the neutral invocation: what the lead's own git calls pin (SPEC 8 "Git is neutralized") --

# Scopes that are the user's: system, global, and the caller's own `GIT_CONFIG_*` / `-c`.
USER_SCOPES = frozenset({"system", "global", "command"})

# Pinned on every call, whatever the command: the lead runs no hook, no fsmonitor, no pager.
ALWAYS_PINS = (
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
)

# Subcommands that read refs, objects or config only: no worktree content (so no filter), no
# remote (so no transport or upload-pack), no ref update (so no hook). They get ALWAYS_PINS and
# need no listing, which keeps the empty-registry fast path at one git process (SPEC 7).
OBJECT_ONLY = frozenset(
    {"rev-parse", "check-ref-format", "symbolic-ref", "show-ref", "for-each-ref",
     "merge-base", "rev-list", "config", "cat-file"}
)  # fmt: skip

# Diff-family subcommands get these flags (`neutral_args`): no external diff, no textconv.
DIFF_FAMILY = frozenset({"diff", "log", "show", "diff-tree", "diff-index", "diff-files"})
NO_EXTERNAL_DIFF = ("--no-ext-diff", "--no-textconv")

_ALLOWED_PROTOCOLS = ("file", "https", "ssh")

# The neutral value of an executable key a repository file sets and the user's config does not.
# `None`: a command-line value cannot override it, and what it leads to is neutralized elsewhere
# (an include's or a worktree config's entries are listed and pinned one by one; an `insteadOf`
# can only reach a transport `protocol.*` allows; git reads `trace2.*` and
# `uploadpack.packObjectsHook` from the user's config only, and `core.worktree` from the
# repository file only; `core.gitProxy` serves only `git://`, which is never allowed).
_NEUTRAL: tuple[tuple[str, str | None], ...] = (
    (r"core\.(worktree|gitproxy)", None),
    (r"url\..+\.(insteadof|pushinsteadof)", None),
    (r"include\.path|includeif\..+\.path|extensions\.worktreeconfig", None),
    (r"trace2\..+|uploadpack\.packobjectshook", None),
    (r"core\.sshcommand", "ssh"),
    (r"core\.attributesfile", "{xdg}/git/attributes"),
    (r"core\.excludesfile", "{xdg}/git/ignore"),
    (r"pager\..+", "false"),
    (r"protocol\..+\.allow", "never"),
    (r"ssh\.variant", "auto"),
    (r"submodule\..+\.update", "none"),
    (r".+", ""),  # a command, program or driver left empty: git runs nothing for it
)


def _neutral_keys() -> tuple[tuple[re.Pattern[str], str | None], ...]:
    """`_NEUTRAL` compiled, once, when a repository file first sets an executable key."""
    found = _COMPILED_NEUTRAL.get("neutral")
    if found is None:
        found = _COMPILED_NEUTRAL["neutral"] = tuple(
            (re.compile(pattern), value) for pattern, value in _NEUTRAL
        )
    return found


_COMPILED_NEUTRAL: dict[str, tuple[tuple[re.Pattern[str], str | None], ...]] = {}


def _neutral_value(key: str) -> str | None:
    lowered = key.lower()
    for pattern, value in _neutral_keys():
        if pattern.fullmatch(lowered):
            if value is None or "{xdg}" not in value:
                return value
            import os

            home = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
            return value.replace("{xdg}", home)
    return ""


def _subsection(key: str) -> str:
    """`filter.My.Driver.clean` -> `My.Driver` (a subsection may hold dots)."""
    return key.split(".", 1)[1].rsplit(".", 1)[0]


# The last listing `neutral_pins` derived pins from, and them: `LISTINGS` hands every git call
# of a batch the same (unchanged) list, so a `status --all` of 1000 units derives them once.
_LAST_PINS: dict[str, tuple[list[ConfigEntry], int, tuple[tuple[str, str], ...]]] = {}


def neutral_pins(entries: list[ConfigEntry]) -> list[tuple[str, str]]:
    """`_neutral_pins(entries)`, derived again only for another listing than the last one."""
    last = _LAST_PINS.get("last")
    if last is not None and last[0] is entries and last[1] == len(entries):
        return list(last[2])
    pins = _neutral_pins(entries)
    _LAST_PINS["last"] = (entries, len(entries), tuple(pins))
    return pins


def _neutral_pins(entries: list[ConfigEntry]) -> list[tuple[str, str]]:
    """The `(key, value)` pairs a lead's git call passes as command-line config, which wins over
    every config file: ALWAYS_PINS; `protocol.allow=never` with file, https and ssh allowed;
    every remote's `uploadpack`/`receivepack` pinned to git's own programs; `diff.external`
    empty; the credential helpers reset to the user's own; and every executable key a
    repository file sets pinned to the user's value for it, else to a neutral one. A filter a
    repository file defines or redefines gets empty `clean`/`smudge`/`process`, not required,
    except for what the user's own config gives that filter (a global LFS filter keeps
    working). `entries` is one listing, or several concatenated (a superset pins more keys,
    never fewer, which is harmless)."""
    user: dict[str, str] = {}
    helpers: list[tuple[str, str]] = []
    planted: dict[str, None] = {}  # ordered set of executable keys a repository file sets
    # Only remotes some file names: a pin alone would make git see a remote that is not there.
    remotes: dict[str, None] = {}
    filters: dict[str, set[str]] = {}  # filter name -> the variables repository files set
    for entry in entries:
        key, lowered = entry.key, entry.key.lower()
        if lowered.startswith("remote.") and lowered.count(".") >= 2:
            remotes[_subsection(key)] = None
        if entry.scope in USER_SCOPES:
            user[key] = "true" if entry.value is None else entry.value
            if lowered == "credential.helper" or (
                lowered.startswith("credential.") and lowered.endswith(".helper")
            ):
                helpers.append((key, entry.value or ""))
            continue
        if lowered.startswith("filter.") and lowered.count(".") >= 2:
            filters.setdefault(_subsection(key), set()).add(lowered.rsplit(".", 1)[1])
        elif is_executable_key(key):
            planted[key] = None
    pins: list[tuple[str, str]] = list(ALWAYS_PINS)
    pins.append(("protocol.allow", "never"))
    for protocol in _ALLOWED_PROTOCOLS:
        key = f"protocol.{protocol}.allow"
        pins.append((key, user.get(key, "always")))
    pins.append(("diff.external", ""))
    pins.append(("credential.helper", ""))  # an empty helper resets the list git gathered
    pins.extend(helpers)
    for remote in remotes:
        for variable, program in (("uploadpack", "git-upload-pack"),
                                  ("receivepack", "git-receive-pack")):  # fmt: skip
            key = f"remote.{remote}.{variable}"
            pins.append((key, user.get(key, program)))
    for name, variables in filters.items():
        for variable, neutral in (("clean", ""), ("smudge", ""), ("process", ""),
                                  ("required", "false")):  # fmt: skip
            key = f"filter.{name}.{variable}"
            # An empty `process` is still "a process filter" to git, which then ignores
            # `clean`/`smudge`: pinned only when a repository file sets one.
            if variable != "process" or key in user or variable in variables:
                pins.append((key, user.get(key, neutral)))
    pinned = {key.lower() for key, _ in pins}
    for key in planted:
        if key.lower() in pinned or key.lower().startswith("credential."):
            continue
        value = user.get(key, _neutral_value(key))
        if value is not None:
            pins.append((key, value))
    return pins


def config_environment(
    pins: list[tuple[str, str]] | tuple[tuple[str, str], ...], inherited: dict[str, str]
) -> dict[str, str]:
    """`GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` variables that add `pins` after the caller's own
    command-line config (`inherited`: the environment the child starts from). Variables, not
    `-c`: a key whose subsection holds `=` stays one key."""
    count_text = inherited.get("GIT_CONFIG_COUNT", "")
    count = int(count_text) if count_text.isdigit() else 0
    variables: dict[str, str] = {}
    for key, value in pins:
        variables[f"GIT_CONFIG_KEY_{count}"] = key
        variables[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    variables["GIT_CONFIG_COUNT"] = str(count)
    return variables


def subcommand(args: list[str] | tuple[str, ...]) -> str:
    """The git subcommand of an argument list (after `-C dir`, `-c k=v` and other options)."""
    index = 0
    while index < len(args):
        word = args[index]
        if word in ("-C", "-c", "--git-dir", "--work-tree"):
            index += 2
            continue
        if word.startswith("-"):
            index += 1
            continue
        return word
    return ""


def neutral_args(args: list[str]) -> list[str]:
    """`args` with the flags that pin what config cannot: NO_EXTERNAL_DIFF after a diff-family
    subcommand, and git's own `upload-pack`/`receive-pack` for a fetch, `ls-remote` or push
    (a remote's `uploadpack`/`receivepack` is "the first one given wins", so a command-line
    value cannot override a planted one; the option can)."""
    name = subcommand(args)
    if name in DIFF_FAMILY:
        flags: tuple[str, ...] = NO_EXTERNAL_DIFF
    elif name in ("fetch", "ls-remote"):
        flags = ("--upload-pack=git-upload-pack",)
    elif name == "push":
        flags = ("--receive-pack=git-receive-pack",)
    else:
        return args
    index = args.index(name) + 1
    return [*args[:index], *flags, *args[index:]]


# -- the listing, memoized per repository ---------------------------------------------------


def _signature(path: str) -> tuple[int, int, int, int] | None:
    import os

    try:
        status = os.stat(path)
    except OSError:
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def _git_dirs(cwd: str) -> tuple[str, str] | None:
    """`(git dir, common dir)` of the worktree holding `cwd`, found as git finds them (the
    nearest `.git` directory, or `.git` file naming a git dir whose `commondir` names the
    common one); None when there is none or the environment names a git dir itself."""
    import os

    if "GIT_DIR" in os.environ or "GIT_COMMON_DIR" in os.environ:
        return None
    directory = os.path.abspath(cwd)
    while True:
        dot_git = os.path.join(directory, ".git")
        if os.path.isdir(dot_git):
            return dot_git, dot_git
        if os.path.isfile(dot_git):
            try:
                with open(dot_git, encoding="utf-8") as handle:
                    text = handle.read(4096).strip()
            except (OSError, UnicodeDecodeError):  # an executor's `.git` file is hostile input
                return None
            if not text.startswith("gitdir: "):
                return None
            git_dir = os.path.normpath(os.path.join(directory, text[len("gitdir: ") :]))
            try:
                with open(os.path.join(git_dir, "commondir"), encoding="utf-8") as handle:
                    common = os.path.normpath(os.path.join(git_dir, handle.read(4096).strip()))
            except (OSError, UnicodeDecodeError):
                common = git_dir
            return git_dir, common
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _user_files() -> list[str]:
    import os

    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    return [
        os.environ.get("GIT_CONFIG_GLOBAL") or os.path.expanduser("~/.gitconfig"),
        os.path.join(xdg, "git", "config"),
        os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig",
    ]


def _watched_files(entries: list[ConfigEntry]) -> set[str] | None:
    """Every file whose change can change the listing: each file it came from and each file an
    include names (present or not). None when one cannot be placed (a relative origin)."""
    import os

    files: set[str] = set()
    for entry in entries:
        origin = entry.file
        if origin is None:
            continue
        if not os.path.isabs(origin):
            return None
        files.add(origin)
        lowered = entry.key.lower()
        if entry.value and (lowered == "include.path" or (
            lowered.startswith("includeif.") and lowered.endswith(".path")
        )):  # fmt: skip
            target = os.path.expanduser(entry.value)
            files.add(os.path.normpath(os.path.join(os.path.dirname(origin), target)))
    return files


def _worktree_dependent(entries: list[ConfigEntry]) -> bool:
    """Whether worktrees of one repository may see different config: a conditional include
    or per-worktree config in a repository file."""
    for entry in entries:
        if entry.scope in USER_SCOPES:
            continue
        lowered = entry.key.lower()
        if lowered.startswith("includeif.") or lowered == "extensions.worktreeconfig":
            return True
    return False


class ListingCache:
    """The config listing of a repository, shared by every git call of one process and listed
    again when any file it came from (or an include names) changes: `(inode, size, mtime,
    ctime)` of each, checked before every use (a few `stat`s, not a git process).

    Keyed by the common dir: one listing serves every worktree. When a repository file sets an
    `includeIf` or `extensions.worktreeConfig` the worktrees may differ, so the entry is the
    union of every worktree's listing (each run against its own git dir), watching each one's
    `HEAD` (an `onbranch:` include) and `config.worktree` too. Thread-safe: `status --all`
    calls git from a thread pool. The listing itself runs with no pins (`git config` runs no
    program) — `list_config(git_dir or cwd, explicit)` is the caller's git layer."""

    def __init__(self) -> None:
        import threading  # (already loaded by subprocess)

        self._lock = threading.Lock()
        self._entries: dict[str, tuple[dict[str, object], list[ConfigEntry]]] = {}

    def entries(self, cwd: str, list_config: Callable[[str, bool], str]) -> list[ConfigEntry]:
        dirs = _git_dirs(cwd)
        if dirs is None:  # nothing to key on: list for this one call
            return parse_listing(list_config(cwd, False))
        git_dir, common = dirs
        with self._lock:
            cached = self._entries.get(common)
            if cached is not None and all(
                _signature(path) == signature for path, signature in cached[0].items()
            ):
                return cached[1]
            entries, watched = self._list(git_dir, common, list_config)
            if watched is not None:
                self._entries[common] = ({path: _signature(path) for path in watched}, entries)
            else:
                self._entries.pop(common, None)
            return entries

    @staticmethod
    def _list(
        git_dir: str, common: str, list_config: Callable[[str, bool], str]
    ) -> tuple[list[ConfigEntry], set[str] | None]:
        import os

        entries = parse_listing(list_config(git_dir, True))
        extra = [os.path.join(common, "config"), os.path.join(git_dir, "config.worktree")]
        if _worktree_dependent(entries):
            admin = os.path.join(common, "worktrees")
            extra += [admin, os.path.join(common, "HEAD")]
            try:
                names = sorted(os.listdir(admin))
            except OSError:
                names = []
            others = [common] + [os.path.join(admin, name) for name in names]
            complete = True
            for other in others:
                if other == git_dir or not os.path.isdir(other):
                    continue
                try:
                    entries += parse_listing(list_config(other, True))
                except Exception:  # a stale worktree git cannot read: list again next call
                    complete = False
                extra += [os.path.join(other, "HEAD"), os.path.join(other, "config.worktree")]
            extra.append(os.path.join(git_dir, "HEAD"))
            if not complete:
                return entries, None
        watched = _watched_files(entries)
        if watched is None:
            return entries, None
        return entries, watched | set(extra) | set(_user_files())


LISTINGS = ListingCache()  # one per process: every git layer's calls share its listings
