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


class ToolError(Exception):
    """A refusal or failure with a stable `code`. Never raised directly: pick the subclass."""

    exit_code: ClassVar[int] = EXIT_REFUSED
    retryable: ClassVar[bool] = False

    def __init__(
        self, code: str, reason: str, *, detail: Any = None, next_step: str | None = None
    ) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason
        self.detail = detail
        self.next_step = next_step
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
