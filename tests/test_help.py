"""SPEC 3.0 Help: every option of every `unit` and `pair` subcommand explains itself, `--version`
and typer's completion work, a bare program name prints its help, and the stored help pages
that `unit --help` prints without Typer (SPEC 7 start-up) are exactly what Typer renders."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from pair import __version__ as pair_version
from pair.cli import app as pair_app
from pair.cli import main as pair_main
from unitmgr import __version__ as unit_version
from unitmgr import help_pages, help_text
from unitmgr.cli import app as unit_app
from unitmgr.entry import main as unit_main

ROOT = Path(__file__).resolve().parent.parent
# A value's metavariable is given explicitly (TEXT only for free text): Typer's own type names
# (`<str>`, INTEGER) say nothing about what goes there.
VAGUE = {"<str>", "STR", "INTEGER", "<int>", "FLOAT", "<float>"}
# SPEC 3.3: required for a new unit (a resume may leave them out, so Typer cannot require them).
CREATE_NEW_UNIT = ("--branch", "--base", "--scope", "--validation", "--lead", "--partner")
CREATE_NEW_UNIT += ("--reason", "--task", "--task-file")
# Required by SPEC 3.2/3.5/3.8 and checked by the command (its own `missing-option` refusal).
CHECKED_REQUIRED = {("restaff", "--lead"), ("restaff", "--partner"), ("restaff", "--reason")}
CHECKED_REQUIRED |= {("create", "--unit")}  # with every other missing option (SPEC 3.3)
CHECKED_REQUIRED |= {("merge", "--head"), ("intake", "--label")}


def _options(app: typer.Typer) -> list[tuple[str, Any, str]]:
    """(command, option, its help column) for every option of every subcommand of `app`."""
    group = typer.main.get_command(app)
    found = []
    for name, command in getattr(group, "commands", {}).items():
        context = command.make_context(name, [], resilient_parsing=True)
        for parameter in command.params:
            if parameter.param_type_name != "option" or parameter.name == "help":
                continue
            record = parameter.get_help_record(context)
            found.append((name, parameter, record[1] if record else ""))
    return found


def test_every_option_has_help_a_telling_metavar_and_its_required_mark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    problems = []
    for program, app in (("unit", unit_app), ("pair", pair_app)):
        options = _options(app)
        assert len(options) > 40 if program == "unit" else len(options) > 20
        for command, option, help_column in options:
            where = f"{program} {command} {option.opts[0]}"
            if not (option.help or "").strip():
                problems.append(f"{where}: no help")
            if not option.is_flag and (option.metavar is None or option.metavar in VAGUE):
                problems.append(f"{where}: metavar {option.metavar!r}")
            if option.required and "[required]" not in help_column:
                problems.append(f"{where}: required but not marked")
            new_unit = command == "create" and option.opts[0] in CREATE_NEW_UNIT
            if new_unit and "Required for a new unit" not in help_column:
                problems.append(f"{where}: SPEC 3.3 requires it for a new unit")
            checked = (command, option.opts[0]) in CHECKED_REQUIRED
            if checked and "Required." not in help_column:
                problems.append(f"{where}: the SPEC requires it")
    assert problems == []
    for main in (unit_main, pair_main):  # every command's summary fits: none ends in "..."
        assert main(["--help"]) == 0
        listing = capsys.readouterr().out.split("Commands:")[1]
        assert "..." not in listing and len(listing.splitlines()) > 8
    for app in (unit_app, pair_app):
        root = {name for p in typer.main.get_command(app).params for name in p.opts}
        assert {"--version", "--install-completion", "--show-completion"} <= root


def test_the_stored_help_pages_are_what_typer_renders_now() -> None:
    rendered = help_text.render_pages()
    assert set(rendered) == {"", *getattr(typer.main.get_command(unit_app), "commands", {})}
    for name, page in rendered.items():
        assert help_pages.PAGES.get(name) == page, (
            f"unit {name} --help is stale: run python -m unitmgr.help_text --write"
        )
    # The stored module is exactly what the writer produces (and so ruff-formatted).
    assert help_text.source(rendered) == help_text.STORED.read_text(encoding="utf-8")


def test_version_bare_programs_and_completion(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    installed = importlib.metadata.version("unitmgr")
    assert unit_version == pair_version == installed
    for main in (unit_main, pair_main):
        assert main(["--version"]) == 0
        assert capsys.readouterr().out == installed + "\n"
    assert unit_main([]) == 0
    assert capsys.readouterr().out == help_pages.PAGES[""]
    assert pair_main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: pair [OPTIONS] COMMAND") and "  send " in out
    # A usage error stays one JSON document.
    assert pair_main(["send", "--bogus"]) == 2
    assert json.loads(capsys.readouterr().out)["code"] == "usage"

    # typer's completion: the script for a named shell, and an actual completion request
    # (which the fast entry must hand to Typer, although its command line is empty).
    monkeypatch.setenv("_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION", "1")
    for main, function in ((unit_main, "_unit_completion"), (pair_main, "_pair_completion")):
        with pytest.raises(SystemExit) as exited:
            main(["--show-completion", "bash"])
        assert exited.value.code == 0
        script = capsys.readouterr().out
        assert function in script and "complete -o default -F" in script
    with pytest.raises(SystemExit):  # into the test's own HOME (tests/conftest.py)
        unit_main(["--install-completion", "bash"])
    assert "_unit_completion" in (Path.home() / ".bash_completions" / "unit.sh").read_text()
    assert "unit.sh" in (Path.home() / ".bashrc").read_text()
    capsys.readouterr()
    monkeypatch.setenv("_UNIT_COMPLETE", "complete_bash")  # as the script sets it
    monkeypatch.setenv("COMP_WORDS", "unit dism")
    monkeypatch.setenv("COMP_CWORD", "1")
    with pytest.raises(SystemExit):
        unit_main([])
    assert capsys.readouterr().out.splitlines() == ["dismantle"]


def test_help_is_printed_without_typer_except_on_a_narrow_terminal() -> None:
    script = (
        "import io, os, sys, contextlib\n"
        "from unitmgr.entry import main\n"
        "pages = []\n"
        "for argv in ([], ['--help'], ['create', '--help'], ['--version']):\n"
        "    out = io.StringIO()\n"
        "    with contextlib.redirect_stdout(out):\n"
        "        assert main(argv) == 0\n"
        "    pages.append(out.getvalue())\n"
        "assert 'typer' not in sys.modules, 'the stored pages need no Typer'\n"
        "os.environ['COLUMNS'] = '60'\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    assert main(['create', '--help']) == 0\n"
        "assert 'typer' in sys.modules\n"
        "pages.append(out.getvalue())\n"
        "print(repr(pages))\n"
    )
    env_run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True
    )
    bare, top, create, version, narrow = eval(env_run.stdout)  # a repr of str literals only
    assert bare == top == help_pages.PAGES[""]
    assert create == help_pages.PAGES["create"]
    assert version == unit_version + "\n"
    assert narrow != create and max(len(line) for line in narrow.splitlines()) <= 60
    assert "--task-file FILE" in narrow
