"""`pair clear` (SPEC 4.1): remove a dead turn's in-flight marker; refuses while any of its
processes lives.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pair.commands.shared import locate_paths
from pair.errors import StateError
from pair.paths import PairPaths
from pair.state import MarkerUnreadable, marker_mutex, read_marker
from registry.atomic import remove_file


def clear(repo: str | Path) -> dict[str, Any]:
    _, paths = locate_paths(repo)
    return clear_state(paths.state_dir)


def clear_state(state_dir: str | Path) -> dict[str, Any]:
    """`clear` for a known state dir (works when the worktree directory itself is gone)."""
    paths = PairPaths(Path(state_dir))
    if not paths.marker_file.exists():
        # Nothing to clear, and nothing written (not even the marker lock) where no pair is.
        return {"ok": True, "status": "already-cleared", "lock_file": str(paths.marker_file)}
    with marker_mutex(paths):
        try:
            marker = read_marker(paths)
        except MarkerUnreadable:
            raise StateError(
                "marker-unreadable",
                f"the in-flight marker {paths.marker_file} cannot be read — inspect it by hand "
                "and remove it once no partner process remains",
            ) from None
        if marker is None:
            return {"ok": True, "status": "already-cleared", "lock_file": str(paths.marker_file)}
        pid = marker.live_pid()
        if pid is not None:
            raise StateError(
                "turn-in-flight",
                f"seq {marker.seq} is still in flight as pid {pid} — clear it only after that "
                "process is gone",
                detail={"seq": marker.seq, "pid": pid},
            )
        remove_file(paths.marker_file)
    return {
        "ok": True,
        "status": "cleared",
        "lock_file": str(paths.marker_file),
        "marker": marker.to_json(),
    }
