"""Bad input (SPEC 3.0, 8): a clear reason, the exit code, one JSON document, nothing written."""

from __future__ import annotations

import pytest

from tests.conftest import Sandbox, run_cli

# (id, arguments after the sandbox's valid create arguments are applied, exit code, code)
CREATE_CASES = [
    ("bad-unit-id", {"unit": "../escape"}, 2, "invalid-unit-id"),
    ("unit-id-too-long", {"unit": "a" * 65}, 2, "invalid-unit-id"),
    ("missing-worktree", {"worktree": None}, 2, "missing-option"),
    # relative: taken from the current directory (the sandbox root), so inside the repository
    ("relative-worktree-inside", {"worktree": "repo/nested"}, 2, "worktree-inside-worktree"),
    ("worktree-inside-repo", {"worktree": "{repo}/nested"}, 2, "worktree-inside-worktree"),
    ("branch-with-dots", {"branch": "feat/a..b"}, 2, "invalid-branch"),
    ("branch-leading-dash", {"branch": "-x"}, 2, "invalid-branch"),
    ("branch-option-injection", {"branch": "--upload-pack=evil"}, 2, "missing-value"),
    ("missing-branch", {"branch": None}, 2, "missing-option"),
    ("unknown-partner", {"partner": "gemini"}, 2, "unknown-partner"),
    ("unknown-lead", {"lead": "bard"}, 2, "unknown-lead"),
    (
        "lead-is-partner",
        {"lead": "claude", "partner": "claude", "effort": "high"},
        2,
        "lead-is-partner",
    ),
    ("effort-missing", {"partner": "codex", "model": None}, 2, "effort-required"),
    ("effort-for-script", {"effort": "high"}, 2, "effort-refused"),
    ("identity-for-script", {"identity": "work"}, 2, "identity-refused"),
    ("script-without-model", {"model": None}, 2, "script-needs-model"),
    ("script-command-unknown", {"model": "no-such-tool-anywhere"}, 2, "script-command-not-found"),
    ("issue-zero", {"issue": "0"}, 2, "invalid-issue"),
    ("issue-text", {"issue": "seven"}, 2, "invalid-issue"),
    ("max-active-zero", {"max-active": "0"}, 2, "invalid-limit"),
    ("max-held-huge", {"max-held": "10001"}, 2, "invalid-limit"),
    ("max-active-past-int-parsing", {"max-active": "9" * 5000}, 2, "invalid-limit"),
    ("paths-absolute", {"paths": "/etc/**"}, 2, "invalid-paths"),
    ("paths-dotdot", {"paths": "src/../../x"}, 2, "invalid-paths"),
    ("task-file-missing", {"task-file": "{root}/nope.md"}, 2, "task-file-missing"),
    ("task-file-empty", {"task-file": "{root}/empty.md"}, 2, "task-file-empty"),
    ("task-empty", {"task-file": None, "task": " \n"}, 2, "task-file-empty"),
    ("task-twice", {"task": "inline too"}, 2, "task-given-twice"),
    ("lock-timeout-text", {"lock-timeout": "soon"}, 2, "invalid-lock-timeout"),
    ("value-looks-like-option", {"scope": "--validation"}, 2, "missing-value"),
]


@pytest.mark.parametrize(
    ("case", "overrides", "exit_code", "code"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES]
)
def test_bad_create_input_is_refused_without_writing(
    sandbox: Sandbox, case: str, overrides: dict, exit_code: int, code: str
) -> None:
    (sandbox.root / "empty.md").write_text("  \n")
    values = {
        key: value.format(repo=sandbox.repo, root=sandbox.root) if isinstance(value, str) else value
        for key, value in overrides.items()
    }
    unit_id = values.pop("unit", "u1")
    args = sandbox.create_args(
        unit_id, **{key.replace("-", "_"): value for key, value in values.items()}
    )
    before = sandbox.snapshot()
    result = sandbox.unit(*args)
    assert result.code == exit_code, result.stdout + result.stderr
    assert result.document is not None, "exactly one JSON document on stdout"
    assert result["ok"] is False and result["code"] == code
    assert result["reason"] and isinstance(result["reason"], str)
    assert sandbox.snapshot() == before


OTHER_CASES = [
    ("unknown-command", ["frobnicate"], 2, "usage"),
    ("unknown-option", ["list", "--bogus"], 2, "usage"),
    ("status-needs-a-target", ["status"], 2, "usage"),
    ("status-both-targets", ["status", "--unit", "u1", "--all"], 2, "usage"),
    ("status-bad-format", ["status", "--all", "--format", "xml"], 2, "invalid-format"),
    ("status-bad-id", ["status", "--unit", "a/b"], 2, "invalid-unit-id"),
    ("status-unknown-unit", ["status", "--unit", "ghost"], 1, "no-such-unit"),
    (
        "dismantle-force-mismatch",
        ["dismantle", "--unit", "u1", "--force", "u2"],
        2,
        "force-mismatch",
    ),
    (
        "dismantle-unknown-unit",
        ["dismantle", "--unit", "ghost", "--force", "ghost"],
        1,
        "no-such-unit",
    ),
    ("dismantle-missing-value", ["dismantle", "--unit"], 2, "missing-value"),
]


@pytest.mark.parametrize(
    ("case", "args", "exit_code", "code"), OTHER_CASES, ids=[c[0] for c in OTHER_CASES]
)
def test_bad_input_to_other_commands(
    sandbox: Sandbox, case: str, args: list, exit_code: int, code: str
) -> None:
    before = sandbox.snapshot()
    result = run_cli("unit", *args, cwd=sandbox.repo)
    assert result.code == exit_code, result.stdout + result.stderr
    assert result["ok"] is False and result["code"] == code
    assert sandbox.snapshot() == before


def test_not_a_git_repository(tmp_path) -> None:
    result = run_cli("unit", "list", "--repo", str(tmp_path), cwd=tmp_path)
    assert result.code == 1 and result["code"] == "not-a-git-repository"
    assert result["reason"] == f"not a git repository: {tmp_path}"


def test_help_is_the_only_text_output(sandbox: Sandbox) -> None:
    result = run_cli("unit", "--help", cwd=sandbox.repo)
    assert result.code == 0 and result.document is None
    assert "create" in result.stdout and "dismantle" in result.stdout
    sub = run_cli("unit", "create", "--help", cwd=sandbox.repo)
    assert sub.code == 0 and "--worktree" in sub.stdout
    # SPEC 3.0 Help: a bare `unit` is its help, exit 0 (no longer a usage error).
    bare = run_cli("unit", cwd=sandbox.repo)
    assert bare.code == 0 and bare.stdout == result.stdout


def test_unreadable_and_too_new_records_are_refused_but_listed(sandbox: Sandbox) -> None:
    units = sandbox.registry / "units"
    units.mkdir(parents=True)
    (units / "torn.json").write_text('{"schema_version": 1, "unit_id": "torn", ')
    (units / "future.json").write_text('{"schema_version": 99, "unit_id": "future"}\n')
    before = sandbox.snapshot()
    for unit_id, code in (("torn", "record-unreadable"), ("future", "record-too-new")):
        result = sandbox.unit("status", "--unit", unit_id)
        assert result.code == 2 and result["code"] == code
        create = sandbox.create(unit_id)
        assert create.code == 2 and create["code"] == code
        unforced = sandbox.unit("dismantle", "--unit", unit_id)
        assert unforced.code == 2 and unforced["code"] == code
    listed = sandbox.unit("list")
    assert listed.code == 0
    assert {u["unit_id"]: u["lifecycle"] for u in listed["units"]} == {
        "future": "unreadable",
        "torn": "unreadable",
    }
    assert sandbox.unit("status", "--all").code == 0
    admission = sandbox.create("u1")
    assert admission.code == 1 and admission["code"] == "admission-paused"
    assert sandbox.snapshot() == before
    removed = sandbox.unit("dismantle", "--unit", "torn", "--force", "torn")
    assert removed.code == 0, removed.stdout
    assert not (units / "torn.json").exists() and (units / "future.json").exists()


@pytest.mark.parametrize(
    ("args", "help_command"),
    [(["--bogus"], "unit --help"), (["create", "--bogus"], "unit create --help")],
)
def test_a_usage_error_names_the_help_that_lists_the_options(
    sandbox: Sandbox, args: list[str], help_command: str
) -> None:
    result = run_cli("unit", *args, cwd=sandbox.repo)
    assert result.code == 2 and result["code"] == "usage", result.stdout
    assert result["next"] == help_command
