"""`unit tail --unit ID [--seq N] [--follow] [--raw]` (SPEC 3.14a): a turn's transcript for a
person — the headless way to attach to an executor.

Each line goes through the partner's adapter (`pair.api.render_line`): assistant text, each
tool call with its command or file, each tool result's first lines, errors and rate limits
marked; the script partner's output as it is. `--raw` prints the (redacted) bytes unchanged.
`--follow` keeps reading as the transcript grows and ends, exit 0, when the turn's receipt
lands, with the receipt's status line. The transcript and receipt paths come from pair's
library API (`pair.api.turn_files`), never built here.

Lock-free and read-only: no lock, no git, no write, no turn. Text goes to stdout as it is read
(the one exception to "one JSON document", like `--help`); a refusal is still JSON. Only whole
lines are printed while a turn runs, so a line (or a secret) is never split across reads.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from registry.errors import StateError, UsageError
from registry.output import Rendered, write_text
from registry.redact import redact_bytes
from unitmgr import validation
from unitmgr.options import TailOptions
from unitmgr.workspace import Workspace

POLL_SECONDS = 0.25
READ_BYTES = 1 << 20


def _seq(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or int(value) < 1:
        raise UsageError(
            "invalid-seq",
            f"--seq must be a positive integer, got {value!r}",
            next_step="pass a turn number from `unit status --unit ID` (pair.seq), or drop --seq",
        )
    return int(value)


class _Printer:
    """Prints a growing transcript from an offset: whole lines while it grows, the rest at the
    end; rendered through the adapter, or raw."""

    def __init__(self, partner: str, *, raw: bool) -> None:
        self.partner, self.raw = partner, raw
        self.offset = 0
        self.pending = b""

    def drain(self, transcript: Path, *, final: bool) -> None:
        try:
            with open(transcript, "rb") as handle:
                handle.seek(self.offset)
                while chunk := handle.read(READ_BYTES):
                    self.offset += len(chunk)
                    self._emit(chunk, final=False)
        except FileNotFoundError:
            pass
        if final:
            self._emit(b"", final=True)

    def _emit(self, chunk: bytes, *, final: bool) -> None:
        data = self.pending + chunk
        cut = len(data) if final else data.rfind(b"\n") + 1
        whole, self.pending = data[:cut], data[cut:]
        if not whole:
            return
        if self.raw:
            sys.stdout.flush()
            sys.stdout.buffer.write(redact_bytes(whole))
            sys.stdout.buffer.flush()
            return
        from pair import api as pair_api

        lines = whole.decode("utf-8", "replace").splitlines()
        rendered = [out for line in lines for out in pair_api.render_line(self.partner, line)]
        if rendered:
            write_text("\n".join(rendered) + "\n")


def status_line(receipt: dict[str, Any]) -> str:
    """The receipt in one line: `[receipt #2 task: replied in 1.4s]`, with a failure's reason."""
    line = f"[receipt #{receipt.get('seq')} {receipt.get('kind')}: {receipt.get('status')}"
    if receipt.get("seconds") is not None:
        line += f" in {receipt['seconds']}s"
    reason = receipt.get("reason")
    if reason and receipt.get("ok") is False:
        line += f" — {str(reason).splitlines()[0]}"
    return line + "]"


def run(repo: str, options: TailOptions) -> Rendered:
    from pair import api as pair_api

    workspace = Workspace.open(repo)
    unit_id = validation.unit_id(options.unit)
    seq = _seq(options.seq)
    record = workspace.read_record(unit_id)
    if record is None:
        raise StateError("no-such-unit", f"unit {unit_id} is not recorded", next_step="unit list")
    state_dir = record.pair.state_dir if record.pair is not None else None
    turn = pair_api.turn_files(state_dir, seq) if state_dir else None
    if turn is None:
        which = f"turn {seq}" if seq is not None else "turn yet"
        raise StateError(
            "no-turn",
            f"unit {unit_id} has no {which}",
            next_step=f"unit status --unit {unit_id} --repo {workspace.toplevel} (pair.seq "
            "names its turns)",
        )
    printer = _Printer(turn.partner, raw=options.raw)
    while True:
        receipt = pair_api.read_receipt(turn.receipt)
        printer.drain(turn.transcript, final=receipt is not None or not options.follow)
        if receipt is not None:
            return Rendered(status_line(receipt))
        if not options.follow:
            return Rendered(f"[turn #{turn.seq} {turn.kind}: no receipt yet]")
        if not _still_running(state_dir, turn.seq):
            # The supervisor writes the receipt before it releases the marker: look once more.
            receipt = pair_api.read_receipt(turn.receipt)
            printer.drain(turn.transcript, final=True)
            if receipt is not None:
                return Rendered(status_line(receipt))
            raise StateError(
                "turn-lost",
                f"turn #{turn.seq} of unit {unit_id} ended without a receipt",
                next_step=f"pair wait --repo {record.worktree} --seq {turn.seq} (reports "
                "worker-lost; pair clear --repo WORKTREE recovers a dead marker)",
            )
        time.sleep(POLL_SECONDS)


def _still_running(state_dir: str | None, seq: int) -> bool:
    from pair import api as pair_api

    if not state_dir:
        return False
    in_flight = pair_api.read_status(state_dir).get("in_flight") or {}
    return in_flight.get("seq") == seq and in_flight.get("alive", True) is not False
