"""`unit watch --once` into a pipe is laid out without rich (unitmgr/views/watch_plain.py):
the same bytes rich prints on watch.run's 100-column non-terminal console, for every frame it
answers; a frame whose layout is rich's own (a line to wrap, columns that do not fit, wide or
control characters) is left to rich."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import Sandbox

WORDS = [
    "u1", "api-7", "working", "creating", "dismantle-failed", "unreadable", "script", "claude",
    "codex", "replied", "failed", "cancelled", "done", "x", "a much longer reason than most",
    "", "feat/7-api", "—", "naïve", "日本", "tab\there", "line\nbreak", "\x1b[31mred",
    "[bold]markup[/bold]", "[link=http://x]y", "  spaced  ", "b " * 60, "a" * 95,
    "unfoldable-" * 12,
]  # fmt: skip
STATES = [
    "recovery", "failed", "rate-limited", "stuck", "waiting-on-lead", "running", "idle",
    "busy", None,
]  # fmt: skip


def _text(rng: random.Random, longest: int = 3) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, longest)))


def _unit(rng: random.Random, index: int) -> dict[str, Any]:
    state = rng.choice(STATES)
    pair: dict[str, Any] = {}
    kind = rng.randint(0, 4)
    if kind == 1:
        pair = {"error": _text(rng)}
    elif kind == 2:
        pair = {
            "in_flight": {"seq": rng.randint(1, 99), "alive": rng.random() < 0.8},
            "turn": {"seconds_since_output": rng.choice([None, 5, 700]), "bytes": 2**20},
        }
    elif kind == 3:
        pair = {
            "seq": 2,
            "latest_receipt": {
                "seq": 2,
                "status": rng.choice(["replied", "failed", None]),
                "foreign_ref_changes": [{"ref": "refs/heads/x"}] if rng.random() < 0.2 else [],
                "throttle_signals": {"rate_limit_lines": rng.choice([0, 3])},
            },
            "turn": {"bytes": rng.choice([None, 5, 5000, 3 * 2**30])},
        }
    elif kind == 4:
        pair = {"latest_receipt": {"unreadable": "too large"}}
    unit: dict[str, Any] = {
        "unit_id": rng.choice(["u", "api", "feature-long-name"]) + str(index),
        "lifecycle": rng.choice(["working", "creating", "unreadable", "dismantle-failed"]),
        "partner": rng.choice(["script", "claude", None]),
        "pair": pair,
        "worktree": rng.choice(
            [{"present": True, "ahead_of_base": 3, "dirty_files": 12}, {"present": False}, {}]
        ),
        "attention": {
            "state": state,
            "since": rng.choice([None, "2026-12-02T10:00:00.000Z", "bad"]),
            "why": _text(rng, 6 if rng.random() < 0.3 else 2),
        },
        "recovery": rng.choice(
            [{}, {"needed": True, "why": _text(rng), "command": "unit create --unit u1 --x"}]
        ),
        "feedback": rng.choice([None, "feedback: 2 CI, 3 review pending"]),
        "ports": rng.choice([[], [20417], [20417, 20418, 20419]]),
        "runner": rng.choice([None, {"kind": "ray", "node": "gpu1", "heartbeat_at": None}]),
        "pending_notice": rng.random() < 0.1,
        "error": rng.random() < 0.1,
    }
    if rng.random() < 0.1:
        unit["runner"] = {"kind": "ray", "node": None, "heartbeat_at": "2026-12-02T10:00:05Z"}
    return unit


def _document(rng: random.Random) -> dict[str, Any]:
    units = [_unit(rng, index) for index in range(rng.choice([0, 1, 1, 2, 3, 5]))]
    document: dict[str, Any] = {
        "repository": rng.choice(
            ["/tmp/r", "/home/someone/projects/" + "deep/" * rng.randint(0, 20)]
        ),
        "observed_at": "2026-12-02T10:05:00.000Z",
        "units": units,
        "overlaps": [],
    }
    if len(units) >= 2 and rng.random() < 0.4:
        files = ["src/a.py", "src/b.py"][: rng.randint(1, 2)]
        document["overlaps"] = [
            {"units": [units[0]["unit_id"], units[1]["unit_id"]], "files": files}
        ]
    if rng.random() < 0.2:
        document["config_warning"] = {"reason": _text(rng), "problems": rng.choice([1, 3])}
    return document


def _rich(document: dict[str, Any]) -> str:
    from rich.console import Console

    from unitmgr.views import watch

    console = Console(width=100, record=True, force_terminal=False)
    with console.capture() as captured:
        console.print(watch.frame(document))
    return captured.get()


def test_the_plain_frame_is_richs_byte_for_byte(monkeypatch: Any) -> None:
    from unitmgr.views.watch_plain import plain_frame

    rng = random.Random(20261202)
    answered = 0
    for _ in range(500):
        document = _document(rng)
        plain = plain_frame(document)
        if plain is not None:
            answered += 1
            assert plain == _rich(document), json.dumps(document)
    assert answered > 230  # the rest hold a character rich measures itself
    # Plain words, as most repositories have them: the plain path answers nearly every frame.
    monkeypatch.setattr(sys.modules[__name__], "WORDS", [w for w in WORDS if w.isalnum()][:8])
    answered = 0
    for _ in range(120):
        document = _document(rng)
        document["repository"] = "/tmp/r"
        plain = plain_frame(document)
        if plain is not None:
            answered += 1
            assert plain == _rich(document), json.dumps(document)
    assert answered > 100


def test_watch_once_into_a_pipe_loads_no_rich(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    probe = (
        "import contextlib, io, json, sys\n"
        "from unitmgr.entry import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    main(['watch', '--once', '--repo', sys.argv[1]])\n"
        "print(json.dumps([out.getvalue(), 'rich' in sys.modules]))\n"
    )
    root = Path(__file__).resolve().parent.parent
    completed = subprocess.run(
        [sys.executable, "-c", probe, str(sandbox.repo)],
        capture_output=True,
        text=True,
        cwd=root,
        check=True,
    )
    frame, loaded_rich = json.loads(completed.stdout)
    assert not loaded_rich, frame
    assert frame.startswith("Waiting on you (1):\n  u1  waiting-on-lead ")
    assert "┃ unit " in frame and "│ u1 " in frame
