"""Turn what a command returned or raised into its one printed document and its exit code.

Shared by the Typer runner (registry/cli_runner.py) and the fast `unit` entry point
(unitmgr/entry.py), so both end a command the same way: a `ToolError` prints its document, a
signal becomes `interrupted` (128 + signal), anything unexpected becomes `internal` (exit 1, the
redacted traceback in `detail` and in a log file named by `detail.log`, registry/crashlog.py),
and every failure names a next step. It must not import typer.
"""

from __future__ import annotations

import shlex
import signal
import threading
from contextlib import contextmanager

from registry import crashlog
from registry.errors import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    Interrupted,
    Rewrite,
    ToolError,
    raise_interrupted,
)
from registry.output import Rendered, emit, write_view

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise `Interrupted` in the main thread while the command runs, so
    every `finally` and `except BaseException` on the way out runs: children started by
    `run_streamed`, `run_git` and a bootstrap are killed as a group, locks are released, and
    the journal keeps its `started` entry (SPEC 3.0)."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers (an in-process caller's worker)
        return
    previous = {
        signum: signal.signal(signum, raise_interrupted)
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


_UNIT_STATUS = Rewrite(command=("unit", "status"), keep=("--unit", "--repo"))
_UNIT_LIST = Rewrite(command=("unit", "list"))
_PAIR_END = Rewrite(command=("pair", "end"))
_PAIR_STATUS = Rewrite(command=("pair", "status"))

# One next step per code, whichever command refused (SPEC 3.0: the same `code` gets the same
# `next` from every command). A refusal's own `next_command` still wins: it knows the value.
BY_CODE: dict[str, Rewrite | str] = {
    "no-such-unit": _UNIT_LIST,
    "unit-exists": _UNIT_STATUS,
    "wrong-lifecycle": _UNIT_LIST,
    "pair-missing": _UNIT_LIST,
    "head-moved": _UNIT_STATUS,
    "no-head": _UNIT_STATUS,
    "unit-vanished": Rewrite(flags=("--dry-run",)),
    "pair-exists": _PAIR_END,
    "pair-identity-differs": _PAIR_END,
    "bootstrap-in-flight": _PAIR_STATUS,
    "no-pair-session": Rewrite(command=("pair", "init", "--help"), keep=()),
    "not-a-git-repository": "--repo: a directory inside a git repository",
    # The same command naming the repository (an origin on GitHub would do as well: the reason
    # says so); `<OWNER>/<NAME>` pasted unfilled is the same refusal, never another repository.
    "github-not-configured": Rewrite(environment={"GITHUB_REPOSITORY": "<OWNER>/<NAME>"}),
}


def _next_for(document: dict[str, Any], exit_code: int, command: str) -> str:
    """A next step for a failure that names none (SPEC 3.0: `next` is never empty, and is a
    command that makes progress, never the one that failed)."""
    words = shlex.split(command)
    if exit_code == EXIT_USAGE:
        words = words[:2]
        if len(words) == 2 and words[1].startswith("-"):
            words = words[:1]  # `unit --bogus`: the program's help, not `unit --bogus --help`
        return shlex.join([*words, "--help"])
    if document.get("retryable"):
        return f"sleep 30 && {command}"
    if document.get("code") == "internal":
        return "a bug: report it with this output (and the log detail.log names)"
    return look_at_state(words)


def look_at_state(words: list[str]) -> str:
    """The read that shows what refused `words`: the unit's status, the pair's, or the list."""
    line = shlex.join(words)
    if words and words[0] == "pair":
        return Rewrite(command=("pair", "status")).apply(line)
    if "--unit" in words or any(word.startswith("--unit=") for word in words):
        return Rewrite(command=("unit", "status"), keep=("--unit", "--repo")).apply(line)
    return Rewrite(command=("unit", "list")).apply(line)


def failure(document: dict[str, Any], exit_code: int, command: str) -> int:
    if not document.get("next"):
        document["next"] = _next_for(document, exit_code, command)
    emit(document)
    return exit_code


def deliver(call: Callable[[], object], command_line: str) -> int:
    """Run `call` (signals interrupt it), print exactly one document, return the exit code."""
    try:
        with interruptible():
            result = call()
    except ToolError as error:
        document = error.document()
        step = error.next_command or BY_CODE.get(error.code)
        if isinstance(step, Rewrite):
            document["next"] = step.apply(command_line)
        elif step is not None:
            document["next"] = step
        if crashlog.unexpected_cause(error) is not None:
            # A typed failure around an unexpected exception (`step-failed`): its trace is kept.
            log = crashlog.write(error, command_line)
            if log is not None and isinstance(document.get("detail") or {}, dict):
                document["detail"] = {**(document.get("detail") or {}), "log": str(log)}
                document["next"] = shlex.join(["tail", "-n", "40", str(log)])
        return failure(document, error.exit_code, command_line)
    except (Interrupted, KeyboardInterrupt) as error:
        signum = error.signum if isinstance(error, Interrupted) else signal.SIGINT
        name = signal.Signals(signum).name
        document = {
            "ok": False,
            "code": "interrupted",
            "reason": (
                f"interrupted by {name}; its children were stopped "
                "(a journaled command keeps its journal)"
            ),
            # The bare command line: a journaled command resumes, a read runs again.
            "next": command_line,
            "detail": {"signal": name},
        }
        return failure(document, 128 + signum, command_line)
    except Exception as error:
        import traceback

        detail: dict[str, Any] = {"traceback": traceback.format_exc()}
        log = crashlog.write(error, command_line)
        if log is not None:
            detail["log"] = str(log)
        document = {
            "ok": False,
            "code": "internal",
            "reason": f"unexpected error: {type(error).__name__}: {error}",
            "detail": detail,
        }
        return failure(document, EXIT_REFUSED, command_line)
    if isinstance(result, Rendered):
        write_view(result)
        return result.exit_code
    if isinstance(result, dict):
        emit(result)
        return EXIT_OK if result.get("ok") else EXIT_REFUSED
    if isinstance(result, int):
        # `--help` (and Typer's own exits) end here: the help text is already printed.
        return result
    return EXIT_OK
