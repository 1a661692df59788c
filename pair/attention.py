"""What a finished turn's receipt leaves its unit waiting on (SPEC 3.4): the one function.

`unit status --all`, `list`, `status --unit`, `wait`, `watch`, `serve` (through
unitmgr/views/attention.py, which adds what only a unit has: its lifecycle, recovery, a turn in
flight) and the supervisor's notification when a turn ends (pair/notify.py) all call
`of_receipt`, so no two of them can disagree about a receipt. Pure: it reads no file and never
looks at the clock. Kept free of heavy imports (the views import it on every read).
"""

from __future__ import annotations

from registry.timeutil import ago

TYPE_CHECKING = False  # typing's own flag costs the reads an import (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

# A reply's first line as `why`: bounded, so a reply that is one long line stays one short line.
WHY_CHARS = 200
HEAD_CHARS = 4096
FAILED_STATUSES = (
    "failed",
    "empty-reply",
    "hang-killed",
    "worker-lost",
    "cancelled",
    "lost",  # the node a turn ran on was lost (SPEC 4.3: `node-lost`)
    "unknown",  # a cancel the node could not confirm (SPEC 4.3)
)


def first_line(text: str | None) -> str:
    # Only a bounded head is split: a long reply costs no more than a short one.
    for raw in (text or "")[:HEAD_CHARS].splitlines():
        line = raw.strip()
        if line:
            return line if len(line) <= WHY_CHARS else line[: WHY_CHARS - 1] + "…"
    return ""


def state(name: str, since: str | None, why: str) -> dict[str, Any]:
    return {"state": name, "since": since or None, "why": why}


def of_receipt(receipt: dict[str, Any], *, updated_at: str | None = None) -> dict[str, Any]:
    """The attention a turn's receipt leaves: `failed` for a failure or a turn that moved refs
    or git config it does not own (the lead looks before anything else), `rate-limited`,
    `waiting-on-lead` for a reply, else `idle`. `since` is its `finished_at` (else
    `updated_at`)."""
    if "unreadable" in receipt:
        return state("failed", updated_at, f"receipt unreadable: {receipt['unreadable']}")
    seq, kind, status = receipt.get("seq"), receipt.get("kind"), receipt.get("status")
    finished = receipt.get("finished_at") or updated_at
    turn = f"#{seq} {kind}"
    moved = [str(change.get("ref")) for change in receipt.get("foreign_ref_changes") or []]
    if moved:
        return state("failed", finished, f"{turn} moved refs it does not own: {', '.join(moved)}")
    config_changes = receipt.get("foreign_config_changes") or []
    planted = [str(change.get("key_or_path")) for change in config_changes]
    if planted:
        why = f"{turn} changed git config it does not own: {', '.join(planted)}"
        return state("failed", finished, first_line(why))
    if status in FAILED_STATUSES:
        reason = first_line(receipt.get("reason"))
        return state("failed", finished, f"{turn} {status}" + (f": {reason}" if reason else ""))
    if status == "rate-limited":
        retry = receipt.get("retry_after_seconds")
        why = f"{turn} rate-limited" + (f", retry after {ago(retry)}" if retry else "")
        reason = first_line(receipt.get("reason"))
        return state("rate-limited", finished, why + (f": {reason}" if reason else ""))
    if status == "replied":
        reply = first_line(receipt.get("reply"))
        return state("waiting-on-lead", finished, f"{turn} replied: {reply}")
    return state("idle", finished, f"{turn} {status}")
