"""Rules the suite keeps so it cannot flake on a busy machine (house rules; issue 15 item 6)."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _commented_lines(source: str) -> set[int]:
    return {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT and token.string.strip("# ")
    }


def _is_sleep(call: ast.Call) -> bool:
    function = call.func
    if isinstance(function, ast.Attribute):
        return function.attr == "sleep" and isinstance(function.value, ast.Name)
    return isinstance(function, ast.Name) and function.id == "sleep"


def fixed_sleeps(source: str) -> list[int]:
    """Lines of `time.sleep(...)` calls that wait a fixed time: outside any polling loop
    (`while`/`for`) and with no comment on the line saying why."""
    tree = ast.parse(source)
    commented = _commented_lines(source)
    found: list[int] = []

    def visit(node: ast.AST, in_loop: bool) -> None:
        waits = isinstance(node, ast.Call) and _is_sleep(node) and not in_loop
        line = getattr(node, "lineno", 0)
        if waits and line not in commented:
            found.append(line)
        for child in ast.iter_child_nodes(node):
            visit(child, in_loop or isinstance(node, ast.While | ast.For | ast.AsyncFor))

    visit(tree, False)
    return found


def test_no_test_waits_for_a_condition_with_a_fixed_sleep() -> None:
    """A sleep may poll (inside a loop, as `wait_until` does) or carry a comment saying why it is
    not synchronization; fakes and partner scripts (tests/fakes/) may sleep freely."""
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if "fakes" in path.relative_to(TESTS).parts:
            continue
        offenders += [
            f"{path.relative_to(TESTS)}:{line}" for line in fixed_sleeps(path.read_text())
        ]
    assert not offenders, f"use wait_until instead of a fixed sleep: {offenders}"


def test_the_sleep_check_tells_polling_from_waiting() -> None:
    waiting = "import time\ndef test():\n    start()\n    time.sleep(0.5)\n    check()\n"
    polling = "import time\ndef wait():\n    while not ready():\n        time.sleep(0.02)\n"
    explained = "import time\ntime.sleep(2)  # it must sit idle for a while, not burn CPU\n"
    assert fixed_sleeps(waiting) == [4]
    assert fixed_sleeps(polling) == []
    assert fixed_sleeps(explained) == []


def test_long_tests_run_first_in_collection_order() -> None:
    from tests.conftest import long_first

    class Item:
        def __init__(self, name: str, marker: str | None) -> None:
            self.name, self.marker = name, marker

        def get_closest_marker(self, name: str) -> object | None:
            return object() if name == self.marker else None

    kinds = [("a", "slow"), ("b", None), ("c", "real"), ("d", "slow"), ("e", None), ("f", "real")]
    items = [Item(name, marker) for name, marker in kinds]
    long_first(items)
    assert [item.name for item in items] == ["c", "f", "a", "d", "b", "e"]


def test_the_long_tests_are_marked_slow() -> None:
    def marked(path: Path, name: str) -> bool:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return any("slow" in ast.unparse(decorator) for decorator in node.decorator_list)
        raise AssertionError(f"{name} not found in {path}")

    assert marked(TESTS / "test_races.py", "test_racing_creates_admit_exactly_max_active")
    assert marked(TESTS / "test_crash.py", "test_a_command_killed_after_each_journal_write_resumes")
