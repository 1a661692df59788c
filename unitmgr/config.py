"""The project config file (SPEC 3.16): `.unitmgr.toml` in the repository's main worktree (the
team's, committed) and `$XDG_CONFIG_HOME/unitmgr/repos/<repository id>.toml` (this machine's).

`load_config` reads both, validates every key and type, and merges them: the local file wins
over the repository file, which wins over the built-in defaults (a command-line flag, applied by
the command, wins over all three). An unknown key, a wrong type or an unreadable file is exit 2
`config-invalid` naming the file, the key and what was expected — for a command that changes
something. A read (`list`, `status`, `watch`, `wait`, `tail`, `serve`, `log`) loads through
`load_for_reading` / `for_reads` instead: it keeps every valid key and reports the first
problem as a `config_warning`, so a typo in the committed file never blinds the lead.

Where the files are is a defence (SPEC 8, references/threat-model.md "Config files"): nothing
is read from where an executor can write. The machine's file is outside the git common dir
(its old place, `<common-dir>/orchestrate/config.toml`, is never read as config:
unitmgr/config_trust.py moves it once, inert), and `.unitmgr.toml` is read from the main
worktree only — never from a linked worktree's checkout, whatever `--repo` or the current
directory says — and never through a symbolic link. A `setup` or `notify.command` a file gives
still runs only once approved (unitmgr/config_trust.py).

The file is untrusted input: it is read bounded (a regular file of at most 1 MiB), a
`worktree_root` template expands only its known placeholders (never `str.format`, which would
reach attributes), and the path it yields still goes through every worktree check of
`unit create`. This module reads; it never writes a file, runs a command or starts git, and it
stays cheap for the commands on the start-up path: with no config file it costs two `stat`s,
and `tomllib` is imported only when a file exists.

Over ~400 lines because every key's check lives beside the loader that applies it, and the
strict load (a write) and the lenient one (a read) must share that one path to never drift.
"""

from __future__ import annotations

import os
import re
import stat

from registry import pathtext, userdirs
from registry.errors import UsageError
from registry.lazy_re import lazy
from registry.timeutil import seconds_from_env
from unitmgr.validation import LIMIT_MAX  # the file's limits are checked like the flags

# `unit list` and `unit status --all` load the config even on an empty registry (an invalid file
# is refused there too), within their start-up budget (SPEC 7): no typing, no dataclasses.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from unitmgr.git import RepositoryPaths
    from unitmgr.workspace import Workspace

REPOSITORY_FILE = ".unitmgr.toml"  # in the main worktree
# The keys whose value is a shell command: from a file, they run only once approved. `validation`
# is what `unit verify` runs; `model` is one only for the script partner (its command line), but
# it is approved whatever the partner, since a `--partner script` flag can make it one.
# `ray.address` is not a shell command, but connecting to a cluster unpickles what it returns
# (SPEC 4.3): a cluster address a file names is trusted exactly like one.
COMMAND_KEYS = ("setup", "validation", "model", "notify.command", "ray.address")
STUCK_MINUTES_DEFAULT = 10.0
PORTS_MAX = 64  # as `unit create --ports` (registry.records.MAX_PORTS)
PORT_RANGE_EXPECTED = 'a range "A-B" of TCP ports, 1024 <= A <= B <= 65535'

# SPEC 3.15's event names, in its order.
NOTIFY_EVENTS = (
    "attention",
    "turn-ended",
    "created",
    "dismantled",
    "merged",
    "held",
    "restaff-failed",
    "create-failed",
    "dismantle-failed",
)
# `worktree_root`'s placeholders (see references/decisions.md).
TEMPLATE_FIELDS = ("repo", "branch_slug", "branch", "unit")
_PLACEHOLDER = lazy(r"\{([^{}]*)\}")

DEFAULTS: dict[str, Any] = {
    "max_active": 2,
    "max_held": 2,
    "lead": None,
    # create's defaults (SPEC 3.3 "Revision 3 inputs"); a flag wins over each
    "partner": None,
    "model": None,
    "effort": None,
    "validation": None,
    "paths": [],
    "setup": None,
    "worktree_root": None,
    "copy": [],
    "stuck_minutes": 10,
    "guard_refs": False,
    "ports": 0,
    "port_range": "20000-29999",
    "notify.command": None,
    "notify.url": None,
    "notify.events": list(NOTIFY_EVENTS),
    # [feedback] (SPEC 3.17): logins forwarded whatever their association, and the round caps
    "feedback.allow": [],
    "feedback.ci_rounds": 2,
    "feedback.review_rounds": 3,
    # where turns run (SPEC 4.3): `runner` and `[ray] {address, clone_url}`
    "runner": "local",
    "ray.address": None,
    "ray.clone_url": None,
}
TABLES = ("notify", "feedback", "ray")
RUNNERS = ("local", "ray")
# What `[ray] clone_url` may be: a URL git fetches on the node, never an option (`-…`).
CLONE_URL = lazy(r"(?:(?:https?|ssh|git|file)://|[A-Za-z0-9._-]+@[A-Za-z0-9._-]+:)[^\s]+")
LOGIN = lazy(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}(?:\[bot\])?")  # a GitHub login, or an app's
# The keys in the order `unit config` prints them.
KEYS = tuple(DEFAULTS)


class Notify:
    """`[notify]`: where events go (SPEC 3.15). Nothing is sent unless `command` or `url` is
    set; `events` defaults to every event name."""

    __slots__ = ("command", "events", "url")

    def __init__(self, *, command: str | None, url: str | None, events: tuple[str, ...]) -> None:
        self.command = command
        self.url = url
        self.events = events

    @property
    def configured(self) -> bool:
        return self.command is not None or self.url is not None


class ProjectConfig:
    """The effective settings: each key's value, and where it came from."""

    __slots__ = ("local_file", "repository_file", "sources", "values")

    def __init__(
        self,
        repository_file: Path | None,  # None: no main worktree (a bare repository)
        local_file: Path,
        values: dict[str, Any],  # only keys a file sets
        sources: dict[str, str],  # key -> "local" | "repository"
    ) -> None:
        self.repository_file = repository_file
        self.local_file = local_file
        self.values = values
        self.sources = sources

    def value(self, key: str) -> Any:
        if key not in DEFAULTS:
            raise KeyError(key)
        value = self.values.get(key, DEFAULTS[key])
        return list(value) if isinstance(value, list) else value

    def source(self, key: str) -> str:
        """`local`, `repository` or `default`."""
        if key not in DEFAULTS:
            raise KeyError(key)
        return self.sources.get(key, "default")

    def file_of(self, key: str) -> Path | None:
        source = self.source(key)
        return {"local": self.local_file, "repository": self.repository_file}.get(source)

    @property
    def notify(self) -> Notify:
        return Notify(
            command=self.value("notify.command"),
            url=self.value("notify.url"),
            events=tuple(self.value("notify.events")),
        )

    def worktree_for(self, *, toplevel: Path, unit_id: str, branch: str) -> str | None:
        """The worktree path `worktree_root` names for a unit, absolute (relative to the
        toplevel), or None when no template is set. Still to be checked like a --worktree."""
        template = self.value("worktree_root")
        if template is None:
            return None
        values = {
            "repo": toplevel.name,
            "branch_slug": branch.replace("/", "-"),
            "branch": branch,
            "unit": unit_id,
        }
        expanded = _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
        return os.path.normpath(os.path.join(toplevel, os.path.expanduser(expanded)))

    def command_from_file(self, key: str) -> str | None:
        """The shell command a file sets for `key` (one of COMMAND_KEYS), or None."""
        value = self.values.get(key) if key in COMMAND_KEYS else None
        if key == "model" and self.value("partner") not in (None, "script"):
            return None  # it goes with that partner only (create), never to a script partner
        return value if isinstance(value, str) else None

    def describe(self, approvals: dict[str, str] | None = None) -> dict[str, Any]:
        """`unit config`'s document body: every key with its value and source, and for a
        command key a file sets, its `approval` (`approved` or `unapproved`, from
        `approvals`: key -> state)."""
        settings = {}
        for key in KEYS:
            file = self.file_of(key)
            settings[key] = {
                "value": self.value(key),
                "source": self.source(key),
                "file": str(file) if file else None,
            }
            if approvals is not None and key in approvals:
                settings[key]["approval"] = approvals[key]
        repository = self.repository_file
        return {
            "files": {
                "repository": {
                    "path": str(repository) if repository else None,
                    "present": repository is not None and repository.is_file(),
                },
                "local": {"path": str(self.local_file), "present": self.local_file.is_file()},
            },
            "settings": settings,
        }


def stuck_seconds(workspace: Workspace | RepositoryPaths | None = None) -> float:
    """The stuck threshold in seconds: `UNITMGR_STUCK_MINUTES` when it is set to a positive
    number (an unset, bad or non-positive value is ignored, as for every `UNITMGR_*` duration),
    else the project config's `stuck_minutes` (SPEC 3.16; two `stat`s when there is no file;
    an invalid file's valid keys, as for every read), else 10 minutes."""
    if workspace is None:
        return _stuck_seconds(None)
    return for_reads(workspace)[0]


def for_reads(workspace: Workspace | RepositoryPaths) -> tuple[float, dict[str, Any] | None]:
    """What a read command takes from the config: the stuck threshold in seconds (as
    `stuck_seconds`) and the `config_warning` its document carries (None: the files are valid).
    """
    config, warning = load_for_reading(workspace.common_git_dir)
    return _stuck_seconds(config), warning


def _stuck_seconds(config: ProjectConfig | None) -> float:
    minutes = seconds_from_env("UNITMGR_STUCK_MINUTES", 0.0)
    if minutes > 0:
        return minutes * 60
    if config is None:
        return STUCK_MINUTES_DEFAULT * 60
    return float(config.value("stuck_minutes")) * 60


def port_range(text: str) -> tuple[int, int] | None:
    """`"A-B"` as `(A, B)`, or None unless 1024 <= A <= B <= 65535 (SPEC 3.19: below 1024 a
    port needs privileges a dev server does not have)."""
    match = re.fullmatch(r"([0-9]{1,5})-([0-9]{1,5})", text.strip())
    if match is None:
        return None
    low, high = int(match.group(1)), int(match.group(2))
    return (low, high) if 1024 <= low <= high <= 65535 else None


def flag_or_config(flag: Any, config: ProjectConfig, key: str) -> Any:
    """A command-line value when one was given (flags win, SPEC 3.16), else the config's."""
    return flag if flag is not None else config.value(key)


def machine_file(common_dir: Path) -> Path:
    """This machine's file: `$XDG_CONFIG_HOME/unitmgr/repos/<repository id>.toml`."""
    from pathlib import Path

    return Path(_machine_file_text(common_dir))


def _machine_file_text(common_dir: Path | str) -> str:
    home = userdirs.config_home_text()
    return pathtext.joined(home, "repos", f"{userdirs.repository_id(common_dir)}.toml")


def config_paths(common_dir: Path) -> tuple[Path | None, Path]:
    """The repository file (in the main worktree; None without one) and the local file."""
    from pathlib import Path

    repository_file, local_file = _config_files(common_dir)
    return (Path(repository_file) if repository_file else None), Path(local_file)


def _config_files(common_dir: Path | str) -> tuple[str | None, str]:
    """`config_paths` as text (what `str()` of those Paths gives): the empty-registry reads
    name and stat the files without importing pathlib (SPEC 7)."""
    from unitmgr.git import main_worktree_text

    main = main_worktree_text(common_dir)
    repository_file = pathtext.joined(main, REPOSITORY_FILE) if main else None
    return repository_file, _machine_file_text(common_dir)


def load_config(toplevel: Path, common_dir: Path) -> ProjectConfig:
    """Both files merged over the defaults; exit 2 `config-invalid` on any bad key or type.

    `toplevel` (the `--repo` worktree) names no file: both files follow from the common dir
    alone, so standing in a unit's worktree reads the same config as standing in the main one.
    """
    del toplevel  # kept in the signature: every caller has it, and none may lean on it
    return _load(common_dir, None)


def load_naming_every_problem(common_dir: Path) -> ProjectConfig:
    """`unit config`'s load: strict like `load_config`, but one `config-invalid` names every
    problem of both files at once (`detail.problems`, one `{file, key, expected, reason}`
    each), its `file`/`key`/`expected` the first one's — one run shows every fix."""
    problems: list[UsageError] = []
    config = _load(common_dir, problems)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        first = problems[0]
        listed = [{**(error.detail or {}), "reason": error.reason} for error in problems]
        raise UsageError(
            "config-invalid",
            f"{len(problems)} problems in the project config: "
            + "; ".join(error.reason.removeprefix("invalid project config ") for error in problems),
            detail={**(first.detail or {}), "problems": listed},
            next_step=first.next_step,
        )
    return config


def load_for_reading(common_dir: Path) -> tuple[ProjectConfig, dict[str, Any] | None]:
    """The config as a read command sees it (SPEC 3.16: a read never fails on the config):
    every valid key of both files, and the `config_warning` to report — `{file, key, reason,
    problems}` for the first problem (`key` null for the whole file, `problems` how many there
    are in all) — or None when both files are valid."""
    problems: list[UsageError] = []
    config = _load(common_dir, problems)
    return config, config_warning(problems)


def config_warning(problems: list[UsageError]) -> dict[str, Any] | None:
    """The document's `config_warning` for these problems (the first one named), or None."""
    if not problems:
        return None
    first = problems[0].detail if isinstance(problems[0].detail, dict) else {}
    return {
        "file": first.get("file"),
        "key": first.get("key"),
        "reason": problems[0].reason,
        "problems": len(problems),
        "next": "unit config",
    }


def reads_warning(common_dir: Path | str) -> dict[str, Any] | None:
    """`load_for_reading(common_dir)[1]`, for a common dir given as text: the empty-registry
    reads' `config_warning`, with no Path made (the same files, read the same way)."""
    problems: list[UsageError] = []
    _read_both(*_config_files(common_dir), problems)
    return config_warning(problems)


def _load(common_dir: Path, problems: list[UsageError] | None) -> ProjectConfig:
    repository_file, local_file = config_paths(common_dir)
    values, sources = _read_both(repository_file, local_file, problems)
    return ProjectConfig(repository_file, local_file, values, sources)


def _read_both(
    repository_file: Path | str | None, local_file: Path | str, problems: list[UsageError] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """Both files' valid keys (the local file's win), and the file each key came from."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    files = (("repository", repository_file), ("local", local_file))
    for source, path in files:
        if path is None:
            continue
        # The local file is read last: it wins. The repository file is a checkout's file, and a
        # committed symbolic link could point it into the common dir an executor writes.
        read = _read(path, follow_links=source == "local", problems=problems)
        for key, value in read.items():
            values[key] = value
            sources[key] = source
    return values, sources


def _invalid(path: Path | str, key: str | None, expected: str, *, got: Any = None) -> UsageError:
    where = f"{path}: {key}" if key else str(path)
    found = "" if got is None else f", got {_shown(got)}"
    return UsageError(
        "config-invalid",
        f"invalid project config {where}: must be {expected}{found}",
        detail={"file": str(path), "key": key, "expected": expected},
        next_step=f"{key or 'the file'} in {path}: must be {expected} (unit config checks it)",
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _refuse_or_note(error: UsageError, problems: list[UsageError] | None) -> None:
    """A strict load raises the problem; a read's load notes it and goes on without it."""
    if problems is None:
        raise error
    problems.append(error)


def _read(
    path: Path | str, *, follow_links: bool = True, problems: list[UsageError] | None = None
) -> dict[str, Any]:
    """One file's validated keys (flattened: `notify.command`), or {} when it does not exist.

    With `problems` (a read's load, SPEC 3.16) nothing is raised: a file that cannot be read or
    parsed gives no key, a bad key is left out, and each problem is appended there."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return {}
    except OSError:
        pass  # read_bounded reports it
    else:
        if not follow_links and stat.S_ISLNK(found.st_mode):
            expected = "a regular file in the main worktree, not a symbolic link"
            _refuse_or_note(_invalid(path, None, expected), problems)
            return {}
    import tomllib  # only when a file exists (start-up of list / status --all)

    from unitmgr.validation import BoundedReadRefused, read_bounded

    try:
        data = read_bounded(str(path))
    except BoundedReadRefused as refused:
        if refused.kind == "missing":
            return {}
        expected = "a readable regular TOML file of at most 1 MiB"
        _refuse_or_note(_invalid(path, None, expected), problems)
        return {}
    try:
        document = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        _refuse_or_note(_invalid(path, None, f"valid UTF-8 TOML ({error})"), problems)
        return {}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        if key in TABLES:
            if not isinstance(value, dict):
                _refuse_or_note(_invalid(path, key, f"a table [{key}]", got=value), problems)
                continue
            for inner, inner_value in value.items():
                flat[f"{key}.{inner}"] = inner_value
        else:
            flat[key] = value
    valid: dict[str, Any] = {}
    for key, value in flat.items():
        try:
            if key not in DEFAULTS:
                raise _invalid(path, key, f"a known key (one of {', '.join(KEYS)})")
            _check(path, key, value)
        except UsageError as error:
            _refuse_or_note(error, problems)
            continue
        valid[key] = value
    return valid


def _check(path: Path | str, key: str, value: Any) -> None:
    def is_int(item: Any) -> bool:
        return isinstance(item, int) and not isinstance(item, bool)

    if key in ("max_active", "max_held"):
        if not is_int(value) or not 1 <= value <= LIMIT_MAX:
            raise _invalid(path, key, f"an integer from 1 to {LIMIT_MAX}", got=value)
    elif key == "stuck_minutes":
        if not (is_int(value) or isinstance(value, float)) or not 0 < value <= 10080:
            raise _invalid(path, key, "a number of minutes above 0 (at most 10080)", got=value)
    elif key == "ports":
        if not is_int(value) or not 0 <= value <= PORTS_MAX:
            raise _invalid(path, key, f"an integer from 0 to {PORTS_MAX}", got=value)
    elif key == "port_range":
        if not isinstance(value, str) or port_range(value) is None:
            raise _invalid(path, key, PORT_RANGE_EXPECTED, got=value)
    elif key == "guard_refs":
        if not isinstance(value, bool):
            raise _invalid(path, key, "a boolean (true or false)", got=value)
    elif key == "lead":
        from pair.partners import LEADS

        if not isinstance(value, str) or value not in LEADS:
            raise _invalid(path, key, f"a string, one of {', '.join(LEADS)}", got=value)
    elif key in ("setup", "validation", "notify.command"):
        if not isinstance(value, str) or not value.strip():
            raise _invalid(path, key, "a non-empty string (a shell command)", got=value)
    elif key in ("partner", "model", "effort"):
        # A value the flag would refuse (an unknown partner, an effort the partner refuses) is
        # refused by `unit create` exactly as the flag would be, naming this file.
        if not isinstance(value, str) or not value.strip():
            raise _invalid(path, key, "a non-empty string", got=value)
    elif key == "paths":
        _check_paths(path, key, value)
    elif key == "worktree_root":
        _check_template(path, key, value)
    elif key == "copy":
        _check_copy(path, key, value)
    elif key == "notify.url":
        if not isinstance(value, str) or not re.fullmatch(r"https?://[^\s]+", value):
            raise _invalid(path, key, "a string, an http:// or https:// URL", got=value)
    elif key == "feedback.allow":
        if not isinstance(value, list) or not all(
            isinstance(item, str) and LOGIN.fullmatch(item) for item in value
        ):
            raise _invalid(path, key, "a list of GitHub logins", got=value)
    elif key in ("feedback.ci_rounds", "feedback.review_rounds"):
        if not is_int(value) or not 0 <= value <= 100:
            raise _invalid(path, key, "an integer from 0 to 100", got=value)
    elif key == "notify.events":
        _check_events(path, key, value)
    elif key == "runner":
        if not isinstance(value, str) or value not in RUNNERS:
            raise _invalid(path, key, f"a string, one of {', '.join(RUNNERS)}", got=value)
    elif key == "ray.address":
        from pair import api as pair_api

        expected = 'a Ray address: "ray://HOST:10001", "HOST:6379" or "auto"'
        if not isinstance(value, str):
            raise _invalid(path, key, expected, got=value)
        try:
            pair_api.RunnerChoice(kind="ray", address=value)
        except UsageError:
            raise _invalid(path, key, expected, got=value) from None
    elif key == "ray.clone_url" and (not isinstance(value, str) or not CLONE_URL.fullmatch(value)):
        expected = "a git URL (https://, ssh://, git://, file:// or user@host:path)"
        raise _invalid(path, key, expected, got=value)


def _check_events(path: Path | str, key: str, value: Any) -> None:
    names = [item for item in value if isinstance(item, str)] if isinstance(value, list) else None
    if names is None or len(names) != len(value) or not set(names) <= set(NOTIFY_EVENTS):
        known = ", ".join(NOTIFY_EVENTS)
        raise _invalid(path, key, f"a list of event names drawn from {known}", got=value)


def _check_template(path: Path | str, key: str, value: Any) -> None:
    fields = ", ".join("{" + name + "}" for name in TEMPLATE_FIELDS)
    expected = f"a non-empty path template string using only {fields}"
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise _invalid(path, key, expected, got=value)
    names = _PLACEHOLDER.findall(value)
    leftover = _PLACEHOLDER.sub("", value)
    if any(name not in TEMPLATE_FIELDS for name in names) or "{" in leftover or "}" in leftover:
        raise _invalid(path, key, expected, got=value)
    if not any(name in ("branch_slug", "branch", "unit") for name in names):
        # Without a per-unit placeholder every unit would get the same worktree.
        raise _invalid(
            path,
            key,
            expected + " (and at least one of {branch_slug}, {branch}, {unit})",
            got=value,
        )


def _check_paths(path: Path | str, key: str, value: Any) -> None:
    """Globs as `--paths` takes them (unitmgr/validation.py `write_paths`)."""
    from unitmgr.validation import write_paths

    expected = "a list of relative globs (no '..', no leading '/' or ':')"
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _invalid(path, key, expected, got=value)
    for item in value:
        try:
            write_paths([item])
        except UsageError:
            raise _invalid(path, key, expected, got=item) from None


def _check_copy(path: Path | str, key: str, value: Any) -> None:
    from pathlib import PurePosixPath

    expected = "a list of relative paths inside the repository (no '..', no leading '/')"
    if not isinstance(value, list):
        raise _invalid(path, key, expected, got=value)
    for item in value:
        if (
            not isinstance(item, str)
            or not item.strip()
            or "\0" in item
            or os.path.isabs(item)
            or item.startswith("~")
            or ".." in PurePosixPath(item).parts
            or PurePosixPath(item).parts in ((), (".",))
        ):
            raise _invalid(path, key, expected, got=item)


def warning_field(warning: dict[str, Any] | None) -> dict[str, Any]:
    """`{config_warning}` for a read's document when the config has a problem, else nothing
    (a valid config leaves every document as it was)."""
    return {"config_warning": warning} if warning else {}
