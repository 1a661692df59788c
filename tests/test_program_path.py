"""The lead starts git by its absolute path, found once per PATH (`registry.environment.
program_path`): the answer is exec's own, so which git runs never changes — only the PATH walk
(one failed `execve` per directory before git's) is skipped."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry import environment as child
from tests.conftest import Sandbox, git_verbs, logging_git


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def _path(*directories: Path | str) -> dict[str, str]:
    return {"PATH": os.pathsep.join(str(directory) for directory in directories)}


def test_the_first_executable_on_path_is_found_as_exec_would(tmp_path: Path) -> None:
    plain = tmp_path / "plain"  # a file, not executable: exec skips it
    plain.mkdir()
    (plain / "tool").write_text("not a program\n")
    folder = tmp_path / "folder"  # a directory of that name: skipped too
    (folder / "tool").mkdir(parents=True)
    found = _executable(tmp_path / "first" / "tool")
    _executable(tmp_path / "second" / "tool")
    search = _path(tmp_path / "missing", plain, folder, found.parent, tmp_path / "second")
    assert child.program_path("tool", search) == str(found)
    # Not on PATH at all: the bare name, so the child's start fails as it always did.
    assert child.program_path("no-such-tool", search) == "no-such-tool"


def test_a_relative_entry_before_the_program_leaves_the_search_to_the_child(
    tmp_path: Path,
) -> None:
    _executable(tmp_path / "abs" / "tool")
    for relative in ("", ".", "bin"):  # the child's working directory decides those
        assert child.program_path("tool", _path(relative, tmp_path / "abs")) == "tool"
    # After the match, a relative entry changes nothing.
    assert child.program_path("tool", _path(tmp_path / "abs", "bin")) == str(
        tmp_path / "abs" / "tool"
    )


def test_each_path_is_looked_up_once_and_a_new_path_again(tmp_path: Path) -> None:
    first = _executable(tmp_path / "a" / "tool")
    search = _path(tmp_path / "a", tmp_path / "b")
    assert child.program_path("tool", search) == str(first)
    first.unlink()  # the same PATH keeps its answer within the process...
    assert child.program_path("tool", search) == str(first)
    later = _executable(tmp_path / "b" / "tool")
    # ...and another PATH is looked up afresh.
    assert child.program_path("tool", _path(tmp_path / "b")) == str(later)


def test_the_git_first_on_the_callers_path_is_the_one_the_cli_runs(sandbox: Sandbox) -> None:
    """A git wrapper first on PATH (as a user's shim would be) is still what `unit` runs."""
    environment, log = logging_git(sandbox.root, sandbox.repo)
    listed = sandbox.unit("list", env=environment)
    assert listed.code == 0, listed.stdout
    assert "rev-parse" in git_verbs(log)


def test_the_script_partner_asks_a_shell_only_for_what_path_does_not_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The script partner's preflight: a first word that is an executable on PATH needs no
    shell; a builtin (`:`) still goes to `sh -c 'command -v'`, and a word neither resolves is
    refused as before."""
    from pair.errors import UsageError
    from pair.partners import adapter_for

    log = tmp_path / "sh.log"
    _executable(tmp_path / "tools" / "mytool")
    shim = tmp_path / "shim" / "sh"  # the shell the preflight starts, logging each start
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec /bin/sh "$@"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim.parent}:{tmp_path / 'tools'}:{os.environ['PATH']}")
    script = adapter_for("script")
    script.preflight(model="mytool --flag", worktree=tmp_path)
    assert not log.exists(), "a shell was started for an executable on PATH"
    script.preflight(model=": nothing", worktree=tmp_path)
    assert "command -v" in log.read_text()
    with pytest.raises(UsageError) as refused:
        script.preflight(model="no-such-tool-anywhere x", worktree=tmp_path)
    assert refused.value.code == "script-command-not-found"
