"""Typed refusals and the one map from refusal to exit code (SPEC 3.0).

Deep code raises a `ToolError` subclass carrying a stable kebab-case `code`, a `reason` for people
and, where useful, the next step; only `registry.cli_runner` turns one into the JSON document and
the exit code. The class decides the exit code:

- `UsageError` (2): the call itself is wrong, decidable from the arguments and the files they name;
- `StateError` (1): the repository, registry, git or GitHub state refuses, or a step failed;
- `RetryableError` (75, `retryable: true`): try again later (a lock timeout, rate limits).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

# typing's own flag would import typing: this module is on the fast reads' path (SPEC 7).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any, ClassVar

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_RETRYABLE = 75


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived during a command (SPEC 3.0): exit 130 or 143.

    A BaseException, like KeyboardInterrupt: `except Exception` handlers (a create's rollback)
    let it pass, so the journal keeps its last `started` entry and the command resumes.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by signal {signum}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class Rewrite:
    """A next step built from the failed command line (SPEC 3.0: `next` is one pasteable
    command, never the identical one). Either the line itself, changed, or — with `command` —
    another command (`("unit", "list")`) carrying the options of `keep` over from the line
    (`--repo` by default, so the next step looks at the same repository). Then options are set
    to a value (replaced where the line has them, else appended), dropped (with their value
    unless listed in `flags`), flags added, and environment assignments put in front.

    Only the runner knows the command line, so a refusal names the change and
    `registry.outcome` applies it to the line that ran.
    """

    def __init__(
        self,
        *,
        command: tuple[str, ...] = (),
        keep: tuple[str, ...] = ("--repo",),
        set_options: dict[str, str] | None = None,
        drop: tuple[str, ...] = (),
        flags: tuple[str, ...] = (),
        environment: dict[str, str] | None = None,
    ) -> None:
        self.command = command
        self.keep = keep
        self.set_options = set_options or {}
        self.drop = drop
        self.flags = flags
        self.environment = environment or {}

    def apply(self, command_line: str) -> str:
        import shlex

        words = shlex.split(command_line)
        if self.command:
            kept = [*self.command]
            for option in self.keep:
                value = _value_of(words, option)
                if value is not None:
                    kept += [option, value]
            words = kept
        for option in (*self.drop, *self.set_options):
            words = _without(words, option, takes_value=option not in self.flags)
        for option, value in self.set_options.items():
            words += [option, value]
        words += [flag for flag in self.flags if flag not in words and flag not in self.drop]
        prefix = "".join(f"{key}={shlex.quote(value)} " for key, value in self.environment.items())
        return prefix + shlex.join(words)


def _value_of(words: list[str], option: str) -> str | None:
    for index, word in enumerate(words):
        if word == option and index + 1 < len(words):
            return words[index + 1]
        if word.startswith(option + "="):
            return word.split("=", 1)[1]
    return None


def _without(words: list[str], option: str, *, takes_value: bool) -> list[str]:
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word == option:
            skip = takes_value
        elif not word.startswith(option + "="):
            kept.append(word)
    return kept


class ToolError(Exception):
    """A refusal or failure with a stable `code`. Never raised directly: pick the subclass."""

    exit_code: ClassVar[int] = EXIT_REFUSED
    retryable: ClassVar[bool] = False

    def __init__(
        self,
        code: str,
        reason: str,
        *,
        detail: Any = None,
        next_step: str | None = None,
        next_command: Rewrite | None = None,
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.detail = detail
        # `next_step` is what a library caller sees; the CLIs print `next_command` applied to
        # the command line that ran, when there is one.
        self.next_step = next_step
        self.next_command = next_command
        self.fields: dict[str, Any] = {}  # extra top-level fields, e.g. `dry_run: true`

    def document(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "ok": False,
            "code": self.code,
            "reason": self.reason,
            "detail": self.detail,
        }
        if self.next_step:
            document["next"] = self.next_step
        if self.retryable:
            document["retryable"] = True
        document.update(self.fields)
        return document


class _InterruptHold:
    """SIGINT/SIGTERM held back while a child is being started (see `hold_interrupts`)."""

    depth = 0
    pending: int | None = None


def raise_interrupted(signum: int, _frame: object) -> None:
    """The SIGINT/SIGTERM handler `registry.cli_runner` installs: raise `Interrupted`, unless a
    child is being started, in which case the signal is held until `release_interrupts()`."""
    if _InterruptHold.depth:
        _InterruptHold.pending = signum
        return
    raise Interrupted(signum)


def hold_interrupts() -> None:
    """Hold SIGINT/SIGTERM until `release_interrupts()`.

    Starting a child and entering the `try` that kills it are two steps; a signal landing between
    them (inside `Popen` itself, or just after) would leave the child running with nobody to kill
    it. The caller holds interrupts across `Popen` and releases them as the first statement of
    that `try`, where a held signal is raised and the child is killed with its group. Only the
    main thread holds: signal handlers run there, and a worker thread must never receive them.
    """
    if threading.current_thread() is threading.main_thread():
        _InterruptHold.depth += 1


def release_interrupts() -> None:
    """End a `hold_interrupts()`; raise the signal that arrived meanwhile, if any."""
    if threading.current_thread() is not threading.main_thread():
        return
    _InterruptHold.depth = max(0, _InterruptHold.depth - 1)
    if _InterruptHold.depth == 0 and _InterruptHold.pending is not None:
        signum, _InterruptHold.pending = _InterruptHold.pending, None
        raise Interrupted(signum)


def reset_interrupt_hold() -> None:
    """Forget a hold and a held signal: for a forked child, which starts its own command."""
    _InterruptHold.depth, _InterruptHold.pending = 0, None


class UsageError(ToolError):
    exit_code = EXIT_USAGE


class StateError(ToolError):
    exit_code = EXIT_REFUSED


class RetryableError(ToolError):
    exit_code = EXIT_RETRYABLE
    retryable = True


@contextmanager
def marking_dry_run(dry_run: bool) -> Iterator[None]:
    """A `--dry-run` refuses exactly as the real command would, plus `dry_run: true`."""
    try:
        yield
    except ToolError as error:
        if dry_run:
            error.fields["dry_run"] = True
        raise
