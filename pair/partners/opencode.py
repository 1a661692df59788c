"""OpenCode headless: `opencode run --format json --dir <root>`, the prompt as the last argument.

stdin is empty; the prompt is the final argv item (left out of the recorded command). The reply
joins the `text` parts; the session id is the first `sessionID` in the stream. The effort is
`--variant`, sent on every turn; the model on create only.
"""

from __future__ import annotations

from typing import Any

from pair.partners.base import (
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    json_objects,
    replied_or_empty,
)


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


class OpenCodePartner(Partner):
    name = "opencode"
    binary_name = "opencode"
    efforts = ("minimal", "low", "medium", "high", "max")

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
        return TurnCommand(argv=[*argv, prompt], stdin_file=None, recorded=argv)

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        events = list(json_objects(output.stdout))
        sid = _sid(events)
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(status="failed", reason=failed.reason, sid=sid)
        outcome = replied_or_empty(_text(events))
        return TurnOutcome(
            status=outcome.status, reply=outcome.reply, reason=outcome.reason, sid=sid
        )

    def partial_reply(self, output: TurnOutput) -> str | None:
        return _text(list(json_objects(output.stdout))).strip() or None


ADAPTER = OpenCodePartner()
