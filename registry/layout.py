"""Where the registry keeps its files (SPEC 2.1): names and paths only, no record read here.

registry/store.py builds every registry path from these; the fast reads (`unit list`, `unit
status --all`) call `unit_ids` alone to answer an empty registry without loading the record
types (SPEC 7: start-up at most 5x `python -c pass`). It knows no git, and it must stay free of
heavy imports (no typing, no dataclasses).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing's own flag costs the fast reads an import (SPEC 7)
if TYPE_CHECKING:
    from pathlib import Path

REGISTRY_DIR = "orchestrate"  # in the git common dir, shared by every worktree
RECORD_SUFFIX = ".json"


def registry_root(common_git_dir: Path) -> Path:
    return common_git_dir / REGISTRY_DIR


def units_dir(common_git_dir: Path) -> Path:
    return registry_root(common_git_dir) / "units"


def registry_root_text(common_git_dir: str) -> str:
    """`str(registry_root(Path(common_git_dir)))`, for the reads that import no pathlib."""
    from registry.pathtext import joined

    return joined(common_git_dir, REGISTRY_DIR)


def units_dir_text(common_git_dir: str) -> str:
    """`str(units_dir(Path(common_git_dir)))`."""
    from registry.pathtext import joined

    return joined(registry_root_text(common_git_dir), "units")


def unit_ids(units: Path | str) -> list[str]:
    """The ids of the record files in `units`, sorted; none when the directory does not exist."""
    try:
        names = os.listdir(units)
    except FileNotFoundError:
        return []
    return sorted(name[: -len(RECORD_SUFFIX)] for name in names if is_record_name(name))


def is_record_name(name: str) -> bool:
    return (
        name.endswith(RECORD_SUFFIX) and not name.startswith(".") and len(name) > len(RECORD_SUFFIX)
    )
