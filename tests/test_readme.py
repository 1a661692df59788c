"""README's two quick-start commands: the demo works, and CI runs the test command verbatim."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quick_start_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```\n(.+?)\n```", section)


def test_readme_has_exactly_two_quick_start_commands() -> None:
    commands = quick_start_commands()
    assert len(commands) == 2
    assert "unitmgr.demo" in commands[0]
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    assert quick_start_commands()[1] in (ROOT / ".ci" / "run").read_text()


def test_the_demo_runs_end_to_end() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "unitmgr.demo"], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert '"replied"' in completed.stdout
    assert "units left: 0" in completed.stdout
    assert "left nothing behind" in completed.stdout
