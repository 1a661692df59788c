"""`unit watch` (SPEC 3.10): a live terminal view of every unit, for a person.

It redraws `unit status --all` every few seconds (lock-free, offline; one `WorktreeScanner` held
for the whole session skips the git calls of worktrees that did not change). Its top line is the
**Waiting on you** banner: every unit whose `attention.state` (SPEC 3.4) asks the lead to act,
with how long and why, recovery commands folded onto their own line, never cut; "all quiet"
only when nobody waits. The table below puts what needs a look first: lost or quiet turns,
failed receipts, throttle signals, overlaps, queued notices, feedback the ledger says is pending
(`feedback: 2 CI, 3 review pending, 1 withheld`, never asked of GitHub) and recovery records.
Ctrl-C ends it cleanly. `--once` draws a single frame (for a pipe or a quick look).
"""

from __future__ import annotations

import signal
import sys
import time

from registry import terminal
from registry.errors import Rewrite, UsageError
from registry.output import Rendered
from unitmgr.views import observe
from unitmgr.views.attention import NEEDS_LEAD, age_at, waiting_on_you
from unitmgr.views.table import config_warning_text, ports_cell, runner_cell
from unitmgr.views.worktree_scan import WorktreeScanner
from unitmgr.workspace import Workspace

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

QUIET_SECONDS = 600  # a turn silent this long is flagged (its idle budget ends it later)


STATE_STYLES = {
    "recovery": "bold red",
    "failed": "red",
    "rate-limited": "yellow",
    "stuck": "yellow",
    "waiting-on-lead": "bold cyan",
    "running": "green",
    "idle": "dim",
    "busy": "blue",
}


def banner(document: dict[str, Any]) -> Any:
    """The top of the frame: every unit waiting on the lead with how long and why, each recovery
    command on its own line (folded, never cut); or "all quiet" when nobody waits."""
    from rich.text import Text

    waiting = waiting_on_you(document["units"])
    warned = config_warning_text(document)
    # A config problem is a line of its own under the banner's first (SPEC 3.16).
    config_line = [Text(warned, style="yellow")] if warned else []
    if not waiting:
        return Text("\n").join(
            [Text("Waiting on you: nobody — all quiet", style="bold green"), *config_line]
        )
    lines = [Text(f"Waiting on you ({len(waiting)}):", style="bold reverse"), *config_line]
    for unit in waiting:
        state = unit["attention"]
        line = Text("  ")
        line.append(unit["unit_id"], style="bold")
        line.append("  ")
        line.append(state["state"], style=STATE_STYLES.get(state["state"], ""))
        line.append(f" {age_at(state.get('since'), document['observed_at'])}  ")
        line.append(str(state.get("why") or ""))
        lines.append(line)
        command = (unit.get("recovery") or {}).get("command")
        if command and state["state"] == "recovery":
            lines.append(Text.assemble("    run: ", (command, "bold")))
    return Text("\n").join(lines)


def _unreadable(pair: dict[str, Any]) -> tuple[str, str] | None:
    """(what, why) when the marker or the receipt was refused by the bounded reader."""
    for name, what in (("in_flight", "marker"), ("latest_receipt", "receipt")):
        found = pair.get(name) or {}
        if "unreadable" in found:
            return what, str(found.get("error"))
    return None


def attention(unit: dict[str, Any]) -> list[tuple[str, str]]:
    """(style, text) for everything about this unit a person should look at: first its
    attention state when the lead must act (the one the banner names, from the one attention
    function), then the details behind it."""
    notes: list[tuple[str, str]] = []
    state = (unit.get("attention") or {}).get("state")
    if state in NEEDS_LEAD:
        notes.append((STATE_STYLES.get(state, "bold"), state))
    recovery = unit.get("recovery") or {}
    if recovery.get("needed"):
        notes.append(("bold red", f"recover: {recovery.get('why')}"))
    if unit.get("feedback"):  # the ledger's counts (SPEC 3.17), as status --all has them
        notes.append(("cyan", str(unit["feedback"])))
    if unit.get("lifecycle") == "unreadable":
        return notes
    pair = unit.get("pair") or {}
    if "error" in pair:
        notes.append(("red", f"pair: {pair['error']}"))
        return notes
    refused = _unreadable(pair)
    if refused:
        notes.append(("red", f"{refused[0]} unreadable: {refused[1]}"))
        return notes
    in_flight = pair.get("in_flight")
    turn = pair.get("turn") or {}
    if in_flight:
        queue = in_flight.get("heavy_queue") or {}
        quiet = turn.get("seconds_since_output")
        if not in_flight.get("alive", True):
            notes.append(("bold red", "turn lost"))
        elif queue.get("queued"):
            notes.append(("cyan", "queued on the heavy slot"))
        elif quiet is not None and quiet >= QUIET_SECONDS:
            notes.append(("yellow", f"quiet {quiet // 60}m"))
    receipt = pair.get("latest_receipt") or {}
    if receipt and not in_flight and receipt.get("status") not in (None, "replied"):
        notes.append(("red", f"#{receipt.get('seq')} {receipt.get('status')}"))
    moved = [change.get("ref") for change in receipt.get("foreign_ref_changes") or []]
    if moved:
        notes.append(("bold red", f"moved foreign refs: {', '.join(map(str, moved))}"))
    planted = [change.get("key_or_path") for change in receipt.get("foreign_config_changes") or []]
    if planted:
        notes.append(("bold red", f"changed git config: {', '.join(map(str, planted))}"))
    throttle = receipt.get("throttle_signals") or {}
    if throttle.get("rate_limit_lines"):
        notes.append(("yellow", f"throttled x{throttle['rate_limit_lines']}"))
    if unit.get("pending_notice"):
        notes.append(("yellow", "notice queued"))
    if unit.get("error"):
        notes.append(("red", "error recorded"))
    return notes


def _calm(unit: dict[str, Any]) -> Any:
    """A unit nobody needs to look at: its attention state as it is (running, idle, busy)."""
    from rich.text import Text

    state = (unit.get("attention") or {}).get("state") or "ok"
    return Text(str(state), style=STATE_STYLES.get(state, "green"))


def _turn(pair: dict[str, Any]) -> str:
    if "error" in pair:
        return "-"
    in_flight = pair.get("in_flight")
    turn = pair.get("turn") or {}
    refused = _unreadable(pair)
    if refused:
        return f"{refused[0]} unreadable"
    if in_flight:
        quiet = turn.get("seconds_since_output")
        return f"#{in_flight.get('seq')} running" + (
            f" {quiet}s quiet" if quiet is not None else ""
        )
    receipt = pair.get("latest_receipt")
    return f"#{receipt.get('seq')} {receipt.get('status')}" if receipt else f"#{pair.get('seq', 0)}"


def _size(count: int | None) -> str:
    if count is None:
        return "-"
    size, unit = float(count), "B"
    for bigger in ("KB", "MB", "GB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.0f}{unit}" if unit == "B" else f"{size:.1f}{unit}"


def frame(document: dict[str, Any]) -> Any:
    """One rich renderable of a `status --all` document.

    Every string an executor could have written is cleaned first (SPEC 8: its escape sequences
    print as visible text) and reaches rich only as `Text`, never as a markup string, so a
    `[link=…]` or `[blink]` in a receipt is shown as it is written."""
    from typing import cast  # with rich, only for the dashboard

    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    document = cast("dict[str, Any]", terminal.clean_all(document))
    units = document["units"]
    flagged = len(waiting_on_you(units))
    title = Text.assemble(
        ("unitmgr ", "bold"),
        f"{document['repository']}  {document['observed_at']}  ",
        (f"{len(units)} unit(s)", "bold"),
        (
            f", {flagged} need attention" if flagged else ", all quiet",
            "yellow" if flagged else "green",
        ),
    )
    table = Table(expand=True, show_lines=False, header_style="bold")
    for name in ("unit", "lifecycle", "partner", "turn", "output", "worktree", "attention"):
        table.add_column(name, overflow="fold")
    ordered = sorted(units, key=lambda unit: (not attention(unit), unit["unit_id"]))
    for unit in ordered:
        notes = attention(unit)
        pair = unit.get("pair") or {}
        worktree = unit.get("worktree") or {}
        turn = pair.get("turn") or {}
        label = Text(unit["unit_id"], style="bold" if notes else "")
        if unit.get("ports"):  # under the id: a column of its own would squeeze a narrow view
            label.append("\n:" + ports_cell(unit["ports"]), style="dim")
        table.add_row(
            label,
            Text(str(unit.get("lifecycle", "-"))),
            _partner_cell(unit),
            Text(_turn(pair)),
            Text(_size(turn.get("bytes"))),
            Text(
                f"+{worktree.get('ahead_of_base')} dirty {worktree.get('dirty_files')}"
                if worktree.get("present")
                else "missing"
                if unit.get("lifecycle") != "unreadable"
                else "-"
            ),
            Text("; ").join(Text(text, style=style) for style, text in notes)
            if notes
            else _calm(unit),
        )
    parts: list[Any] = [banner(document), title, table]
    for overlap in document.get("overlaps", []):
        first, second = overlap["units"]
        parts.append(
            Text(f"overlap {first} / {second}: " + ", ".join(overlap["files"][:5]), style="yellow")
        )
    return Group(*parts)


def _partner_cell(unit: dict[str, Any]) -> Any:
    """The partner, and under it where a unit on another machine runs (SPEC 4.3) with the
    lead's last heartbeat."""
    from rich.text import Text

    cell = Text(str(unit.get("partner") or "-"))
    where = runner_cell(unit.get("runner"))
    if where is not None:
        beat = unit["runner"].get("heartbeat_at")
        cell.append(f"\n{where}" + (f" hb {beat[11:19]}" if beat else ""), style="dim")
    return cell


def _rich_once(document: dict[str, Any]) -> Rendered:
    from rich.console import Console

    console = Console(width=100, record=True, force_terminal=sys.stdout.isatty())
    with console.capture() as captured:
        console.print(frame(document))
    return Rendered(captured.get(), styled=console.is_terminal)


def run(repo: str, *, interval: float, once: bool) -> Rendered:
    if not 0.2 <= interval <= 3600:
        raise UsageError(
            "invalid-interval",
            f"--interval must be 0.2 to 3600 seconds, got {interval}",
            next_command=Rewrite(set_options={"--interval": "2"}),
        )
    workspace = Workspace.open(repo)
    if once and not sys.stdout.isatty():
        from unitmgr.views.watch_plain import plain_frame

        document = observe.status_all(workspace)
        plain = plain_frame(document)
        if plain is not None:  # rich's own bytes, without importing rich (SPEC 7)
            return Rendered(plain, styled=False)
        return _rich_once(document)
    from rich.console import Console
    from rich.live import Live

    if once:
        return _rich_once(observe.status_all(workspace))
    if not sys.stdout.isatty():
        raise UsageError(
            "not-a-terminal",
            "unit watch is a live view for a terminal — use unit status --all (or watch --once)",
            next_command=Rewrite(flags=("--once",)),
        )
    console = Console()
    scanner = WorktreeScanner(reuse=True, common_git_dir=workspace.common_git_dir)
    stopped = False

    def stop(*_: Any) -> None:
        nonlocal stopped
        stopped = True

    previous = signal.signal(signal.SIGINT, stop)
    try:
        with Live(
            frame(observe.status_all(workspace, scanner)), console=console, auto_refresh=False
        ) as live:
            while not stopped:
                deadline = time.monotonic() + interval
                while not stopped and time.monotonic() < deadline:
                    time.sleep(0.1)
                if not stopped:
                    live.update(frame(observe.status_all(workspace, scanner)), refresh=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    return Rendered("unit watch: stopped")
