"""Grok headless: `grok --prompt-file <f> --output-format streaming-json`.

Grok takes its session id from us (`--session-id <uuid>` on create, `--resume <sid>` after), so
the sid is never parsed. The reply joins the `text` events (`thought` events stay in the
transcript only). An `end` event with `stopReason: "cancelled"` is a failure (`grok-cancelled`)
even on exit 0; a stream without an `end` that exits 0 with text counts as replied. Writable
turns need `--always-approve` too: under acceptEdits Grok cancelled its own tool calls.
"""

from __future__ import annotations

import os
from pathlib import Path

from pair.partners.base import (
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    json_objects,
    replied_or_empty,
    store_has,
)

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(
        str(e["data"]) for e in events if e.get("type") == "text" and isinstance(e.get("data"), str)
    )


class GrokPartner(Partner):
    name = "grok"
    binary_name = "grok"
    efforts = ("low", "medium", "high", "xhigh")

    def command(self, request: TurnRequest) -> TurnCommand:
        argv = [request.partner_bin or self.binary_name, "--prompt-file", str(request.prompt_file)]
        argv += ["--output-format", "streaming-json"]
        argv += ["--session-id", request.sid] if request.bootstrap else ["--resume", request.sid]
        if request.write:
            argv += ["--permission-mode", "bypassPermissions", "--always-approve"]
        else:
            argv += ["--permission-mode", "plan"]
        if request.bootstrap and request.model:
            argv += ["-m", request.model]
        if request.bootstrap and request.effort:
            argv += ["--reasoning-effort", request.effort]
        return TurnCommand(argv=argv, stdin_file=None, recorded=argv)

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        events = list(json_objects(output.stdout))
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(status="failed", reason=failed.reason, sid=request.sid)
        end = next((e for e in reversed(events) if e.get("type") == "end"), None)
        if end is not None and end.get("stopReason") == "cancelled":
            return TurnOutcome(status="failed", reason="grok-cancelled", sid=request.sid)
        outcome = replied_or_empty(_text(events))
        return TurnOutcome(
            status=outcome.status, reply=outcome.reply, reason=outcome.reason, sid=request.sid
        )

    def partial_reply(self, output: TurnOutput) -> str | None:
        return _text(list(json_objects(output.stdout))).strip() or None

    def session_known(self, sid: str, *, identity_home: str | None, worktree: Path) -> bool:
        home = os.environ.get("GROK_HOME") or str(Path.home() / ".grok")
        return store_has(Path(home) / "sessions", sid)


ADAPTER = GrokPartner()
