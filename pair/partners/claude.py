"""Claude Code headless: `claude -p --output-format stream-json --verbose`, prompt on stdin.

The session id is the `session_id` of the final `result` event (or of the last event carrying
one, when a run died early); the reply is `result.result`, else the last assistant text. A
`result` with `is_error: true` is a failure even on exit 0. The model the CLI actually runs is
read from the first `system/init` event; `rate_limit_event`s are kept for the receipt.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from pair.partners.base import (
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    json_objects,
    last_assistant_text,
    replied_or_empty,
)


def _events(output: TurnOutput) -> list[dict[str, Any]]:
    return list(json_objects(output.stdout))


class ClaudePartner(Partner):
    name = "claude"
    binary_name = "claude"
    efforts = ("low", "medium", "high", "xhigh", "max")

    def command(self, request: TurnRequest) -> TurnCommand:
        argv = [request.partner_bin or self.binary_name, "-p"]
        if not request.bootstrap:
            argv += ["--resume", request.sid]
        argv += [
            "--output-format",
            "stream-json",
            "--verbose",
            "--strict-mcp-config",
            "--no-chrome",
        ]
        if request.model:
            argv += ["--model", request.model]
        if request.effort:
            argv += ["--effort", request.effort]
        # bypassPermissions: acceptEdits left Bash calls waiting for an approval nobody gives.
        argv += ["--permission-mode", "bypassPermissions" if request.write else "plan"]
        return TurnCommand(argv=argv, stdin_file=request.prompt_file, recorded=argv)

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        events = _events(output)
        extra = _observations(events)
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(
                status="failed", reason=failed.reason, sid=extra.get("sid"), extra=extra
            )
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        if result is not None and result.get("is_error") is True:
            return TurnOutcome(
                status="failed",
                reason="the partner run reported is_error — read the transcript",
                sid=extra.get("sid"),
                extra=extra,
            )
        reply = result.get("result") if result is not None else None
        if not isinstance(reply, str) or not reply.strip():
            reply = last_assistant_text(events)
        outcome = replied_or_empty(reply, **extra)
        return TurnOutcome(
            status=outcome.status,
            reply=outcome.reply,
            reason=outcome.reason,
            sid=extra.get("sid"),
            extra=extra,
        )

    def partial_reply(self, output: TurnOutput) -> str | None:
        return last_assistant_text(_events(output)) or None

    def session_known(self, sid: str, *, identity_home: str | None, worktree: Path) -> bool:
        projects = Path.home() / ".claude" / "projects"
        folder = projects / re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
        try:
            os.listdir(projects)
        except OSError:
            return True  # an unreadable store proves nothing
        try:
            (folder / f"{sid}.jsonl").stat()
        except FileNotFoundError:
            return False
        except OSError:
            return True
        return True


def _observations(events: list[dict[str, Any]]) -> dict[str, Any]:
    """Session id, the model the CLI reports, and the last rate-limit event."""
    found: dict[str, Any] = {}
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    carrier = result or next((e for e in reversed(events) if "session_id" in e), None)
    if carrier is not None and isinstance(carrier.get("session_id"), str):
        found["sid"] = carrier["session_id"]
    init = next(
        (e for e in events if e.get("type") == "system" and e.get("subtype") == "init"), None
    )
    if init is not None and isinstance(init.get("model"), str):
        found["model"] = init["model"]
    limit = next((e for e in reversed(events) if e.get("type") == "rate_limit_event"), None)
    if limit is not None and isinstance(limit.get("rate_limit_info"), dict):
        found["rate_limit_event"] = limit["rate_limit_info"]
    return found


ADAPTER = ClaudePartner()
