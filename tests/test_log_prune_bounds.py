"""`unit log` and `unit prune` against what an executor plants in the registry (SPEC 3.18, 8):
`events.jsonl` and the archive root are in the git common dir it writes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import Sandbox, write_record
from unitmgr.lifecycle import prune

OLD = "20200101T000000Z"
MEASURE_PRUNE = """
import json, sys, tracemalloc
from unitmgr.lifecycle import prune
tracemalloc.start()
document = prune.run(sys.argv[1], older_than="30d", dry_run=True, lock_timeout="5")
print(json.dumps([document, tracemalloc.get_traced_memory()[1]]))
"""


def _events(sandbox: Sandbox, *events: dict[str, object]) -> Path:
    path = sandbox.registry / "events.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return path


def test_log_of_an_unknown_unit_is_refused_and_a_logged_one_answers(sandbox: Sandbox) -> None:
    write_record(sandbox, "u1")
    _events(sandbox, {"command": "prune", "step": "pruned", "at": "2026-01-01T00:00:00Z",
                      "unit": "gone"})  # fmt: skip
    refused = sandbox.unit("log", "--unit", "nosuch")
    assert refused.code == 1, refused.stdout
    assert refused["code"] == "no-such-unit" and refused["next"], refused.stdout
    assert sandbox.unit("log", "--unit", "u1")["events"] == []  # recorded, nothing logged yet
    assert [e["unit"] for e in sandbox.unit("log", "--unit", "gone")["events"]] == ["gone"]


def test_log_follow_resumes_from_no_planted_future_time(sandbox: Sandbox) -> None:
    first = {"command": "create", "step": "reserve", "at": "2026-01-01T00:00:00Z", "unit": "u1"}
    events = _events(sandbox, first)
    process = subprocess.Popen(
        ["unit", "log", "--follow", "--repo", str(sandbox.repo)],
        cwd=sandbox.root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert json.loads(process.stdout.readline()) == {"event": first}
        planted = {"command": "x", "at": "9999-12-31T23:59:59Z", "unit": "u1"}
        with events.open("a") as handle:
            handle.write(json.dumps(planted) + "\n")
        assert json.loads(process.stdout.readline()) == {"event": planted}
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    (end,) = [json.loads(line) for line in out.splitlines()]
    since = end["next"].split("--since ")[1].split()[0]
    assert not since.startswith("9999"), end["next"]
    assert since <= time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 1))


def test_prune_lists_a_huge_archive_root_only_up_to_its_cap(sandbox: Sandbox) -> None:
    """A planted root of many entries costs the cap, not its size: the listing is bounded as
    it is read (young archives with long names, so only the listing holds memory)."""
    root = sandbox.registry / "archive"
    root.mkdir(parents=True)
    count = 2 * prune.MAX_ROOT_ENTRIES
    padding = "p" * 200
    for index in range(count):
        os.mkdir(root / f"{padding}{index:06d}-20991231T000000Z")
    # Measured in an interpreter of its own: tracemalloc counts every thread's allocations, and
    # a library an earlier test loaded in this one (Ray's threads) would be counted as prune's.
    measured = subprocess.run(
        [sys.executable, "-c", MEASURE_PRUNE, str(sandbox.repo)],
        capture_output=True,
        text=True,
        check=True,
    )
    document, peak = json.loads(measured.stdout)
    assert document["truncated"]["looked_at"] == prune.MAX_ROOT_ENTRIES
    assert document["younger"] == prune.MAX_ROOT_ENTRIES
    # Measured: ~5.9 MB when all 20 000 names were listed first, ~3 MB with the cap.
    assert peak < 4 * 1024 * 1024, peak


def test_a_prune_killed_mid_removal_leaves_no_half_archive_and_resumes(
    sandbox: Sandbox,
) -> None:
    archive = sandbox.registry / "archive" / f"old-{OLD}"
    (archive / "transcripts").mkdir(parents=True)
    for index in range(5):
        (archive / "transcripts" / f"{index:04d}.log").write_text("x" * 10)
    crashed = sandbox.unit(
        "prune",
        env={**os.environ, "UNITMGR_TEST_HOOKS": "1",
             "UNITMGR_TEST_CRASH_AFTER": "prune:claimed:done"},
    )  # fmt: skip
    assert crashed.code == -signal.SIGKILL or crashed.code == 128 + signal.SIGKILL, crashed.code
    claimed = archive.parent / f"{prune.CLAIMED}{archive.name}"
    assert not archive.exists() and claimed.is_dir()  # claimed whole, never half an archive
    listed = sandbox.unit("prune", "--dry-run")
    assert [(p["unit_id"], p.get("resumed")) for p in listed["pruned"]] == [("old", True)]
    resumed = sandbox.unit("prune")
    assert resumed.code == 0, resumed.stdout
    assert resumed["pruned"][0]["resumed"] is True and resumed["bytes_freed"] == 50
    assert not claimed.exists() and list(archive.parent.iterdir()) == []
