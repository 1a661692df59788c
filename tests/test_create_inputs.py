"""Create in one try (SPEC 3.3 "Revision 3 inputs", 3.16): every missing option named at once,
a relative `--worktree`, the task inline or on standard input, and the config's create defaults
(`partner`, `model`, `effort`, `validation`, `paths`), each a flag overrides — all through the
real CLI.
"""

from __future__ import annotations

import os
import shlex

from tests.conftest import FakePartners, Sandbox, run_cli

SCRIPT = "cat > /dev/null; echo hello > GREETING.md; echo done"
ROOMY = {"max_active": "9", "max_held": "9"}


def _fill(next_step: str, values: dict[str, str]) -> list[str]:
    """The words of a `next` command (after `unit`), each `<PLACEHOLDER>` replaced by the value
    `values` gives the option before it."""
    words = shlex.split(next_step)
    assert words[0] == "unit", next_step
    filled = [
        values[words[at - 1]] if word.startswith("<") and word.endswith(">") else word
        for at, word in enumerate(words)
    ]
    return filled[1:]


def test_one_create_with_several_options_missing_names_them_all(sandbox: Sandbox) -> None:
    before = sandbox.snapshot()
    refused = sandbox.unit("create", "--branch", "feat/u1", "--partner", "script", "--scope", "s")
    assert refused.code == 2 and refused["code"] == "missing-option", refused.stdout
    missing = ["--unit", "--worktree", "--base", "--validation", "--lead", "--reason", "--task"]
    assert refused["detail"] == {"missing": [*missing, "--model"]}
    for flag in missing:
        assert flag in refused["reason"]
    assert "--task (or --task-file)" in refused["reason"]
    assert "--worktree (or worktree_root in the config)" in refused["reason"]
    # `next` is the same create with a quoted placeholder for each missing option, in --help order
    assert refused["next"] == (
        "unit create --unit '<ID>' --worktree '<PATH>' --branch feat/u1 --base '<BRANCH>' "
        "--scope s --validation '<COMMAND>' --lead '<LEAD>' --partner script --reason '<TEXT>' "
        f"--task '<TEXT>' --model '<COMMAND>' --repo {sandbox.repo}"
    )
    assert sandbox.snapshot() == before  # nothing written
    # Pasted unfilled, a placeholder is no value: the same refusal, nothing made of '<TEXT>'.
    unfilled = run_cli("unit", *shlex.split(refused["next"])[1:], cwd=sandbox.root)
    assert unfilled.code == 2 and unfilled["detail"] == refused["detail"], unfilled.stdout
    assert unfilled["next"] == refused["next"]
    assert sandbox.snapshot() == before
    # Filled in, that one line creates the unit.
    values = {
        "--unit": "u1",
        "--worktree": str(sandbox.worktree("u1")),
        "--base": "main",
        "--validation": "test -f GREETING.md",
        "--lead": "human",
        "--reason": "tests",
        "--task": "Add a greeting file.",
        "--model": SCRIPT,
    }
    words = _fill(refused["next"], values)
    created = run_cli("unit", *words, cwd=sandbox.root)
    assert created.code == 0, created.stdout + created.stderr
    assert sandbox.record("u1")["task"] == "Add a greeting file."

    # A lone missing effort keeps its own code; beside another missing option it is listed too.
    alone = sandbox.create("u2", partner="codex", model=None)
    assert alone["code"] == "effort-required", alone.stdout
    beside = sandbox.create("u2", partner="codex", model=None, reason=None)
    assert beside["detail"] == {"missing": ["--reason", "--effort"]}, beside.stdout
    # A blank value is missing too, and a bare `unit create` names everything.
    bare = sandbox.unit("create")
    assert bare.code == 2 and bare["detail"]["missing"][:2] == ["--unit", "--worktree"]
    assert sandbox.create("u2", worktree=" ")["detail"] == {"missing": ["--worktree"]}


def test_restaff_names_every_missing_option_at_once(sandbox: Sandbox) -> None:
    assert sandbox.create("u1").code == 0
    sandbox.wait_turn("u1")
    before = sandbox.record("u1")
    refused = sandbox.unit("restaff", "--unit", "u1", "--partner", "script")
    assert refused.code == 2 and refused["code"] == "missing-option", refused.stdout
    assert refused["detail"] == {"missing": ["--lead", "--reason", "--model"]}
    assert refused["reason"] == "restaff requires --lead, --reason and --model"
    assert refused["next"] == (
        f"unit restaff --unit u1 --partner script --repo {sandbox.repo} --lead '<LEAD>' "
        "--reason '<TEXT>' --model '<COMMAND>'"
    )
    unfilled = run_cli("unit", *shlex.split(refused["next"])[1:], cwd=sandbox.root)
    assert unfilled["detail"] == refused["detail"], unfilled.stdout  # a placeholder is no value
    values = {"--lead": "human", "--reason": "another command", "--model": SCRIPT}
    restaffed = run_cli("unit", *_fill(refused["next"], values), cwd=sandbox.root)
    assert restaffed.code == 0, restaffed.stdout + restaffed.stderr
    assert sandbox.record("u1")["staffing"]["history"] != before["staffing"]["history"]


def test_a_relative_worktree_is_taken_from_the_current_directory(sandbox: Sandbox) -> None:
    created = sandbox.create("u1", worktree="worktrees/u1")  # the CLI runs in sandbox.root
    assert created.code == 0, created.stdout + created.stderr
    assert sandbox.record("u1")["worktree"] == str(sandbox.worktree("u1"))
    assert (sandbox.worktree("u1") / ".git").is_file()

    elsewhere = sandbox.root / "elsewhere"
    elsewhere.mkdir()
    args = sandbox.create_args("u2", worktree="../worktrees/u2", **ROOMY)
    from_elsewhere = run_cli("unit", *args, "--repo", str(sandbox.repo), cwd=elsewhere)
    assert from_elsewhere.code == 0, from_elsewhere.stdout + from_elsewhere.stderr
    assert sandbox.record("u2")["worktree"] == str(sandbox.worktree("u2"))
    sandbox.wait_turn("u2")  # its first turn ends before the snapshot, not during it

    # Inside a worktree is still refused, nothing written; `next` puts it beside the repository.
    before = sandbox.snapshot()
    args = sandbox.create_args("u3", worktree="nested/u3", **ROOMY)
    inside = run_cli("unit", *args, "--repo", str(sandbox.repo), cwd=sandbox.repo)
    assert inside.code == 2 and inside["code"] == "worktree-inside-worktree", inside.stdout
    assert str(sandbox.repo / "nested" / "u3") in inside["reason"]
    assert sandbox.snapshot() == before
    beside = sandbox.root / "repo.units" / "u3"
    assert f"--worktree {beside} " in inside["next"], inside["next"]
    moved = run_cli("unit", *shlex.split(inside["next"])[1:], cwd=sandbox.repo)
    assert moved.code == 0, moved.stdout + moved.stderr
    assert sandbox.record("u3")["worktree"] == str(beside)


def test_the_task_inline_and_on_standard_input(sandbox: Sandbox) -> None:
    inline = sandbox.create("u1", task_file=None, task="  Inline task.\n")
    assert inline.code == 0, inline.stdout + inline.stderr
    assert sandbox.record("u1")["task"] == "Inline task."
    manifest = sandbox.registry / "tasks" / "u1.md"
    assert manifest.read_text() == "Inline task.\n"

    piped = sandbox.unit(*sandbox.create_args("u2", task_file="-", **ROOMY), input=b"Piped.\n")
    assert piped.code == 0, piped.stdout + piped.stderr
    assert sandbox.record("u2")["task"] == "Piped."
    for unit in ("u1", "u2"):  # their first turns end before the snapshot, not during it
        sandbox.wait_turn(unit)

    before = sandbox.snapshot()
    args = sandbox.create_args("u3", task_file="-", **ROOMY)
    big = sandbox.unit(*args, input=b"x" * (1024 * 1024 + 1))
    assert big.code == 2 and big["code"] == "input-too-large", big.stdout
    assert "standard input" in big["reason"]
    empty = sandbox.unit(*args)  # stdin is /dev/null
    assert empty.code == 2 and empty["code"] == "task-file-empty", empty.stdout
    assert "standard input" in empty["reason"]
    blank = sandbox.create("u3", task_file=None, task=" \n", **ROOMY)
    assert blank["code"] == "task-file-empty" and "--task" in blank["reason"], blank.stdout
    both = sandbox.create("u3", task="also inline", **ROOMY)
    assert both.code == 2 and both["code"] == "task-given-twice", both.stdout
    assert "--task " not in both["next"] and f"--task-file {sandbox.task}" in both["next"]
    assert sandbox.snapshot() == before
    exact = sandbox.unit(*sandbox.create_args("u3", task_file="-", **ROOMY), input=b"x" * 2**20)
    assert exact.code == 0, exact.stdout  # exactly 1 MiB is within the bound


def test_a_resume_compares_an_inline_task_with_the_recorded_one(sandbox: Sandbox) -> None:
    args = sandbox.create_args("u1", task_file=None, task="The task.")
    crash = {
        **os.environ,
        "UNITMGR_TEST_HOOKS": "1",
        "UNITMGR_TEST_CRASH_AFTER": "create:worktree:done",
    }
    assert sandbox.unit(*args, env=crash).code == -9
    differs = sandbox.create("u1", task_file=None, task="Another task.")
    assert differs.code == 1 and differs["code"] == "cannot-resume", differs.stdout
    assert differs["detail"]["field"] == "task"
    both = sandbox.create("u1", task="The task.")
    assert both["code"] == "task-given-twice", both.stdout
    resumed = sandbox.create("u1", task_file=None, task="The task.")
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
    assert sandbox.create("u2", task_file="-", **ROOMY).code == 2  # empty stdin: not a resume


CONFIG = f"""lead = "human"
partner = "script"
model = "{SCRIPT}"
validation = "test -f GREETING.md"
paths = ["GREETING.md", "docs/**"]
worktree_root = "../worktrees/{{unit}}"
max_active = 9
max_held = 9
"""


def _minimal(unit_id: str, *extra: str) -> list[str]:
    """A create that names only what the config cannot supply."""
    return [
        "create", "--unit", unit_id, "--branch", f"feat/{unit_id}", "--base", "main",
        "--scope", "a greeting file", "--reason", "tests", "--task", "Add a greeting file.",
        *extra,
    ]  # fmt: skip


def test_the_config_supplies_the_create_defaults_once_its_commands_are_approved(
    sandbox: Sandbox,
) -> None:
    shared = sandbox.repo / ".unitmgr.toml"
    shared.write_text(CONFIG)
    settings = sandbox.unit("config")["settings"]
    for key, value in (("partner", "script"), ("validation", "test -f GREETING.md")):
        assert settings[key]["value"] == value and settings[key]["source"] == "repository"
    assert settings["paths"] == {
        "value": ["GREETING.md", "docs/**"],
        "source": "repository",
        "file": str(shared),
    }
    assert settings["effort"] == {"value": None, "source": "default", "file": None}
    # `validation` (what verify runs) and a script partner's `model` are shell commands.
    assert settings["validation"]["approval"] == settings["model"]["approval"] == "unapproved"

    before = sandbox.snapshot()
    refused = sandbox.unit(*_minimal("u1"))
    assert refused.code == 1 and refused["code"] == "config-unapproved", refused.stdout
    assert refused["detail"]["key"] == "validation" and refused["detail"]["file"] == str(shared)
    assert refused["next"] == f"unit config --approve --repo {sandbox.repo}"
    assert sandbox.unit(*_minimal("u1"), "--dry-run")["code"] == "config-unapproved"
    assert sandbox.snapshot() == before

    approved = sandbox.unit("config", "--approve")
    assert [entry["key"] for entry in approved["approved"]] == ["validation", "model"]
    created = sandbox.unit(*_minimal("u1"))
    assert created.code == 0, created.stdout + created.stderr
    record = sandbox.record("u1")
    assert record["worktree"] == str(sandbox.worktree("u1"))
    assert record["validation"] == "test -f GREETING.md"
    assert record["paths"] == ["GREETING.md", "docs/**"]
    assert record["staffing"]["current"]["partner"] == "script"
    assert record["staffing"]["current"]["model"] == SCRIPT

    # A changed model is a changed command: refused until approved again.
    shared.write_text(CONFIG.replace("echo done", "echo changed"))
    changed = sandbox.unit(*_minimal("u2"))
    assert changed["code"] == "config-unapproved" and changed["detail"]["key"] == "model"


def test_a_flag_overrides_the_config_and_needs_no_approval(sandbox: Sandbox) -> None:
    (sandbox.repo / ".unitmgr.toml").write_text(CONFIG)  # nothing of it approved
    flags = ("--validation", "true", "--model", SCRIPT, "--paths", "src/**")
    created = sandbox.unit(*_minimal("u1", *flags))
    assert created.code == 0, created.stdout + created.stderr
    record = sandbox.record("u1")
    assert record["validation"] == "true" and record["paths"] == ["src/**"]
    assert record["staffing"]["current"]["model"] == SCRIPT


def test_the_configs_model_and_effort_go_with_its_partner(
    sandbox: Sandbox, fake_partners: FakePartners
) -> None:
    """(A fake codex on PATH: a dry run looks the partner's binary up, as the create does.)"""
    (sandbox.repo / ".unitmgr.toml").write_text(
        'lead = "human"\npartner = "codex"\nmodel = "gpt-5"\neffort = "high"\n'
        'validation = "true"\nworktree_root = "../worktrees/{unit}"\n'
    )
    assert sandbox.unit("config", "--approve").code == 0  # the validation
    plan = sandbox.unit(*_minimal("u1", "--dry-run"))
    assert plan.code == 0, plan.stdout
    pair_init = next(step for step in plan["plan"] if step["step"] == "pair-init")
    assert pair_init["detail"] == {"partner": "codex", "model": "gpt-5", "effort": "high"}
    lower = sandbox.unit(*_minimal("u1", "--dry-run", "--effort", "low"))
    assert next(s for s in lower["plan"] if s["step"] == "pair-init")["detail"]["effort"] == "low"
    # Another partner on the command line takes neither (codex's effort would be refused, and its
    # model would run as the script's command line).
    other = sandbox.unit(*_minimal("u1", "--dry-run", "--partner", "script", "--model", "cat"))
    assert other.code == 0, other.stdout
    detail = next(s for s in other["plan"] if s["step"] == "pair-init")["detail"]
    assert detail == {"partner": "script", "model": "cat", "effort": None}
    no_model = sandbox.unit(*_minimal("u1", "--dry-run", "--partner", "script"))
    assert no_model["code"] == "script-needs-model", no_model.stdout


def test_config_values_are_refused_like_their_flags(sandbox: Sandbox) -> None:
    shared = sandbox.repo / ".unitmgr.toml"
    base = 'lead = "human"\nvalidation = "true"\nworktree_root = "../worktrees/{unit}"\n'
    shared.write_text(base + 'partner = "gemini"\n')
    assert sandbox.unit("config", "--approve").code == 0
    unknown = sandbox.unit(*_minimal("u1"))
    assert unknown.code == 2 and unknown["code"] == "unknown-partner", unknown.stdout
    assert f"partner 'gemini' from {shared}" in unknown["reason"]
    for text, key in (
        ("partner = 3\n", "partner"),
        ('effort = ""\n', "effort"),
        ("validation = true\n", "validation"),
        ('paths = "src/**"\n', "paths"),
        ('paths = ["../outside"]\n', "paths"),
        ('paths = [":(top)x"]\n', "paths"),
    ):
        shared.write_text(base.replace('validation = "true"\n', "") + text)
        invalid = sandbox.unit(*_minimal("u1"))
        assert invalid.code == 2 and invalid["code"] == "config-invalid", (text, invalid.stdout)
        assert invalid["detail"]["key"] == key and invalid["detail"]["file"] == str(shared)
    shared.write_text(base + 'partner = "script"\neffort = "high"\nmodel = "cat"\n')
    assert sandbox.unit("config", "--approve").code == 0
    refused = sandbox.unit(*_minimal("u1"))
    assert refused["code"] == "effort-refused", refused.stdout  # as --effort high would be
    assert "effort 'high' from" in refused["reason"]
