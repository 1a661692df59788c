"""The adapters read what the real CLIs print (recorded in tests/fixtures/real/).

Each transcript was recorded from the real claude 2.1.197, codex 0.171.0 or opencode 1.18.33
against the scripted model server; here it is parsed through its adapter, and replayed through
`pair send` by the fake partners.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pair.partners import adapter_for
from pair.partners.base import TurnOutput, TurnRequest
from tests.conftest import FakePartners, Sandbox

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real"
INDEX = json.loads((FIXTURES / "index.json").read_text())


def interpret(name: str, tmp_path: Path, *, reply_file_text: str | None = None):
    entry = INDEX[name]
    adapter = adapter_for(entry["partner"])
    reply_file = tmp_path / "reply.md"
    if reply_file_text is not None:
        reply_file.write_text(reply_file_text)
    request = TurnRequest(
        partner=entry["partner"],
        sid="sid-1",
        seq=1,
        kind="task",
        write=True,
        model=None,
        effort=None,
        worktree=tmp_path,
        prompt_file=tmp_path / "prompt.md",
        reply_file=reply_file,
        partner_bin=adapter.binary_name,
    )
    output = TurnOutput(exit_code=entry["exit_code"], stdout=(FIXTURES / name).read_bytes())
    return adapter.interpret(request, output)


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        (
            "claude-429.jsonl",
            "API Error: Request rejected (429) · Number of request tokens has exceeded your "
            "per-minute rate limit (scripted) (api_error_status 429) (claude exited 1)",
        ),
        (
            "codex-429.jsonl",
            "codex turn.failed: exceeded retry limit, last status: 429 Too Many Requests "
            "(codex exited 1)",
        ),
        (
            "opencode-429.jsonl",
            "opencode APIError: Number of request tokens has exceeded your per-minute rate limit "
            "(scripted) (HTTP 429) (opencode exited 1)",
        ),
    ],
)
def test_a_real_429_is_rate_limited_with_the_clis_own_message(
    tmp_path: Path, name: str, quoted: str
) -> None:
    outcome = interpret(name, tmp_path)
    assert outcome.status == "rate-limited"
    assert outcome.reason == quoted
    assert outcome.sid  # every CLI names its session even when the turn failed


def test_opencode_reports_the_servers_retry_after(tmp_path: Path) -> None:
    # The server answered `retry-after-ms: 20` (which opencode itself honours first).
    assert interpret("opencode-429.jsonl", tmp_path).retry_after_seconds == pytest.approx(0.02)


@pytest.mark.parametrize(
    "name", ["claude-write.jsonl", "codex-write.jsonl", "opencode-write.jsonl"]
)
def test_a_real_tool_turn_replies(tmp_path: Path, name: str) -> None:
    outcome = interpret(name, tmp_path)
    assert outcome.status == "replied", outcome.reason
    assert outcome.reply == "wrote OUT.md"


def test_codex_warnings_are_not_failures(tmp_path: Path) -> None:
    # `item.completed` of type `error`: the resume-model notice codex prints on a plain resume.
    outcome = interpret("codex-resume-notice.jsonl", tmp_path)
    assert outcome.status == "replied" and outcome.reply == "ready"
    assert outcome.sid == "01a2311f-7d34-7a82-b242-f477c2fc172c"


@pytest.mark.parametrize(
    ("partner", "fixture", "needle"),
    [
        ("claude", "claude-429.jsonl", "api_error_status 429"),
        ("codex", "codex-429.jsonl", "exceeded retry limit"),
        ("opencode", "opencode-429.jsonl", "HTTP 429"),
    ],
)
def test_a_replayed_429_ends_the_send_rate_limited(
    sandbox: Sandbox, fake_partners: FakePartners, partner: str, fixture: str, needle: str
) -> None:
    assert sandbox.pair("init", "--partner", partner, "--lead", "human").code == 0
    body = sandbox.root / "body.md"
    body.write_text("please do it\n")
    import os

    environment = {**os.environ, "FAKE_SCENARIO": f"replay:{fixture}"}
    result = sandbox.pair("send", "--kind", "task", "--body-file", str(body), env=environment)
    assert result.code == 1, result.stdout
    assert result["status"] == "rate-limited"
    assert needle in result["reason"] and "read the transcript" not in result["reason"]
