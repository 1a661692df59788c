"""A scripted model server on 127.0.0.1 for the real-CLI tier (SPEC 4.2).

It speaks the two wire protocols the real partner CLIs use — the Anthropic Messages API with SSE
(`POST /v1/messages`, claude and opencode) and the OpenAI Responses API with SSE (`POST
/v1/responses`, codex) — and answers each request from a script chosen by a marker in the
conversation's latest user prompt (its last marker):

- no marker: a plain reply (`MOCK_REPLY`, or "ready" for a bootstrap);
- `MOCK:write <file>`: a tool call whose shell command writes `<file>` in the CLI's cwd, then,
  once the tool's result comes back, a final reply;
- `MOCK:hang-stream`: the stream starts and then never sends another byte;
- `MOCK:hang-tool <n>`: a tool call running `(setsid sleep <n> &); sleep <n+1>`, a command
  that hangs and leaves a `setsid` grandchild behind;
- `MOCK:429`: HTTP 429 with `retry-after` (and `retry-after-ms`) and the provider's own error
  body.

A request that offers no tools is a side request (opencode's session title, on its small model)
and always gets a plain text answer, whatever its prompt says.

Every request is logged (path, model, the effort / reasoning / thinking fields, the tool names)
so a test can assert the model and effort every turn used. Endpoints a CLI calls besides the two
above (token counting, model listings, ...) are answered as the real API would and logged in
`other` (with claude 2.1.197, codex 0.171.0 and opencode 1.18.33 it stays empty).

It must never reach beyond loopback, and never block its caller: it runs in daemon threads and
`stop()` releases every hanging stream.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARKER = re.compile(r"MOCK:(write|hang-stream|hang-tool|429)(?:[ \t]+([A-Za-z0-9._/-]+))?")
RATE_LIMIT_MESSAGE = "Number of request tokens has exceeded your per-minute rate limit (scripted)"
RETRY_AFTER_SECONDS = 1
# opencode retries a 429 five times, honouring `retry-after-ms` first: keep its retries quick.
RETRY_AFTER_HEADERS = {"retry-after": str(RETRY_AFTER_SECONDS), "retry-after-ms": "20"}


@dataclass
class Call:
    path: str
    api: str  # anthropic | openai | other
    model: str | None
    effort: dict[str, Any]
    tools: list[str]
    script: str
    body: dict[str, Any] = field(repr=False, default_factory=dict)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def anthropic_state(body: dict[str, Any]) -> tuple[str, bool]:
    """(the latest user prompt's text, whether the last message carries a tool result)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    last = messages[-1] if messages else {}
    content = last.get("content")
    tool_result = isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in content
    )
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        blocks = message.get("content")
        if (
            isinstance(blocks, list)
            and blocks
            and all(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks)
        ):
            continue
        return _text_of(blocks), tool_result
    return "", tool_result


def openai_state(body: dict[str, Any]) -> tuple[str, bool]:
    items = body.get("input")
    if isinstance(items, str):
        return items, False
    items = [i for i in items or [] if isinstance(i, dict)]
    tool_result = bool(items) and str(items[-1].get("type", "")).endswith("_call_output")
    for item in reversed(items):
        if item.get("role") == "user" and item.get("type", "message") == "message":
            content = item.get("content")
            if isinstance(content, list):
                return (
                    "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict)),
                    tool_result,
                )
            return _text_of(content), tool_result
    return "", tool_result


class ModelServer:
    """`with ModelServer() as server:` — `server.url`, `server.calls`, `server.stop()`."""

    def __init__(self, reply: str = "done") -> None:
        self.reply = reply
        self.calls: list[Call] = []
        self.other: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                server._get(self)

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                server._post(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> ModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- what tests read ---------------------------------------------------------------------

    def turns(self, api: str | None = None) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if api is None or c.api == api]

    # -- plumbing ------------------------------------------------------------------------------

    def _record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def _get(self, handler: BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.other.append(("GET", handler.path))
        if handler.path.split("?")[0].endswith("/models"):
            _json(handler, 200, {"data": [], "object": "list", "has_more": False})
            return
        _json(handler, 404, {"error": {"type": "not_found_error", "message": handler.path}})

    def _post(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = handler.path.split("?")[0]
        if path.endswith("/v1/messages"):
            self._anthropic(handler, body)
        elif path.endswith("/v1/messages/count_tokens"):
            self._note("POST", handler.path)
            _json(handler, 200, {"input_tokens": 12})
        elif path.endswith("/responses"):
            self._openai(handler, body)
        else:
            self._note("POST", handler.path)
            _json(handler, 404, {"error": {"type": "not_found_error", "message": handler.path}})

    def _note(self, method: str, path: str) -> None:
        with self._lock:
            self.other.append((method, path))

    # -- Anthropic Messages ------------------------------------------------------------------

    def _anthropic(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        prompt, after_tool = anthropic_state(body)
        tools = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)]
        # A request without tools is a side request (opencode's session title): never scripted.
        script, argument = _script(prompt) if tools else ("title", None)
        effort = {
            key: body[key]
            for key in ("thinking", "output_config", "effort", "reasoning_effort")
            if key in body
        }
        self._record(
            Call(handler.path, "anthropic", body.get("model"), effort, tools, script, body)
        )
        model = str(body.get("model") or "claude-scripted")
        if script == "429":
            _json(
                handler,
                429,
                {
                    "type": "error",
                    "error": {"type": "rate_limit_error", "message": RATE_LIMIT_MESSAGE},
                },
                headers=RETRY_AFTER_HEADERS,
            )
            return
        if not body.get("stream"):
            # A non-streaming side request (titles, summaries): one short text message.
            _json(handler, 200, _anthropic_message(model, self.reply))
            return
        stream = _Sse(handler)
        stream.event(
            "message_start",
            {"type": "message_start", "message": {**_anthropic_message(model, ""), "content": []}},
        )
        if script == "hang-stream":
            self._hang()
            return
        command = _command(script, argument)
        if command is not None and not after_tool:
            tool = "Bash" if "Bash" in tools else "bash"
            block = {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": tool}
            stream.event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {**block, "input": {}},
                },
            )
            arguments = json.dumps({"command": command, "description": "run the scripted command"})
            stream.event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": arguments},
                },
            )
            stop = "tool_use"
        else:
            text = self._final_text(prompt, script, argument)
            stream.event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            stream.event(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": text},
                },
            )
            stop = "end_turn"
        stream.event("content_block_stop", {"type": "content_block_stop", "index": 0})
        stream.event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
        stream.event("message_stop", {"type": "message_stop"})
        stream.close()

    # -- OpenAI Responses --------------------------------------------------------------------

    def _openai(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        prompt, after_tool = openai_state(body)
        script, argument = _script(prompt)
        tools = _openai_tools(body)
        effort = {key: body[key] for key in ("reasoning", "text") if key in body}
        self._record(Call(handler.path, "openai", body.get("model"), effort, tools, script, body))
        if script == "429":
            _json(
                handler,
                429,
                {
                    "error": {
                        "type": "rate_limit_exceeded",
                        "code": "rate_limit_exceeded",
                        "message": RATE_LIMIT_MESSAGE,
                    }
                },
                headers=RETRY_AFTER_HEADERS,
            )
            return
        response_id = f"resp_{uuid.uuid4().hex[:16]}"
        stream = _Sse(handler)
        stream.event(
            "response.created",
            {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}},
        )
        if script == "hang-stream":
            self._hang()
            return
        command = _command(script, argument)
        if command is not None and not after_tool:
            call_id = f"call_{uuid.uuid4().hex[:16]}"
            item = _openai_tool_call(body, call_id, command)
        else:
            text = self._final_text(prompt, script, argument)
            item = {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{uuid.uuid4().hex[:16]}",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
            stream.event(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": 0,
                    "item": {**item, "status": "in_progress", "content": []},
                },
            )
            stream.event(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": item["id"],
                    "output_index": 0,
                    "content_index": 0,
                    "delta": text,
                },
            )
        stream.event(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        )
        stream.event(
            "response.completed",
            {
                "type": "response.completed",
                "response": {
                    "id": response_id,
                    "status": "completed",
                    "usage": {
                        "input_tokens": 12,
                        "input_tokens_details": {"cached_tokens": 0},
                        "output_tokens": 5,
                        "output_tokens_details": {"reasoning_tokens": 0},
                        "total_tokens": 17,
                    },
                },
            },
        )
        stream.close()

    # -- shared --------------------------------------------------------------------------------

    def _final_text(self, prompt: str, script: str, argument: str | None) -> str:
        if script == "title":
            return "Scripted session"
        if script == "write":
            return f"wrote {argument}"
        if "sid=" not in prompt:  # the bootstrap carries no `[agent ...]` header
            return "ready"
        return self.reply

    def _hang(self) -> None:
        # Hold the connection open, sending nothing, until the client goes or the server stops.
        self._stopping.wait()


def _script(prompt: str) -> tuple[str, str | None]:
    # The last marker: opencode merges a failed turn's prompt with the next one into one message.
    matches = list(MARKER.finditer(prompt))
    if not matches:
        return "reply", None
    return matches[-1].group(1), matches[-1].group(2)


def _command(script: str, argument: str | None) -> str | None:
    if script == "write":
        return f"printf 'written by the partner\\n' > {argument or 'PARTNER.md'}"
    if script == "hang-tool":
        seconds = int(argument or "3011")
        return f"(setsid sleep {seconds} &); sleep {seconds + 1}"
    return None


def _openai_tools(body: dict[str, Any]) -> list[str]:
    names: list[str] = []
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            names.append(str(tool.get("name") or tool.get("type")))
    for item in body.get("input") or []:
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            names.append("additional_tools")
    return names


def _openai_tool_call(body: dict[str, Any], call_id: str, command: str) -> dict[str, Any]:
    """Codex's freeform `exec` tool (JavaScript calling `tools.exec_command`), else a function
    call to whichever shell tool the request offers."""
    if "additional_tools" not in _openai_tools(body):
        return {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:16]}",
            "call_id": call_id,
            "name": "exec_command",
            "arguments": json.dumps({"cmd": command, "yield_time_ms": 30000}),
            "status": "completed",
        }
    script = (
        '// @exec: {"yield_time_ms": 30000}\n'
        f"const result = await tools.exec_command({{ cmd: {json.dumps(command)}, "
        "yield_time_ms: 30000 });\n"
        "text(JSON.stringify(result));\n"
    )
    return {
        "type": "custom_tool_call",
        "id": f"ctc_{uuid.uuid4().hex[:16]}",
        "call_id": call_id,
        "name": "exec",
        "input": script,
        "status": "completed",
    }


def _anthropic_message(model: str, text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def _json(
    handler: BaseHTTPRequestHandler,
    status: int,
    document: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> None:
    data = json.dumps(document).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    for key, value in (headers or {}).items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(data)


class _Sse:
    """A chunked `text/event-stream` response."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self.handler = handler
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("transfer-encoding", "chunked")
        handler.end_headers()

    def event(self, name: str, data: dict[str, Any]) -> None:
        payload = f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        self._chunk(payload)

    def _chunk(self, payload: bytes) -> None:
        try:
            self.handler.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.handler.wfile.flush()
        except OSError:
            pass

    def close(self) -> None:
        # The empty chunk ends a chunked body; _chunk adds the framing. The connection stays
        # open for the client's next request, as the real APIs keep it: closing it unannounced
        # raced a CLI that reused it for its next request (claude's second request of a turn
        # failed ECONNRESET under load, with retries off).
        self._chunk(b"")
