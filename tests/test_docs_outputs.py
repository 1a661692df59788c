"""The JSON shapes `references/json-output.md` and the orchestrate skill document exist in real
outputs: create (and its dry run), status --unit, status --all, list, dismantle, and the
refusals' `detail` (a failed setup, admission paused) — built once with the script partner.

A documented shape is read as the doc writes it: `{ok, status: "a"|"b", key?, obj {a, b},
list: [{a, b}]}`; a key marked `?` is optional and not checked, and a path that reaches `null` or
an empty list in the sample cannot be checked further (the doc allows it there)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.conftest import Sandbox

ROOT = Path(__file__).resolve().parent.parent
JSON_OUTPUT = (ROOT / "references" / "json-output.md").read_text(encoding="utf-8")
SKILL = (ROOT / "skills" / "orchestrate" / "SKILL.md").read_text(encoding="utf-8")
# Words in a shape that name no key: `units: [record + observed + recovery {...}]`.
NOT_KEYS = {"record"}
# Skill paths of outputs this test does not build (intake needs GitHub; a dismantle that abandons
# work needs unpushed commits): json-output.md documents them with those commands.
# Paths the skill names that are not in these outputs: intake's capacity, a forced dismantle's
# recovery, and `notify.command`, a config key (references/config.md), not a JSON path.
SKILL_ELSEWHERE = {("capacity", "slots"), ("abandoned", "recover_with"), ("notify", "command")}

Path_ = tuple[str, ...]


def _balanced(text: str, start: int) -> str:
    """The `{...}` block that opens at `text[start]`."""
    depth = 0
    for at in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[at], 0)
        if depth == 0:
            return text[start : at + 1]
    raise AssertionError(f"unbalanced shape: {text[start : start + 80]}")


def _members(body: str) -> list[str]:
    """The top-level members of an object's body, split at commas and `+` outside nesting."""
    members, depth, quoted, current = [], 0, False, ""
    for character in body:
        if character == '"':
            quoted = not quoted
        elif not quoted and character in "{[(":
            depth += 1
        elif not quoted and character in "}])":
            depth -= 1
        if not quoted and depth == 0 and character in ",+":
            members.append(current)
            current = ""
            continue
        current += character
    return [member.strip() for member in [*members, current] if member.strip()]


def shape_paths(shape: str) -> set[Path_]:
    """Every required key path a documented `{...}` shape names."""
    paths: set[Path_] = set()
    for member in _members(shape.strip()[1:-1]):
        match = re.match(r"([a-z_]+)(\??)", member)
        if not match or match.group(1) in NOT_KEYS:
            continue
        key, optional = match.groups()
        if optional:
            continue
        paths.add((key,))
        rest = re.sub(r"\([^)]*\)", "", member[match.end() :])  # a remark in parentheses
        if "[" in rest and ("{" not in rest or rest.index("[") < rest.index("{")):
            # A list: its element's shape, written `[{...}]` or `[name + other {...}]`.
            inner = rest[rest.index("[") + 1 : rest.rindex("]")].strip()
            if "{" in inner:  # `[cleanup entries]` or `[...]` names no keys
                child = inner if inner.startswith("{") else "{" + inner + "}"
                paths |= {(key, *path) for path in shape_paths(child)}
        elif "{" in rest:
            child = _balanced(rest, rest.index("{"))
            paths |= {(key, *path) for path in shape_paths(child)}
    return paths


def _bullet(heading: str) -> str:
    """The text of the json-output.md bullet that starts with `- heading`, sub-bullets and all."""
    start = JSON_OUTPUT.index(f"\n- {heading}") + 1
    following = re.compile(r"\n- |\n\n").search(JSON_OUTPUT, start + 2)
    return JSON_OUTPUT[start : following.start() if following else len(JSON_OUTPUT)]


def _shape_after(text: str, marker: str) -> str:
    """The first `{...}` block after `marker` in `text`."""
    at = text.index(marker) + len(marker)
    return _balanced(text, text.index("{", at))


def _member_after(text: str, marker: str) -> str:
    """`key {...}` written in prose right after `marker`, as the shape `{key {...}}`."""
    at = text.index(marker) + len(marker)
    return "{" + text[at : text.index("{", at)] + _shape_after(text, marker) + "}"


def check(document: Any, path: Path_) -> bool | None:
    """True when `path` exists in `document` (in some element of a list), False when it does
    not, None when a `null` or an empty list on the way leaves it uncheckable."""
    if not path:
        return True
    if isinstance(document, list):
        found = [check(item, path) for item in document]
        return None if not found else (True if True in found else (None in found and None))
    if not isinstance(document, dict):
        return False
    if path[0] not in document:
        return False
    value = document[path[0]]
    if len(path) == 1:
        return True
    if value is None or value == []:
        return None
    return check(value, path[1:])


def dotted(text: str) -> set[Path_]:
    """The `a.b.c` key paths written in backticks (file names excluded)."""
    found = re.findall(r"`([a-z_]+(?:\.[a-z_]+)+)`", text)
    return {tuple(name.split(".")) for name in found if not name.endswith((".md", ".json"))}


def _anywhere(documents: list[Any], path: Path_) -> Any:
    """The object in `documents` (at any depth) where `path` starts, or {} when there is none."""
    stack = list(documents)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if check(item, path):
                return item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return {}


def _row(code: str) -> str:
    return next(line for line in JSON_OUTPUT.splitlines() if line.startswith(f"| `{code}` |"))


def test_every_documented_json_path_is_in_a_real_output(sandbox: Sandbox) -> None:
    dry = sandbox.create("u1", "--dry-run")
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    outputs = {
        "dry": dry.document,
        "create": created.document,
        "status": sandbox.unit("status", "--unit", "u1").document,
        "all": sandbox.unit("status", "--all").document,
        "list": sandbox.unit("list").document,
    }
    setup_failed = sandbox.create("u2", setup="echo from-setup; exit 3")
    admission = sandbox.create("u3", max_active="1")
    outputs["dismantle"] = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1").document
    assert setup_failed["code"] == "setup-failed" and admission["code"] == "admission-paused"
    assert outputs["dismantle"]["ok"] is True, outputs["dismantle"]

    status_all = _bullet("`unit status --all`")
    expectations: list[tuple[str, Path_, Any]] = []

    def expect(label: str, prefix: Path_, document: Any, shape: str) -> None:
        expectations.extend((label, prefix + path, document) for path in shape_paths(shape))

    create_bullet = _bullet("`unit create` →")
    shapes = [
        ("unit create", (), "create", _shape_after(create_bullet, "→")),
        ("create's unit", ("unit",), "create", _member_after(create_bullet, "the record with `")),
        ("create --dry-run", (), "dry", _shape_after(_bullet("`unit create --dry-run`"), "→")),
        ("unit list", (), "list", _shape_after(_bullet("`unit list`"), "→")),
        ("status --unit", (), "status", _shape_after(_bullet("`unit status --unit ID` →"), "→")),
        ("status --all", (), "all", _shape_after(status_all, "→")),
        ("status --all unit", ("units",), "all", _shape_after(status_all, "each unit is")),
        ("status --all pair", ("units", "pair"), "all", _shape_after(status_all, "`pair`:")),
        (
            "status --all worktree",
            ("units", "worktree"),
            "all",
            _shape_after(status_all, "`{present: false}` or"),
        ),
        ("unit dismantle", (), "dismantle", _shape_after(_bullet("`unit dismantle` →"), "→")),
    ]
    for label, prefix, output, shape in shapes:
        expect(label, prefix, outputs[output], shape)
    # A refusal's detail: admission paused carries the capacity that intake documents, and a
    # failed new create the rollback detail.
    capacity = _shape_after(_bullet("`unit intake` →"), "capacity")
    expect("admission-paused detail", (), admission["detail"], capacity)
    failed = _shape_after(create_bullet, "A new create that fails")
    expect("failed create detail", ("detail",), setup_failed.document, failed)
    expectations += [
        ("setup-failed row", p, setup_failed.document) for p in dotted(_row("setup-failed"))
    ]
    # The skill's `a.b` paths: each in some real output, at any depth.
    missing_option = sandbox.create("u4", reason=None, scope=None)  # SKILL's `detail.missing`
    assert missing_option["code"] == "missing-option", missing_option.stdout
    documents = [*outputs.values(), setup_failed.document, admission.document]
    documents.append(missing_option.document)
    for path in dotted(SKILL) - SKILL_ELSEWHERE:
        expectations.append((f"skill: {'.'.join(path)}", path, _anywhere(documents, path)))

    missing = [
        f"{label}: {'.'.join(path)}"
        for label, path, document in expectations
        if check(document, path) is False
    ]
    checked = [e for e in expectations if check(e[2], e[1])]
    assert missing == [], "\n".join(missing)
    assert len(checked) > 80, len(checked)
    assert setup_failed["detail"]["cause"]["output_tail"].strip() == "from-setup"
