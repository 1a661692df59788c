"""`--format table`: list and status for people, readable at 80 columns.

A recovery command is never cut: it gets its own lines, wrapped between words to the terminal's
width (at most 80) with shell line continuations, so copying the lines runs exactly the command.
Under the rows, each unit waiting on the lead gets a line — its attention state, how long, why —
in the order `unit watch` names them.
"""

from __future__ import annotations

from registry import terminal
from unitmgr.views.attention import age_at, waiting_on_you

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

WIDTH = 80
COMMAND_INDENT = "    "


def _cut(text: Any, width: int) -> str:
    value = "-" if text is None or text == "" else str(text)
    return value if len(value) <= width else value[: width - 1] + "…"


def _width() -> int:
    return min(WIDTH, terminal.columns())


def _note(text: str) -> str:
    """A `! ...` line wrapped to the table width, continuation lines indented."""
    import textwrap  # only for a table (SPEC 7: the JSON answer needs none)

    return textwrap.fill(
        text, _width(), subsequent_indent="    ", break_long_words=True, break_on_hyphens=False
    )


def shell_words(command: str) -> list[str]:
    """`command` split at the spaces outside quotes: each word as written, quotes and all."""
    words, current, quote = [], "", ""
    for character in command:
        if character == " " and not quote:
            words.append(current)
            current = ""
            continue
        if quote and character == quote:
            quote = ""
        elif not quote and character in "'\"":
            quote = character
        current += character
    return [word for word in [*words, current] if word]


def command_lines(command: str) -> str:
    """`command` on lines of at most the table width, broken only between words with ` \\`, so
    the lines paste into a shell as the command itself; a longer word stays whole."""
    words = shell_words(command)
    if " ".join(words) != command:  # doubled spaces or an open quote: never re-spaced
        return COMMAND_INDENT + command
    width, lines, line = _width(), [], COMMAND_INDENT
    for word in words:
        if line.strip() and len(line) + 1 + len(word) + 2 > width:
            lines.append(line + " \\")
            line = COMMAND_INDENT + "  " + word
        else:
            line = (line + " " + word) if line.strip() else line + word
    return "\n".join([*lines, line])


def _recovery(unit: dict[str, Any]) -> str:
    """What a unit needing recovery shows under the table: why, then the whole command."""
    recovery = unit["recovery"]
    return (
        _note(f"! {unit['unit_id']}: {recovery['why']}") + "\n" + command_lines(recovery["command"])
    )


def _waiting(units: list[dict[str, Any]], observed_at: str | None) -> list[str]:
    """A `! ...` line per unit waiting on the lead (SPEC 3.4), as `unit watch`'s banner names
    them; a unit needing recovery has its own note, with the command, already."""
    notes = []
    for unit in waiting_on_you(units):
        state = unit["attention"]
        if state["state"] == "recovery":
            continue
        since = f" {age_at(state.get('since'), observed_at)}" if observed_at else ""
        notes.append(_note(f"! {unit['unit_id']} {state['state']}{since}: {state.get('why')}"))
    return notes


def _rows(header: list[str], rows: list[list[str]], widths: list[int]) -> str:
    lines = ["  ".join(_cut(c, w).ljust(w) for c, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        lines.append(
            "  ".join(_cut(c, w).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        )
    return "\n".join(lines)


def _turn(pair: dict[str, Any]) -> str:
    if "error" in pair:
        return "pair: " + str(pair["error"])
    in_flight = pair.get("in_flight")
    if in_flight and "unreadable" in in_flight:
        return "marker unreadable"
    if in_flight:
        turn = pair.get("turn") or {}
        quiet = turn.get("seconds_since_output")
        state = "running" if in_flight.get("alive", True) else "LOST"
        return f"#{in_flight.get('seq')} {state}" + (
            f", quiet {quiet}s" if quiet is not None else ""
        )
    receipt = pair.get("latest_receipt")
    if receipt and "unreadable" in receipt:
        return "receipt unreadable"
    if receipt:
        text = f"#{receipt.get('seq')} {receipt.get('status')}"
        throttle = receipt.get("throttle_signals")
        if throttle:
            text += f" (throttled x{throttle.get('rate_limit_lines')})"
        return text
    return f"#{pair.get('seq', 0)} idle"


def _worktree(worktree: dict[str, Any]) -> str:
    if not worktree.get("present"):
        return "missing"
    ahead, behind = worktree.get("ahead_of_base"), worktree.get("behind_base")
    return f"+{ahead}/-{behind} dirty {worktree.get('dirty_files')}"


def config_warning_text(document: dict[str, Any]) -> str | None:
    """The one note a config problem gets (SPEC 3.16: a read reports it, never fails on it),
    its control characters shown escaped: the file is the repository's, anyone's to write."""
    warning = document.get("config_warning")
    if not isinstance(warning, dict):
        return None
    more = int(warning.get("problems") or 1) - 1
    also = f" (and {more} more)" if more > 0 else ""
    reason = terminal.clean(str(warning.get("reason")))
    return f"config warning: {reason}{also}; ignored, see: unit config"


def _config_notes(document: dict[str, Any]) -> list[str]:
    text = config_warning_text(document)
    return [_note("! " + text)] if text else []


def status_all(document: dict[str, Any]) -> str:
    header = ["UNIT", "LIFECYCLE", "PARTNER", "TURN", "WORKTREE"]
    widths = [14, 17, 8, 20, 13]
    rows = []
    notes = []
    for unit in document["units"]:
        if unit.get("lifecycle") == "unreadable":
            rows.append([unit["unit_id"], "UNREADABLE", "-", "-", "-"])
        else:
            rows.append(
                [
                    unit["unit_id"],
                    unit["lifecycle"],
                    unit.get("partner") or "-",
                    _turn(unit["pair"]),
                    _worktree(unit["worktree"]),
                ]
            )
        if (unit.get("recovery") or {}).get("needed"):
            notes.append(_recovery(unit))
    text = _rows(header, rows, widths) if rows else "no units"
    notes += _runner_notes(document["units"])
    notes += _waiting(document["units"], document.get("observed_at"))
    notes += [
        _note(f"  {u['unit_id']} {u['feedback']}") for u in document["units"] if u.get("feedback")
    ]
    notes += _config_notes(document)
    for overlap in document.get("overlaps", []):
        a, b = overlap["units"]
        notes.append(_note(f"! overlap {a} / {b}: " + ", ".join(overlap["files"][:3])))
    return "\n".join([text, *notes]) + "\n"


def runner_cell(runner: Any) -> str | None:
    """`ray gpu1` (or `ray any node`) for a unit on another machine (SPEC 4.3), None here."""
    if not isinstance(runner, dict) or not runner.get("kind"):
        return None
    return f"{runner['kind']} {runner.get('node') or 'any node'}"


def _runner_notes(units: list[dict[str, Any]]) -> list[str]:
    """One line per unit on another machine: its node and the lead's last heartbeat."""
    notes = []
    for unit in units:
        where = runner_cell(unit.get("runner"))
        if where is not None:
            beat = unit["runner"].get("heartbeat_at") or "- (no turn in flight)"
            notes.append(_note(f"  {unit['unit_id']} runs on {where}, heartbeat {beat}"))
    return notes


def ports_cell(ports: Any) -> str:
    """A unit's leased ports in a cell: `20417`, or `20417+1` (the first, and how many more)."""
    if not isinstance(ports, list) or not ports:
        return "-"
    return str(ports[0]) + (f"+{len(ports) - 1}" if len(ports) > 1 else "")


def list_units(document: dict[str, Any]) -> str:
    header = ["UNIT", "LIFECYCLE", "BRANCH", "PARTNER", "PORTS", "RECOVERY"]
    widths = [14, 17, 15, 8, 8, 8]
    rows = []
    notes = []
    for unit in document["units"]:
        recovery = unit.get("recovery") or {}
        partner = ((unit.get("staffing") or {}).get("current") or {}).get("partner")
        rows.append(
            [
                unit["unit_id"],
                unit.get("lifecycle", "-"),
                unit.get("branch") or "-",
                partner or "-",
                ports_cell(unit.get("ports")),
                "needed" if recovery.get("needed") else "-",
            ]
        )
        if recovery.get("needed"):
            notes.append(_recovery(unit))
    text = _rows(header, rows, widths) if rows else "no units"
    notes += _runner_notes(document["units"])
    notes += _waiting(document["units"], None)
    notes += _config_notes(document)
    return "\n".join([text, *notes]) + "\n"


def status_unit(document: dict[str, Any]) -> str:
    unit = document["unit"]
    observed = unit.get("observed") or {}
    pair = observed.get("pair") or {}
    receipt = observed.get("latest_receipt") or {}
    staffing = (unit.get("staffing") or {}).get("current") or {}
    lines = [
        f"unit       {unit['unit_id']}  ({unit['lifecycle']})",
        f"branch     {unit['branch']}  base {unit['base']}",
        f"worktree   {unit['worktree']}",
        f"ports      {' '.join(str(port) for port in unit.get('ports') or []) or '-'}",
        f"partner    {staffing.get('partner')}  model {_cut(staffing.get('model'), 40)}",
        f"pair       seq {pair.get('seq', '-')}  "
        + ("in flight" if pair.get("in_flight") else "idle"),
        f"receipt    {receipt.get('status', '-')}  {_cut(receipt.get('reason'), 50)}",
    ]
    where = runner_cell(unit.get("runner"))
    if where is not None:
        beat = unit["runner"].get("heartbeat_at") or "-"
        lines.append(f"runner     {where}  heartbeat {beat}")
    if unit.get("error"):
        lines.append(f"error      {_cut(unit['error'], 68)}")
    lines += _config_notes(document)
    return "\n".join(lines) + "\n"


def _waiting_on(dependency: dict[str, Any], repository: str) -> str:
    """`#3 open`, `#4 duplicate`, or `other/lib#2 open`: `#2` alone would be this repository's."""
    named = dependency.get("repository", repository)
    where = "" if named == repository else named
    return f"{where}#{dependency['number']} {dependency.get('state_reason') or dependency['state']}"


def intake(document: dict[str, Any]) -> str:
    capacity = document["capacity"]
    lines = [
        _note(
            f"{document['repository']}: {capacity['slots']} slot(s) free "
            f"(active {capacity['active']}/{capacity['max_active']}, held {capacity['held']}/"
            f"{capacity['max_held']}, PR state {capacity['pr_state']})"
        ),
    ]
    header = ["ISSUE", "READY", "DEPENDS ON", "TITLE"]
    widths = [7, 5, 18, 44]
    rows = []
    for candidate in document["candidates"]:
        waiting = [
            _waiting_on(d, document["repository"])
            for d in candidate["depends_on"]
            if not d.get("satisfied")
        ]
        rows.append(
            [
                f"#{candidate['number']}",
                "yes" if candidate["ready"] else "no",
                ", ".join(waiting) or "-",
                candidate["title"],
            ]
        )
    lines.append(_rows(header, rows, widths) if rows else "no candidates")
    if document.get("capped"):
        lines.append("! the listing hit --limit: there may be more candidates")
    return "\n".join(lines) + "\n"
