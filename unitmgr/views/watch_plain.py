"""`unit watch --once` into a pipe without rich: the very text rich prints there (SPEC 7).

Importing rich alone is several times `python -c pass`, and a frame sent to a pipe carries no
style: `plain_frame` lays the frame out as rich 15 does on watch.run's 100-column console that
is no terminal — the banner, title and overlap lines word-wrapped and folded as `Text.wrap`
does, the table in the heavy-head box, its columns measured, collapsed (`_collapse_widths`,
`ratio_reduce`) and widened (`ratio_distribute`) by rich's own arithmetic, each cell wrapped
the same way — for text of one-cell characters (printable ASCII and the banner's dash). A frame
holding any other character (wide, combining, tab, control: rich's own cell measure) answers
None, and `watch.frame` renders it with rich, as before. tests/test_watch_plain.py holds the two
to the same bytes over thousands of frames; a rich upgrade that moves a byte fails it.
"""

from __future__ import annotations

from math import ceil

from registry import terminal
from registry.lazy_re import lazy
from unitmgr.views import watch
from unitmgr.views.attention import age_at, waiting_on_you
from unitmgr.views.table import config_warning_text, ports_cell, runner_cell

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

WIDTH = 100  # watch.run's console
COLUMNS = ("unit", "lifecycle", "partner", "turn", "output", "worktree", "attention")
ONE_CELL = frozenset(chr(code) for code in range(0x20, 0x7F)) | {"\u2014"}
WORD = lazy(r"\s*\S+\s*")
TRAILING_SPACE = lazy(r"\s+$")


def _one_cell(text: str) -> bool:
    return all(character in ONE_CELL for character in text)


def _wrap(line: str, width: int) -> list[str]:
    """rich's `Text.wrap` of one line of one-cell characters (overflow "fold"): `divide_line`'s
    breaks, each piece's whitespace beyond `width` cut (`rstrip_end`), then cropped."""
    breaks: list[int] = []
    offset = 0
    position = 0
    found = WORD.match(line, position)
    while found is not None:
        start, end = found.span()
        word = found.group(0)
        length = len(word.rstrip())
        if width - offset >= length:
            offset += len(word)
        elif length > width:
            folded = [word[index : index + width] for index in range(0, len(word), width)]
            for index, piece in enumerate(folded):
                if start:
                    breaks.append(start)
                if index == len(folded) - 1:
                    offset = len(piece)
                else:
                    start += len(piece)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
        found = WORD.match(line, end)
    pieces = [line[a:b] for a, b in zip([0, *breaks], [*breaks, len(line)], strict=True)]
    wrapped = []
    for piece in pieces:
        kept = piece
        if len(piece) > width:
            space = TRAILING_SPACE.search(piece)
            if space is not None:
                kept = piece[: len(piece) - min(len(space.group(0)), len(piece) - width)]
        wrapped.append(kept[:width])
    return wrapped


def _banner(document: dict[str, Any]) -> list[str]:
    """watch.banner's lines."""
    waiting = waiting_on_you(document["units"])
    warned = config_warning_text(document)
    config_line = [warned] if warned else []
    if not waiting:
        return ["Waiting on you: nobody \u2014 all quiet", *config_line]
    lines = [f"Waiting on you ({len(waiting)}):", *config_line]
    for unit in waiting:
        state = unit["attention"]
        lines.append(
            f"  {unit['unit_id']}  {state['state']}"
            f" {age_at(state.get('since'), document['observed_at'])}  "
            + str(state.get("why") or "")
        )
        command = (unit.get("recovery") or {}).get("command")
        if command and state["state"] == "recovery":
            lines.append(f"    run: {command}")
    return lines


def _row(unit: dict[str, Any]) -> list[str]:
    """watch.frame's cells of one unit, as text."""
    notes = watch.attention(unit)
    pair = unit.get("pair") or {}
    worktree = unit.get("worktree") or {}
    turn = pair.get("turn") or {}
    label = unit["unit_id"]
    if unit.get("ports"):
        label += "\n:" + ports_cell(unit["ports"])
    partner = str(unit.get("partner") or "-")
    where = runner_cell(unit.get("runner"))
    if where is not None:
        beat = unit["runner"].get("heartbeat_at")
        partner += f"\n{where}" + (f" hb {beat[11:19]}" if beat else "")
    calm = (unit.get("attention") or {}).get("state") or "ok"
    return [
        label,
        str(unit.get("lifecycle", "-")),
        partner,
        watch._turn(pair),
        watch._size(turn.get("bytes")),
        f"+{worktree.get('ahead_of_base')} dirty {worktree.get('dirty_files')}"
        if worktree.get("present")
        else "missing"
        if unit.get("lifecycle") != "unreadable"
        else "-",
        "; ".join(text for _, text in notes) if notes else str(calm),
    ]


def _distribute(total: int, ratios: list[int]) -> list[int]:
    """rich's `ratio_distribute` without minimums."""
    total_ratio, remaining, found = sum(ratios), total, []
    for ratio in ratios:
        part = ceil(ratio * remaining / total_ratio) if total_ratio > 0 else remaining
        found.append(part)
        total_ratio -= ratio
        remaining -= part
    return found


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """rich's `ratio_reduce`."""
    ratios = [ratio if maximum else 0 for ratio, maximum in zip(ratios, maximums, strict=True)]
    total_ratio, remaining, found = sum(ratios), total, []
    if not total_ratio:
        return values[:]
    for ratio, maximum, value in zip(ratios, maximums, values, strict=True):
        if ratio and total_ratio > 0:
            part = min(maximum, round(ratio * remaining / total_ratio))
            found.append(value - part)
            remaining -= part
            total_ratio -= ratio
        else:
            found.append(value)
    return found


def _collapse(widths: list[int], room: int) -> list[int]:
    """rich's `Table._collapse_widths`, every column wrapable."""
    total = sum(widths)
    excess = total - room
    while total and excess > 0:
        widest = max(widths)
        second = max(width if width != widest else 0 for width in widths)
        ratios = [1 if width == widest else 0 for width in widths]
        difference = widest - second
        if not any(ratios) or not difference:
            break
        widths = _reduce(excess, ratios, [min(excess, difference)] * len(widths), widths)
        total = sum(widths)
        excess = total - room
    return widths


def _widths(cells: list[list[list[str]]], room: int) -> list[int] | None:
    """rich's `Table._calculate_column_widths` for watch's table (expand, padding 1, fold)."""
    longest = [
        max(len(line) for row in cells for line in row[column]) for column in range(len(COLUMNS))
    ]

    def measured(limit: int) -> list[int]:
        # Padding's measure: the text's clamped to `limit`, plus 2, clamped again.
        return [limit if limit - 2 < 1 else min(min(size, limit) + 2, limit) for size in longest]

    widths = [width or 1 for width in measured(room)]
    table_width = sum(widths)
    if table_width > room:
        widths = _collapse(widths, room)
        table_width = sum(widths)
        if table_width > room:
            widths = _reduce(table_width - room, [1] * len(widths), widths, widths)
            table_width = sum(widths)
        widths = [
            measured(width)[column] if width >= 1 else 0 for column, width in enumerate(widths)
        ]
    if table_width < room:
        widths = [
            width + pad
            for width, pad in zip(widths, _distribute(room - table_width, widths), strict=True)
        ]
    return widths if all(width >= 3 for width in widths) else None


def _table(rows: list[list[str]]) -> list[str] | None:
    cells = [[cell.split("\n") for cell in row] for row in [list(COLUMNS), *rows]]
    if not all(_one_cell(line) for row in cells for cell in row for line in cell):
        return None
    room = WIDTH - (len(COLUMNS) + 1)
    widths = _widths(cells, room)
    if widths is None:
        return None  # a column too narrow for its padding: rich's own layout

    def lines_of(row: list[list[str]], edge: str, inner: str) -> list[str]:
        wrapped = [
            [piece for line in cell for piece in _wrap(line, width - 2)]
            for cell, width in zip(row, widths, strict=True)
        ]
        height = max(len(cell) for cell in wrapped)
        return [
            edge
            + inner.join(
                " " + (cell[index] if index < len(cell) else "").ljust(width - 2) + " "
                for cell, width in zip(wrapped, widths, strict=True)
            )
            + edge
            for index in range(height)
        ]

    def rule(left: str, fill: str, middle: str, right: str) -> str:
        return left + middle.join(fill * width for width in widths) + right

    lines = [rule("┏", "━", "┳", "┓"), *lines_of(cells[0], "┃", "┃"), rule("┡", "━", "╇", "┩")]
    for row in cells[1:]:
        lines.extend(lines_of(row, "│", "│"))
    lines.append(rule("└", "─", "┴", "┘"))
    return lines


def plain_frame(document: dict[str, Any]) -> str | None:
    """watch.frame's text as rich prints it to a 100-column non-terminal, or None when rich's
    layout must decide (see the module's docstring)."""
    document = terminal.clean_all(document)  # type: ignore[assignment]
    units = document["units"]
    flagged = len(waiting_on_you(units))
    title = f"unitmgr {document['repository']}  {document['observed_at']}  {len(units)} unit(s)" + (
        f", {flagged} need attention" if flagged else ", all quiet"
    )
    ordered = sorted(units, key=lambda unit: (not watch.attention(unit), unit["unit_id"]))
    table = _table([_row(unit) for unit in ordered])
    if table is None:
        return None
    lines = [*_banner(document), title]
    for overlap in document.get("overlaps", []):
        first, second = overlap["units"]
        lines.append(f"overlap {first} / {second}: " + ", ".join(overlap["files"][:5]))
    if not all(_one_cell(line) for line in lines):
        return None
    overlaps = len(document.get("overlaps", []))
    before = [piece for line in lines[: len(lines) - overlaps] for piece in _wrap(line, WIDTH)]
    after = [piece for line in lines[len(lines) - overlaps :] for piece in _wrap(line, WIDTH)]
    return "".join(line + "\n" for line in [*before, *table, *after])
