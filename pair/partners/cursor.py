"""Cursor headless: `cursor-agent -p --trust --output-format stream-json`, prompt on stdin.

`--trust` because a headless run refuses an untrusted directory; read-only turns use
`--mode plan` (plain `-p` writes). The effort lives inside the model id, passed on create only.
The session id and reply come from the last `result` event that is not an error.
"""

from __future__ import annotations

from pathlib import Path

from pair.errors import Rewrite, UsageError
from pair.partners.base import (
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    json_objects,
    last_assistant_text,
    replied_or_empty,
    store_has,
)

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

SID_KEYS = ("chat_id", "chatId", "session_id", "sessionId")


def _sid(events: list[dict[str, Any]]) -> str | None:
    for event in reversed(events):
        if event.get("type") == "result" and event.get("is_error") is not True:
            for key in SID_KEYS:
                if isinstance(event.get(key), str) and event[key]:
                    return str(event[key])
    for event in events:
        if isinstance(event.get("session_id"), str) and event["session_id"]:
            return str(event["session_id"])
    return None


class CursorPartner(Partner):
    name = "cursor"
    binary_name = "cursor-agent"

    def command(self, request: TurnRequest) -> TurnCommand:
        argv = [request.partner_bin or self.binary_name, "-p", "--trust"]
        argv += ["--output-format", "stream-json"]
        if not request.bootstrap:
            argv += ["--resume", request.sid]
        if request.bootstrap and request.model:
            argv += ["--model", request.model]
        argv += ["--force"] if request.write else ["--mode", "plan"]
        return TurnCommand(argv=argv, stdin_file=request.prompt_file, recorded=argv)

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        events = list(json_objects(output.stdout))
        sid = _sid(events)
        result = next((e for e in reversed(events) if e.get("type") == "result"), None)
        text = result.get("result") if result is not None else None
        failed_result = result is not None and result.get("is_error") is True
        if failed_result and isinstance(text, str) and text.strip():
            return self.failure(request, output, f"cursor-agent: {text.strip()}", sid=sid)
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(status="failed", reason=failed.reason, sid=sid)
        if result is not None and result.get("is_error") is True:
            return TurnOutcome(
                status="failed",
                reason="the partner run reported is_error — read the transcript",
                sid=sid,
            )
        reply = result.get("result") if result is not None else None
        if not isinstance(reply, str) or not reply.strip():
            reply = last_assistant_text(events)
        outcome = replied_or_empty(reply)
        return TurnOutcome(
            status=outcome.status, reply=outcome.reply, reason=outcome.reason, sid=sid
        )

    def validate_staffing(
        self, *, model: str | None, effort: str | None, identity: str, writable: bool = True
    ) -> None:
        super().validate_staffing(model=model, effort=effort, identity=identity)
        family = bool(model and model.lower().startswith("latest:"))
        if effort is not None and not family:
            raise UsageError(
                "effort-refused",
                "cursor carries effort inside the model id — omit --effort (or use "
                "latest:<family>)",
                next_command=Rewrite(drop=("--effort",)),
            )
        if family and effort is None:
            raise UsageError(
                "effort-required",
                f"cursor {model} needs --effort for catalog resolution",
                next_command=Rewrite(set_options={"--effort": "high"}),
            )

    def session_known(self, sid: str, *, identity_home: str | None, worktree: Path) -> bool:
        return store_has(Path.home() / ".cursor" / "chats", sid)

    def partial_reply(self, output: TurnOutput) -> str | None:
        return last_assistant_text(list(json_objects(output.stdout))) or None

    def render_event(self, event: dict[str, Any]) -> list[str]:
        from pair.partners.claude import render_stream_json  # the same stream-json events

        return render_stream_json(event)


ADAPTER = CursorPartner()
