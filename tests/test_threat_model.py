"""The threat model (SPEC 2.5, 8): the test plays a hostile executor.

Every executor can write the git common dir, so it can plant unit records. These tests plant
records naming the main checkout, an outside directory with a process running in it, another
unit's worktree (and its branch and pair state), and the base branch, then run the lead's
routine commands — forced and unforced dismantles, restaff — and prove from full snapshots that
nothing the records do not own was deleted, killed or rewritten. And secrets an executor prints
appear nowhere unitmgr writes, while an `ssh://git@…` URL in a task reaches the executor exactly
as written and survives a crashed create's resume.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import CLI_OUTPUTS, Sandbox, git, write_record


def tree(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """Every file under `root` (links as their target text) with its sha256."""
    found = {}
    for directory, names, files in os.walk(root):
        names[:] = [n for n in names if os.path.join(directory, n) not in skip]
        for name in files:
            path = Path(directory, name)
            if path.is_symlink():
                found[str(path)] = "link:" + os.readlink(path)
            else:
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


class World:
    """The lead's repository, a real unit (the victim), an outside directory with a process."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        created = sandbox.create("victim", model="cat > /dev/null; echo ok")
        assert created.code == 0, created.stdout
        sandbox.wait_turn("victim")
        self.victim = sandbox.record("victim")
        self.outside = sandbox.root / "outside"
        self.outside.mkdir()
        (self.outside / "precious.txt").write_text("not unitmgr's\n")
        self.process = subprocess.Popen(["sleep", "300"], cwd=self.outside)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()

    def snapshot(self) -> dict[str, Any]:
        repo = self.sandbox.repo
        orchestrate = str(self.sandbox.registry)
        return {
            # The main checkout and its git dir, except the registry the commands journal in.
            "main": tree(repo, skip=(orchestrate, str(repo / ".git" / "logs"))),
            "victim": tree(Path(self.victim["worktree"])),
            "outside": tree(self.outside),
            "branches": git(repo, "for-each-ref", "--format=%(refname) %(objectname)"),
            "worktrees": git(repo, "worktree", "list", "--porcelain"),
            "origin": git(repo, "ls-remote", "origin"),
            "process": psutil.pid_exists(self.process.pid)
            and psutil.Process(self.process.pid).status() != psutil.STATUS_ZOMBIE,
            "victim_record": self.sandbox.record("victim"),
        }

    def plant(self, unit_id: str, **fields: Any) -> None:
        plant(self.sandbox, unit_id, **fields)


def plant(sandbox: Sandbox, unit_id: str, **fields: Any) -> None:
    """A hostile record: merged, proved, owning everything it names."""
    defaults = {
        "lead": "human",
        "resources": {"task_file": True, "worktree": True, "local_branch": True},
        "pr": {"number": 1, "state": "merged", "proved": True, "head_sha": "0" * 40},
    }
    write_record(sandbox, unit_id, **{**defaults, **fields})


@pytest.fixture
def world(sandbox: Sandbox) -> Any:
    built = World(sandbox)
    yield built
    built.close()


def hostile_records(world: World) -> dict[str, dict[str, Any]]:
    sandbox, victim = world.sandbox, world.victim
    return {
        "main-checkout": {"worktree": str(sandbox.repo), "branch": "main", "base": "dev"},
        "outside-dir": {"worktree": str(world.outside), "branch": "feat/outside"},
        "other-unit": {"worktree": victim["worktree"], "branch": victim["branch"]},
        "other-pair": {
            "worktree": str(sandbox.root / "gone"),
            "branch": "feat/other-pair",
            "pair": {"state_dir": victim["pair"]["state_dir"]},
        },
        "base-branch": {"worktree": str(sandbox.root / "nowhere"), "branch": "main"},
        "origin-default": {
            "worktree": str(sandbox.root / "nowhere2"),
            "branch": "main",
            "base": "dev",
        },
        "victim-branch": {"worktree": str(sandbox.root / "elsewhere"), "branch": victim["branch"]},
    }


COMMANDS = {
    "forced": lambda unit_id: ["dismantle", "--unit", unit_id, "--force", unit_id],
    "unforced": lambda unit_id: ["dismantle", "--unit", unit_id],
    "restaff": lambda unit_id: [
        "restaff", "--unit", unit_id, "--lead", "human", "--partner", "script",
        "--model", "cat", "--reason", "threat model",
    ],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_unit_command_destroys_what_a_hostile_record_names(world: World, command: str) -> None:
    sandbox = world.sandbox
    records = hostile_records(world)
    for unit_id, fields in records.items():
        world.plant(unit_id, **fields)
    before = world.snapshot()
    assert before["process"] is True
    for unit_id in records:
        result = sandbox.unit(*COMMANDS[command](unit_id))
        assert result.code != 0, (unit_id, result.stdout)
        if command != "restaff" or unit_id != "other-pair":
            assert result["next"], result.stdout
        after = world.snapshot()
        assert after == before, f"{command} of {unit_id} changed what it does not own"
    # The check refuses by proof, not by reflex: the victim itself still dismantles.
    for unit_id in records:
        (sandbox.registry / "units" / f"{unit_id}.json").unlink()
    gone = sandbox.unit("dismantle", "--unit", "victim", "--force", "victim")
    assert gone.code == 0, gone.stdout
    assert not Path(world.victim["worktree"]).exists()


def test_a_forced_dismantle_names_the_untrusted_field(world: World) -> None:
    sandbox = world.sandbox
    cases = {
        "main-checkout": ("worktree", "the main worktree"),
        "outside-dir": ("worktree", "no worktree of this repository"),
        "other-unit": ("worktree", "unit victim's worktree"),
        "other-pair": ("pair.state_dir", "no proven worktree"),
        "base-branch": ("branch", "the recorded base"),
        "origin-default": ("branch", "main is never deleted by unitmgr"),
        "victim-branch": ("branch", "unit victim records it"),
    }
    records = hostile_records(world)
    git(sandbox.repo, "remote", "set-head", "origin", "main")
    for unit_id, (field, reported) in cases.items():
        world.plant(unit_id, **records[unit_id])
        result = sandbox.unit("dismantle", "--unit", unit_id, "--force", unit_id)
        assert result.code == 1 and result["code"] == "record-untrusted", result.stdout
        cause = result["detail"]["cause"]
        assert cause["field"] == field and reported in cause["git"], (unit_id, cause)
        (sandbox.registry / "units" / f"{unit_id}.json").unlink()  # one hostile record at a time


SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-" + "PlantedAnthropicKey0123456789",
    "OPENAI_API_KEY": "planted-openai-key-value-42",
    "FOO_SECRET": "planted-foo-secret-value",
}


def test_planted_secrets_appear_nowhere_after_a_full_unit_life(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    prints = "cat > /dev/null; echo $ANTHROPIC_API_KEY $OPENAI_API_KEY $FOO_SECRET"
    validation = "echo $FOO_SECRET $OPENAI_API_KEY"
    created = sandbox.create("u1", model=prints, validation=validation, setup=f"{prints} >&2")
    assert created.code == 0, created.stdout
    receipt = sandbox.wait_turn("u1")
    assert receipt["status"] == "replied" and "***" in receipt["reply"]
    sandbox.unit("status", "--unit", "u1")
    sandbox.unit("status", "--all")
    assert sandbox.unit("addendum", "--unit", "u1", "--text", "more").code == 0
    sandbox.wait_turn("u1")
    assert sandbox.unit("verify", "--unit", "u1").code == 0
    dismantled = sandbox.unit("dismantle", "--unit", "u1", "--force", "u1")
    assert dismantled.code == 0 and dismantled["archive"], dismantled.stdout
    leaks = []
    for path in sandbox.common_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            leaks += [f"{path}: {name}" for name, v in SECRETS.items() if v.encode() in data]
    assert not leaks, leaks
    assert any(Path(dismantled["archive"]).rglob("*.log"))  # the transcripts were archived
    for output in CLI_OUTPUTS:
        assert not any(value in output for value in SECRETS.values()), output[-500:]


def test_an_ssh_url_reaches_the_executor_unchanged_and_a_crashed_create_resumes(
    sandbox: Sandbox,
) -> None:
    url = "ssh://git@github.com/o/r.git"
    scp = "git@github.com:o/r.git"
    sandbox.task.write_text(f"Mirror {url} (also known as {scp}).\n")
    args = sandbox.create_args("u1", model="cat > /dev/null; echo ok")
    crash = {"UNITMGR_TEST_HOOKS": "1", "UNITMGR_TEST_CRASH_AFTER": "create:pair-init:started"}
    crashed = sandbox.unit(*args, env={**os.environ, **crash})
    assert crashed.code == -9
    assert json.loads((sandbox.registry / "units" / "u1.json").read_text())["task"].startswith(
        f"Mirror {url}"
    )
    resumed = sandbox.unit(*args)
    assert resumed.code == 0 and resumed["status"] == "resumed", resumed.stdout
    prompt = Path(sandbox.wait_turn("u1")["prompt_file"]).read_text()
    assert f"Mirror {url} (also known as {scp})." in prompt


def test_remote_deletion_is_leased_and_recover_with_names_both_branches(sandbox: Sandbox) -> None:
    from tests.test_create import PUSHING_MODEL

    assert sandbox.create("u1", model=PUSHING_MODEL).code == 0
    sandbox.wait_turn("u1")
    pushed = git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1").split()[0]
    args = ["dismantle", "--unit", "u1", "--force", "u1"]
    crash = {"UNITMGR_TEST_HOOKS": "1", "UNITMGR_TEST_CRASH_AFTER": "dismantle:worktree:done"}
    assert sandbox.unit(*args, env={**os.environ, **crash}).code == -9
    abandoned = sandbox.record("u1")["abandoned"]
    assert abandoned["remote_head"] == pushed
    assert abandoned["recover_with"] == [
        f"git branch feat/u1 {abandoned['head']}",
        f"git push origin {pushed}:refs/heads/feat/u1",
    ]
    # Someone pushes to the branch after the dismantle recorded what it abandons.
    other = sandbox.root / "other-clone"
    git(sandbox.root, "clone", "-q", "-b", "feat/u1", str(sandbox.origin), str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "pushed after the decision")
    git(other, "push", "-q", "origin", "HEAD:feat/u1")
    moved = git(other, "rev-parse", "HEAD")
    resumed = sandbox.unit(*args)
    assert resumed.code == 0, resumed.stdout
    (remote,) = [entry for entry in resumed["done"] if entry["step"] == "remote-branch"]
    assert remote["detail"]["skipped"] == f"remote moved from {pushed} to {moved}"
    assert git(sandbox.repo, "ls-remote", "origin", "refs/heads/feat/u1").split()[0] == moved
    assert resumed["abandoned"]["recover_with"] == [f"git branch feat/u1 {abandoned['head']}"]


# -- the executor forges git's own files -------------------------------------------------------


def linked_worktree(sandbox: Sandbox, name: str, branch: str) -> Path:
    path = sandbox.root / name
    git(sandbox.repo, "worktree", "add", "-q", "-b", branch, str(path))
    return path


def refused(sandbox: Sandbox, unit_id: str) -> dict[str, Any]:
    result = sandbox.unit("dismantle", "--unit", unit_id, "--force", unit_id)
    assert result.code == 1 and result["code"] == "record-untrusted", result.stdout
    cause: dict[str, Any] = result["detail"]["cause"]
    return cause


def refs(sandbox: Sandbox) -> tuple[str, str]:
    return (
        git(sandbox.repo, "for-each-ref", "--format=%(refname) %(objectname)"),
        git(sandbox.repo, "ls-remote", "origin"),
    )


@pytest.mark.parametrize("target", ["outside", "registry"])
def test_a_forged_gitdir_file_proves_no_directory(sandbox: Sandbox, target: str) -> None:
    linked_worktree(sandbox, "wt1", "u1")
    admin = sandbox.common_dir / "worktrees" / "wt1"
    if target == "outside":
        victim = sandbox.root / "victim"
        victim.mkdir()
        (victim / "precious.txt").write_text("not unitmgr's\n")
    else:  # the registry itself, with a back-link so that git would remove it
        victim = sandbox.registry
        victim.mkdir(parents=True, exist_ok=True)
        (victim / ".git").write_text(f"gitdir: {admin}\n")
    (admin / "gitdir").write_text(f"{victim / '.git'}\n")
    plant(sandbox, "u1", worktree=str(victim), branch="u1")

    def state() -> tuple[Any, ...]:
        # The registry's event log and journals are what the refused command may write.
        files = tree(victim)
        if target == "registry":  # what the refused command itself writes there is not compared
            files = {k: "" for k in files if not k.endswith(("events.jsonl", ".lock"))}
            files = {k: v for k, v in files.items() if "/journal" not in k}
        return files, refs(sandbox)

    before = state()
    cause = refused(sandbox, "u1")
    assert cause["field"] == "worktree", cause
    assert state() == before


def test_a_worktree_swapped_for_a_symlink_reaps_and_removes_nothing(sandbox: Sandbox) -> None:
    worktree = linked_worktree(sandbox, "wt2", "u2")
    victim = sandbox.root / "victim2"
    victim.mkdir()
    (victim / "precious.txt").write_text("not unitmgr's\n")
    shutil.rmtree(worktree)
    worktree.symlink_to(victim)
    process = subprocess.Popen(["sleep", "300"], cwd=victim)
    try:
        plant(sandbox, "u2", worktree=str(worktree), branch="u2")
        before = tree(victim), refs(sandbox)
        cause = refused(sandbox, "u2")
        assert cause["field"] == "worktree" and "symlink" in cause["git"], cause
        assert process.poll() is None, "a process outside every worktree was killed"
        assert (tree(victim), refs(sandbox)) == before
        assert worktree.is_symlink()
    finally:
        process.kill()
        process.wait()


def test_an_unreadable_record_leaves_nothing_proven(world: World) -> None:
    sandbox, victim = world.sandbox, world.victim
    (sandbox.registry / "units" / "victim.json").write_text("{garbage")
    world.plant("thief", worktree=victim["worktree"], branch=victim["branch"])
    before = tree(Path(victim["worktree"])), refs(sandbox)
    cause = refused(sandbox, "thief")
    assert cause["field"] == "registry" and "unit victim" in cause["git"], cause
    assert cause["recorded"].endswith("victim.json"), cause
    assert (tree(Path(victim["worktree"])), refs(sandbox)) == before


def test_forged_refs_and_reflogs_protect_main_and_origins_default(sandbox: Sandbox) -> None:
    repo = sandbox.repo
    assert sandbox.origin is not None
    # origin's default is `trunk`; the executor hides that and forges main's creation.
    git(repo, "push", "-q", "origin", "HEAD:trunk")
    git(sandbox.origin, "symbolic-ref", "HEAD", "refs/heads/trunk")
    git(repo, "fetch", "-q", "origin")
    git(repo, "branch", "-q", "trunk", "origin/trunk")
    git(repo, "checkout", "-q", "-b", "dev")
    git(repo, "update-ref", "-d", "--no-deref", "refs/remotes/origin/HEAD")
    reflog = sandbox.common_dir / "logs" / "refs" / "heads" / "main"
    sha = git(repo, "rev-parse", "main")
    reflog.write_text(
        f"{'0' * 40} {sha} Executor <e@x> 1700000000 +0000\tbranch: Created from HEAD\n"
    )
    assert (
        git(repo, "reflog", "show", "--format=%gs", "main")
        .splitlines()[-1]
        .startswith("branch: Created")
    )
    for unit_id, branch, reported in (
        ("take-main", "main", "never deleted"),
        ("take-trunk", "trunk", "origin's default branch"),
    ):
        plant(
            sandbox,
            unit_id,
            worktree=str(sandbox.root / f"no-{unit_id}"),
            branch=branch,
            base="dev",
        )
        before = refs(sandbox)
        cause = refused(sandbox, unit_id)
        assert cause["field"] == "branch" and reported in cause["git"], (unit_id, cause)
        assert refs(sandbox) == before
        (sandbox.registry / "units" / f"{unit_id}.json").unlink()


# -- a recorded process group that may be a stranger's -----------------------------------------


def dead_identity(pgid: int, *, create_time: float) -> Any:
    from registry.processes import ProcessIdentity, is_alive

    finished = subprocess.Popen(["true"])
    finished.wait()
    identity = ProcessIdentity(finished.pid, create_time, pgid, "sh")
    assert not is_alive(identity)
    return identity


def test_a_dead_identitys_pgid_never_reaches_a_strangers_group() -> None:
    from registry.processes import OWN_CHILD, kill_tree

    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)  # pid == its pgid
    try:
        started = psutil.Process(stranger.pid).create_time()
        assert (
            kill_tree(dead_identity(stranger.pid, create_time=started - 50), proof=OWN_CHILD) == []
        )
        assert stranger.poll() is None, "a stranger's group was killed"
    finally:
        stranger.kill()
        stranger.wait()


def test_group_members_older_than_the_recorded_process_are_left_alone() -> None:
    from registry.processes import OWN_CHILD, kill_tree

    # A group whose leader is gone: its member started before the process recorded with it.
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $!"], start_new_session=True, stdout=subprocess.PIPE
    )
    assert leader.stdout is not None
    member = psutil.Process(int(leader.stdout.readline()))
    leader.wait()
    try:
        later = member.create_time() + 50
        assert kill_tree(dead_identity(leader.pid, create_time=later), proof=OWN_CHILD) == []
        assert member.is_running() and member.status() != psutil.STATUS_ZOMBIE
    finally:
        member.kill()
        member.wait(timeout=10)
