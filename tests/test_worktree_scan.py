"""The worktree facts of `status --all` (views/worktree_scan.py): the one-call status gives the
same answers as the separate `rev-list`/`status`/`diff` calls, and a reusing scanner skips git only
while nothing it watches changed (SPEC 3.4, 7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Sandbox, git, git_verbs, logging_git, run_cli, write_record
from unitmgr import git as unit_git
from unitmgr.views.worktree_scan import WorktreeJob, WorktreeScanner


def _separate_calls(job: WorktreeJob) -> tuple[object, ...]:
    """What the three separate git calls answer for one worktree."""
    counts = unit_git.ahead_behind(job.base_ref, worktree=job.worktree)
    entries = unit_git.status_porcelain(job.worktree)
    committed = unit_git.changed_since_merge_base(job.base_ref, worktree=job.worktree)
    return counts, entries, committed


def _job(sandbox: Sandbox, name: str, base_ref: str = "refs/heads/main") -> WorktreeJob:
    path = sandbox.worktree(name)
    rows = {row.path: row for row in unit_git.list_worktrees(cwd=sandbox.repo)}
    row = rows[str(path)]
    return WorktreeJob(path, base_ref, row.branch, row.head)


def _worktree(sandbox: Sandbox, name: str, branch: str) -> Path:
    path = sandbox.worktree(name)
    git(sandbox.repo, "worktree", "add", "-q", "-b", branch, str(path), "main")
    return path


@pytest.fixture
def shapes(sandbox: Sandbox) -> list[WorktreeJob]:
    """Worktrees in every shape the status header must answer (or give up on) correctly."""
    git(sandbox.repo, "update-ref", "refs/heads/main", "HEAD")
    clean = _worktree(sandbox, "clean", "feat/clean")
    ahead = _worktree(sandbox, "ahead", "feat/a=b.c")  # `=` and `.` in the config key
    (ahead / "new.txt").write_text("x\n")
    git(ahead, "add", "new.txt")
    git(ahead, "commit", "-q", "-m", "ahead")
    (ahead / "README.md").write_text("changed\n")
    git(ahead, "mv", "new.txt", "moved.txt")
    (ahead / "untracked").mkdir()
    (ahead / "untracked" / "file").write_text("u\n")
    # Ignored files and directories: the reusing scanner asks git for them, and must still
    # answer exactly what the plain status does.
    (sandbox.common_dir / "info").mkdir(exist_ok=True)
    (sandbox.common_dir / "info" / "exclude").write_text("*.log\nbuild/\n")
    (ahead / "untracked" / "debug.log").write_text("l\n")
    (ahead / "build").mkdir()
    (ahead / "build" / "out.o").write_text("o\n")
    (ahead / "logs").mkdir()
    (ahead / "logs" / "a.log").write_text("l\n")
    behind = _worktree(sandbox, "behind", "feat/behind")
    own_upstream = _worktree(sandbox, "own", "feat/own")
    git(own_upstream, "config", "branch.feat/own.remote", "origin")
    git(own_upstream, "config", "branch.feat/own.merge", "refs/heads/elsewhere")
    detached = _worktree(sandbox, "detached", "feat/detached")
    git(detached, "checkout", "-q", "--detach")
    (sandbox.repo / "later.txt").write_text("later\n")
    git(sandbox.repo, "add", "later.txt")
    git(sandbox.repo, "commit", "-q", "-m", "base moves")
    git(sandbox.repo, "update-ref", "refs/heads/main", "HEAD")
    del clean, behind
    jobs = [_job(sandbox, name) for name in ("clean", "ahead", "behind", "own", "detached")]
    jobs.append(_job(sandbox, "clean", base_ref="refs/heads/no-such-base"))
    jobs.append(_job(sandbox, "ahead", base_ref="refs/remotes/origin/main"))
    return jobs


def test_one_status_call_answers_what_the_three_calls_do(
    shapes: list[WorktreeJob], sandbox: Sandbox
) -> None:
    found = WorktreeScanner().scan(shapes)
    reusing = WorktreeScanner(reuse=True, common_git_dir=sandbox.common_dir)
    for job, facts, again in zip(shapes, found, reusing.scan(shapes), strict=True):
        counts, entries, committed = _separate_calls(job)
        assert (facts.counts, facts.entries, facts.committed) == (counts, entries, committed), job
        assert again == facts, job
    ahead = found[1]
    assert ahead.counts == (1, 1)
    assert ahead.committed == ["new.txt"]
    assert ahead.entries is not None and "?? untracked/" in ahead.entries


def test_reuse_skips_git_only_while_nothing_changed(sandbox: Sandbox) -> None:
    git(sandbox.repo, "update-ref", "refs/heads/main", "HEAD")
    path = _worktree(sandbox, "w", "feat/w")
    scanner = WorktreeScanner(reuse=True, common_git_dir=sandbox.common_dir)

    def scan() -> tuple[object, int]:
        (facts,) = scanner.scan([_job(sandbox, "w")])
        return facts, scanner.git_runs

    first, runs = scan()
    assert runs == 1
    assert scan() == (first, 0)  # nothing changed: no git at all

    (path / "notes.txt").write_text("new\n")  # a new file moves its directory's mtime
    facts, runs = scan()
    assert runs == 1 and facts.entries == ["?? notes.txt"]
    assert scan()[1] == 0

    (path / "scratch").mkdir()  # an untracked directory: its contents are not watched
    (path / "scratch" / "a").write_text("a\n")
    facts, runs = scan()
    assert runs == 1 and facts.entries == ["?? notes.txt", "?? scratch/"]
    assert scan()[1] == 0
    (path / "scratch" / "b").write_text("b\n")  # changes nothing git shows
    assert scan()[1] == 0
    (path / "scratch" / "a").unlink()
    (path / "scratch" / "b").unlink()
    (path / "scratch").rmdir()

    git(path, "add", "notes.txt")  # the index changes
    facts, runs = scan()
    assert runs == 1 and facts.entries == ["A  notes.txt"]

    git(path, "commit", "-q", "-m", "notes")  # HEAD moves
    facts, runs = scan()
    assert runs == 1 and facts.counts == (1, 0) and facts.committed == ["notes.txt"]

    (sandbox.repo / "base.txt").write_text("b\n")  # the base ref moves, the worktree does not
    git(sandbox.repo, "add", "base.txt")
    git(sandbox.repo, "commit", "-q", "-m", "base")
    git(sandbox.repo, "update-ref", "refs/heads/main", "HEAD")
    facts, runs = scan()
    assert runs == 1 and facts.counts == (1, 1)


def _status_all_logging_git(sandbox: Sandbox, tmp_path: Path) -> tuple[dict, Path]:
    """`unit status --all` with a `git` wrapper first on PATH that logs every call's argv."""
    env, log = logging_git(tmp_path, sandbox.repo)
    result = run_cli(
        "unit", "status", "--all", "--repo", str(sandbox.repo), cwd=sandbox.root, env=env
    )
    assert result.code == 0, result.stdout
    return json.loads(result.stdout), log


def test_status_all_runs_one_git_process_per_clean_worktree(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Counted with a `git` wrapper first on PATH: one `worktree list`, one `rev-parse`, one
    `config --list` for the whole repository (the neutral pins, SPEC 8: memoized, not one per
    unit), and one `status` per unit whose branch is not ahead (no `rev-list`, no `diff`)."""
    git(sandbox.repo, "update-ref", "refs/heads/main", "HEAD")
    for name in ("u1", "u2", "u3"):
        _worktree(sandbox, name, f"feat/{name}")
        write_record(sandbox, name, base_ref="refs/heads/main")
    document, log = _status_all_logging_git(sandbox, tmp_path)
    assert [unit["worktree"]["ahead_of_base"] for unit in document["units"]] == [0, 0, 0]
    verbs = [next(word for word in line.split() if not word.startswith("-") and "/" not in word)
             for line in log.read_text().splitlines()]  # fmt: skip
    assert sorted(verbs) == ["config", "rev-parse", "status", "status", "status", "worktree"], verbs


def test_overlaps_through_the_index_match_the_pairwise_comparison() -> None:
    import random

    from unitmgr.views.observe import overlaps

    def pairwise(changed: dict[str, list[str]]) -> list[dict[str, object]]:
        found: list[dict[str, object]] = []
        ids = sorted(changed)
        for index, first in enumerate(ids):
            for second in ids[index + 1 :]:
                shared = set(changed[first]) & set(changed[second])
                if shared:
                    found.append({"units": [first, second], "files": sorted(shared)})
        return found

    chooser = random.Random(15)
    for _ in range(200):
        changed = {
            f"u{chooser.randint(0, 30)}": chooser.choices("abcdefgh", k=chooser.randint(0, 4))
            for _ in range(chooser.randint(0, 12))
        }
        assert overlaps(changed) == pairwise(changed), changed


def test_a_worktree_removed_before_git_starts_reads_as_git_failing_there(tmp_path: Path) -> None:
    """A reader racing a dismantle: the worktree is gone before `git status` can start in it.
    That is a git failure in a directory git cannot enter (`status --all` shows the worktree
    absent), never an unexpected error."""
    gone = tmp_path / "removed-worktree"
    refused = unit_git.run_git(["status"], cwd=gone, step="status", check=False)
    assert refused.returncode == 128 and "cannot change to" in refused.stderr
    with pytest.raises(unit_git.GitError) as raised:
        unit_git.run_git(["status"], cwd=gone, step="status")
    assert raised.value.code == "git-failed"
    assert unit_git.status_against(gone, branch="feat/x", upstream_ref="refs/heads/main") is None


def test_a_worktree_whose_git_file_is_not_utf8_reads_as_git_failing_there(
    sandbox: Sandbox,
) -> None:
    """An executor can write anything into its worktree's `.git` file: bytes that are not
    UTF-8 make that worktree's git call fail (`status --all` shows its facts unknown), never
    an exception that would take every other unit's summary down with it."""
    path = _worktree(sandbox, "u1", "feat/u1")
    (path / ".git").write_bytes(b"gitdir: /tmp/\xff\xfe\n")
    assert unit_git.status_against(path, branch="feat/u1", upstream_ref="refs/heads/main") is None


def test_status_all_batches_the_diffs_of_units_ahead_of_their_base(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """A realistic batch (SPEC 7 rev 3): each unit one commit ahead with a dirty tracked file
    costs one `status` per unit, and the overlaps' diffs two git processes for all of them."""
    git(sandbox.repo, "update-ref", "refs/heads/main", "HEAD")
    names = ("u1", "u2", "u3", "u4")
    for name in names:
        path = _worktree(sandbox, name, f"feat/{name}")
        (path / f"{name}.txt").write_text("mine\n")
        (path / "shared.txt").write_text("both\n")
        git(path, "add", f"{name}.txt", "shared.txt")
        git(path, "commit", "-q", "-m", name)
        (path / "README.md").write_text("dirty\n")
        write_record(sandbox, name, base_ref="refs/heads/main")
    # One unit merged its base back in: its merge base needs git's own answer.
    (sandbox.repo / "later.txt").write_text("later\n")
    git(sandbox.repo, "add", "later.txt")
    git(sandbox.repo, "commit", "-q", "-m", "base moves")
    git(sandbox.worktree("u4"), "merge", "-q", "--no-edit", "main")
    document, log = _status_all_logging_git(sandbox, tmp_path)
    verbs = git_verbs(log)
    assert verbs.count("status") == len(names), verbs
    assert verbs.count("rev-list") == 1 and verbs.count("diff-tree") == 1, verbs
    assert verbs.count("diff") == 1, verbs  # u4 alone: the merge of its base
    # The batched answer is the one `git diff base...HEAD` gives, unit by unit.
    overlapping = {tuple(entry["units"]): entry["files"] for entry in document["overlaps"]}
    for first, second in (("u1", "u2"), ("u1", "u4"), ("u3", "u4")):
        assert "shared.txt" in overlapping[(first, second)], overlapping
    for name in names:
        expected = unit_git.changed_since_merge_base(
            "refs/heads/main", worktree=sandbox.worktree(name)
        )
        assert expected is not None and f"{name}.txt" in expected
    scanned = WorktreeScanner().scan([_job(sandbox, name) for name in names])
    for name, facts in zip(names, scanned, strict=True):
        expected = unit_git.changed_since_merge_base(
            "refs/heads/main", worktree=sandbox.worktree(name)
        )
        assert facts.committed == expected, name


@pytest.mark.timeout(600)  # 24 real creates, four at a time, on a shared machine
def test_status_all_over_a_realistic_batch_costs_one_git_process_per_unit(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """SPEC 7 revision 3: units made by `unit create`, each one commit ahead of its base with
    one dirty tracked file. Counted with the logging wrapper: one `status` per unit and a
    constant for the whole batch (the worktree listing, the config listing, the batched
    `rev-list` and `diff-tree` of the overlaps), never a second process per unit."""
    from concurrent.futures import ThreadPoolExecutor

    count = 24

    def create(index: int) -> None:
        name = f"r{index:02d}"
        created = sandbox.create(
            name,
            "--max-active", str(count), "--max-held", str(count), "--lock-timeout", "300",
            model="cat > /dev/null; echo done",
        )  # fmt: skip
        assert created.code == 0, created.stdout
        worktree = sandbox.worktree(name)
        (worktree / f"{name}.txt").write_text("done\n")
        git(worktree, "add", f"{name}.txt")
        git(worktree, "commit", "-q", "-m", name)
        (worktree / f"{name}.txt").write_text("done, and more\n")

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(create, range(count)))
    document, log = _status_all_logging_git(sandbox, tmp_path)
    units = document["units"]
    assert len(units) == count and document["overlaps"] == []
    for unit in units:  # each summary whole: a null would be a git call that failed
        worktree = unit["worktree"]
        assert (worktree["ahead_of_base"], worktree["behind_base"]) == (1, 0), unit
        assert worktree["dirty_sample"] == [f" M {unit['unit_id']}.txt"], unit
    verbs = git_verbs(log)
    assert verbs.count("status") == count, verbs
    assert verbs.count("rev-list") <= 1 and verbs.count("diff-tree") <= 1, verbs
    assert len(verbs) <= count + 8, sorted(set(verbs))


def test_records_read_one_at_a_time_are_the_whole_scan(sandbox: Sandbox) -> None:
    """`status --all` reads records one at a time (`Workspace.scan_each`, so each unit's git
    call starts while the next record is read): the same entries, in the same order, with the
    same derived pair state dirs as `Workspace.scan`, an unreadable record included."""
    from unitmgr.workspace import Workspace

    for name in ("u2", "u1"):
        _worktree(sandbox, name, f"feat/{name}")
        write_record(
            sandbox,
            name,
            worktree=str(sandbox.worktree(name)),
            pair={"sid": "s", "state_dir": "/planted/elsewhere"},
        )
    write_record(sandbox, "u3", pair={"sid": "s", "state_dir": "/planted"})  # no worktree
    (sandbox.registry / "units" / "u0.json").write_text("{not json")
    workspace = Workspace.open(str(sandbox.repo))
    whole, each = workspace.scan(), list(workspace.scan_each())
    assert [entry.unit_id for entry in each] == ["u0", "u1", "u2", "u3"]
    assert [entry.to_json() for entry in each] == [entry.to_json() for entry in whole]
    states = [getattr(getattr(entry, "pair", None), "state_dir", None) for entry in each]
    assert states == [getattr(getattr(e, "pair", None), "state_dir", None) for e in whole]
    assert states[1] and states[1].startswith(str(sandbox.common_dir)) and states[3] is None
