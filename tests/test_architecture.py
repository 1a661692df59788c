"""Architecture rules the code must keep (SPEC 1; references/architecture.md)."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("registry", "pair", "unitmgr")
FORBIDDEN = {
    "registry": {"pair", "unitmgr"},
    "pair": {"unitmgr"},
    "unitmgr": set(),
}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every rule that reads it."""
    return ast.parse(path.read_text(), filename=str(path))


def imported_top_levels(path: Path) -> set[str]:
    tree = parsed(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_import_direction(package: str) -> None:
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_top_levels(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, dotted in full (`from unitmgr import views` gives both
    `unitmgr` and `unitmgr.views`), lazy imports inside functions included."""
    tree = parsed(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


# Inside unitmgr (references/architecture.md): views read and never change a unit, so they import
# no lifecycle and no command; the lifecycle never reaches back up to a command; only a command
# (and the app that assembles them) speaks Typer.
LAYERS = {
    "unitmgr/views": ("unitmgr.lifecycle", "unitmgr.commands", "unitmgr.cli", "typer"),
    "unitmgr/lifecycle": ("unitmgr.commands", "unitmgr.cli", "typer"),
    "registry": ("unitmgr", "pair"),
    "pair": ("unitmgr",),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layers_import_only_downwards(layer: str) -> None:
    for path in sorted((ROOT / layer).rglob("*.py")):
        bad = {
            name
            for name in imported_modules(path)
            for forbidden in LAYERS[layer]
            if name == forbidden or name.startswith(forbidden + ".")
        }
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


# The top of unitmgr: the Typer app, the console entry and the fast reads' bodies sit above the
# commands and views (help_text renders the app for the stored pages); every other
# `unitmgr/*.py` is a base module all layers build on.
ABOVE_THE_BASE = {"cli.py", "entry.py", "quick_reads.py", "help_text.py"}


def test_the_base_modules_import_no_layer_above() -> None:
    above = ("unitmgr.views", "unitmgr.lifecycle", "unitmgr.commands", "unitmgr.cli", "typer")
    for path in sorted((ROOT / "unitmgr").glob("*.py")):
        if path.name in ABOVE_THE_BASE:
            continue
        bad = {
            name
            for name in imported_modules(path)
            for forbidden in above
            if name == forbidden or name.startswith(forbidden + ".")
        }
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


# What unitmgr may use of pair (references/architecture.md): the library API and its paths,
# the partner registry and its adapters, identity homes, the lead markers, the errors. The
# state files, the commands and the runner machinery are pair's own.
PAIR_SURFACE = (
    "pair.api",
    "pair.paths",
    "pair.partners",
    "pair.identity",
    "pair.environment",
    "pair.gitconfig",
    "pair.config_audit",
    "pair.attention",
)


def test_unitmgr_uses_only_the_public_surface_of_pair() -> None:
    for path in sorted((ROOT / "unitmgr").rglob("*.py")):
        reached = {
            name
            for name in imported_modules(path)
            if name.startswith("pair.") and not name.startswith(PAIR_SURFACE)
        }
        # `from pair.api import x` also names `pair.api.x`: the surface's own members.
        assert not reached, f"{path.relative_to(ROOT)} imports {sorted(reached)}: ask pair.api"


def test_the_plain_modules_import_no_command() -> None:
    """Only unitmgr/cli.py assembles the commands; nothing below depends on them."""
    for path in sorted((ROOT / "unitmgr").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative == "unitmgr/cli.py" or relative.startswith("unitmgr/commands/"):
            continue
        bad = {n for n in imported_modules(path) if n.startswith("unitmgr.commands")}
        assert not bad, f"{relative} imports {sorted(bad)}"


@pytest.mark.parametrize("package", PACKAGES)
def test_nobody_imports_click(package: str) -> None:
    for path in sorted((ROOT / package).rglob("*.py")):
        assert "click" not in imported_top_levels(path), path


def test_git_calls_live_in_the_git_modules() -> None:
    allowed = {ROOT / "unitmgr" / "git.py", ROOT / "pair" / "git.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path in allowed:
                continue
            text = path.read_text()
            assert '["git",' not in text and "'git'," not in text, f"{path} runs git directly"


def test_supervisor_imports_neither_gitpython_nor_pygithub() -> None:
    code = (
        "import sys; import pair.supervisor, pair.api;"
        "assert 'git' not in sys.modules and 'github' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.parametrize("args", [["--help"], ["create", "--help"], ["status", "--all"]])
def test_start_up_path_stays_light(args: list[str], tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path / "r")], check=True)
    argv = [*args, "--repo", str(tmp_path / "r")] if args == ["status", "--all"] else args
    code = (
        "import sys\n"
        "from unitmgr.cli import main\n"
        f"code = main({argv!r})\n"
        "heavy = sorted(m for m in ('git', 'github', 'pydantic', 'rich') if m in sys.modules)\n"
        "assert code == 0, code\n"
        "assert not heavy, heavy\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT
    )
    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("module", ["unitmgr", "pair"])
def test_python_dash_m_entry_points(module: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True
    )
    assert completed.returncode == 0 and "Usage" in completed.stdout


def test_journal_step_names_are_the_contract() -> None:
    from unitmgr.steps import CREATE_STEPS, DISMANTLE_STEPS

    assert CREATE_STEPS == (
        "reserve",
        "manifest",
        "worktree",
        "pr-body-exclude",
        "copy-files",
        "setup",
        "pair-init",
        "pair-verify",
        "first-task",
        "working",
    )
    assert DISMANTLE_STEPS == (
        "end-pair",
        "reap",
        "archive",
        "worktree",
        "local-branch",
        "remote-branch",
        "manifest",
        "record",
    )


MODULE_LINES = 400


def test_a_long_module_says_why() -> None:
    """No module over ~400 lines without a reason written in its docstring (one in its first
    lines names "400 lines"); generated help pages are data."""
    unexplained = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            if text.count("\n") <= MODULE_LINES or path.name == "help_pages.py":
                continue
            docstring = ast.get_docstring(ast.parse(text)) or ""
            if "400 lines" not in docstring:
                unexplained.append(str(path.relative_to(ROOT)))
    assert unexplained == [], f"over {MODULE_LINES} lines with no reason given: {unexplained}"


def test_every_module_is_on_the_plan() -> None:
    """references/architecture.md names every module (the commands and the partner adapters
    by their directory): a newcomer finds each one on the plan."""
    plan = (ROOT / "references" / "architecture.md").read_text()
    missing = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py")
        and path.parent.name not in ("commands", "partners")
        and path.name not in plan
    ]
    assert missing == [], f"not on references/architecture.md's plan: {missing}"
