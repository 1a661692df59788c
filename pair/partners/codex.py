"""Codex headless: `codex exec ... --json -o <reply-file> -`, prompt on stdin.

Create: `exec -s <sandbox> -C <root> [-c approval_policy="never"] [-m M]
[-c model_reasoning_effort="E"] --json -o <reply> -`. Resume: `exec resume <sid>
-c sandbox_mode="<sandbox>" [-c approval_policy="never"] [-m M] [-c model_reasoning_effort="E"]
--json -o <reply> -` (resume takes neither `-C` nor `-s`; the directory is the spawn cwd). Model
and effort go on every turn: `exec resume` does not keep the thread's model — it takes
config.toml's, else the CLI default, and says "This session was recorded with model X but is
resuming with Y" (codex-cli 0.171). The session id is the first `thread.started` event's
`thread_id`; the reply is the `-o` file, else the last completed `agent_message`. A `turn.failed`
event is a failure even on exit 0; its message (else, on a non-zero exit, the last top-level
`error` event's) is the reason. `item.completed` items of type `error` are warnings (unknown
model metadata, the resume model notice), never failures. Every turn passes
`--disable shell_snapshot`: codex would otherwise write the partner's environment, tokens
included, under `$CODEX_HOME/shell_snapshots/`.
"""

from __future__ import annotations

import os
from pathlib import Path

from pair.partners.base import (
    REPLY_MAX_BYTES,
    Partner,
    TurnCommand,
    TurnOutcome,
    TurnOutput,
    TurnRequest,
    error_lines,
    json_objects,
    replied_or_empty,
    said,
    store_has,
    tool_call,
    tool_detail,
    tool_result,
)
from registry import bounded

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def _last_agent_message(events: list[dict[str, Any]]) -> str:
    for event in reversed(events):
        item = event.get("item")
        if (
            event.get("type") == "item.completed"
            and isinstance(item, dict)
            and item.get("type") == "agent_message"
            and isinstance(item.get("text"), str)
        ):
            return str(item["text"])
    return ""


def _final_error(events: list[dict[str, Any]], *, failed_exit: bool) -> str | None:
    """The last `turn.failed` message, else — when codex exited non-zero — the last top-level
    `error` event's (codex also prints `error` events for retries it then survives)."""
    for kind in ("turn.failed", "error") if failed_exit else ("turn.failed",):
        for event in reversed(events):
            if event.get("type") != kind:
                continue
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else event.get("message")
            if isinstance(message, str) and message.strip():
                return f"codex {kind}: {message.strip()}"
            return f"codex {kind} (no message)"
    return None


class CodexPartner(Partner):
    name = "codex"
    binary_name = "codex"
    verified_versions = ("codex-cli 0.171.0",)

    def help_argv(self, request: TurnRequest) -> list[str]:
        return ["exec", "--help"] if request.bootstrap else ["exec", "resume", "--help"]

    def command(self, request: TurnRequest) -> TurnCommand:
        sandbox = "danger-full-access" if request.write else "read-only"
        argv = [request.partner_bin or self.binary_name, "exec"]
        if request.bootstrap:
            argv += ["-s", sandbox, "-C", str(request.worktree)]
        else:
            argv += ["resume", request.sid, "-c", f'sandbox_mode="{sandbox}"']
        if request.write:
            # The machine's config may keep approvals on-request; nobody is there to answer.
            argv += ["-c", 'approval_policy="never"']
        if request.model:
            argv += ["-m", request.model]
        if request.effort:
            argv += ["-c", f'model_reasoning_effort="{request.effort}"']
        # codex 0.171 otherwise snapshots the shell environment — GH_TOKEN included — into
        # $CODEX_HOME/shell_snapshots/ (found by the real tier's planted-token check).
        argv += ["--disable", "shell_snapshot"]
        argv += ["--json", "-o", str(request.reply_file), "-"]
        return TurnCommand(argv=argv, stdin_file=request.prompt_file, recorded=argv)

    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        events = list(json_objects(output.stdout))
        sid = next(
            (
                str(e["thread_id"])
                for e in events
                if e.get("type") == "thread.started" and isinstance(e.get("thread_id"), str)
            ),
            None,
        )
        message = _final_error(events, failed_exit=output.exit_code not in (0, None))
        if message is not None:
            return self.failure(request, output, message, sid=sid)
        failed = self.exited(request, output)
        if failed:
            return TurnOutcome(status="failed", reason=failed.reason, sid=sid)
        try:
            reply = bounded.read_bytes(request.reply_file, REPLY_MAX_BYTES).decode().strip()
        except (FileNotFoundError, ValueError):  # missing, refused (SPEC 8) or not UTF-8
            reply = ""
        outcome = replied_or_empty(reply or _last_agent_message(events))
        return TurnOutcome(
            status=outcome.status, reply=outcome.reply, reason=outcome.reason, sid=sid
        )

    def partial_reply(self, output: TurnOutput) -> str | None:
        return _last_agent_message(list(json_objects(output.stdout))) or None

    def render_event(self, event: dict[str, Any]) -> list[str]:
        return _render(event)

    def session_known(self, sid: str, *, identity_home: str | None, worktree: Path) -> bool:
        home = identity_home or os.environ.get("CODEX_HOME") or str(Path.home() / ".codex")
        return store_has(Path(home) / "sessions", sid)


ADAPTER = CodexPartner()


def _render(event: dict[str, Any]) -> list[str]:
    """A `codex exec --json` event for a person: commands when they start, their output when
    they end, file changes, agent messages and errors; reasoning and bookkeeping are left out."""
    kind = event.get("type")
    item = event.get("item") if isinstance(event.get("item"), dict) else {}
    assert isinstance(item, dict)
    item_type = item.get("type")
    if kind == "thread.started":
        return [f"· thread {event.get('thread_id')}"]
    if kind == "item.started" and item_type == "command_execution":
        return tool_call("shell", str(item.get("command") or ""))
    if kind != "item.completed":
        if kind == "error":
            return error_lines(str(event.get("message")))
        if kind == "turn.failed":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            assert isinstance(error, dict)
            return error_lines(f"turn failed: {error.get('message')}")
        if kind == "turn.completed":
            usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
            assert isinstance(usage, dict)
            return [f"· turn completed, {usage.get('output_tokens')} output tokens"]
        return []
    if item_type == "agent_message":
        return said(str(item.get("text") or ""))
    if item_type == "command_execution":
        code = item.get("exit_code")
        output = str(item.get("aggregated_output") or "") or f"(exit {code})"
        return tool_result(output, error=code not in (0, None))
    if item_type == "file_change":
        changes = item.get("changes") if isinstance(item.get("changes"), list) else []
        assert isinstance(changes, list)
        paths = ", ".join(
            f"{change.get('kind', 'edit')} {change.get('path')}"
            for change in changes
            if isinstance(change, dict)
        )
        return tool_call("edit", paths)
    if item_type == "mcp_tool_call":
        name = f"{item.get('server')}.{item.get('tool')}"
        return tool_call(name, tool_detail(item.get("arguments")))
    if item_type == "web_search":
        return tool_call("web_search", str(item.get("query") or ""))
    if item_type == "error":
        return error_lines(str(item.get("message")))
    return []
