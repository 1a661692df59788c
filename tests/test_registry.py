"""The registry library: records, atomic writes, events, redaction."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from registry.atomic import append_line, write_text_atomic
from registry.records import (
    RecordTooNew,
    RecordUnreadable,
    Staffing,
    StaffingHistory,
    UnitRecord,
    decode_record,
    encode_record,
)
from registry.redact import StreamRedactor, redact
from registry.store import Registry, UnreadableRecord


def sample_record(**changes: object) -> UnitRecord:
    record = UnitRecord(
        unit_id="u1",
        worktree="/w/u1",
        branch="feat/u1",
        base="main",
        lifecycle="working",
        staffing=StaffingHistory(current=Staffing(partner="script", model="cat")),
    )
    for key, value in changes.items():
        setattr(record, key, value)
    return record


def test_record_round_trips_unknown_keys_at_every_level() -> None:
    document = json.loads(encode_record(sample_record()))
    document["future_field"] = {"kept": [1, 2]}
    document["staffing"]["current"]["future_nested"] = "also kept"
    document["resources"]["future_flag"] = True
    decoded = decode_record(json.dumps(document))
    assert json.loads(encode_record(decoded)) == document
    assert list(json.loads(encode_record(decoded)))[:2] == ["schema_version", "unit_id"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"issue": "7"}, "record.issue must be an integer"),
        ({"lifecycle": "flying"}, "not a known lifecycle"),
        ({"paths": "src/**"}, "record.paths must be a list"),
        ({"resources": {"worktree": "yes"}}, "record.resources.worktree must be true or false"),
        (
            {"staffing": {"current": {"partner": 3}}},
            "record.staffing.current.partner must be a string",
        ),
        ({"unit_id": None}, "record.unit_id must be a string"),
    ],
)
def test_wrong_types_make_a_record_unreadable(change: dict, message: str) -> None:
    document = json.loads(encode_record(sample_record()))
    document.update(change)
    with pytest.raises(RecordUnreadable, match=message):
        decode_record(json.dumps(document))


def test_newer_schema_is_too_new_and_garbage_is_unreadable() -> None:
    with pytest.raises(RecordTooNew):
        decode_record('{"schema_version": 2, "unit_id": "u1"}')
    for text in ("", "{", "[]", '"x"', '{"schema_version": "1"}'):
        with pytest.raises(RecordUnreadable):
            decode_record(text)
    with pytest.raises(RecordUnreadable, match="names unit"):
        decode_record(encode_record(sample_record()), expected_id="other")


def test_registry_writes_private_files_atomically(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "common")
    registry.write(sample_record())
    path = registry.record_path("u1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for directory in (registry.root, registry.units_dir):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert registry.read("u1").branch == "feat/u1"
    assert [p.name for p in registry.units_dir.iterdir()] == ["u1.json"]
    assert path.read_text().endswith("}\n") and '\n  "unit_id": "u1",' in path.read_text()
    (registry.units_dir / "bad.json").write_text("{nope")
    (registry.units_dir / ".partial.json.123.tmp").write_text("{")
    entries = registry.scan()
    assert [e.unit_id for e in entries] == ["bad", "u1"]
    assert isinstance(entries[0], UnreadableRecord) and entries[0].code == "record-unreadable"


def test_reader_never_creates_the_registry(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "common")
    assert registry.scan() == [] and registry.read("u1") is None
    assert not (tmp_path / "common").exists()


def test_a_killed_writer_leaves_the_old_record_intact(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    write_text_atomic(target, json.dumps({"version": "old"}))
    script = (
        "import os, signal, sys\n"
        "import registry.atomic as atomic\n"
        "real = atomic._fsync\n"
        "def dying(fd):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "atomic._fsync = dying\n"
        f"atomic.write_text_atomic(__import__('pathlib').Path({str(target)!r}), 'x' * 5_000_000)\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], check=False)
    assert completed.returncode == -9
    assert json.loads(target.read_text()) == {"version": "old"}


def test_events_are_whole_lines(tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    for index in range(50):
        append_line(log, json.dumps({"i": index}))
    lines = log.read_text().splitlines()
    assert [json.loads(line)["i"] for line in lines] == list(range(50))
    assert stat.S_IMODE(log.stat().st_mode) == 0o600


def test_redaction_of_tokens_and_url_userinfo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "gho_abcdefgh12345678")
    monkeypatch.setenv("GH_TOKEN", "short")  # under 8 characters: not treated as a secret
    assert redact("x gho_abcdefgh12345678 y") == "x *** y"
    assert redact("short") == "short"
    assert (
        redact("push to https://user:pa55@github.com/o/r.git")
        == "push to https://***@github.com/o/r.git"
    )
    assert (
        redact("mail a@b.com and https://github.com/o/r@v1")
        == "mail a@b.com and https://github.com/o/r@v1"
    )


def test_stream_redaction_catches_a_token_split_across_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "ghp_" + "Z" * 30
    monkeypatch.setenv("GH_TOKEN", token)
    stream = f"line one\nthe token is {token} ok\n".encode()
    for cut in range(1, len(stream)):
        redactor = StreamRedactor(max_hold_seconds=60)
        out = (
            redactor.feed(stream[:cut], now=0)
            + redactor.feed(stream[cut:], now=0)
            + redactor.flush()
        )
        assert token.encode() not in out
        assert out == stream.replace(token.encode(), b"***")


def test_stream_redaction_releases_a_long_partial_line_safely(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "ghp_" + "Q" * 20
    monkeypatch.setenv("GH_TOKEN", token)
    redactor = StreamRedactor(max_hold_seconds=0.5)
    first = redactor.feed(b"progress..." + token[:10].encode(), now=0.0)
    assert first == b""
    later = redactor.pending(now=1.0)  # held too long: released, but never a partial secret tail
    assert token[:10].encode() not in later
    rest = redactor.feed(token[10:].encode() + b" done\n", now=1.1) + redactor.flush()
    assert token.encode() not in later + rest
    assert (later + rest) == b"progress...*** done\n"


def test_record_files_never_hold_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GH_TOKEN", "ghs_secretsecretsecret")
    registry = Registry(tmp_path / "c")
    record = sample_record(task="use ghs_secretsecretsecret to push", scope="https://me:pw@host/x")
    registry.write(record)
    text = registry.record_path("u1").read_text()
    assert "ghs_secret" not in text and "me:pw" not in text
    assert os.stat(registry.record_path("u1")).st_mode & 0o077 == 0


def test_a_dead_writers_temp_file_is_swept_and_a_live_ones_is_kept(tmp_path: Path) -> None:
    """`sweep_temp_files` (registry/atomic.py): a `.NAME.PID.HEX.tmp` whose writer is gone is
    garbage at once; a live writer's is kept until it is old; a stranger's name only by age."""
    import os
    import subprocess

    from registry.atomic import sweep_temp_files

    exited = subprocess.Popen(["true"])  # a pid that has just exited, and was reaped
    exited.wait()
    dead = tmp_path / f".u1.json.{exited.pid}.0a1b2c3d.tmp"
    live = tmp_path / f".u2.json.{os.getppid()}.0a1b2c3d.tmp"
    mine = tmp_path / f".u3.json.{os.getpid()}.0a1b2c3d.tmp"
    stranger = tmp_path / ".notes.tmp"
    for path in (dead, live, mine, stranger):
        path.write_text("partial")
    assert sweep_temp_files(tmp_path) == [dead]
    old = 0.0  # the epoch: older than any cutoff
    for path in (live, stranger):
        os.utime(path, (old, old))
    assert sorted(sweep_temp_files(tmp_path)) == sorted([live, stranger])
    assert mine.exists()
