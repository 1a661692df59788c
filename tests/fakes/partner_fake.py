"""Fake partner CLIs that speak the real headless stream formats (anchor-pair.md 6.4).

Installed by tests as executables named `claude`, `codex`, `cursor-agent`, `opencode`, `grok`
and `agent-run`, each `main(<name>)`. Every run appends what it saw to `$FAKE_LOG` (argv, cwd,
the prompt, lead markers present, CODEX_HOME). `$FAKE_SCENARIO` picks the behaviour:
ok (default), empty, fail, is-error, cancelled, turn-failed, hang, rate-limited, no-session,
heavy, orphan (leaves a double-forked `setsid sleep $FAKE_ORPHAN_SECONDS`),
fail-after-reply-file (codex: writes its `-o` reply file, then exits 3).

`replay:<file>` prints a recorded real transcript (`tests/fixtures/real/<file>`) and exits with
the code the real CLI exited with (its `index.json`).

`--version` and `--help` answer as the real CLIs do: claude, codex and opencode print the help
texts recorded from the real binaries (`tests/fixtures/real/help/`), cursor-agent and grok a help
naming the flags their adapters pass. `$FAKE_HELP=bare` prints a help that names no flag.
"""

from __future__ import annotations

import json
import os
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Every fake run is a fresh interpreter (`python -S`, tests/conftest.py), started by each turn a
# test runs: `subprocess`, `pathlib` and `typing` cost each start ~10 ms, so they are imported
# only where used (subprocess) or not at all (paths are plain strings here).

LEAD_MARKERS = (
    "OPENCODE_CLIENT",
    "OPENCODE_PID",
    "OPENCODE_WORKSPACE_ID",
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "CODEX_SANDBOX",
    "CODEX_THREAD_ID",
    "CURSOR_AGENT",
    "CURSOR_AGENT_CHAT_ID",
    "GROK_SESSION_ID",
    "GROK_AGENT",
)

FIXTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "fixtures", "real"
)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


VERSIONS = {
    "claude": "2.1.197 (Claude Code)",
    "codex": "codex-cli 0.171.0",
    "opencode": "1.18.33",
    "cursor-agent": "2026.11.20-fake",
    "grok": "grok 1.0.5-fake",
}
HELP_FILES = {
    ("claude",): "claude.txt",
    ("codex", "exec"): "codex-exec.txt",
    ("codex", "exec", "resume"): "codex-exec-resume.txt",
    ("opencode", "run"): "opencode-run.txt",
}
SYNTHETIC_HELP = {
    "cursor-agent": "-p, --print  --trust  --output-format <f>  --resume <id>  --model <m>  "
    "--force  --mode <plan>  --list-models",
    "grok": "--prompt-file <f>  --output-format <f>  --session-id <id>  --resume <id>  "
    "--permission-mode <m>  --always-approve  -m, --model <m>  --reasoning-effort <e>",
}


def version_or_help(name: str, argv: list[str]) -> bool:
    """Answer `--version` / `[subcommand...] --help` like the real CLI; True when answered."""
    probes = os.environ.get("FAKE_PROBE_LOG")
    if probes and (argv == ["--version"] or "--help" in argv):
        with open(probes, "a") as handle:
            handle.write(json.dumps({"name": name, "argv": argv}) + "\n")
    if argv == ["--version"]:
        print(VERSIONS[name])
        return True
    if "--help" not in argv:
        return False
    if os.environ.get("FAKE_HELP") == "bare":
        print(f"Usage: {name} [options]\n\nOptions:\n  -h, --help  show help")
        return True
    words = (name, *[word for word in argv if word != "--help"])
    if words in HELP_FILES:
        print(read_text(os.path.join(FIXTURES, "help", HELP_FILES[words])), end="")
    else:
        print(SYNTHETIC_HELP.get(name, "-h, --help"))
    return True


CODEX_CATALOG = [
    {"model": "gpt-5.5-sol", "supportedReasoningEfforts": [{"reasoningEffort": "high"}]},
    {
        "model": "gpt-5.6-sol",
        "supportedReasoningEfforts": [
            {"reasoningEffort": "low"},
            {"reasoningEffort": "medium"},
            {"reasoningEffort": "high"},
        ],
    },
    {"model": "gpt-6-astra", "supportedReasoningEfforts": ["high", "xhigh"]},
    {"model": "gpt-7-sol", "hidden": True},
    {"model": "gpt-5.6-luna", "supportedReasoningEfforts": ["max"]},
    {"model": "gpt-daybreak-blue-latest"},
]
GROK_MODELS = """Available models:
* grok-4.6 (default)
- grok-4.11
- grok-4.11-preview
- grok-5 beta
"""
CURSOR_MODELS = """Available models
kimi-k3-high - Kimi K3 (high)
kimi-k3-low - Kimi K3 (low)
kimi-k2-max - Kimi K2 (max)
kimi-k3-thinking-max - Kimi K3 thinking
composer-2.5 - Composer
"""


def emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def log(name: str, argv: list[str], prompt: str) -> None:
    path = os.environ.get("FAKE_LOG")
    if not path:
        return
    entry = {
        "name": name,
        "argv": argv,
        "cwd": os.getcwd(),
        "prompt": prompt,
        "markers": [m for m in LEAD_MARKERS if m in os.environ],
        "codex_home": os.environ.get("CODEX_HOME"),
        "gh_token": bool(os.environ.get("GH_TOKEN")),
        "opencode_permission": os.environ.get("OPENCODE_PERMISSION"),
    }
    with open(path, "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def hang_forever(partial: dict[str, Any] | None) -> None:
    if partial is not None:
        emit(partial)
    import subprocess

    child = subprocess.Popen(["sleep", "300"])
    pids = os.environ.get("FAKE_PIDS")
    if pids:
        with open(pids, "a") as handle:
            handle.write(f"{os.getpid()}\n{child.pid}\n")
    time.sleep(600)


def heavy_job() -> None:
    """Run a job through the machine-wide heavy slot and wait for it."""
    import subprocess

    subprocess.run(["agent-run", "heavy", "--", "sh", "-c", "echo heavy job ran"], check=True)


def before_reply(scenario: str) -> None:
    if scenario == "rate-limited":
        sys.stderr.write("HTTP 429 Too Many Requests: rate limit hit, retry in 5s\n")
        sys.stderr.flush()
    if scenario == "heavy":
        heavy_job()
    if scenario == "orphan":
        # A double-forked `setsid` grandchild: out of the partner's group and, once the
        # subshell exits, no descendant of the partner either.
        import subprocess

        seconds = os.environ.get("FAKE_ORPHAN_SECONDS", "3371")
        subprocess.run(["sh", "-c", f"(setsid sleep {seconds} >/dev/null 2>&1 &)"], check=True)


def reply_text(scenario: str, name: str) -> str:
    return "" if scenario == "empty" else os.environ.get("FAKE_REPLY", f"{name} did the work")


def claude(argv: list[str], scenario: str) -> int:
    prompt = sys.stdin.read()
    log("claude", argv, prompt)
    resumed = option(argv, "--resume")
    sid = None if scenario == "no-session" else resumed or "claude-session-1"
    requested = option(argv, "--model")
    model = (
        os.environ.get("FAKE_CLAUDE_MODEL")
        or (f"claude-{requested}-5" if requested and "-" not in requested else requested)
        or "claude-sonnet-5"
    )
    init: dict[str, Any] = {"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": model}
    if sid:
        init["session_id"] = sid
    emit(init)
    if scenario == "rate-limited":
        emit(
            {
                "type": "rate_limit_event",
                "rate_limit_info": {
                    "status": "allowed_warning",
                    "resetsAt": 1788000000,
                    "rateLimitType": "five_hour",
                    "utilization": 0.91,
                },
            }
        )
    if scenario == "hang":
        hang_forever(
            {"type": "assistant", "message": {"content": [{"type": "text", "text": "half done"}]}}
        )
    if scenario == "fail":
        sys.stderr.write("claude: something broke\n")
        return 3
    before_reply(scenario)
    text = reply_text(scenario, "claude")
    emit({"type": "assistant", "message": {"content": [{"type": "text", "text": text}]}})
    result: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "is_error": scenario == "is-error",
        "api_error_status": 500 if scenario == "is-error" else None,
        "result": "API Error: 500 Internal server error" if scenario == "is-error" else text,
    }
    if sid:
        result["session_id"] = sid
    emit(result)
    exit_gate = os.environ.get("FAKE_EXIT_GATE")  # a test that must see it alive opens it
    deadline = time.monotonic() + 60
    while exit_gate and not os.path.exists(exit_gate) and time.monotonic() < deadline:
        time.sleep(0.02)
    return 0


def codex_app_server() -> int:
    catalog = json.loads(os.environ.get("FAKE_CODEX_MODELS", "null")) or CODEX_CATALOG
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            emit({"id": ident, "result": {"userAgent": "fake-codex/0.171.0"}})
        elif method == "model/list":
            start = int(message.get("params", {}).get("cursor") or 0)
            page = catalog[start : start + 2]
            following = str(start + 2) if start + 2 < len(catalog) else None
            emit({"method": "remoteControl/status/changed", "params": {}})
            emit({"id": ident, "result": {"data": page, "nextCursor": following}})
        elif method == "account/rateLimits/read":
            if os.environ.get("FAKE_CODEX_RATE_LIMITS") == "fail":
                emit({"id": ident, "error": {"code": -32000, "message": "not logged in"}})
            else:
                window = {"usedPercent": 42, "windowDurationMins": 10080, "resetsAt": 1788000000}
                emit(
                    {
                        "id": ident,
                        "result": {
                            "rateLimits": {"limitId": "codex", "primary": window},
                            "rateLimitsByLimitId": {
                                "codex": {"limitId": "codex", "primary": window, "secondary": None}
                            },
                        },
                    }
                )
        else:
            emit({"id": ident, "error": {"code": -32601, "message": f"unknown {method}"}})
    return 0


def codex(argv: list[str], scenario: str) -> int:
    if argv[:1] == ["app-server"]:
        return codex_app_server()
    prompt = sys.stdin.read()
    log("codex", argv, prompt)
    resumed = argv[2] if argv[1:2] == ["resume"] else None
    if scenario != "no-session":
        emit({"type": "thread.started", "thread_id": resumed or "codex-thread-1"})
    if resumed and "-m" not in argv:
        # What codex-cli 0.171 prints when a resume names no model (it runs the CLI default).
        recorded = os.environ.get("FAKE_CODEX_RECORDED_MODEL", "gpt-6-luna")
        notice = (
            f"This session was recorded with model `{recorded}` but is resuming with "
            f"`gpt-6.2-sol`. Consider switching back to `{recorded}` as it may affect Codex "
            "performance."
        )
        emit(
            {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": notice}}
        )
    emit({"type": "turn.started"})
    if scenario == "hang":
        hang_forever(
            {"type": "item.completed", "item": {"type": "agent_message", "text": "partly"}}
        )
    if scenario == "fail":
        return 3
    if scenario == "fail-after-reply-file":
        reply_file = option(argv, "-o")
        if reply_file:
            write_text(reply_file, reply_text(scenario, "codex") + "\n")
        return 3
    if scenario == "turn-failed":
        emit({"type": "turn.failed", "error": {"message": "model overloaded"}})
        return 0
    before_reply(scenario)
    text = reply_text(scenario, "codex")
    emit(
        {"type": "item.completed", "item": {"id": "item-0", "type": "agent_message", "text": text}}
    )
    emit({"type": "turn.completed", "usage": {"input_tokens": 10, "output_tokens": 2}})
    reply_file = option(argv, "-o")
    if reply_file and text:
        write_text(reply_file, text + "\n")
    return 0


def cursor(argv: list[str], scenario: str) -> int:
    if argv[:1] == ["--list-models"]:
        print(CURSOR_MODELS, end="")
        return 0
    prompt = sys.stdin.read()
    log("cursor-agent", argv, prompt)
    sid = option(argv, "--resume") or "cursor-chat-1"
    if scenario == "no-session":
        sid = ""
    emit({"type": "system", "subtype": "init", "session_id": sid})
    emit({"type": "thinking", "subtype": "delta", "text": "checking", "session_id": sid})
    if scenario == "hang":
        hang_forever(
            {"type": "assistant", "message": {"content": [{"type": "text", "text": "so far"}]}}
        )
    if scenario == "fail":
        return 3
    before_reply(scenario)
    text = reply_text(scenario, "cursor")
    emit(
        {
            "type": "assistant",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        }
    )
    emit(
        {
            "type": "result",
            "subtype": "success",
            "is_error": scenario == "is-error",
            "result": "model unavailable (scripted)" if scenario == "is-error" else text,
            "session_id": sid,
        }
    )
    return 0


def opencode(argv: list[str], scenario: str) -> int:
    prompt = argv[-1]
    log("opencode", argv, prompt)
    sid = None if scenario == "no-session" else option(argv, "--session") or "ses_open_1"
    base = {"timestamp": 1, **({"sessionID": sid} if sid else {})}
    emit({**base, "type": "step_start", "part": {"type": "step-start"}})
    if scenario == "hang":
        hang_forever({**base, "type": "text", "part": {"type": "text", "text": "started"}})
    if scenario == "fail":
        return 3
    before_reply(scenario)
    text = reply_text(scenario, "opencode")
    if text:
        emit({**base, "type": "text", "part": {"type": "text", "text": text}})
    emit({**base, "type": "step_finish", "part": {"type": "step-finish", "reason": "stop"}})
    return 0


def grok(argv: list[str], scenario: str) -> int:
    if argv[:1] == ["models"]:
        print(GROK_MODELS, end="")
        return 0
    prompt_file = option(argv, "--prompt-file")
    prompt = read_text(prompt_file) if prompt_file else ""
    log("grok", argv, prompt)
    sid = option(argv, "--session-id") or option(argv, "--resume")
    emit({"type": "thought", "data": "thinking it over"})
    if scenario == "hang":
        hang_forever({"type": "text", "data": "partial "})
    if scenario == "fail":
        return 3
    if scenario == "cancelled":
        emit({"type": "end", "stopReason": "cancelled", "sessionId": sid})
        return 0
    before_reply(scenario)
    text = reply_text(scenario, "grok")
    if text:
        emit({"type": "text", "data": text[:3]})
        emit({"type": "text", "data": text[3:]})
    emit({"type": "usage", "usage": {"input_tokens": 5, "output_tokens": 5}})
    emit({"type": "end", "stopReason": "end_turn", "sessionId": sid})
    return 0


def agent_run(argv: list[str]) -> int:
    """`agent-run heavy [--] command...`: waits for the slot ($FAKE_HEAVY_GATE), then runs."""
    if argv[:1] != ["heavy"]:
        return 2
    command = argv[1:]
    if command[:1] == ["--"]:
        command = command[1:]
    gate = os.environ.get("FAKE_HEAVY_GATE")
    while gate and not os.path.exists(gate):
        time.sleep(0.05)
    import subprocess

    return subprocess.run(command, check=False).returncode


def replay(name: str, argv: list[str], fixture: str) -> int:
    """Print a real CLI's recorded stdout and exit as it did."""
    prompt = argv[-1] if name == "opencode" else sys.stdin.read()
    log(name, argv, prompt)
    index = json.loads(read_text(os.path.join(FIXTURES, "index.json")))
    sys.stdout.write(read_text(os.path.join(FIXTURES, fixture)))
    sys.stdout.flush()
    return int(index[fixture]["exit_code"])


def main(name: str) -> None:
    argv = sys.argv[1:]
    scenario = os.environ.get("FAKE_SCENARIO", "ok")
    handlers = {
        "claude": claude,
        "codex": codex,
        "cursor-agent": cursor,
        "opencode": opencode,
        "grok": grok,
    }
    if name == "agent-run":
        sys.exit(agent_run(argv))
    if version_or_help(name, argv):
        sys.exit(0)
    if scenario.startswith("replay:") and argv[:1] not in (["app-server"], ["models"]):
        sys.exit(replay(name, argv, scenario.split(":", 1)[1]))
    sys.exit(handlers[name](argv, scenario))
