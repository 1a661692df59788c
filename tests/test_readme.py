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


def using_it_lines() -> list[list[str]]:
    """Each `unit`/`pair` command line of README's "Using it" tour, continuations joined."""
    import shlex

    from tests.test_readme_tour import tour_lines

    lines = [shlex.split(line, comments=True) for line in tour_lines()]
    assert all(words[0] in ("unit", "pair") for words in lines)
    return lines


def test_every_using_it_command_parses_with_the_cli_parser() -> None:
    """Every option README shows exists on that command, and nothing is left over."""
    from tests.test_every_code import parses

    lines = using_it_lines()
    assert len(lines) >= 15
    for words in lines:
        parses(words)


def test_the_readme_restaff_example_is_a_valid_staffing() -> None:
    """`--lead claude --partner claude` is refused `lead-is-partner`: the example must not be."""
    from unitmgr import validation

    (restaff,) = [words for words in using_it_lines() if words[1:2] == ["restaff"]]
    value = {
        word: restaff[index + 1] for index, word in enumerate(restaff) if word.startswith("--")
    }
    validation.staffing(
        lead=value["--lead"], partner=value["--partner"], model=value.get("--model"),
        effort=value.get("--effort"), identity=None, command="restaff",
    )  # fmt: skip


def test_the_readme_names_only_files_in_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), target
    assert "SPEC.md" not in text  # the contract lives outside the repository


def test_the_quick_start_puts_unit_on_path() -> None:
    assert ". .venv/bin/activate" in quick_start_commands()[0]
