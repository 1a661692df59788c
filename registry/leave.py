"""How the `unit` and `pair` console scripts end: the interpreter's exit, without its teardown.

A short command's last 10-20 ms went to the interpreter's finalization — every module's
namespace cleared and a final garbage collection over everything ~150 imports made — after
its one JSON document was already written (SPEC 7). `leave` does what an exit must do and
what a caller can see — non-daemon threads joined (a notification still being delivered),
`atexit` callbacks run, stdout and stderr flushed, exit status 120 when one cannot be
flushed, as CPython's own exit gives — and then ends the process with `os._exit`. The
warm CLI of the tests (tests/cli_zygote.py) ends each command the same way.

It must not be called from a function a caller uses as a library (`main(argv)` returns its
code): only from the console scripts' own wrappers and `python -m`.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

# CPython's exit status when flushing stdout fails at exit (Py_FinalizeEx).
UNFLUSHED = 120


def leave(code: int | None) -> NoReturn:
    """End the process with `code` (None is 0) as `sys.exit(code)` would, minus the teardown.

    Each step stands alone, as in CPython's own exit: a Ctrl-C while a thread is joined, or an
    atexit callback that raises, is printed and the next steps still run."""
    status = 0 if code is None else code
    try:
        threading = sys.modules.get("threading")
        if threading is not None:  # (never imported: no thread to wait for)
            _step(threading._shutdown)  # joins non-daemon threads
        import atexit

        _step(atexit._run_exitfuncs)
        for stream in (sys.stdout, sys.stderr):
            if stream is None or getattr(stream, "closed", False):
                continue  # (CPython skips a closed stream too)
            try:
                stream.flush()
            except OSError as error:  # a closed pipe: CPython exits 120 for either stream
                status = UNFLUSHED
                if stream is sys.stdout:
                    _ignored(error, "<stdout>")
    finally:
        os._exit(status & 0xFF)


def _step(action: Callable[[], object]) -> None:
    try:
        action()
    except BaseException as error:  # Ctrl-C included: said, then the exit goes on
        _ignored(error, getattr(action, "__qualname__", "exit"))


def _ignored(error: BaseException, where: str) -> None:
    """CPython's "Exception ignored" line and traceback, on stderr if it can still be written."""
    try:
        import traceback

        sys.stderr.write(f"Exception ignored at exit in: {where}\n")
        traceback.print_exception(error, file=sys.stderr)
        sys.stderr.flush()
    except BaseException:  # stderr gone too: nothing left to say it on
        pass
