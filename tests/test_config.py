"""The project config file (SPEC 3.16): keys, types, precedence, sources, `unit config`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry.errors import UsageError
from tests.conftest import Sandbox
from unitmgr.config import NOTIFY_EVENTS, load_config


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_precedence_local_over_repository_over_defaults(tmp_path: Path) -> None:
    top, common = tmp_path / "repo", tmp_path / "repo" / ".git"
    shared = _write(
        top / ".unitmgr.toml",
        'max_active = 5\nmax_held = 3\nsetup = "make deps"\ncopy = [".env"]\n'
        'worktree_root = "../{repo}.units/{branch_slug}"\n'
        '[notify]\ncommand = "notify-send unit"\nevents = ["attention", "merged"]\n',
    )
    local = _write(
        common / "orchestrate" / "config.toml",
        'max_active = 7\nguard_refs = true\n[notify]\nurl = "https://hooks.example/u"\n',
    )
    config = load_config(top, common)
    assert (config.value("max_active"), config.source("max_active")) == (7, "local")
    assert config.file_of("max_active") == local
    assert (config.value("max_held"), config.source("max_held")) == (3, "repository")
    assert config.file_of("max_held") == shared
    assert (config.value("lead"), config.source("lead")) == (None, "default")
    assert config.value("stuck_minutes") == 10 and config.value("guard_refs") is True
    assert config.notify.command == "notify-send unit"  # per key: the repository's command
    assert config.notify.url == "https://hooks.example/u"  # and the local url
    assert config.notify.events == ("attention", "merged")
    assert config.worktree_for(toplevel=top, unit_id="u1", branch="feat/a-b") == str(
        tmp_path / "repo.units" / "feat-a-b"
    )
    # No file at all: every default, and notify configured nowhere.
    empty = load_config(tmp_path / "none", tmp_path / "none" / ".git")
    assert empty.value("max_active") == 2 and empty.source("copy") == "default"
    assert not empty.notify.configured and empty.notify.events == NOTIFY_EVENTS
    assert empty.worktree_for(toplevel=top, unit_id="u", branch="b") is None


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("max_active = 0\n", "max_active", "an integer from 1 to 100"),
        ("max_held = true\n", "max_held", "an integer from 1 to 100"),
        ('lead = "nobody"\n', "lead", "a string, one of"),
        ("setup = 3\n", "setup", "a non-empty string"),
        ('copy = "/etc/passwd"\n', "copy", "a list of relative paths"),
        ('copy = ["../secret"]\n', "copy", "a list of relative paths"),
        ('worktree_root = "/w/{repo.__class__}"\n', "worktree_root", "a non-empty path template"),
        ('worktree_root = "/w/{repo}"\n', "worktree_root", "at least one of"),
        ('stuck_minutes = "ten"\n', "stuck_minutes", "a number of minutes"),
        ('guard_refs = "yes"\n', "guard_refs", "a boolean"),
        ('[notify]\nurl = "file:///etc/passwd"\n', "notify.url", "an http:// or https:// URL"),
        ('[notify]\nevents = ["attention", "lunch"]\n', "notify.events", "a list of event names"),
        ('notify = "x"\n', "notify", "a table [notify]"),
        ("max_actve = 3\n", "max_actve", "a known key"),
        ("max_active = = 3\n", None, "valid UTF-8 TOML"),
    ],
)
def test_a_bad_key_or_type_is_config_invalid_naming_file_key_and_type(
    tmp_path: Path, text: str, key: str | None, expected: str
) -> None:
    path = _write(tmp_path / ".unitmgr.toml", text)
    with pytest.raises(UsageError) as raised:
        load_config(tmp_path, tmp_path / ".git")
    error = raised.value
    assert error.code == "config-invalid" and error.exit_code == 2
    assert error.detail == {"file": str(path), "key": key, "expected": error.detail["expected"]}
    assert expected in error.detail["expected"] and str(path) in error.reason
    assert key is None or f"{key}:" in error.reason
    assert "unit config" in error.next_step


def test_a_config_that_is_not_a_small_regular_file_is_refused_unread(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".unitmgr.toml")  # opened for reading it would block forever
    with pytest.raises(UsageError) as raised:
        load_config(tmp_path, tmp_path / ".git")
    assert raised.value.code == "config-invalid"
    (tmp_path / ".unitmgr.toml").unlink()
    _write(tmp_path / ".unitmgr.toml", "# " + "x" * (1024 * 1024) + "\n")
    with pytest.raises(UsageError, match="1 MiB"):
        load_config(tmp_path, tmp_path / ".git")


def test_unit_config_prints_every_setting_with_its_source(sandbox: Sandbox) -> None:
    shared = _write(sandbox.repo / ".unitmgr.toml", 'max_held = 4\nsetup = "make deps"\n')
    local = _write(sandbox.registry / "config.toml", 'setup = "true"\n')
    result = sandbox.unit("config")
    assert result.code == 0, result.stdout
    settings = result["settings"]
    assert settings["max_held"] == {"value": 4, "source": "repository", "file": str(shared)}
    assert settings["setup"] == {"value": "true", "source": "local", "file": str(local)}
    assert settings["max_active"] == {"value": 2, "source": "default", "file": None}
    assert result["files"]["local"] == {"path": str(local), "present": True}
    table = sandbox.unit("config", "--format", "table")
    assert table.code == 0 and table.document is None
    assert any(
        line.split() == ["max_held", "4", "(repository)"] for line in table.stdout.splitlines()
    ), table.stdout
