"""The adapter interface every partner implements, and helpers for reading JSON streams.

Over 400 lines because each partner's refusals carry their exact next command (an install line,
an option to drop) beside the interface they refine; split it when a second concern arrives.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

from pair.errors import Rewrite, UsageError
from registry.lazy_re import lazy  # compiled on first use: off start-up (SPEC 7)
from registry.light_dataclass import dataclass, field

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any, ClassVar


@dataclass(frozen=True)
class TurnRequest:
    """One turn to run: everything an adapter needs to build its command line."""

    partner: str
    sid: str  # the session to resume; for a bootstrap, a pre-generated id or ""
    seq: int
    kind: str
    write: bool
    model: str | None  # what to pass to the CLI's model flag (None: the CLI's default)
    effort: str | None
    worktree: Path
    prompt_file: Path
    reply_file: Path
    bootstrap: bool = False  # True: create the session (no resume)
    partner_bin: str | None = None


@dataclass(frozen=True)
class TurnCommand:
    argv: list[str]
    stdin_file: Path | None  # the prompt on stdin; None means /dev/null
    recorded: list[str]  # the command as the receipt shows it (never the prompt itself)
    # Variables this turn's partner needs on top of the partner environment (never secrets).
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TurnOutput:
    exit_code: int | None  # None when killed on a hang or never started
    stdout: bytes  # raw stdout (bounded), for parsing


@dataclass(frozen=True)
class TurnOutcome:
    status: str  # replied | empty-reply | failed | rate-limited | hang-killed
    reply: str | None = None
    reason: str | None = None  # for a failure: the partner's own final error, quoted first
    sid: str | None = None  # the session id the stream names (read at bootstrap)
    extra: dict[str, Any] = field(default_factory=dict)  # e.g. the model a CLI reports
    retry_after_seconds: float | None = None  # a rate limit's wait, when the stream names one


# A reply file a CLI wrote itself (Codex's `-o`) is read at most this far (SPEC 8).
REPLY_MAX_BYTES = 4 * 1024 * 1024
EMPTY_REPLY = (
    "the partner exited 0 with no reply — read the transcript before resending, the prompt "
    "may already be consumed"
)
EFFORT_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max", "ultra")
# A partner's final error is a rate or usage limit when it says so (SPEC 4.1 Receipts).
RATE_LIMITED = lazy(
    r"(?i)\b429\b|rate.?limit|usage limit|quota|too many requests|resource.?exhausted"
)
RETRY_AFTER = lazy(
    r"(?i)(?:retry[- ]after|retry in|retrying in|try again in)\D{0,3}(\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?\b"
)
_UNIT_SECONDS = {"ms": 0.001, "m": 60.0, "h": 3600.0}


# The npm packages of the partner CLIs that have one (package.json pins the verified versions).
NPM_PACKAGES = {
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "opencode": "opencode-ai",
}


def install_line(partner: str, variable: str, verified: tuple[str, ...] = ()) -> str:
    """The next step of `partner-not-installed` and `partner-cli-unsupported`: the install
    command (of the newest verified version), else the variable to set."""
    package = NPM_PACKAGES.get(partner)
    if package:
        return f"npm install -g {package}" + (f"@{verified[-1]}" if verified else "")
    versions = f" ({', '.join(verified)})" if verified else ""
    return f"{variable}=/path/to/{partner}: a verified {partner} CLI{versions}"


def retry_after_in(text: str | None) -> float | None:
    """Seconds named by `retry after N[unit]` / `retry in N` in an error message, if any."""
    match = RETRY_AFTER.search(text or "")
    if match is None:
        return None
    unit = (match.group(2) or "s").lower()
    scale = _UNIT_SECONDS.get("ms" if unit.startswith("milli") or unit == "ms" else unit[0], 1.0)
    return float(match.group(1)) * scale


def retry_after_header(headers: Any) -> float | None:
    """Seconds from an HTTP response's `retry-after-ms` / `retry-after` (a number) header."""
    if not isinstance(headers, dict):
        return None
    lowered = {str(k).lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(lowered[name]) * scale
        except (KeyError, TypeError, ValueError):
            continue
    return None


class Partner(ABC):
    name: ClassVar[str]
    binary_name: ClassVar[str] = ""  # the executable looked up on PATH
    bootstrap: ClassVar[bool] = True  # whether init runs a read-only turn to get a session id
    efforts: ClassVar[tuple[str, ...]] = EFFORT_LEVELS
    # The CLI versions the real-CLI tier ran (references/headless.md lists the same).
    verified_versions: ClassVar[tuple[str, ...]] = ()

    def bin_variable(self) -> str:
        return f"UNITMGR_{self.name.upper()}_BIN"

    def binary(self) -> str:
        """The executable: `UNITMGR_<PARTNER>_BIN`, else `binary_name` found on PATH."""
        variable = self.bin_variable()
        override = os.environ.get(variable, "").strip()
        import shutil  # with its archive modules, only when a partner's binary is looked up

        found = shutil.which(override or self.binary_name)
        if found is None:
            raise UsageError(
                "partner-not-installed",
                f"{override or self.binary_name} is not installed (not on PATH) — install the "
                f"{self.name} CLI or set {variable}",
                next_step=install_line(self.name, variable),
            )
        return os.path.abspath(found)

    def validate_staffing(
        self, *, model: str | None, effort: str | None, identity: str, writable: bool = True
    ) -> None:
        """Refuse (UsageError) an effort or identity this partner cannot take.

        `writable`: the session will run writable turns (an executor — every unit's pair).
        """
        if effort is not None and effort not in self.efforts:
            raise UsageError(
                "effort-refused",
                f"{self.name} does not take --effort {effort} — use one of "
                f"{', '.join(self.efforts)}",
                next_command=Rewrite(
                    set_options={"--effort": "high" if "high" in self.efforts else self.efforts[0]}
                ),
            )
        if identity != "default" and self.name != "codex":
            raise UsageError(
                "identity-refused",
                f"{self.name} has no named identities — only codex keeps one account per home; "
                "drop --identity or use default",
                next_command=Rewrite(drop=("--identity",)),
            )

    def preflight(self, *, model: str | None, worktree: Path) -> None:
        """Refuse (UsageError) when the partner cannot run here at all (binary missing)."""
        self.binary()

    def verify_cli(self, binary: str) -> str | None:
        """The binary's version, once its `--help` names every flag this adapter passes; else
        `partner-cli-unsupported` (SPEC 4.1 preflight). Cached per binary."""
        from pair.partners.preflight import verify

        return verify(self, binary)

    def help_argv(self, request: TurnRequest) -> list[str]:
        """The help command that documents the flags of `request`'s command line."""
        return ["--help"]

    def flags_by_help(self) -> dict[tuple[str, ...], list[str]]:
        """Every flag the adapter passes, grouped by the help command that must name it."""
        found: dict[tuple[str, ...], list[str]] = {}
        for bootstrap in (True, False):
            for write in (False, True):
                request = TurnRequest(
                    partner=self.name,
                    sid="session-id",
                    seq=0 if bootstrap else 1,
                    kind="init" if bootstrap else "task",
                    write=write,
                    model="model-id",
                    effort=self.efforts[-1] if self.efforts else None,
                    worktree=Path(os.devnull),
                    prompt_file=Path(os.devnull),
                    reply_file=Path(os.devnull),
                    bootstrap=bootstrap,
                    partner_bin=self.binary_name,
                )
                flags = found.setdefault(tuple(self.help_argv(request)), [])
                for word in self.command(request).recorded[1:]:
                    if word.startswith("-") and len(word) > 1 and word not in flags:
                        flags.append(word)
        return found

    @abstractmethod
    def command(self, request: TurnRequest) -> TurnCommand: ...

    @abstractmethod
    def interpret(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome:
        """The turn's outcome from its exit code and stdout."""

    def partial_reply(self, output: TurnOutput) -> str | None:
        """What can be recovered of the reply of a turn killed on a hang."""
        return None

    def session_known(self, sid: str, *, identity_home: str | None, worktree: Path) -> bool:
        """False only when the CLI's own session store is readable and lacks `sid`."""
        return True

    def render(self, line: str) -> list[str]:
        """One transcript line for a person (SPEC 3.14a, `unit tail`): a stream event through
        `render_event`; anything else (stderr, pair's own `[pair: …]` notes) as it is, a rate
        or usage limit marked."""
        event = json_event(line)
        if event is None:
            return [marked(line)]
        return self.render_event(event)

    def render_event(self, event: dict[str, Any]) -> list[str]:
        """A stream event for a person; an adapter that knows its CLI's events overrides this,
        the others show the event as it came."""
        return [json.dumps(event, ensure_ascii=False)]

    def failure(
        self,
        request: TurnRequest,
        output: TurnOutput,
        message: str,
        *,
        sid: str | None = None,
        extra: dict[str, Any] | None = None,
        rate_limited: bool = False,
        retry_after_seconds: float | None = None,
    ) -> TurnOutcome:
        """A failed turn whose reason quotes the partner's own final error first; `rate-limited`
        when that error is a rate or usage limit."""
        reason = message.strip()
        if output.exit_code not in (0, None):
            name = Path(request.partner_bin or self.binary_name).name
            reason += f" ({name} exited {output.exit_code})"
        limited = rate_limited or RATE_LIMITED.search(message) is not None
        return TurnOutcome(
            status="rate-limited" if limited else "failed",
            reason=reason,
            sid=sid,
            extra=extra or {},
            retry_after_seconds=(
                retry_after_seconds if retry_after_seconds is not None else retry_after_in(message)
            ),
        )

    def exited(self, request: TurnRequest, output: TurnOutput) -> TurnOutcome | None:
        """When the stream names no error of its own: a non-zero exit is a failure whatever the
        stream says (adapters quote a named error first, through `failure`)."""
        if output.exit_code not in (0, None):
            name = Path(request.partner_bin or self.binary_name).name
            return TurnOutcome(
                status="failed",
                reason=f"{name} exited {output.exit_code} — read the transcript",
            )
        return None


STORE_ENTRIES = 20_000  # entries of a partner's session store looked at, in all directories


def store_has(store: Path, sid: str, depth: int = 6, budget: list[int] | None = None) -> bool:
    """Whether a session store has an entry naming `sid` (True when it cannot be read).

    The store is the partner's, which the executor can write: the walk reads entry by entry
    and looks at no more than `STORE_ENTRIES` in all; past that it answers True, as for a
    store it cannot read (the session is not declared lost on a count)."""
    budget = [STORE_ENTRIES] if budget is None else budget
    try:
        entries = os.scandir(store)
    except OSError:
        return True
    with entries:
        for entry in entries:
            budget[0] -= 1
            if budget[0] < 0:
                return True
            if sid in entry.name:
                return True
            try:
                if entry.is_dir(follow_symlinks=False) and (
                    depth <= 0 or store_has(Path(entry.path), sid, depth - 1, budget)
                ):
                    return True
            except OSError:
                return True
    return False


# -- rendering a transcript for a person (`unit tail`) ------------------------------------------

RESULT_LINES = 4  # a tool result shows its first lines only


def json_event(line: str) -> dict[str, Any] | None:
    """The JSON object a stream line holds (from its first `{`), or None."""
    start = line.find("{")
    if start < 0:
        return None
    try:
        value = json.loads(line[start:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def marked(line: str) -> str:
    """A plain line, marked `!! rate-limit` when it reads like a rate or usage limit."""
    return f"!! rate-limit: {line}" if RATE_LIMITED.search(line) else line


def said(text: str) -> list[str]:
    """Assistant text: its first line labelled, the rest indented under it."""
    lines = text.strip().splitlines() or [""]
    return [f"assistant: {lines[0]}", *(f"  {line}" for line in lines[1:])]


def tool_detail(arguments: Any) -> str:
    """What a tool call acts on: its command, file, path or pattern (else its arguments)."""
    if not isinstance(arguments, dict):
        return "" if arguments is None else str(arguments)
    for key in ("command", "cmd", "file_path", "filePath", "path", "pattern", "url", "query"):
        value = arguments.get(key)
        if isinstance(value, str | list) and value:
            return " ".join(map(str, value)) if isinstance(value, list) else value
    return json.dumps(arguments, ensure_ascii=False)[:200]


def tool_call(name: str, detail: str) -> list[str]:
    first = (detail.splitlines() or [""])[0]
    more = " …" if len(detail.splitlines()) > 1 else ""
    return [f"→ {name}: {first}{more}" if first else f"→ {name}"]


def tool_result(text: str, *, error: bool = False) -> list[str]:
    """A tool result's first lines (`RESULT_LINES`), and how many it left out."""
    lines = text.rstrip("\n").splitlines() or ["(no output)"]
    mark = "!! " if error else ""
    shown = [f"  ← {mark}{line}" for line in lines[:RESULT_LINES]]
    if len(lines) > RESULT_LINES:
        shown.append(f"  ← … {len(lines) - RESULT_LINES} more line(s)")
    return shown


def error_lines(message: str) -> list[str]:
    """The partner's error, marked as a rate limit when it is one."""
    kind = "rate-limit" if RATE_LIMITED.search(message) else "error"
    return [f"!! {kind}: {message}"]


def json_objects(stdout: bytes) -> Iterator[dict[str, Any]]:
    """Every JSON object in a stream, one per line, each parsed from its first `{`.

    A stream with no parseable line is tried once as a single (pretty-printed) object.
    """
    found = False
    for raw in stdout.splitlines():
        start = raw.find(b"{")
        if start < 0:
            continue
        try:
            value = json.loads(raw[start:])
        except ValueError:
            continue
        if isinstance(value, dict):
            found = True
            yield value
    if not found:
        try:
            value = json.loads(stdout)
        except ValueError:
            return
        if isinstance(value, dict):
            yield value


def text_blocks(message: Any) -> str:
    """The joined `text` blocks of an assistant message's `content`."""
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def last_assistant_text(events: list[dict[str, Any]]) -> str:
    """The text of the last `assistant` event that has any (Claude and Cursor streams)."""
    for event in reversed(events):
        if event.get("type") == "assistant":
            text = text_blocks(event.get("message"))
            if text.strip():
                return text
    return ""


def replied_or_empty(reply: str | None, **extra: Any) -> TurnOutcome:
    reply = (reply or "").strip()
    if reply:
        return TurnOutcome(status="replied", reply=reply, extra=extra)
    return TurnOutcome(status="empty-reply", reason=EMPTY_REPLY, extra=extra)
