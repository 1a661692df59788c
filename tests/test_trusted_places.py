"""The user's own directories (registry/userdirs.py) and the git config catalogue
(pair/gitconfig.py): the two foundations of SPEC 8's "the lead runs nothing an executor planted".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pair.gitconfig import LIST_ARGS, is_executable_key, parse_listing
from registry import userdirs


def test_repository_id_is_shared_by_worktrees_and_differs_between_clones(tmp_path: Path) -> None:
    first, second = tmp_path / "one" / ".git", tmp_path / "two" / ".git"
    first.mkdir(parents=True)
    second.mkdir(parents=True)
    assert userdirs.repository_id(first) == userdirs.repository_id(first / ".")
    assert userdirs.repository_id(first) != userdirs.repository_id(second)
    assert userdirs.repository_id(first).startswith("one-")
    (tmp_path / "link").symlink_to(tmp_path / "one")
    assert userdirs.repository_id(tmp_path / "link" / ".git") == userdirs.repository_id(first)


def test_xdg_directories_ignore_a_relative_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    assert userdirs.config_home() == tmp_path / "cfg" / "unitmgr"
    assert userdirs.state_home() == Path.home() / ".local/state" / "unitmgr"


@pytest.mark.parametrize(
    "key",
    [
        "core.fsmonitor",
        "filter.lfs.clean",
        "filter.a.b.smudge",
        "remote.origin.uploadpack",
        "url.ext::sh -c x.insteadof",
        "includeif.gitdir:/x/.path",
        "credential.https://h.helper",
        "trace2.eventtarget",
    ],
)
def test_executable_keys_are_recognized(key: str) -> None:
    assert is_executable_key(key)


@pytest.mark.parametrize("key", ["user.name", "core.bare", "remote.origin.url", "filter.x.y"])
def test_plain_keys_are_not_executable(key: str) -> None:
    assert not is_executable_key(key)


def test_the_listing_names_scope_origin_and_value(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "config", "filter.evil.clean", "touch x\ny"], check=True
    )
    (repo / ".git" / "config").write_text(
        (repo / ".git" / "config").read_text() + "[core]\n\tfsmonitor\n"
    )
    listing = subprocess.run(
        ["git", "-C", str(repo), *LIST_ARGS], capture_output=True, text=True, check=True
    ).stdout
    entries = {entry.key: entry for entry in parse_listing(listing)}
    evil = entries["filter.evil.clean"]
    assert (evil.scope, evil.file, evil.value) == ("local", ".git/config", "touch x\ny")
    assert evil.from_repository and evil.executable
    assert entries["core.fsmonitor"].value is None  # set without `=`
