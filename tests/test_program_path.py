"""The lead starts git (and a partner) by the path `registry.environment.program_path` found on
PATH — the first executable file of that name, kept per PATH value while the directories it
searched are unchanged — so the PATH walk (one failed `execve` per directory before git's) is
skipped; a file found that cannot be started is passed over as exec's own search would
(`start_found`)."""

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


def test_an_answer_is_kept_only_while_the_directories_it_searched_are_unchanged(
    tmp_path: Path,
) -> None:
    second = _executable(tmp_path / "b" / "tool")
    search = _path(tmp_path / "a", tmp_path / "b")
    (tmp_path / "a").mkdir()
    assert child.program_path("tool", search) == str(second)
    # A program added earlier on PATH (a reinstall, a user's shim) is found from then on...
    first = _executable(tmp_path / "a" / "tool")
    assert child.program_path("tool", search) == str(first)
    # ...and one removed is not answered any more.
    first.unlink()
    assert child.program_path("tool", search) == str(second)
    second.unlink()
    assert child.program_path("tool", search) == "tool"


def test_an_answer_over_unchanged_directories_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _executable(tmp_path / "old" / "tool")
    hour_ago = os.stat(found.parent).st_mtime - 3600
    os.utime(found.parent, (hour_ago, hour_ago))  # a PATH directory nobody touched lately
    search = _path(found.parent)
    looked: list[str] = []
    isfile = os.path.isfile
    monkeypatch.setattr(os.path, "isfile", lambda path: looked.append(path) or isfile(path))
    assert child.program_path("tool", search) == str(found)
    assert child.program_path("tool", search) == str(found)
    assert looked == [str(found)], "the second lookup searched PATH again"


def test_a_program_found_that_cannot_start_is_passed_over_as_exec_would(tmp_path: Path) -> None:
    """A stale shim first on PATH (executable, but its interpreter is gone): starting by name
    went on to the next directory, and so does `start_found`; argv[0] stays the name."""
    import subprocess

    shim = tmp_path / "shims" / "tool"
    shim.parent.mkdir()
    shim.write_text("#!/nonexistent/interpreter\n")
    shim.chmod(0o755)
    real = tmp_path / "bin" / "tool"
    real.parent.mkdir()
    real.write_text('#!/bin/sh\necho "ran $0"\n')
    real.chmod(0o755)
    environment = {**os.environ, **_path(shim.parent, real.parent, "/usr/bin", "/bin")}
    assert child.program_path("tool", environment) == str(shim)
    done = child.start_found(
        subprocess.run, ["tool"], env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0 and done.stdout == f"ran {real}\n"


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


def test_a_kept_answer_is_looked_at_again_once_its_recheck_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over directories nobody touched lately the answer is kept; a program then added earlier
    on PATH changes that directory's mtime, which the next due check sees."""
    (tmp_path / "a").mkdir()
    second = _executable(tmp_path / "b" / "tool")
    for folder in (tmp_path / "a", tmp_path / "b"):
        hour_ago = os.stat(folder).st_mtime - 3600
        os.utime(folder, (hour_ago, hour_ago))
    search = _path(tmp_path / "a", tmp_path / "b")
    assert child.program_path("tool", search) == str(second)
    first = _executable(tmp_path / "a" / "tool")
    assert child.program_path("tool", search) == str(second)  # within the second: kept
    monkeypatch.setattr(child, "RECHECK_SECONDS", 0.0)  # the check is due
    assert child.program_path("tool", search) == str(first)
