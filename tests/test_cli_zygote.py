"""The warm interpreter the suite runs `unit`/`pair` in (tests/cli_zygote.py) answers exactly as a
fresh console script does: same exit code, stdout and stderr, a SIGKILLed command reads as -9,
the environment and directory are the caller's, and a timeout kills the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


@pytest.mark.skipif(cli_client.FRESH, reason="UNITMGR_TESTS_FRESH_CLI=1: every call is fresh")
def test_commands_at_once_each_get_their_own_status_and_a_broken_request_stops_nothing(
    sandbox: Sandbox,
) -> None:
    """One server forks every command and waits on each by its pidfd: eight at once, of three
    exit codes, each answered with its own; a client that connects and leaves without a request
    is dropped and the server goes on serving."""
    import socket
    from concurrent.futures import ThreadPoolExecutor

    cases = [("--version",), ("frobnicate",), ("list", "--repo", str(sandbox.root))] * 3
    expected = {case: fresh("unit", *case, cwd=sandbox.root) for case in set(cases)}
    assert len({outcome[0] for outcome in expected.values()}) == 3  # 0, 2 and not-a-repository
    with ThreadPoolExecutor(len(cases)) as pool:
        answers = list(pool.map(lambda case: warm("unit", *case, cwd=sandbox.root), cases))
    assert answers == [expected[case] for case in cases]

    path = cli_client._socket_path("plain", dict(os.environ))
    server = cli_client._servers["plain"][0]
    for payload in (b"", b"{not json\n"):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)
            assert client.recv(100) == b""  # dropped: no pid, no status
    assert warm("unit", "--version", cwd=sandbox.root) == expected[("--version",)]
    assert cli_client._servers["plain"][0] is server and server.poll() is None  # the same one


@pytest.mark.skipif(cli_client.FRESH, reason="UNITMGR_TESTS_FRESH_CLI=1: every call is fresh")
def test_a_command_that_may_talk_to_github_runs_in_the_server_with_pygithub_warm(
    sandbox: Sandbox,
) -> None:
    plain = dict(os.environ)
    with_github = dict(os.environ, GITHUB_API_URL="http://127.0.0.1:9/api/v3")
    assert cli_client.server_kind("unit", ["list"], plain) == "plain"
    assert cli_client.server_kind("pair", ["status"], plain) == "plain"
    assert cli_client.server_kind("unit", ["intake", "--label", "x"], plain) == "github"
    assert cli_client.server_kind("unit", ["create", "--unit", "u1"], with_github) == "github"
    # Either server answers as the console script does.
    for environment in (plain, with_github):
        assert warm("unit", "--version", cwd=sandbox.root, env=environment) == fresh(
            "unit", "--version", cwd=sandbox.root, env=environment
        )
    assert {"plain", "github"} <= set(cli_client._servers)


def test_a_warm_command_has_the_search_path_of_a_fresh_one(tmp_path: Path) -> None:
    from tests.cli_zygote import console_script_path

    script = tmp_path / "bin" / "tool"
    script.parent.mkdir()
    script.write_text("import json, sys\nprint(json.dumps(sys.path))\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    show = "import json, sys; print(json.dumps(sys.path))"
    warm_path = json.loads(subprocess.check_output([sys.executable, "-P", "-c", show], env=env))
    fresh_path = json.loads(subprocess.check_output([sys.executable, str(script)], env=env))
    assert console_script_path(str(script), warm_path) == fresh_path
    assert str(tmp_path / "a") in fresh_path
