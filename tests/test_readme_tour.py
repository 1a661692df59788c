"""README's "Using it" run as written: its `.unitmgr.toml` and every command line, in order.

The file and the commands are read from README.md, never copied here. What the README tells a
reader to fill in is filled in — the script-partner lines for a machine with no AI CLI, the
restaff line's partner, `OBSERVED_AT`, `SHA`, `$(unit …)` — and nothing else. What happens
between the commands outside this machine (the issue on GitHub, the executor's PR, its review and
green checks) is the fake GitHub's. `unit watch` runs under a pseudo-terminal and `unit serve` in
the background, each stopped with Ctrl-C as a person would; every command must exit 0, or the
exit its README line names.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shlex
import signal
import subprocess
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.conftest import CLI_OUTPUTS, Result, Sandbox, git, run_cli

ROOT = Path(__file__).resolve().parent.parent
SECTION = (ROOT / "README.md").read_text().split("## Using it", 1)[1].split("\n## ", 1)[0]
PROSE = " ".join(SECTION.split())  # the section's words, its line breaks as spaces


def fenced_blocks(info: str) -> list[str]:
    """The section's fenced blocks whose info string is `info` ("" for none), in order."""
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in SECTION.splitlines():
        if line.startswith("```"):
            if current is None:
                current = []
                blocks.append((line[3:].strip(), current))
            else:
                current = None
        elif current is not None:
            current.append(line)
    return ["\n".join(body) for kind, body in blocks if kind == info]


def toml_blocks() -> list[str]:
    return fenced_blocks("toml")


def tour_config() -> str:
    """The repository's file with the script-partner lines in place of the keys README names."""
    config, variant = toml_blocks()
    replaced = re.search(r"stand in for the file's ((?:`\w+`(?:, | and )?)+)", PROSE)
    assert replaced, "README must say which keys the script-partner lines replace"
    keys = set(re.findall(r"`(\w+)`", replaced.group(1)))
    assert keys == {"partner", "model", "effort"}
    kept = [line for line in config.splitlines() if line.split(" ", 1)[0] not in keys]
    return "\n".join([*kept, *variant.splitlines()]) + "\n"


def tour_lines() -> list[str]:
    """Each command line of the tour's block, continuations joined, comments kept."""
    (block,) = [block for block in fenced_blocks("") if block.startswith("unit ")]
    lines: list[str] = []
    for line in block.replace("\\\n", " ").splitlines():
        if shlex.split(line, comments=True):
            lines.append(line)
        elif line.strip():  # a comment continued under its line
            lines[-1] += " " + line.strip()
    return lines


def restaff_substitution() -> tuple[str, str]:
    found = re.search(r"restaff line's `([^`]+)` reads `([^`]+)`", PROSE)
    assert found, "README must say what the restaff line reads on the script partner"
    return found.group(1), found.group(2)


def test_the_tour_names_what_a_reader_fills_in() -> None:
    commands = " ".join(tour_lines())
    for placeholder in ("OBSERVED_AT", "SHA", "$(unit path api-7)"):
        assert placeholder in commands
        assert f"`{placeholder}`" in PROSE, f"README never says what {placeholder} is"
    words = [word for line in tour_lines() for word in shlex.split(line, comments=True)]
    capitals = {word for word in words if re.fullmatch(r"[A-Z][A-Z_]{2,}", word)}
    assert capitals == {"OBSERVED_AT", "SHA"}  # no other placeholder is left unexplained
    old, _ = restaff_substitution()
    assert old in commands


def _read_until(fd: int, needle: bytes, timeout: float = 20.0) -> bytes:
    seen = b""
    while needle not in seen:
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"no {needle!r} in {seen!r}"
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed
            break
        assert chunk, f"ended before {needle!r}: {seen!r}"
        seen += chunk
    return seen


def _watch(words: list[str], repo: Path) -> int:
    """`unit watch` under a pseudo-terminal: its first frame, then Ctrl-C."""
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(repo)
        os.environ.update(COLUMNS="100", LINES="40")
        os.execvp(words[0], words)
    try:
        assert b"Waiting on you" in _read_until(master, b"Waiting on you")
        os.write(master, b"\x03")
        _read_until(master, b"unit watch: stopped")
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(master)
    return os.waitstatus_to_exitcode(status)


def _serve(words: list[str], repo: Path) -> int:
    """`unit serve` in the background: the address it prints, one page from it, then Ctrl-C.

    README's port is 8787; when another program on this shared machine holds it (`port-in-use`,
    the machine's state, not the README's), the line runs again on `--port 0`, as that
    refusal's `next` says."""
    for attempt in (words, [*words, "--port", "0"]):
        process = subprocess.Popen(
            attempt, cwd=repo, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            assert process.stderr is not None
            line = _first_line(process.stderr.fileno())
            if not line:
                out = process.communicate(timeout=20)[0].decode()
                assert json.loads(out)["code"] == "port-in-use" and attempt is words, out
                continue
            assert attempt is not words or "http://127.0.0.1:8787/" in line, line  # README's
            url = line.split("unit serve: ", 1)[1].split()[0].split("?")[0]
            with urllib.request.urlopen(url, timeout=10) as response:
                assert response.status == 200 and b"<!doctype html>" in response.read()
            with urllib.request.urlopen(url + "api/status", timeout=10) as response:
                units = json.loads(response.read())["units"]
            assert [unit["unit_id"] for unit in units] == ["api-7"]
            process.send_signal(signal.SIGINT)
            out, err = (stream.decode() for stream in process.communicate(timeout=20))
            CLI_OUTPUTS.append(out + err)
            assert json.loads(out)["status"] == "stopped", out + err
            return process.returncode
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    raise AssertionError("unreachable: the second attempt returns or fails")


def _first_line(fd: int, timeout: float = 20.0) -> str:
    """The first line written to `fd`, or "" when it closed first."""
    seen = b""
    while not seen.endswith(b"\n"):
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"no line in {seen!r}"
        chunk = os.read(fd, 1)
        if not chunk:
            return ""
        seen += chunk
    return seen.decode()


def _expected_exit(line: str) -> tuple[int, str | None]:
    """The exit a README line says it gives (`exit 1 code`), else 0."""
    said = re.search(r"exit (\d+) ([a-z-]+)", line)
    return (int(said.group(1)), said.group(2)) if said else (0, None)


def _prepare(sandbox: Sandbox, github: Any) -> None:
    """The reader's repository: its `make deps`/`make test`, an ignored .env, README's file."""
    repo = sandbox.repo
    (repo / "Makefile").write_text("deps:\n\t@true\ntest:\n\ttest -f src/v2.md\n")
    (repo / ".gitignore").write_text(".env\n")
    (repo / ".env").write_text("API_KEY=local\n")
    (repo / ".unitmgr.toml").write_text(tour_config())
    git(repo, "add", "Makefile", ".gitignore", ".unitmgr.toml")
    git(repo, "commit", "-qm", "the tour's repository")
    git(repo, "push", "-q", "origin", "HEAD:main")
    github.next_number = 7
    assert github.add_issue("Add the /v2 endpoints") == 7


def test_using_it_runs_as_written(sandbox: Sandbox, github: Any) -> None:
    repo = sandbox.repo
    _prepare(sandbox, github)
    old, new = restaff_substitution()
    created_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ran: list[str] = []
    documents: list[Any] = []
    head = ""
    for line in tour_lines():
        line = line.replace(old, new)
        words = shlex.split(line, comments=True)
        verb = words[1]
        if verb == "merge":  # the executor's PR, reviewed and green (GitHub's part)
            head = git(Path(_worktree(repo)), "rev-parse", "HEAD")
            number = github.add_pull("feat/7-api", head)
            github.review(number, "alice", "APPROVED", head)
            github.status(head, "ci/tests", "success")
            github.protection["main"] = ["ci/tests"]
        words = [
            created_at if word == "OBSERVED_AT" else head if word == "SHA" else word
            for word in words
        ]
        words = [_command_substitution(word, repo) for word in words]
        code, refusal = _expected_exit(line)
        if verb == "watch":
            assert _watch(words, repo) == code, line
        elif verb == "serve":
            assert _serve(words, repo) == code, line
        else:
            result = run_cli(words[0], *words[1:], cwd=repo, timeout=60)
            assert result.code == code, f"{line}\n{result.stdout}{result.stderr}"
            _check(verb, result, refusal)
            documents.append(result.document)
            if verb == "addendum":  # a person reads the reply before the next line
                assert run_cli("pair", "wait", "--repo", _worktree(repo), cwd=repo).code == 0
        ran.append(verb)
    assert ran == [
        "config", "config", "create", "intake", "create", "list", "status", "wait", "tail",
        "wait", "watch", "serve", "addendum", "cancel", "restaff", "scope", "verify", "merge",
        "dismantle",
    ]  # fmt: skip
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert run_cli("unit", "list", cwd=repo)["units"] == []
    documents.append(
        run_cli("unit", "config", cwd=repo).document
    )  # README: "shows what is in effect"
    _every_json_path_named_is_in_the_tour(documents)


def _worktree(repo: Path) -> str:
    return run_cli("unit", "path", "api-7", cwd=repo).stdout.strip()


def _command_substitution(word: str, repo: Path) -> str:
    """`$(unit …)` in a word, as the shell would expand it."""

    def expand(found: re.Match[str]) -> str:
        words = shlex.split(found.group(1))
        result = run_cli(words[0], *words[1:], cwd=repo)
        assert result.code == 0, result.stdout + result.stderr
        return result.stdout.strip()

    return re.sub(r"\$\(((?:unit|pair) [^)]*)\)", expand, word)


def _check(verb: str, result: Result, refusal: str | None) -> None:
    """What each line's comment promises, where the document shows it."""
    document = result.document
    if refusal is not None:
        assert document["code"] == refusal, result.stdout
        return
    if verb == "intake":
        assert [issue["number"] for issue in document["candidates"]] == [7], result.stdout
    elif verb == "create" and "--unit" in result.argv:
        assert document["status"] == "created", result.stdout
    elif verb == "wait":
        assert document["ok"], result.stdout
    elif verb == "merge":
        assert document["status"] == "merged", result.stdout
    elif verb == "dismantle":
        assert document["merged_pr"]["number"] == 8, result.stdout


def _help_options(text: str) -> dict[str, str]:
    """`--help`'s options: flag → its help text, wrapped lines joined."""
    options: dict[str, str] = {}
    flag = None
    for line in text.split("Options:", 1)[1].splitlines():
        found = re.match(r"\s{2}(--[a-z-]+)(?:\s+[A-Z]+)?\s*(.*)", line)
        if found:
            flag = found.group(1)
            options[flag] = found.group(2)
        elif flag and line.strip():
            options[flag] += " " + line.strip()
    return options


# What a newcomer on a fresh machine (Python and git, no AI CLI) puts where each placeholder of
# the refusal's `next` stands, from the help alone: the one partner installed is the script.
FIRST_CREATE = {
    "--worktree": "../first",
    "--branch": "feat/first",
    "--base": "main",
    "--scope": "a greeting file",
    "--validation": "test -f GREETING.md",
    "--lead": "human",
    "--partner": "script",
    "--reason": "my first unit",
    "--task": "Add GREETING.md.",
    "--model": "cat > /dev/null; echo hello > GREETING.md; echo done",
}


def test_a_first_create_from_help_alone(sandbox: Sandbox) -> None:
    """README quick start, then a first `unit create` written from `unit create --help` alone:
    the first try names every missing option at once, the second creates the unit."""
    repo = sandbox.repo
    helped = run_cli("unit", "create", "--help", cwd=repo)
    assert helped.code == 0
    options = _help_options(helped.stdout)
    required = {flag for flag, text in options.items() if "Required" in text} - {"--unit"}
    first = run_cli("unit", "create", "--unit", "first", cwd=repo)
    assert first.code == 2 and first["code"] == "missing-option", first.stdout
    named = first["detail"]["missing"]
    # every option the help calls required, at once (--worktree is, with no worktree_root)
    assert set(named) == required - {"--task-file"} | {"--worktree"}
    missing = list(named)
    choices = {**FIRST_CREATE}
    for flag, text in options.items():  # what the chosen partner needs, in the help's words
        said = re.search(r"required for ([^.;)]+)", text)
        if said and choices["--partner"] in said.group(1) and flag not in missing:
            missing.append(flag)
    assert "--model" in missing  # the script partner's command line
    words = shlex.split(first["next"])
    placeholders = {
        words[index]: words[index + 1]
        for index in range(len(words) - 1)
        if re.fullmatch(r"<[A-Z]+>", words[index + 1])
    }
    assert set(placeholders) == set(named)
    filled = [choices.get(words[index - 1], word) if word in placeholders.values() else word
              for index, word in enumerate(words)]  # fmt: skip
    filled += [
        word for flag in missing if flag not in placeholders for word in (flag, choices[flag])
    ]
    created = run_cli(filled[0], *filled[1:], cwd=repo)
    assert created.code == 0, created.stdout + created.stderr
    assert created["status"] == "created"
    assert created["unit"]["worktree"] == str((repo / "../first").resolve())


# The references a newcomer reads beside README, and the `a.b` paths they name that this tour
# cannot produce (each is checked where its output is built).
PATH_DOCS = ("README.md", "references/config.md", "references/staffing.md",
             "references/recovery.md", "references/delivery.md")  # fmt: skip
NOT_IN_TOUR = {
    ("detail", "problems"): "a bad config: tests/test_config.py",
    ("detail", "cause"): "a failed setup: tests/test_docs_outputs.py",
    ("detail", "gates"): "a refused merge: tests/test_github.py",
    (
        "abandoned",
        "recover_with",
    ): "a forced dismantle of unpushed work: tests/test_dismantle_saves.py",
    ("abandoned", "saved"): "the same",
    ("abandoned", "saved", "restore_with"): "the same",
    ("output", "title"): "a check run's output on GitHub, not a unit document",
    ("in_flight", "heavy_queue"): "a turn in flight (the tour's end before each read)",
    ("pair", "in_flight"): "the same",
    ("pair", "turn"): "the same",
}


def _every_json_path_named_is_in_the_tour(documents: list[Any]) -> None:
    """Each `a.b` JSON path README and the references a newcomer reads name is in one of the
    tour's documents (config keys and file names are not JSON paths)."""
    from tests.test_docs_outputs import _anywhere, check, dotted
    from unitmgr.config import KEYS

    named: set[tuple[str, ...]] = set()
    for name in PATH_DOCS:
        named |= dotted((ROOT / name).read_text())
    paths = {
        path
        for path in named
        if ".".join(path) not in KEYS
        and not {"md", "jsonl", "patch", "tar", "py", "com", "api", "toml"} & set(path)
    }
    missing = [
        ".".join(path)
        for path in sorted(paths - set(NOT_IN_TOUR))
        if not check(_anywhere(documents, path), path)
    ]
    assert missing == [], missing
    assert len(paths - set(NOT_IN_TOUR)) >= 4, paths
    assert "observed_at" in {
        key for document in documents if isinstance(document, dict) for key in document
    }
