"""The fast entry point (unitmgr/entry.py): a plain `status --all` or `list` is answered without
Typer, with exactly the document, exit code and errors the Typer app gives (SPEC 7 start-up)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from registry.errors import ToolError
from tests.conftest import Sandbox, write_record
from unitmgr.entry import _LIST, _STATUS_ALL, simple_options

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("typer", "rich", "github", "git", "psutil")
# What an empty registry's answer must not load either: together a third of its budget
# (pathlib, with urllib.parse and ipaddress, and datetime: its paths and stamp are text).
LEAN = (
    "typing", "dataclasses", "inspect", "registry.records", "unitmgr.views.observe", "pathlib",
    "datetime",
)  # fmt: skip


def _run(module: str, argv: list[str], cwd: Path) -> tuple[int, str, list[str]]:
    code = (
        "import json, sys\n"
        f"from {module} import main\n"
        f"code = main({argv!r})\n"
        f"loaded = [name for name in {HEAVY + LEAN!r} if name in sys.modules]\n"
        "sys.stderr.write(json.dumps({'code': code, 'loaded': loaded}))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, check=True
    )
    outcome = json.loads(completed.stderr.strip().splitlines()[-1])
    stdout = re.sub(r'"observed_at": "[^"]*"', '"observed_at": "T"', completed.stdout)
    return outcome["code"], stdout, outcome["loaded"]


FAST = [
    ["status", "--all"],
    ["status", "--all", "--format", "table"],
    ["status", "--repo={repo}", "--all", "--format=json", "--lock-timeout", "5"],
    ["status", "--all", "--format", "yaml"],
    ["status", "--all", "--lock-timeout", "soon"],
    ["list"],
    ["list", "--format", "table"],
    ["list", "--format", "xml"],
]
# Plain, but no fast read: the declared command's own body, still without Typer (SPEC 7 rev. 3).
DECLARED = [
    ["status", "--all", "--unit", "u1"],
    ["status"],
    ["status", "--unit", "u1"],
    ["status", "--unit", "nobody", "--format", "table"],
    ["path", "u1"],
    ["path", "nobody"],
    ["shell-init", "fish"],
    ["shell-init", "tcsh"],
    ["list", "--prs", "--format", "xml"],
]
HANDED_OVER = [
    ["status", "--all", "--all"],
    ["status", "--all", "--help"],
    ["status", "--all", "--repo"],
    ["status", "--all", "--lock-timeout", "-1"],
    ["status", "--all", "--format", "--repo", "x"],
    ["list", "--bogus"],
    ["list", "--prs=yes"],
    ["status", "-h"],
    ["path"],
    ["path", "u1", "u2"],
    ["status", "--unit", "u1", "--", "x"],
]


def _argv(template: list[str], repo: Path) -> list[str]:
    argv = [word.replace("{repo}", str(repo)) for word in template]
    return argv if any("--repo" in word for word in argv) else [*argv, "--repo", str(repo)]


def test_the_entry_answers_exactly_as_the_typer_app(sandbox: Sandbox) -> None:
    write_record(sandbox, "u1")  # a unit whose worktree is missing: recovery and all
    for template in FAST + DECLARED + HANDED_OVER:
        argv = _argv(template, sandbox.repo)
        fast = _run("unitmgr.entry", argv, ROOT)
        assert fast[:2] == _run("unitmgr.cli", argv, ROOT)[:2], argv
        if template in FAST:
            assert not set(fast[2]) & set(HEAVY), f"{argv} loaded {fast[2]}"
        elif template in DECLARED:
            assert "typer" not in fast[2], f"{argv} loaded {fast[2]}"
        else:
            assert "typer" in fast[2], argv


def test_an_empty_registry_and_a_missing_repository(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    for argv in (["status", "--all"], ["list"]):
        for repo in (tmp_path / "r", tmp_path / "missing"):
            fast = _run("unitmgr.entry", [*argv, "--repo", str(repo)], ROOT)
            assert fast[:2] == _run("unitmgr.cli", [*argv, "--repo", str(repo)], ROOT)[:2]
            assert fast[2] == [], f"{argv} loaded {fast[2]}"
    code, stdout, _ = _run("unitmgr.entry", ["list", "--repo", str(tmp_path / "missing")], ROOT)
    assert code == 1 and json.loads(stdout)["code"] == "not-a-git-repository"


def _answer(function: Callable[..., object], *args: object, **options: object) -> object:
    try:
        return function(*args, **options)
    except ToolError as error:
        return error.document()


def test_an_empty_registry_is_answered_as_the_views_answer_it(sandbox: Sandbox) -> None:
    """The empty registry's own answer (unitmgr/quick_reads.py) against the views' for the
    same repository — with no config, a valid one and an invalid one (its `config_warning`
    the same in both) — and a file in `units/`
    that is no record file (`.x.json`, `x.txt`) is no unit to either."""
    from unitmgr import quick_reads
    from unitmgr.views import observe
    from unitmgr.workspace import Workspace

    units = sandbox.common_dir / "orchestrate" / "units"
    units.mkdir(parents=True)
    (units / ".hidden.json").write_text("{}")
    (units / "notes.txt").write_text("")
    repo, config = str(sandbox.repo), sandbox.repo / ".unitmgr.toml"
    options = {"repo": repo, "lock_timeout": "30", "format_name": "json"}
    for text, valid in ((None, True), ("stuck_minutes = 3\n", True), ("bogus = 1\n", False)):
        if text is not None:
            config.write_text(text)  # (tomllib imports typing: only a file costs that)
        workspace = Workspace.open(repo)
        listed = _answer(quick_reads.list_units, prs=False, **options)
        assert listed == _answer(observe.list_units, workspace), text
        status = _answer(quick_reads.status_all, **options)
        viewed = _answer(observe.status_all, workspace)
        assert isinstance(status, dict) and isinstance(viewed, dict)
        assert {**status, "observed_at": "T"} == {**viewed, "observed_at": "T"}, text
        # SPEC 3.16: a read reports a bad config, never fails on it.
        assert status["ok"] is True, status
        assert ("config_warning" not in status) is valid, status
        assert valid or status["config_warning"]["key"] == "bogus", status
        for argv in (["status", "--all"], ["list", "--format", "table"]):  # and in a process
            code, out, loaded = _run("unitmgr.entry", _argv(argv, sandbox.repo), ROOT)
            assert code == 0, (text, argv)
            assert valid or "config warning" in out or "config_warning" in out, (text, out)
            if text is None and "table" not in argv:  # a table's renderer may load typing
                assert loaded == [], (argv, loaded)
            assert not set(loaded) & set(HEAVY), (text, argv, loaded)


def test_only_plain_spellings_are_parsed() -> None:
    assert simple_options(["--all", "--repo", "r"], _STATUS_ALL) == {"all": True, "repo": "r"}
    assert simple_options(["--repo=r", "--prs"], _LIST) == {"repo": "r", "prs": True}
    assert simple_options(["--repo", "a", "--repo", "b"], _LIST) == {}  # a repeat
    assert simple_options(["--all=1"], _STATUS_ALL) == {}  # a flag given a value
    assert simple_options(["--repo", "-x"], _LIST) == {}  # a value that looks like an option
    assert simple_options(["--rep", "r"], _LIST) == {}  # never a prefix
