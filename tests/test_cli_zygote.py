"""The warm interpreter the suite runs `unit`/`pair` in (tests/cli_zygote.py) answers exactly as a
fresh console script does: same exit code, stdout and stderr, a SIGKILLed command reads as -9,
the environment and directory are the caller's, and a timeout kills the command."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import cli_client
from tests.conftest import Sandbox, run_cli


def fresh(program: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple:
    completed = cli_client.run_fresh(program, list(args), cwd=cwd, env=env, timeout=60)
    return completed.returncode, completed.stdout, completed.stderr


def warm(program: str, *args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple:
    environment = dict(os.environ if env is None else env)
    assert cli_client.serves(program, environment)
    completed = cli_client.run(program, list(args), cwd=cwd, env=environment, timeout=60)
    return completed.returncode, completed.stdout, completed.stderr


@pytest.mark.skipif(cli_client.FRESH, reason="UNITMGR_TESTS_FRESH_CLI=1: every call is fresh")
def test_a_warm_fork_answers_as_the_console_script(sandbox: Sandbox) -> None:
    repo = str(sandbox.repo)
    cases: list[tuple[str, ...]] = [
        ("unit", "list", "--repo", repo),  # the fast path without Typer
        ("unit", "status", "--unit", "nope", "--repo", repo),  # Typer, a typed error
        ("unit", "--bogus"),  # a usage error before the subcommand
        ("pair", "status", "--repo", repo),
    ]
    for program, *args in cases:
        expected = fresh(program, *args, cwd=sandbox.root)
        assert warm(program, *args, cwd=sandbox.root) == expected, (program, args)

    # The environment is the caller's: the test hook kills each create after its journal write.
    crash = dict(os.environ, UNITMGR_TEST_HOOKS="1", UNITMGR_TEST_CRASH_AFTER="create:reserve:done")
    killed = fresh("unit", *sandbox.create_args("u1"), "--repo", repo, cwd=sandbox.root, env=crash)
    args = [arg.replace("u1", "u2") for arg in sandbox.create_args("u1")]
    warm_killed = warm("unit", *args, "--repo", repo, cwd=sandbox.root, env=crash)
    assert killed[0] == warm_killed[0] == -9
    assert [text.replace("u1", "u2") for text in killed[1:]] == list(warm_killed[1:])
    assert {unit["unit_id"] for unit in sandbox.unit("list")["units"]} == {"u1", "u2"}

    # The working directory is the caller's: `--repo` defaults to it.
    assert warm("unit", "list", cwd=sandbox.repo) == fresh("unit", "list", cwd=sandbox.repo)

    # A timeout kills the command and raises as subprocess.run does (the setup hook outlives it,
    # in its own process group, until the sandbox stops what is left in it).
    hung = sandbox.create_args("u3", setup="sleep 30", max_active="5", max_held="5")
    with pytest.raises(subprocess.TimeoutExpired):
        run_cli("unit", *hung, "--repo", repo, cwd=sandbox.root, timeout=1)


@pytest.mark.skipif(cli_client.FRESH, reason="UNITMGR_TESTS_FRESH_CLI=1: every call is fresh")
def test_other_interpreter_settings_run_fresh(sandbox: Sandbox) -> None:
    # The settings are compared with the warm interpreter's own: start it first (in a worker
    # where no earlier test has, nothing is there to compare with yet).
    assert warm("unit", "--version", cwd=sandbox.root)[0] == 0
    assert not cli_client.serves("unit", dict(os.environ, PYTHONPATH="/elsewhere"))
    assert not cli_client.serves("unit", dict(os.environ, LANG="de_DE.ISO-8859-1"))
    assert not cli_client.serves("git", dict(os.environ))
