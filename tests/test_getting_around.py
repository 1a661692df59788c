"""Getting around (SPEC 3.18): `unit path ID`, `unit shell-init` run by real shells, `-h` on
every command, and completion of unit ids and option values through typer's own protocol."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from registry import plain_argv
from registry.cli_runner import command_spec
from tests.conftest import Sandbox, git, write_record

ROOT = Path(__file__).resolve().parent.parent


def _linked_unit(sandbox: Sandbox, unit_id: str) -> Path:
    """A unit whose worktree git proves its own: a linked worktree on the recorded branch."""
    worktree = sandbox.worktree(unit_id)
    git(sandbox.repo, "worktree", "add", "-q", "-b", f"feat/{unit_id}", str(worktree))
    write_record(sandbox, unit_id)
    return worktree


def test_path_prints_the_proven_worktree_and_nothing_else(sandbox: Sandbox) -> None:
    worktree = _linked_unit(sandbox, "u1")
    found = sandbox.unit("path", "u1")
    assert (found.code, found.stdout, found.stderr) == (0, f"{worktree}\n", "")
    missing = sandbox.unit("path", "nobody")
    assert missing.code == 1 and missing["code"] == "no-such-unit"
    bad = sandbox.unit("path", "../x")
    assert bad.code == 2 and bad["code"] == "invalid-unit-id"


@pytest.mark.parametrize(
    "planted",
    ["/etc", "{main}", "{other}", "{wt}\n/etc", "{wt}\x1b[2J"],
    ids=["etc", "main-worktree", "another-unit", "newline", "escape"],
)
def test_path_never_prints_what_git_does_not_prove(sandbox: Sandbox, planted: str) -> None:
    """An executor rewrites its record's worktree, the way it can write the registry."""
    worktree = _linked_unit(sandbox, "u1")
    other = _linked_unit(sandbox, "u2")
    value = planted.format(main=sandbox.repo, other=other, wt=worktree)
    write_record(sandbox, "u1", signed=False, worktree=value)
    refused = sandbox.unit("path", "u1")
    # A path no worktree has is missing; one git has but does not prove the unit's, untrusted.
    expected = "worktree-missing" if "\n" in value or "\x1b" in value else "record-untrusted"
    assert refused.code == 1 and refused["code"] == expected, refused.stdout
    assert refused.stdout.lstrip().startswith("{") and "\x1b" not in refused.stdout


def test_path_of_a_unit_whose_worktree_is_gone(sandbox: Sandbox) -> None:
    write_record(sandbox, "u1")  # never created: git has no entry, the directory is absent
    gone = sandbox.unit("path", "u1")
    assert gone.code == 1 and gone["code"] == "worktree-missing"
    assert gone["next"] == "unit dismantle --unit u1 --force u1"


SCRIPT = {
    "bash": 'eval "$(unit shell-init bash)"\n{body}',
    "zsh": 'eval "$(unit shell-init zsh)"\n{body}',
    "fish": "unit shell-init fish | source\n{body}",
}
BODY = {
    "posix": (
        "cd {repo}\n"
        "unit cd u1 --repo {repo} || exit 9\n"
        "pwd\n"
        'unit cd nobody --repo {repo}; echo "status=$?"\n'
        "pwd\n"
        "unit path u1 --repo {repo}\n"
    ),
    "fish": (
        "cd {repo}\n"
        "unit cd u1 --repo {repo}; or exit 9\n"
        "pwd\n"
        'unit cd nobody --repo {repo}; echo "status=$status"\n'
        "pwd\n"
        "unit path u1 --repo {repo}\n"
    ),
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_shell_init_gives_a_unit_cd_that_changes_directory(sandbox: Sandbox, shell: str) -> None:
    program = shutil.which(shell)
    if program is None:
        pytest.skip(f"{shell} is not installed")
    worktree = _linked_unit(sandbox, "u1")
    body = BODY["fish" if shell == "fish" else "posix"].format(repo=sandbox.repo)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    completed = subprocess.run(
        [program, "-c", SCRIPT[shell].format(body=body)],
        capture_output=True,
        text=True,
        env=env,
        cwd=sandbox.root,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    lines = completed.stdout.splitlines()
    # cd'd into the worktree; a refusal prints its document, returns 1 and stays put; any other
    # subcommand is the real `unit`.
    assert lines[0] == str(worktree), lines
    assert '"code": "no-such-unit"' in completed.stdout and "status=1" in lines
    assert lines[-2:] == [str(worktree), str(worktree)], lines


def test_shell_init_refuses_an_unknown_shell(sandbox: Sandbox) -> None:
    refused = sandbox.unit("shell-init", "tcsh")
    assert refused.code == 2 and refused["code"] == "unknown-shell"
    assert refused["next"] == "unit shell-init bash"


def _every_subcommand(app: Any) -> list[str]:
    return list(getattr(typer.main.get_command(app), "commands", {}))


def test_dash_h_is_help_everywhere(sandbox: Sandbox) -> None:
    from pair.cli import app as pair_app
    from unitmgr.cli import whole_app

    for program, app in (("unit", whole_app()), ("pair", pair_app)):
        for words in ([], *([name] for name in _every_subcommand(app))):
            short = subprocess.run(
                [program, *words, "-h"], capture_output=True, text=True, cwd=sandbox.root
            )
            long = subprocess.run(
                [program, *words, "--help"], capture_output=True, text=True, cwd=sandbox.root
            )
            assert short.returncode == 0 and short.stdout.startswith("Usage:"), (program, words)
            assert short.stdout == long.stdout, (program, words)
            assert "-h, --help" in short.stdout


def _complete(sandbox: Sandbox, words: str, **environment: str) -> list[str]:
    """What the shell gets from typer's bash completion protocol for the command line `words`
    (the cursor at its end)."""
    env = {
        **os.environ,
        "_UNIT_COMPLETE": "complete_bash",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
        **environment,
    }
    completed = subprocess.run(
        ["unit"], capture_output=True, text=True, env=env, cwd=sandbox.repo, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


def test_completion_offers_recorded_ids_and_the_allowed_values(sandbox: Sandbox) -> None:
    for unit_id in ("api-7", "api-8", "web"):
        write_record(sandbox, unit_id)
    assert _complete(sandbox, "unit status --unit ") == ["api-7", "api-8", "web"]
    assert _complete(sandbox, "unit tail --unit api") == ["api-7", "api-8"]
    assert _complete(sandbox, "unit create --partner c") == ["claude", "codex", "cursor"]
    assert _complete(sandbox, "unit restaff --lead h") == ["human"]
    assert _complete(sandbox, "unit list --format ") == ["json", "table"]
    assert _complete(sandbox, "unit create --partner claude --effort ") == [
        "low",
        "medium",
        "high",
        "xhigh",
        "max",
    ]
    assert "high" in _complete(sandbox, "unit create --effort h")


def test_completion_survives_a_hostile_registry(sandbox: Sandbox) -> None:
    """An executor plants record files whose names are no ids (a newline, an escape, a space),
    unreadable contents, and thousands of files: what is offered is bounded and clean."""
    write_record(sandbox, "good")
    units = sandbox.registry / "units"
    for name in ("bad\nline", "esc\x1b[2J", "with space", "-rf"):
        (units / f"{name}.json").write_text("{not json")
    (units / "garbage.json").write_bytes(b"\xff\x00" * 100)
    for index in range(3000):
        (units / f"bulk-{index:04d}.json").write_text("")
    offered = _complete(sandbox, "unit status --unit ")
    assert "good" in offered or len(offered) == 200
    assert len(offered) <= 200
    assert all(
        line and line.isascii() and line.isprintable() and " " not in line for line in offered
    )
    assert not any(line.startswith("-") for line in offered)
    assert _complete(sandbox, "unit status --unit go") == ["good"]


# -- the plain parser gives each command exactly what Typer gives it ---------------------------


def _typer_kwargs(command: Any, arguments: list[str]) -> dict[str, Any] | str:
    """The keyword arguments Typer passes `command`'s callback for `arguments` (or the usage
    error it raises instead)."""
    context = command.make_context(command.name, list(arguments))
    return dict(context.params)


def _samples(spec: dict[str, Any]) -> list[list[str]]:
    """Plain command lines over every option of `spec`: each alone, then all together."""
    values = {"value": "v1", "int": "7", "float": "2.5", "multiple": "m1"}
    words = [f"a{index}" for index, _ in enumerate(spec["arguments"])]
    singles = []
    together = list(words)
    for flag, (_, kind) in spec["options"].items():
        given = [flag] if kind == "flag" else [flag, values[kind]]
        singles.append([*words, *given])
        together += given if kind != "multiple" else [*given, f"{flag}=m2"]
    return [*singles, together]


def test_the_plain_parser_fills_what_typer_fills() -> None:
    from pair.cli import app as pair_app
    from unitmgr.cli import whole_app

    checked = 0
    for app in (whole_app(), pair_app):
        group = typer.main.get_command(app)
        for name, command in getattr(group, "commands", {}).items():
            spec = command_spec(command)
            if spec is None:
                continue
            for arguments in _samples(spec):
                plain = plain_argv.parse(arguments, spec)
                if plain is None:
                    continue  # a required option left out: Typer's to refuse
                typer_given = _typer_kwargs(command, arguments)
                normal = {k: list(v) if isinstance(v, tuple) else v for k, v in plain.items()}
                assert normal == {
                    k: list(v) if isinstance(v, tuple) else v for k, v in typer_given.items()
                }, (name, arguments)
                checked += 1
    assert checked > 60


@pytest.mark.parametrize(
    "arguments",
    [
        ["--unit"],
        ["--unit", "-x"],
        ["--unit", "a", "--unit", "b"],
        ["--all=1"],
        ["--all", "--all"],
        ["-h"],
        ["--help"],
        ["--", "x"],
        ["--bogus"],
        ["stray"],
        ["--unit=--repo"],
    ],
)
def test_the_plain_parser_hands_over_whatever_is_not_plain(arguments: list[str]) -> None:
    spec = {
        "options": {"--unit": ["unit", "value"], "--all": ["all_units", "flag"]},
        "arguments": [],
        "defaults": {"unit": None, "all_units": False},
        "required": [],
    }
    assert plain_argv.parse(arguments, spec) is None
    assert plain_argv.parse(["--unit=a", "--all"], spec) == {"unit": "a", "all_units": True}
