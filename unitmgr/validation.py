"""Argument checks shared by the unit commands (SPEC 3.0, 3.3): exit 2, nothing written.

Every check here is decidable from the arguments and the files they name; none takes a lock or
changes anything.
"""

from __future__ import annotations

import math
import os
import re
import stat

from registry.errors import Rewrite, UsageError
from registry.lazy_re import lazy

TYPE_CHECKING = False  # typing's own flag would import typing on the fast reads (SPEC 7)
if TYPE_CHECKING:
    from unitmgr.options import RestaffOptions

UNIT_ID = lazy(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}")
MAX_INPUT_FILE_BYTES = 1024 * 1024  # SPEC 3.0, 8: task and addendum files
EFFORT_REQUIRED = ("claude", "codex", "grok", "opencode")
# --max-active / --max-held (and the config file's max_active / max_held): a cap on units that a
# careful user could mean on one machine, well past what a batch of worktrees there holds
# (references/decisions.md); anything larger is a typo, refused with exit 2.
LIMIT_MAX = 10_000


def unit_id(value: str, option: str = "--unit") -> str:
    if not UNIT_ID.fullmatch(value):  # `match` with `$` would take a trailing newline
        raise UsageError(
            "invalid-unit-id",
            f"{option} must match [A-Za-z0-9][A-Za-z0-9_.+-]{{0,63}}, got {value!r}",
            next_step=f"{option}: letters, digits and _.+- (a letter or digit first, at most 64)",
        )
    return value


def issue_number(value: str | None) -> int | None:
    if value is None:
        return None
    if not re.fullmatch(r"[1-9][0-9]{0,9}", value):
        raise UsageError(
            "invalid-issue",
            f"--issue must be a positive issue number, got {value!r}",
            next_step="--issue: the issue's number alone, e.g. --issue 12",
        )
    return int(value)


def limit(value: str, option: str) -> int:
    # Bounded digits before `int`: a 5000-digit value would raise past Python's int-string limit.
    if not re.fullmatch(r"[1-9][0-9]{0,5}", value) or int(value) > LIMIT_MAX:
        raise UsageError(
            "invalid-limit",
            f"{option} must be between 1 and {LIMIT_MAX}, got {value!r}",
            next_command=Rewrite(set_options={option: _clamped(value, 1, LIMIT_MAX)}),
        )
    return int(value)


def _clamped(value: str, low: int, high: int) -> str:
    """The nearest allowed count to `value` (`low` for anything that is not a number)."""
    try:
        return str(min(max(int(value), low), high))
    except ValueError:
        return str(low)


def lock_timeout(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if math.isnan(seconds) or not 0 <= seconds < 86400:
        raise UsageError(
            "invalid-lock-timeout",
            f"--lock-timeout must be a number of seconds from 0, got {value!r}",
            next_command=Rewrite(set_options={"--lock-timeout": "30"}),
        )
    return seconds


def commit_sha(value: str, option: str) -> str:
    """A full commit SHA (40 hex digits, or 64 in a SHA-256 repository), lowercased.

    Never an abbreviation: a gate compares it for equality with the PR head.
    """
    sha = value.strip().lower()
    if len(sha) not in (40, 64) or any(c not in "0123456789abcdef" for c in sha):
        raise UsageError(
            "invalid-head",
            f"{option} must be a full commit SHA (40 hex digits), got {value!r}",
            next_step=f"{option}: the PR's full head SHA (unit status --unit ID names it)",
            next_command=Rewrite(command=("unit", "status"), keep=("--unit", "--repo")),
        )
    return sha


class BoundedReadRefused(Exception):
    """Why `read_bounded` refused a file: `kind` is missing, unreadable, not-regular, too-large
    or grew; the message names the file (its caller adds the option or key)."""

    def __init__(self, kind: str, message: str, size: int = 0) -> None:
        super().__init__(message)
        self.kind = kind
        self.size = size


def read_bounded(path: str, limit: int = MAX_INPUT_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (task, addendum and config files).

    Checked with `os.stat` before any open, so a FIFO, device or directory is refused without
    being opened for reading (opening a FIFO would block forever); the read itself is bounded
    too, in case the file grows between the check and the read.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise BoundedReadRefused("missing", "does not exist") from None
    except OSError as error:
        raise BoundedReadRefused("unreadable", str(error.strerror)) from None
    if not stat.S_ISREG(info.st_mode):
        raise BoundedReadRefused("not-regular", "is not a regular file")
    if info.st_size > limit:
        raise BoundedReadRefused("too-large", "is over the 1 MiB bound", info.st_size)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # swapped since the stat
                raise BoundedReadRefused("not-regular", "is not a file")
            data = handle.read(limit + 1)
    except OSError as error:
        raise BoundedReadRefused("unreadable", str(error)) from None
    if len(data) > limit:
        raise BoundedReadRefused("grew", "grew over the 1 MiB bound")
    return data


def read_input_file(value: str, option: str, *, missing_code: str) -> str:
    """The text of a task or addendum file: a regular file of at most 1 MiB, UTF-8."""
    try:
        data = read_bounded(os.path.expanduser(value))
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UsageError(missing_code, f"cannot read {option} {value}: {error}") from None
    except BoundedReadRefused as refused:
        if refused.kind == "missing":
            raise UsageError(
                missing_code,
                f"{option} does not exist: {value}",
                next_step=f"{option}: a file that exists ({value} does not)",
            ) from None
        if refused.kind == "unreadable":
            raise UsageError(missing_code, f"cannot read {option} {value}: {refused}") from None
        if refused.kind == "not-regular":
            raise UsageError(
                "input-not-regular-file",
                f"{option} {value} {refused}",
                next_step=f"{option}: a regular file holding the text",
            ) from None
        if refused.kind == "too-large":
            raise UsageError(
                "input-too-large",
                f"{option} {value} is {refused.size} bytes, over the 1 MiB bound",
                next_step=f"{option}: a file of at most 1 MiB (refer to long material in the "
                "repository)",
            ) from None
        raise UsageError("input-too-large", f"{option} {value} {refused}") from None


def required(value: str | None, option: str, command: str = "create") -> str:
    if value is None or not value.strip():
        raise UsageError(
            "missing-option",
            f"{command} requires {option}",
            next_step=f"{option}: add it (unit {command} --help describes it)",
        )
    return value


def write_paths(patterns: list[str]) -> list[str]:
    """`--paths` patterns: relative, non-empty, free of `..` (SPEC 2.2)."""
    cleaned = []
    for pattern in patterns:
        fix = "--paths: plain globs relative to the root, without ':' magic or '..'"
        if not pattern.strip():
            raise UsageError("invalid-paths", "--paths patterns must not be empty", next_step=fix)
        if pattern.startswith("/") or os.path.isabs(pattern):
            raise UsageError(
                "invalid-paths",
                f"--paths patterns are relative to the repository root: {pattern!r}",
                next_step=fix,
            )
        if pattern.startswith(":"):
            raise UsageError(
                "invalid-paths",
                f"--paths patterns are plain globs, not pathspec magic: {pattern!r}",
                next_step=fix,
            )
        if ".." in pattern.split("/"):  # PurePosixPath(pattern).parts, without pathlib
            raise UsageError(
                "invalid-paths",
                f"--paths patterns may not contain '..': {pattern!r}",
                next_step=fix,
            )
        cleaned.append(pattern)
    return cleaned


def staffing(
    *,
    lead: str,
    partner: str,
    model: str | None,
    effort: str | None,
    identity: str | None,
    command: str = "create",
) -> None:
    """The unit's own staffing rules (SPEC 3.3 "Leads", "Partners"): a known lead and partner, a
    valid identity name, never the lead's own CLI, and an effort where unitmgr requires one.

    What a partner itself can take (efforts, identities, the script's command, cursor's
    effort-in-the-model) is the adapter's `validate_staffing`, which the caller runs next.
    """
    from pair.identity import IDENTITY_NAME  # not on the path of the lock-free commands
    from pair.partners import LEADS, PARTNERS

    if lead not in LEADS:
        raise UsageError(
            "unknown-lead",
            f"unknown lead {lead!r} — use one of {', '.join(LEADS)}",
            next_step=f"--lead: one of {', '.join(LEADS)}",
        )
    if partner not in PARTNERS:
        raise UsageError(
            "unknown-partner",
            f"unknown partner {partner!r} — use one of {', '.join(PARTNERS)}",
            next_step=f"--partner: one of {', '.join(PARTNERS)}",
        )
    if identity is not None and not IDENTITY_NAME.match(identity):
        raise UsageError(
            "invalid-identity",
            f"invalid --identity name {identity!r}",
            next_step="--identity: letters, digits, _ and - only",
        )
    if lead == partner and not (partner == "codex" and identity is not None):
        raise UsageError(
            "lead-is-partner",
            f"the partner must differ from the lead ({lead}) — pairing a CLI with itself echoes",
            next_step=f"--partner: a CLI other than the lead's, e.g. --partner "
            f"{'claude' if lead == 'codex' else 'codex'}",
        )
    if partner in EFFORT_REQUIRED and not effort:
        raise UsageError(
            "effort-required",
            f"{command} requires --effort for {partner}",
            next_command=Rewrite(set_options={"--effort": "high"}),
        )


PLACEHOLDER = lazy(r"<[A-Z|]+>")  # what a missing-option next puts where a value goes

RESTAFF_PLACEHOLDERS = {
    "--lead": "<LEAD>",
    "--partner": "<PARTNER>",
    "--reason": "<TEXT>",
    "--model": "<COMMAND>",
    "--effort": "<EFFORT>",
}


def refuse_missing_restaff_options(options: RestaffOptions) -> None:
    """Every missing option at once (as create names them): `--lead`, `--partner`, `--reason`,
    and beside another missing one the effort the partner needs or the script's command line
    (alone, each keeps its own refusal). A `<PLACEHOLDER>` pasted back unfilled is missing."""

    def unset(value: str | None) -> bool:
        return value is None or not value.strip() or PLACEHOLDER.fullmatch(value) is not None

    given = {"--lead": options.lead, "--partner": options.partner, "--reason": options.reason}
    missing = [flag for flag, value in given.items() if unset(value)]
    if missing and options.partner in EFFORT_REQUIRED and unset(options.effort):
        missing.append("--effort")
    if missing and options.partner == "script" and unset(options.model):
        missing.append("--model")
    if not missing:
        return
    listed = missing[0] if len(missing) == 1 else ", ".join(missing[:-1]) + " and " + missing[-1]
    raise UsageError(
        "missing-option",
        f"restaff requires {listed}",
        detail={"missing": missing},
        next_command=Rewrite(set_options={flag: RESTAFF_PLACEHOLDERS[flag] for flag in missing}),
    )
