"""Fuzzing (hypothesis): record decoding never crashes, and invalid arguments never write.

The CLI examples run the real entry point (`unitmgr.cli.main`) in-process, against one real
repository per test, and compare everything a refused command must leave untouched.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry.records import (
    RecordTooNew,
    RecordUnreadable,
    UnitRecord,
    decode_record,
    encode_record,
)
from unitmgr.cli import main

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=20,
)
FIELDS = (
    "schema_version",
    "unit_id",
    "worktree",
    "branch",
    "base",
    "lifecycle",
    "issue",
    "paths",
    "resources",
    "staffing",
    "pair",
    "journal",
)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_decoding_arbitrary_json_never_crashes(value: object) -> None:
    try:
        record = decode_record(json.dumps(value))
    except (RecordUnreadable, RecordTooNew):
        return
    assert isinstance(record, UnitRecord)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=12))
def test_decoding_near_records_never_crashes(fields: dict) -> None:
    base = {
        "schema_version": 1,
        "unit_id": "u1",
        "worktree": "/w",
        "branch": "b",
        "base": "main",
        "lifecycle": "working",
    }
    try:
        record = decode_record(json.dumps({**base, **fields}))
    except (RecordUnreadable, RecordTooNew):
        return
    # Whatever decodes, encodes back to the same document (unknown keys included).
    assert json.loads(encode_record(record)) == json.loads(
        encode_record(decode_record(encode_record(record)))
    )


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_decoding_arbitrary_bytes_never_crashes(data: bytes) -> None:
    try:
        decode_record(data)
    except (RecordUnreadable, RecordTooNew):
        pass


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "i"], check=True)
    (tmp_path / "task.md").write_text("task\n")
    return repo


def _state(repo: Path) -> tuple:
    refs = subprocess.run(
        ["git", "-C", str(repo), "for-each-ref"], capture_output=True, text=True
    ).stdout
    worktrees = subprocess.run(
        ["git", "-C", str(repo), "worktree", "list", "--porcelain"], capture_output=True, text=True
    ).stdout
    registry = repo / ".git" / "orchestrate"
    files = sorted(str(p) for p in registry.rglob("*") if p.is_file() and "/locks/" not in str(p))
    return refs, worktrees, files, sorted(p.name for p in repo.parent.iterdir())


def _create(repo: Path, **changes: str) -> list[str]:
    options = {
        "unit": "u1",
        "worktree": str(repo.parent / "wt"),
        "branch": "feat/ok",
        "base": "main",
        "scope": "s",
        "validation": "v",
        "lead": "human",
        "partner": "script",
        "reason": "r",
        "task-file": str(repo.parent / "task.md"),
        "model": "cat",
    }
    options.update(changes)
    args = ["create", "--repo", str(repo)]
    for key, value in options.items():
        args += [f"--{key}", value]
    return args


def _refused_without_writing(repo: Path, argv: list[str], code: str | None = None) -> None:
    before = _state(repo)
    output = io.StringIO()
    with contextlib.redirect_stdout(output), contextlib.redirect_stderr(io.StringIO()):
        exit_code = main(argv)
    document = json.loads(output.getvalue())
    assert exit_code in (1, 2) and document["ok"] is False and document["code"], document
    assert code is None or document["code"] == code, document
    assert _state(repo) == before


BAD_ID = st.one_of(
    st.text(min_size=65, max_size=80, alphabet="abc"),
    st.text(min_size=1, max_size=10).map(lambda t: "../" + t),
    st.text(min_size=1, max_size=10).map(lambda t: "." + t),
    st.text(min_size=1, max_size=10).map(lambda t: "a/" + t),
    st.text(min_size=1, max_size=10).map(lambda t: "a b" + t),
    st.just(""),
).filter(lambda value: not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}", value))
BAD_BRANCH = st.one_of(
    st.sampled_from(
        [
            "a..b",
            "a~b",
            "a^b",
            "a:b",
            "a b",
            "a\\b",
            "a?b",
            "a*b",
            "a[b",
            "a@{b",
            "-x",
            "x.lock",
            "x/",
            "/x",
            "x.",
            ".x",
            "@",
            "a//b",
        ]
    ),
    st.text(min_size=1, max_size=8, alphabet="abc").map(lambda t: t + ".."),
)
BAD_PATH = st.one_of(
    st.text(min_size=1, max_size=10, alphabet="abc/*").map(lambda t: "/" + t),
    st.text(min_size=0, max_size=10, alphabet="abc/*").map(lambda t: "../" + t),
    st.text(min_size=1, max_size=10, alphabet="abc").map(lambda t: f"{t}/../x"),
    st.just(" "),
)
NOT_A_NUMBER = st.text(min_size=1, max_size=6, alphabet="ab.-x ").filter(
    lambda t: not t.strip().isdigit()
)
BAD_ISSUE = st.one_of(st.integers(max_value=0).map(str), NOT_A_NUMBER)
BAD_LIMIT = st.one_of(BAD_ISSUE, st.integers(min_value=10_001).map(str))
# Relative paths that, taken from the repository's top level, land inside it (SPEC 3.3: a
# relative --worktree resolves against the current directory; inside a worktree is refused).
BAD_WORKTREE = st.text(min_size=1, max_size=12, alphabet="abc/.").filter(
    lambda t: (
        not t.startswith("/")
        and os.path.normpath(t) != "."
        and not t.startswith("..")
        and not os.path.normpath(t).startswith("..")
    )
)
QUICK = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@QUICK
@given(BAD_ID)
def test_invalid_unit_ids_never_write(tmp_path: Path, unit_id: str) -> None:
    repo = tmp_path / "repo"
    if not repo.exists():
        _repo(tmp_path)
    for argv in (
        _create(repo, unit=unit_id),
        ["status", "--repo", str(repo), "--unit", unit_id],
        ["dismantle", "--repo", str(repo), "--unit", unit_id, "--force", unit_id],
    ):
        if unit_id.startswith("-"):
            continue  # a value that looks like an option is a usage error before it is an id
        _refused_without_writing(repo, argv)


@QUICK
@given(BAD_BRANCH)
def test_invalid_branch_names_never_write(tmp_path: Path, branch: str) -> None:
    repo = tmp_path / "repo"
    if not repo.exists():
        _repo(tmp_path)
    _refused_without_writing(repo, _create(repo, branch=branch))


@QUICK
@given(BAD_PATH)
def test_invalid_write_scopes_never_write(tmp_path: Path, pattern: str) -> None:
    repo = tmp_path / "repo"
    if not repo.exists():
        _repo(tmp_path)
    _refused_without_writing(repo, _create(repo, paths=pattern))


@QUICK
@given(
    st.one_of(
        st.tuples(BAD_ISSUE, st.just("issue")),
        st.tuples(BAD_LIMIT, st.sampled_from(["max-active", "max-held"])),
    )
)
def test_invalid_numbers_never_write(tmp_path: Path, bad: tuple[str, str]) -> None:
    value, option = bad
    repo = tmp_path / "repo"
    if not repo.exists():
        _repo(tmp_path)
    _refused_without_writing(repo, _create(repo, **{option: value}))


@QUICK
@given(BAD_WORKTREE)
def test_relative_worktrees_inside_the_repository_never_write(
    tmp_path: Path, worktree: str
) -> None:
    repo = tmp_path / "repo"
    if not repo.exists():
        _repo(tmp_path)
    with contextlib.chdir(repo):  # resolved from here: inside the main worktree
        _refused_without_writing(
            repo, _create(repo, worktree=worktree), code="worktree-inside-worktree"
        )
