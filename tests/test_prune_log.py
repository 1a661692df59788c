"""`unit prune` and `unit log` (SPEC 3.18), with what an executor can plant: the archive root
and `events.jsonl` are in the git common dir it writes."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from tests.conftest import GITHUB_TOKEN, Sandbox, write_record

OLD = "20200101T000000Z"


def _archive(sandbox: Sandbox, name: str, files: int = 1) -> Path:
    path = sandbox.registry / "archive" / name
    (path / "transcripts").mkdir(parents=True)
    for index in range(files):
        (path / "transcripts" / f"{index:04d}.log").write_text("x" * 10)
    return path


def test_prune_removes_old_archives_only_and_dry_run_writes_nothing(sandbox: Sandbox) -> None:
    write_record(sandbox, "kept")
    gone = _archive(sandbox, f"old-{OLD}", files=3)
    recorded = _archive(sandbox, f"kept-{OLD}")
    young = _archive(sandbox, "new-20991231T000000Z")
    dry = sandbox.unit("prune", "--dry-run")
    assert dry.code == 0, dry.stdout
    assert dry["dry_run"] is True and [p["unit_id"] for p in dry["pruned"]] == ["old"]
    assert dry["bytes_freed"] == 30 and gone.exists()
    assert not (sandbox.registry / "events.jsonl").exists()
    real = sandbox.unit("prune")
    assert real.code == 0, real.stdout
    assert [item["path"] for item in real["pruned"]] == [str(gone)]
    assert real["bytes_freed"] == 30 and not gone.exists()
    assert recorded.exists() and young.exists() and real["younger"] == 1
    assert real["kept"] == [
        {"path": str(recorded), "unit_id": "kept", "why": "unit still recorded"}
    ]
    logged = sandbox.unit("log", "--unit", "old")
    assert [e["step"] for e in logged["events"]] == ["pruned"]


def test_a_bad_duration_is_refused_with_a_pasteable_next(sandbox: Sandbox) -> None:
    for value in ("3x", "30", "-1d", "d"):
        refused = sandbox.unit("prune", "--older-than", value)
        assert refused.code == 2 and refused["code"] == "invalid-duration", refused.stdout
        assert refused["next"] == "unit prune --older-than 30d --dry-run"


def test_prune_never_follows_a_planted_link_out_of_the_archive(sandbox: Sandbox) -> None:
    victim = sandbox.root / "home"
    (victim / "docs").mkdir(parents=True)
    (victim / "docs" / "thesis.tex").write_text("years of work")
    archive = sandbox.registry / "archive"
    archive.mkdir(parents=True)
    # The executor plants a link named like an old archive, and a link inside a real one.
    (archive / f"x-{OLD}").symlink_to(victim)
    inner = _archive(sandbox, f"y-{OLD}")
    (inner / "transcripts" / "link").symlink_to(victim / "docs")
    pruned = sandbox.unit("prune", "--older-than", "1d")
    assert pruned.code == 0, pruned.stdout
    assert (victim / "docs" / "thesis.tex").read_text() == "years of work"
    assert (archive / f"x-{OLD}").is_symlink() and not inner.exists()
    assert any("symbolic link" in item["why"] for item in pruned["ignored"])
    # And when the archive root itself is a link, nothing under its target is touched.
    (archive / f"x-{OLD}").unlink()
    archive.rmdir()
    (victim / f"z-{OLD}").mkdir()
    archive.symlink_to(victim)
    again = sandbox.unit("prune", "--older-than", "1d")
    assert again.code == 0 and again["pruned"] == [], again.stdout
    assert (victim / f"z-{OLD}").is_dir() and (victim / "docs" / "thesis.tex").exists()


def test_prune_bounds_its_walk(sandbox: Sandbox) -> None:
    deep = _archive(sandbox, f"deep-{OLD}")
    path = deep
    for _ in range(40):  # deeper than any pair state
        path = path / "d"
    path.mkdir(parents=True)
    pruned = sandbox.unit("prune")
    assert pruned.code == 0, pruned.stdout
    assert deep.exists() and "deeper than" in pruned["kept"][0]["why"]


def test_log_reads_bounded_skips_malformed_and_escapes_the_table(sandbox: Sandbox) -> None:
    events = sandbox.registry / "events.jsonl"
    events.parent.mkdir(parents=True)
    lines = [
        {
            "command": "create",
            "step": "reserve",
            "status": "done",
            "at": "2026-01-01T00:00:00Z",
            "unit": "u1",
            "detail": {"why": "clear\x1b[2J screen"},
        },
        "not json",
        "[1, 2]",
        {
            "command": "verify",
            "step": "verification",
            "status": "done",
            "at": "2026-01-02T00:00:00Z",
            "unit": "u2",
            "detail": {"token": GITHUB_TOKEN},
        },
        "x" * (70 * 1024),
    ]
    events.write_text(
        "".join((json.dumps(line) if isinstance(line, dict) else line) + "\n" for line in lines)
    )
    logged = sandbox.unit("log")
    assert logged.code == 0, logged.stdout
    assert [e["unit"] for e in logged["events"]] == ["u1", "u2"] and logged["skipped"] == 3
    assert GITHUB_TOKEN not in logged.stdout
    only = sandbox.unit("log", "--unit", "u2", "--since", "2026-01-01T12:00:00Z")
    assert [e["unit"] for e in only["events"]] == ["u2"]
    table = sandbox.unit("log", "--format", "table")
    assert table.code == 0 and "\x1b" not in table.stdout and "\\x1b[2J" in table.stdout
    rows = [line for line in table.stdout.splitlines() if line.startswith("2026-")]
    assert len(rows) == 2 and "create" in rows[0] and "reserve" in rows[0]
    assert "3 malformed lines skipped" in table.stdout and GITHUB_TOKEN not in table.stdout
    assert sandbox.unit("log", "--since", "yesterday")["code"] == "invalid-since"
    # A planted link in place of the log is reported, never followed.
    events.unlink()
    events.symlink_to(sandbox.root / "task.md")
    linked = sandbox.unit("log")
    assert linked.code == 0 and linked["events"] == [] and "unreadable" in linked.document


def test_log_follow_prints_json_lines_and_ends_on_sigint(sandbox: Sandbox) -> None:
    events = sandbox.registry / "events.jsonl"
    events.parent.mkdir(parents=True)
    first = {
        "command": "create",
        "step": "reserve",
        "status": "done",
        "at": "2026-01-01T00:00:00Z",
        "unit": "u1",
    }
    events.write_text(json.dumps(first) + "\n")
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
        # A planted "end" line is an event like any other, wrapped: it cannot end the stream.
        planted = {"ok": False, "code": "interrupted", "at": "2026-01-03T00:00:00Z"}
        with events.open("a") as handle:
            handle.write(json.dumps(planted) + "\n")
        assert json.loads(process.stdout.readline()) == {"event": planted}
        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130
    (end,) = [json.loads(line) for line in out.splitlines()]
    assert end["code"] == "interrupted" and end["ok"] is False
    assert "--since 2026-01-03T00:00:00Z" in end["next"] and "--follow" in end["next"]
    assert "journal" not in end["reason"]


def test_log_reports_a_config_warning(sandbox: Sandbox) -> None:
    (sandbox.repo / ".unitmgr.toml").write_text("stuk = 1\n")
    logged = sandbox.unit("log")
    assert logged.code == 0 and logged["config_warning"]["key"] == "stuk"
    table = sandbox.unit("log", "--format", "table")
    assert table.stdout.startswith("! config warning:")
    for args in (("prune",), ("prune", "--dry-run")):  # a command that changes something
        assert sandbox.unit(*args)["code"] == "config-invalid"
