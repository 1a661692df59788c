"""The agent-facing docs match the CLI exactly (SPEC 6)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer.main

from pair.cli import app as pair_app
from unitmgr.cli import app as unit_app

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([*(ROOT / "skills").rglob("*.md"), *(ROOT / "references").rglob("*.md")])
NEWCOMER_DOCS = [ROOT / "README.md", *DOCS]  # what a newcomer reads: README first
FENCE = re.compile(r"```[a-z]*\n(.*?)```", re.DOTALL)
SPAN = re.compile(r"`([^`\n]+)`")
INVOCATION = re.compile(r"^(?:\$ )?(unit|pair) ([a-z][a-z-]*)((?: .*)?)$")


def invocations(text: str) -> list[tuple[str, str, str]]:
    """`unit <command> <options>` written as a command: a line of a fenced block, or a code
    span whose command word is followed by options (or nothing)."""
    found = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s#\s.*$", "", line)  # a shell comment is prose
            match = INVOCATION.match(line.strip())
            if match:
                found.append(match.groups())
    for span in SPAN.findall(FENCE.sub("", text)):
        match = INVOCATION.match(span.strip())
        if match:
            rest = match.group(3).split()
            if not rest or rest[0].startswith("--") or rest[0] in ("...", "…"):
                found.append(match.groups())
    return found


def cli_commands() -> dict[str, dict[str, set[str]]]:
    found: dict[str, dict[str, set[str]]] = {}
    for name, app in (("unit", unit_app), ("pair", pair_app)):
        group = typer.main.get_command(app)
        found[name] = {
            command_name: {
                opt for param in command.params for opt in param.opts if opt.startswith("--")
            }
            for command_name, command in group.commands.items()  # type: ignore[attr-defined]
        }
    return found


def test_every_command_and_option_named_in_the_docs_exists() -> None:
    commands = cli_commands()
    problems = []
    for doc in NEWCOMER_DOCS:
        for program, command, rest in invocations(doc.read_text()):
            if command not in commands[program]:
                problems.append(f"{doc.name}: `{program} {command}` is not a command")
                continue
            unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "", rest)
            for option in re.findall(r"(?<![\w-])--[a-z][a-z-]*", unquoted):
                if option not in commands[program][command] | {"--help"}:
                    problems.append(f"{doc.name}: `{program} {command}` has no {option}")
    assert not problems, "\n".join(problems)


def test_every_cli_command_is_documented() -> None:
    text = "\n".join(doc.read_text() for doc in DOCS)
    for program, commands in cli_commands().items():
        for command in commands:
            assert f"{program} {command}" in text, f"`{program} {command}` is undocumented"


def test_skills_have_front_matter() -> None:
    for skill in (ROOT / "skills").rglob("SKILL.md"):
        head = skill.read_text().split("---")
        assert head[0] == "" and "name:" in head[1] and "description:" in head[1], skill


ERROR_CLASSES = {"ToolError", "UsageError", "StateError", "RetryableError"}


def _codes_in_source() -> set[str]:
    codes: set[str] = set()
    for package in ("registry", "pair", "unitmgr"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                raising = isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Name) and node.func.id in ERROR_CLASSES)
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "__init__")
                )
                if (
                    raising
                    and isinstance(node, ast.Call)
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and re.fullmatch(r"[a-z]+(-[a-z]+)*", node.args[0].value)
                ):
                    codes.add(node.args[0].value)
                if isinstance(node, ast.Dict):
                    for key, value in zip(node.keys, node.values, strict=True):
                        if (
                            isinstance(key, ast.Constant)
                            and key.value == "code"
                            and isinstance(value, ast.Constant)
                            and isinstance(value.value, str)
                        ):
                            codes.add(value.value)
    return codes


def test_every_code_in_the_source_is_in_the_table() -> None:
    table = (ROOT / "references" / "json-output.md").read_text()
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.MULTILINE))
    missing = sorted(_codes_in_source() - documented - {"no-pair"})
    assert not missing, f"codes missing from references/json-output.md: {missing}"


def test_the_skill_names_the_commands_without_lock_timeout() -> None:
    """SKILL.md's claim about `--lock-timeout` matches the CLI: the commands it exempts are
    exactly those without the option, and the default it states is the CLI's."""
    import re

    import typer.main

    from unitmgr.cli import whole_app

    root = typer.main.get_command(whole_app())
    without = sorted(
        name
        for name, command in root.commands.items()
        if not any("--lock-timeout" in parameter.opts for parameter in command.params)
    )
    text = (ROOT / "skills" / "orchestrate" / "SKILL.md").read_text()
    claim = re.search(r"every command but (.+?) takes `--lock-timeout SECONDS` \(default (\d+)\)",
                      " ".join(text.split()))  # fmt: skip
    assert claim is not None
    assert sorted(re.findall(r"`unit ([a-z-]+)`", claim.group(1))) == without
    defaults = {
        parameter.default
        for command in root.commands.values()
        for parameter in command.params
        if "--lock-timeout" in parameter.opts
    }
    assert defaults == {claim.group(2)}, defaults


# -- every claim a newcomer checks (issue 22 item 5): options by name, defaults -------------------

# Options written in the docs that belong to other programs (git, npm, the partner CLIs, the
# test runner): never a `unit`/`pair` option, so not looked up there.
FOREIGN_OPTIONS = {
    # bench/status_batch.py's own (references/benchmarks.md)
    "--keep", "--reuse",
    # git
    "--ignored", "--untracked-files", "--no-ext-diff", "--no-optional-locks", "--no-track",
    "--receive-pack", "--upload-pack",
    # the partner CLIs (references/headless.md)
    "--agent", "--disable", "--mode", "--no-chrome", "--permission-mode", "--prompt-file",
    "--session-id", "--strict-mcp-config", "--variant", "--version",
    "--durations",  # pytest
    "--install-completion", "--show-completion",  # Typer's, which unit and pair do not take
}  # fmt: skip


def every_cli_option() -> set[str]:
    return {
        option
        for program in cli_commands().values()
        for options in program.values()
        for option in options
    } | {"--help"}


def option_spans(text: str) -> list[str]:
    """Each `--option` a code span (or a fenced line) opens with: what a reader types."""
    spans = SPAN.findall(FENCE.sub("", text))
    return [match.group(1) for span in spans if (match := re.match(r"(--[a-z][a-z-]*)", span))]


def test_every_option_a_newcomer_reads_exists_with_that_spelling() -> None:
    """An option named on its own in prose (`--max-held`, `--task-file -`) is an option of some
    `unit` or `pair` command, spelt as the CLI spells it (a command line with its command is
    checked per command above)."""
    known = every_cli_option() | FOREIGN_OPTIONS
    problems = [
        f"{doc.relative_to(ROOT)}: `{option}` is no unit or pair option"
        for doc in NEWCOMER_DOCS
        for option in option_spans(doc.read_text())
        if option not in known
    ]
    assert not problems, "\n".join(sorted(set(problems)))


def _defaults_by_option() -> dict[str, set[str]]:
    """Each option's defaults across every command: the parameter's default, and the number
    its help gives as the fallback (`default: config max_active, else 2`)."""
    from unitmgr.cli import whole_app

    found: dict[str, set[str]] = {}
    for app in (whole_app(), pair_app):
        for command in typer.main.get_command(app).commands.values():  # type: ignore[attr-defined]
            for parameter in command.params:
                for option in (opt for opt in parameter.opts if opt.startswith("--")):
                    values = found.setdefault(option, set())
                    if parameter.default not in (None, False, ()):
                        values.add(_number(str(parameter.default)))
                    help_text = " ".join((getattr(parameter, "help", "") or "").split())
                    for said in re.findall(r"default[^)]*?(?:else|:) (\d[\d.]*)\)", help_text):
                        values.add(_number(said))
    return found


def _number(text: str) -> str:
    return text[:-2] if re.fullmatch(r"\d+\.0", text) else text


DEFAULT_CLAIM = re.compile(r"`(--[a-z][a-z-]*)(?: [^`]*)?` \(defaults? (\d[\d.]*)")


def test_every_default_a_newcomer_reads_is_the_clis() -> None:
    """`--option …` (default N) in README, skills and references is the CLI's default for
    that option (on every command that takes it)."""
    defaults = _defaults_by_option()
    claims = []
    for doc in NEWCOMER_DOCS:
        for option, value in DEFAULT_CLAIM.findall(" ".join(doc.read_text().split())):
            claims.append((doc.relative_to(ROOT), option, _number(value)))
    assert len(claims) >= 5, claims
    wrong = [
        f"{doc}: {option} (default {value}); the CLI's: {sorted(defaults.get(option, ()))}"
        for doc, option, value in claims
        if value not in defaults.get(option, set())
    ]
    assert not wrong, "\n".join(wrong)


def test_every_config_default_in_the_table_is_the_loaders() -> None:
    """references/config.md's table: each key's stated default is the one the loader applies
    with no config file (`none`: no value; `all`: every event; `2, 3`: one per key listed)."""
    import json

    from unitmgr.config import ProjectConfig

    empty = ProjectConfig(None, Path("/nonexistent/local.toml"), {}, {})
    table = (ROOT / "references" / "config.md").read_text()
    rows = re.findall(r"^\| (`[^|]+`) \| [^|]+ \| ([^|]+) \|", table, re.MULTILINE)
    checked = 0
    for keys, stated in rows:
        names = re.findall(r"`([a-z_.]+)`", keys)
        values = [value.strip().strip("`") for value in stated.split(", ")]
        if len(values) == 1:
            values *= len(names)
        assert len(values) == len(names), (names, stated)
        for key, value in zip(names, values, strict=True):
            actual = empty.value(key)
            if value == "none":
                assert actual is None, (key, actual)
            elif value == "all":
                assert isinstance(actual, (list, tuple)) and len(actual) > 1, (key, actual)
            else:
                expected = json.loads(value)
                assert actual == expected or list(actual) == expected, (key, value, actual)
            checked += 1
    assert checked >= 20, checked
