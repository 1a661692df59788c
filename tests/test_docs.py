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
    for doc in DOCS:
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
