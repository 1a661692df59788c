"""`unit tail` (SPEC 3.14a): the recorded real-CLI transcripts rendered through their adapters,
`unit tail` on a replayed real transcript, and `--follow` on a script-partner turn."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pair import api as pair_api
from tests.conftest import FakePartners, Sandbox
from tests.test_watch import read_until

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "real"
INDEX = json.loads((FIXTURES / "index.json").read_text())


def rendered(name: str) -> list[str]:
    partner = INDEX[name]["partner"]
    text = (FIXTURES / name).read_text()
    return [out for line in text.splitlines() for out in pair_api.render_line(partner, line)]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "claude-write.jsonl",
            [
                "→ Bash: printf 'written by the partner\\n' > OUT.md",
                "  ← (Bash completed with no output)",
                "assistant: wrote OUT.md",
            ],
        ),
        (
            "codex-write.jsonl",
            [
                "→ shell: /bin/bash -lc \"printf 'written by the partner\\\\n' > OUT.md\"",
                "  ← (exit 0)",
                "assistant: wrote OUT.md",
            ],
        ),
        (
            "opencode-write.jsonl",
            [
                "→ bash: printf 'written by the partner\\n' > OUT.md",
                "  ← (no output)",
                "assistant: wrote OUT.md",
            ],
        ),
    ],
)
def test_a_real_transcript_reads_as_calls_results_and_text(name: str, expected: list[str]) -> None:
    lines = rendered(name)
    # In order, and nothing of the raw JSON left over.
    positions = [lines.index(line) for line in expected]
    assert positions == sorted(positions), lines
    assert not any(line.lstrip().startswith("{") for line in lines), lines


@pytest.mark.parametrize("name", ["claude-429.jsonl", "codex-429.jsonl", "opencode-429.jsonl"])
def test_a_real_rate_limit_is_marked(name: str) -> None:
    marked = [line for line in rendered(name) if line.startswith("!! rate-limit: ")]
    assert marked and all("429" in line for line in marked), rendered(name)


def test_plain_lines_pass_through_and_a_rate_limit_line_is_marked() -> None:
    assert pair_api.render_line("codex", "[pair: cancelled: by the lead]") == [
        "[pair: cancelled: by the lead]"
    ]
    assert pair_api.render_line("claude", "HTTP 429 Too Many Requests") == [
        "!! rate-limit: HTTP 429 Too Many Requests"
    ]
    # The script partner's output is shown as it is, even when it looks like JSON.
    assert pair_api.render_line("script", '{"type": "text"}') == ['{"type": "text"}']


def test_tail_renders_a_replayed_claude_turn_and_raw_prints_its_bytes(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    environment = {
        **os.environ,
        "FAKE_SCENARIO": "replay:claude-write.jsonl",
        "IS_SANDBOX": "1",
    }
    created = sandbox.unit(
        *sandbox.create_args("u1", partner="claude", model=None, effort="low"), env=environment
    )
    assert created.code == 0, created.stdout + created.stderr
    receipt = sandbox.wait_turn("u1")
    tail = subprocess.run(
        ["unit", "tail", "--unit", "u1", "--repo", str(sandbox.repo)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert tail.returncode == 0, tail.stdout + tail.stderr
    lines = tail.stdout.splitlines()
    assert "→ Bash: printf 'written by the partner\\n' > OUT.md" in lines
    assert "assistant: wrote OUT.md" in lines
    assert lines[-1].startswith(f"[receipt #{receipt['seq']} task: replied")
    raw = subprocess.run(
        ["unit", "tail", "--unit", "u1", "--raw", "--repo", str(sandbox.repo)],
        capture_output=True,
        timeout=60,
    )
    transcript = Path(receipt["transcript"]).read_bytes()
    assert raw.returncode == 0 and raw.stdout.startswith(transcript)
    missing = sandbox.unit("tail", "--unit", "u1", "--seq", "9")
    assert missing.code == 1 and missing["code"] == "no-turn" and missing["next"]
    bad = sandbox.unit("tail", "--unit", "u1", "--seq", "0")
    assert bad.code == 2 and bad["code"] == "invalid-seq"


def test_follow_prints_as_the_turn_runs_and_ends_with_its_receipt(sandbox: Sandbox) -> None:
    gate = sandbox.root / "gate"
    script = (
        "cat > /dev/null; echo 'step one' >&2; "
        f"while [ ! -f {gate} ]; do sleep 0.05; done; echo 'step two' >&2; echo finished"
    )
    assert sandbox.create("u1", model=script).code == 0
    follower = subprocess.Popen(
        ["unit", "tail", "--unit", "u1", "--follow", "--repo", str(sandbox.repo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert follower.stdout is not None
        seen = read_until(follower.stdout.fileno(), b"step one\n")
        assert follower.poll() is None and b"step two" not in seen  # still following
        gate.write_text("go")
        rest, _ = follower.communicate(timeout=30)  # it exits once the receipt is printed
        seen += rest
        assert follower.returncode == 0
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    text = seen.decode()
    assert text.index("step one") < text.index("step two") < text.index("[receipt #1")
