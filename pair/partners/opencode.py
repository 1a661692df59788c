"""OpenCode headless: `opencode run --format json --dir <root>`, the prompt as the last argument.

stdin is empty; the prompt is the final argv item (left out of the recorded command). The reply
joins the `text` parts; the session id is the first `sessionID` in the stream. The effort is
`--variant`, sent on every turn; the model on create only — a session keeps its model on
`--session` (opencode 1.18.33, proved by the real tier). A failed run prints an
`{"type": "error", "error": {"name", "data": {"message", "statusCode", "responseHeaders"}}}`
event (after its own retries) and exits 1: that message is the reason.

`--agent plan` alone does not make a turn read-only: under `opencode run` the plan agent still
ran a shell command that wrote a file (1.18.33, proved by the real tier), so a read-only turn also
sets `OPENCODE_PERMISSION` to deny `edit`, `bash` and `webfetch`, which removes those tools.
"""

from __future__ import annotations

import json

from pair.partners.base import (
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    error_lines,
    json_objects,
    replied_or_empty,
    retry_after_header,
    said,
    tool_call,
    tool_detail,
    tool_result,
)

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _text(events: list[dict[str, Any]]) -> str:
    parts = []
    for event in events:
        part = event.get("part")
        if (
            event.get("type") == "text"
            and isinstance(part, dict)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            parts.append(part["text"])
    return "".join(parts)


def _sid(events: list[dict[str, Any]]) -> str | None:
    for event in events:
        for holder in (event, event.get("part")):
            if isinstance(holder, dict) and isinstance(holder.get("sessionID"), str):
                return str(holder["sessionID"])
    return None


def _final_error(events: list[dict[str, Any]]) -> tuple[str, bool, float | None] | None:
    """(opencode's own error message, a rate limit?, seconds to wait) of its last error event."""
    for event in reversed(events):
        if event.get("type") != "error":
            continue
        error = event.get("error") if isinstance(event.get("error"), dict) else {}
        assert isinstance(error, dict)
        data = error.get("data") if isinstance(error.get("data"), dict) else {}
        assert isinstance(data, dict)
        message = data.get("message") or error.get("message") or "(no message)"
        name = error.get("name") or "error"
        status = data.get("statusCode")
        text = f"opencode {name}: {message}"
        if isinstance(status, int):
            text += f" (HTTP {status})"
        wait = retry_after_header(data.get("responseHeaders"))
        return text, status == 429, wait
    return None


READ_ONLY_PERMISSION = json.dumps({"edit": "deny", "bash": "deny", "webfetch": "deny"})


class OpenCodePartner(Partner):
    name = "opencode"
    binary_name = "opencode"
    efforts = ("minimal", "low", "medium", "high", "max")
    verified_versions = ("1.18.33",)

    def help_argv(self, request: TurnRequest) -> list[str]:
        return ["run", "--help"]

    def command(self, request: TurnRequest) -> TurnCommand:
        argv = [request.partner_bin or self.binary_name, "run", "--format", "json"]
        argv += ["--dir", str(request.worktree)]
        if not request.bootstrap:
            argv += ["--session", request.sid]
        if request.bootstrap and request.model:
            argv += ["-m", request.model]
        if request.effort:
            argv += ["--variant", request.effort]
        argv += ["--auto"] if request.write else ["--agent", "plan"]
        prompt = request.prompt_file.read_text(encoding="utf-8")
        environment = {} if request.write else {"OPENCODE_PERMISSION": READ_ONLY_PERMISSION}
        return TurnCommand(
            argv=[*argv, prompt], stdin_file=None, recorded=argv, environment=environment
        )

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        events = list(json_objects(output.stdout))
        sid = _sid(events)
        error = _final_error(events)
        if error is not None:
            message, limited, wait = error
            return self.failure(
                request,
                output,
                message,
                sid=sid,
                rate_limited=limited,
                retry_after_seconds=wait,
            )
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(status="failed", reason=failed.reason, sid=sid)
        outcome = replied_or_empty(_text(events))
        return TurnOutcome(
            status=outcome.status, reply=outcome.reply, reason=outcome.reason, sid=sid
        )

    def partial_reply(self, output: TurnOutput) -> str | None:
        return _text(list(json_objects(output.stdout))).strip() or None

    def render_event(self, event: dict[str, Any]) -> list[str]:
        return _render(event)


ADAPTER = OpenCodePartner()


def _render(event: dict[str, Any]) -> list[str]:
    """An `opencode run --format json` event for a person: each tool call with its input and
    its output's first lines, the text, and errors; step bookkeeping is left out."""
    kind = event.get("type")
    part = event.get("part") if isinstance(event.get("part"), dict) else {}
    assert isinstance(part, dict)
    if kind == "text":
        return said(str(part.get("text") or ""))
    if kind == "tool_use":
        state = part.get("state") if isinstance(part.get("state"), dict) else {}
        assert isinstance(state, dict)
        lines = tool_call(str(part.get("tool")), tool_detail(state.get("input")))
        if "output" in state or state.get("status") == "error":
            output = str(state.get("output") or state.get("error") or "")
            lines += tool_result(output, error=state.get("status") == "error")
        return lines
    if kind == "error":
        found = _final_error([event])
        return error_lines(found[0] if found else "opencode error")
    return []
