"""`--format table` (SPEC 3.0): a recovery command is never cut at the terminal width; it is
wrapped between words with shell line continuations, so the lines paste as the command."""

from __future__ import annotations

import os
import re
import shlex

import pytest

from tests.conftest import Sandbox, run_cli, write_record
from unitmgr.views.table import command_lines, shell_words


def _commands_in(table: str) -> list[str]:
    """The recovery commands a person would copy from the table: each `! ...` note's following
    indented lines, joined back at their ` \\` continuations."""
    commands, lines = [], table.splitlines()
    for index, line in enumerate(lines):
        if not line.startswith("! ") or index + 1 >= len(lines):
            continue
        parts, at = [], index + 1
        while at < len(lines) and lines[at].startswith("    "):
            parts.append(lines[at].strip())
            at += 1
            if not parts[-1].endswith(" \\"):
                break
            parts[-1] = parts[-1][:-2]
        commands.append(" ".join(parts))
    return commands


def test_recovery_commands_wrap_whole_at_a_narrow_terminal(sandbox: Sandbox) -> None:
    write_record(sandbox, "u1")  # worktree missing: dismantle --force, with a long --repo path
    write_record(sandbox, "unit-with-a-longer-name", branch="feat/x")
    env = {**os.environ, "COLUMNS": "60"}
    for command in (["status", "--all"], ["list"]):
        document = sandbox.unit(*command, env=env).document
        expected = [unit["recovery"]["command"] for unit in document["units"]]
        assert len(expected) == 2 and all(len(c) > 60 for c in expected)
        table = sandbox.unit(*command, "--format", "table", env=env)
        assert table.code == 0
        assert _commands_in(table.stdout) == expected, table.stdout
        wrapped = [line for line in table.stdout.splitlines() if line.endswith(" \\")]
        assert wrapped and all(len(line) <= 60 for line in wrapped)
    assert "unit dismantle" in run_cli("unit", "list", "--format", "table", cwd=sandbox.repo).stdout


@pytest.mark.parametrize("columns", ["40", "200"])
def test_a_quoted_command_wraps_only_between_words(
    columns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    words = ["unit", "create", "--unit", "u1", "--scope", "a greeting file", "--model"]
    words += ["cat > /dev/null; echo hello > GREETING.md", "--repo", "/tmp/" + "x" * 70]
    command = shlex.join(words)
    text = command_lines(command)
    assert shlex.split(text.replace(" \\\n", " ")) == words
    assert _commands_in("! u1: lifecycle creating\n" + text) == [command]
    lines = text.splitlines()
    width = min(int(columns), 80)  # never wider than the table's 80 columns
    assert len(lines) > 1
    # A line runs over only to keep one word (the quoted model, the long path) whole.
    over = [line.strip().removesuffix(" \\") for line in lines if len(line) > width]
    assert over and all(len(shell_words(line)) == 1 for line in over)


def test_a_unit_waiting_on_the_lead_gets_its_line_under_both_tables(sandbox: Sandbox) -> None:
    """A person reading `--format table` sees who waits on them, as `unit watch`'s banner says
    it: the state, how long (status, which has an observation time) and why."""
    created = sandbox.create("u1", model="cat >/dev/null; echo ready for review")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    status = sandbox.unit("status", "--all", "--format", "table")
    assert status.code == 0
    [line] = [line for line in status.stdout.splitlines() if line.startswith("! u1")]
    assert re.fullmatch(r"! u1 waiting-on-lead \d+s: #1 task replied: ready for review", line)
    listed = sandbox.unit("list", "--format", "table")
    assert "! u1 waiting-on-lead: #1 task replied: ready for review" in listed.stdout.splitlines()
