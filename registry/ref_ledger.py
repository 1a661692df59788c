"""Who moved a ref (SPEC 4.1, revision 3): the lead's ref ledger and the executors' ref log.

The ref store is shared by every unit, so a turn's before/after diff of `git for-each-ref`
also sees other executors' commits, the lead's creates, dismantles and fetches. Two append-only
files in the registry say whose each change was:

- `ref-ledger.jsonl` — what unitmgr itself moves (a create's new branch, a dismantle's deleted
  branches, a base fetch), written *before* the git call that moves it, one JSON line each
  (`{ref, command, unit, at, epoch}`): a change the ledger names in a turn's window is the
  lead's, never an executor's fault.
- `ref-audit.log` — what executors move: the `reference-transaction` hook unitmgr installs
  (unitmgr/ref_guard.py) appends `EPOCH OLD NEW REF UNIT` for every update prepared by a
  process carrying `UNITMGR_UNIT` (the pair supervisor sets it for its partner).

Both live in the common dir an executor can write, so they attribute honest work; they are
never a proof of anything (a hostile executor can write either). Reads take only the last
`TAIL_BYTES` of each file, through a non-following, non-blocking open of a regular file; the
writers prune a file past `PRUNE_BYTES` to its tail. This module knows no git.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

from registry.layout import registry_root
from registry.timeutil import iso_from_epoch

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

LEDGER_NAME = "ref-ledger.jsonl"
AUDIT_LOG_NAME = "ref-audit.log"
TAIL_BYTES = 1 << 20
PRUNE_BYTES = 4 << 20
# A window's edges are taken from two clocks a second apart at most (`date +%s` in the hook).
WINDOW_SLACK_SECONDS = 2.0


def ledger_path(common_git_dir: Path) -> Path:
    return registry_root(common_git_dir) / LEDGER_NAME


def audit_log_path(common_git_dir: Path) -> Path:
    return registry_root(common_git_dir) / AUDIT_LOG_NAME


def record_lead_moves(
    common_git_dir: Path, refs: list[str], *, command: str, unit: str | None
) -> None:
    """Say, before the git call that moves them, that the lead is about to move `refs`."""
    if not refs:
        return
    path = ledger_path(common_git_dir)
    _prune(path)
    now = time.time()
    at = iso_from_epoch(now)
    lines = "".join(
        json.dumps({"ref": ref, "command": command, "unit": unit, "at": at, "epoch": now}) + "\n"
        for ref in refs
    )
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, lines.encode("utf-8"))  # one write: lines of concurrent writers never mix
    finally:
        os.close(fd)


def lead_moved(common_git_dir: Path, since_epoch: float) -> set[str]:
    """The refs the ledger says the lead moved at or after `since_epoch`."""
    moved = set()
    for line in tail_lines(ledger_path(common_git_dir)):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        epoch, ref = entry.get("epoch"), entry.get("ref")
        recent = isinstance(epoch, int | float) and epoch >= since_epoch - WINDOW_SLACK_SECONDS
        if isinstance(ref, str) and recent:
            moved.add(ref)
    return moved


def movers(common_git_dir: Path, since_epoch: float) -> dict[str, set[str]]:
    """ref → the units whose processes updated it at or after `since_epoch` (the hook's log)."""
    found: dict[str, set[str]] = {}
    for line in tail_lines(audit_log_path(common_git_dir)):
        parts = line.split(" ", 4)
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        epoch, _old, _new, ref, unit = parts
        if int(epoch) >= since_epoch - WINDOW_SLACK_SECONDS:
            found.setdefault(ref, set()).add(unit.strip())
    return found


def tail_lines(path: Path, limit: int = TAIL_BYTES) -> list[str]:
    """The complete lines of the last `limit` bytes of a regular file; none for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []
        start = max(0, info.st_size - limit)
        data = os.pread(fd, min(limit, info.st_size), start)
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").split("\n")
    if start > 0:
        lines = lines[1:]  # the first line was cut
    return [line for line in lines[:-1] if line]  # the last is empty or still being written


def prune_audit_log(common_git_dir: Path) -> None:
    _prune(audit_log_path(common_git_dir))


def _prune(path: Path) -> None:
    """Cut a file past `PRUNE_BYTES` down to its last `TAIL_BYTES` (a few lines written while
    it is rewritten may be lost: the worst outcome is one change read as unattributed)."""
    try:
        if os.lstat(path).st_size <= PRUNE_BYTES:
            return
    except OSError:
        return
    from registry.atomic import write_text_atomic

    write_text_atomic(path, "".join(line + "\n" for line in tail_lines(path)), mode=0o600)


def describe(change: dict[str, Any]) -> str:
    return f"{change.get('ref')} {change.get('before')} -> {change.get('after')}"
