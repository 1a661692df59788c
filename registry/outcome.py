"""Turn what a command returned or raised into its one printed document and its exit code.

Shared by the Typer runner (registry/cli_runner.py) and the fast `unit` entry point
(unitmgr/entry.py), so both end a command the same way. It must not import typer.
"""

from __future__ import annotations

from collections.abc import Callable

from registry.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, ToolError
from registry.output import Rendered, emit, write_text


def deliver(call: Callable[[], object]) -> int:
    """Run `call`; a `ToolError` prints its document, anything unexpected becomes `internal`
    (exit 1, the redacted traceback in `detail`), Ctrl-C becomes `interrupted`."""
    try:
        result = call()
    except ToolError as error:
        emit(error.document())
        return error.exit_code
    except KeyboardInterrupt:
        emit({"ok": False, "code": "interrupted", "reason": "interrupted", "detail": None})
        return EXIT_INTERRUPTED
    except Exception as error:
        import traceback

        emit(
            {
                "ok": False,
                "code": "internal",
                "reason": f"unexpected error: {type(error).__name__}: {error}",
                "detail": {"traceback": traceback.format_exc()},
            }
        )
        return EXIT_REFUSED
    if isinstance(result, Rendered):
        write_text(result.text if result.text.endswith("\n") else result.text + "\n")
        return result.exit_code
    if isinstance(result, dict):
        emit(result)
        return EXIT_OK if result.get("ok") else EXIT_REFUSED
    if isinstance(result, int):
        # `--help` (and Typer's own exits) end here: the help text is already printed.
        return result
    return EXIT_OK
