"""Claude Code headless: `claude -p --output-format stream-json --verbose`, prompt on stdin.

The session id is the `session_id` of the final `result` event (or of the last event carrying
one, when a run died early); the reply is `result.result`, else the last assistant text. A
`result` with `is_error: true` is a failure even on exit 0, and its `result` text (with
`api_error_status`) is the reason; an API error also marks the last assistant event
(`"error": "rate_limit"`, the text `API Error: ...`). The model the CLI actually runs is read from
the first `system/init` event; `rate_limit_event`s are kept for the receipt. Every turn passes
`--model` and `--effort`: a resumed session otherwise runs on the CLI's defaults.

Claude Code refuses `bypassPermissions` for uid 0 unless `IS_SANDBOX=1`, so a writable session
as root without it is refused at staffing time (`partner-refuses-root`), before anything starts.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from pair.errors import Rewrite, UsageError
from pair.partners.base import (
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    error_lines,
    json_objects,
    last_assistant_text,
    replied_or_empty,
    said,
    text_blocks,
    tool_call,
    tool_detail,
    tool_result,
)

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _events(output: TurnOutput) -> list[dict[str, Any]]:
    return list(json_objects(output.stdout))


# The same command with IS_SANDBOX=1 in front (the reason says when that is right: only on a
# machine that is a sandbox; elsewhere, run as a non-root user).
ROOT_NEXT = Rewrite(environment={"IS_SANDBOX": "1"})


def refuses_root() -> bool:
    """Whether Claude Code will refuse a writable (bypassPermissions) run here."""
    return os.geteuid() == 0 and os.environ.get("IS_SANDBOX", "").strip() != "1"


class ClaudePartner(Partner):
    name = "claude"
    binary_name = "claude"
    efforts = ("low", "medium", "high", "xhigh", "max")
    verified_versions = ("2.1.197 (Claude Code)",)

    def validate_staffing(
        self, *, model: str | None, effort: str | None, identity: str, writable: bool = True
    ) -> None:
        super().validate_staffing(model=model, effort=effort, identity=identity)
        if writable and refuses_root():
            raise UsageError(
                "partner-refuses-root",
                "Claude Code refuses --permission-mode bypassPermissions for root unless "
                "IS_SANDBOX=1 is set, so every writable claude turn would fail (set it only "
                "where the machine is a sandbox; elsewhere run as a non-root user)",
                next_command=ROOT_NEXT,
            )

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
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        error = _final_error(events, result)
        if error is not None:
            message, limited = error
            return self.failure(
                request, output, message, sid=extra.get("sid"), extra=extra, rate_limited=limited
            )
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(
                status="failed", reason=failed.reason, sid=extra.get("sid"), extra=extra
            )
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

    def render_event(self, event: dict[str, Any]) -> list[str]:
        return render_stream_json(event)

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


def _final_error(
    events: list[dict[str, Any]], result: dict[str, Any] | None
) -> tuple[str, bool] | None:
    """(Claude's own error message, whether it is a rate limit), or None when none is named."""
    if result is not None and result.get("is_error") is True:
        text = result.get("result")
        status = result.get("api_error_status")
        message = text.strip() if isinstance(text, str) and text.strip() else ""
        if isinstance(status, int):
            message = f"{message or 'API error'} (api_error_status {status})"
        if message:
            return message, status == 429
    for event in reversed(events):
        if event.get("type") == "assistant" and isinstance(event.get("error"), str):
            text = text_blocks(event.get("message")).strip()
            return text or f"API error: {event['error']}", event["error"] == "rate_limit"
    return None


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


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(block.get("text", "")) for block in content if isinstance(block, dict))
    return "" if content is None else str(content)


def render_stream_json(event: dict[str, Any]) -> list[str]:
    """A `stream-json` event (Claude Code's, which Cursor's follows) for a person."""
    kind, message = event.get("type"), event.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    blocks = blocks if isinstance(blocks, list) else []
    if kind == "system" and event.get("subtype") == "init":
        return [f"· session {event.get('session_id')} · model {event.get('model')}"]
    if kind == "assistant":
        if isinstance(event.get("error"), str):  # an API error, its text the error message
            return error_lines(f"{event['error']}: {text_blocks(message)}".rstrip(": "))
        lines: list[str] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and str(block.get("text") or "").strip():
                lines += said(str(block["text"]))
            elif block.get("type") == "tool_use":
                lines += tool_call(str(block.get("name")), tool_detail(block.get("input")))
        return lines
    if kind == "user":
        return [
            line
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "tool_result"
            for line in tool_result(
                _result_text(block.get("content")), error=block.get("is_error") is True
            )
        ]
    if kind == "result":
        if event.get("is_error"):
            status = event.get("api_error_status")
            suffix = f" (api_error_status {status})" if status else ""
            return error_lines(f"{event.get('result') or event.get('subtype')}{suffix}")
        return [f"· result: {event.get('subtype')}, {event.get('num_turns')} turn(s)"]
    if kind == "rate_limit_event":
        info = event.get("rate_limit_info") or {}
        status = info.get("status") if isinstance(info, dict) else None
        if status in (None, "allowed"):
            return [f"· rate limit status: {status or 'unknown'}"]
        return [f"!! rate-limit: {status} (resets {info.get('resetsAt')})"]
    return []  # stream deltas and bookkeeping events say nothing a person needs
