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

import shlex
import sys
import time
from pathlib import Path

from registry import bounded, terminal
from registry.errors import StateError, UsageError
from registry.output import Rendered, progress, write_text
from registry.redact import redact_bytes
from unitmgr import validation
from unitmgr.options import TailOptions
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

POLL_SECONDS = 0.25
TAIL_BYTES = 1 << 20  # a longer transcript is shown from its last MiB (and so is a jump ahead)
PENDING_BYTES = 64 * 1024  # an incomplete line longer than this is printed as it stands
KEEP_BYTES = 4096  # what an overlong line keeps back, so a token is never split


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
    """Prints a growing transcript: whole lines while it grows, the rest at the end; rendered
    through the adapter, or raw.

    Bounded whatever the file is (SPEC 8): it starts at most `TAIL_BYTES` from the end, a
    follow never reads more than that per poll (a file that jumps further ahead is skipped to
    its last `TAIL_BYTES`), and an incomplete line longer than `PENDING_BYTES` is printed as
    it is. Every read goes through the bounded reader from the git dir that holds `pair/`: a
    FIFO, a device or a symlink (the transcript's, or a symlinked `pair/` or `transcripts/`)
    is never read, and `unreadable` says why."""

    def __init__(self, partner: str, *, raw: bool, below: Path) -> None:
        self.partner, self.raw, self.below = partner, raw, below
        self.offset = 0
        self.pending = b""
        self.cut = False  # the next bytes start inside a line: drop up to its end
        self.unreadable: str | None = None
        self.terminal = sys.stdout.isatty()

    def drain(self, transcript: Path, *, final: bool) -> None:
        try:
            self._read(transcript)
        except FileNotFoundError:
            pass
        except bounded.Unreadable as error:
            self.unreadable = error.reason
        if final:
            self._emit(b"", final=True)

    def _read(self, transcript: Path) -> None:
        _, size = bounded.read_range(transcript, 0, 0, below=self.below)
        if size < self.offset:  # replaced by a shorter file: start over at its tail
            self._note(f"[the transcript shrank to {size} bytes]")
            self.offset, self.pending = 0, b""
        if size - self.offset > TAIL_BYTES:
            start = size - TAIL_BYTES
            self._note(f"[… {start - self.offset} bytes not shown]")
            self.offset, self.pending, self.cut = start, b"", start > 0
        if size > self.offset:
            data, _ = bounded.read_range(
                transcript, self.offset, size - self.offset, below=self.below
            )
            self.offset += len(data)
            self._emit(data, final=False)

    def _emit(self, chunk: bytes, *, final: bool) -> None:
        if self.cut and chunk:
            end = chunk.find(b"\n")
            chunk, self.cut = (chunk[end + 1 :], False) if end >= 0 else (b"", True)
        data = self.pending + chunk
        cut = len(data) if final else data.rfind(b"\n") + 1
        if len(data) - cut > PENDING_BYTES:  # a line that never ends: print it as it stands
            cut = _safe_cut(data, len(data) - KEEP_BYTES)
        whole, self.pending = data[:cut], data[cut:]
        if not whole:
            return
        if self.raw:
            self._write_raw(redact_bytes(whole))
            return
        from pair import api as pair_api

        lines = whole.decode("utf-8", "replace").splitlines()
        rendered = [out for line in lines for out in pair_api.render_line(self.partner, line)]
        if rendered:
            write_text(terminal.clean("\n".join(rendered)) + "\n")

    def _write_raw(self, data: bytes) -> None:
        """`--raw`: the redacted bytes unchanged — unless stdout is a terminal, where an
        executor's escape sequence would act on the lead's terminal: there they are shown as
        visible escapes, like every text view (decisions.md)."""
        if self.terminal:
            write_text(terminal.clean(data.decode("utf-8", "backslashreplace")))
            return
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def _note(self, text: str) -> None:
        if self.raw:
            progress(text)  # raw stdout stays the transcript's bytes
        else:
            write_text(text + "\n")


def _safe_cut(data: bytes, at: int) -> int:
    """Where to split an overlong line near `at`: after the last space, quote or comma in the
    `KEEP_BYTES` before it, so a token (which has none) is not split across two redactions."""
    window = data[max(0, at - KEEP_BYTES) : at]
    best = max(window.rfind(separator) for separator in (b" ", b'"', b",", b"\t", b"'"))
    return max(0, at - KEEP_BYTES) + best + 1 if best >= 0 else at


def status_line(receipt: dict[str, Any]) -> str:
    """The receipt in one line: `[receipt #2 task: replied in 1.4s]`, with a failure's reason."""
    if "unreadable" in receipt:
        return f"[receipt {receipt['unreadable']} unreadable: {receipt.get('error')}]"
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
            # Its `pair.seq` names the turns there are.
            next_step=shlex.join(
                ["unit", "status", "--unit", unit_id, "--repo", str(workspace.toplevel)]
            ),
        )
    _warn_of_config(workspace)
    printer = _Printer(turn.partner, raw=options.raw, below=Path(str(state_dir)).parent)
    while True:
        receipt = pair_api.read_receipt(turn.receipt)
        printer.drain(turn.transcript, final=receipt is not None or not options.follow)
        if printer.unreadable is not None:  # shown, never followed (a read command: exit 0)
            shown = f"[transcript {turn.transcript} unreadable: {printer.unreadable}]"
            end = status_line(receipt) if receipt else f"[turn #{turn.seq}: no receipt yet]"
            return Rendered(f"{shown}\n{end}")
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
                f"turn #{turn.seq} of unit {unit_id} ended without a receipt (pair wait reports "
                "it worker-lost; pair clear recovers a dead marker)",
                # Quoted: the recorded worktree is executor-writable text (SPEC 8).
                next_step=shlex.join(
                    ["pair", "wait", "--repo", str(record.worktree), "--seq", str(turn.seq)]
                ),
            )
        time.sleep(POLL_SECONDS)


def _warn_of_config(workspace: Workspace) -> None:
    """tail needs no key, yet reports a config problem as every read does (SPEC 3.16): one line
    on stderr, since stdout is the transcript (`--raw` must stay the bytes, unchanged)."""
    from unitmgr import config
    from unitmgr.views.table import config_warning_text

    text = config_warning_text(config.warning_field(config.for_reads(workspace)[1]))
    if text:
        progress(f"[{text}]")


def _still_running(state_dir: str | None, seq: int) -> bool:
    from pair import api as pair_api

    if not state_dir:
        return False
    in_flight = pair_api.read_status(state_dir).get("in_flight") or {}
    return in_flight.get("seq") == seq and in_flight.get("alive", True) is not False
