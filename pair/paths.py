"""Where a pair keeps its files: the one place that names them (SPEC 4.1).

State is per worktree, in `<absolute-git-dir>/pair/`:

```
session.json                      the session (partner, sid, seq, staffing)
in-flight.json                    the in-flight marker: at most one turn (or bootstrap) runs
in-flight.lock                    flock serializing every change to the marker (holds no state)
transcripts/NNNN-<kind>.log       the partner's output (redacted), byte for byte
transcripts/NNNN-<kind>-prompt.md / -reply.md / -receipt.json / -supervisor.log
ended/<stamp>-<sid>/              sessions that `end` closed (kept for the archive)
```

This module is public: `unitmgr` asks it (through `pair.api`) for every pair path instead of
building `<git-dir>/pair/...` itself. It computes names only: it reads, writes and runs nothing.
"""

from __future__ import annotations

from pathlib import Path

from registry.light_dataclass import dataclass

STATE_DIR_NAME = "pair"
RECEIPT_SUFFIX = "-receipt.json"
LOG_SUFFIX = ".log"  # a transcript (`NNNN-<kind>.log`) or a supervisor log (`-supervisor.log`)


def state_dir_for(git_dir: str | Path) -> Path:
    """The pair state dir of the worktree whose absolute git dir is `git_dir`."""
    return Path(git_dir) / STATE_DIR_NAME


def is_receipt(name: str) -> bool:
    """Whether a file name under `transcripts/` is a turn's receipt."""
    return name.endswith(RECEIPT_SUFFIX)


def is_log(name: str) -> bool:
    """Whether a file name is a log that grows with a turn (a transcript or a supervisor log)."""
    return name.endswith(LOG_SUFFIX)


@dataclass(frozen=True)
class PairPaths:
    state_dir: Path

    @property
    def session_file(self) -> Path:
        return self.state_dir / "session.json"

    @property
    def marker_file(self) -> Path:
        return self.state_dir / "in-flight.json"

    @property
    def marker_mutex_file(self) -> Path:
        return self.state_dir / "in-flight.lock"

    @property
    def lock_files(self) -> tuple[Path, ...]:
        """Files that serialize access and hold no state (an archive skips them)."""
        return (self.marker_mutex_file,)

    @property
    def transcripts_dir(self) -> Path:
        return self.state_dir / "transcripts"

    @property
    def ended_dir(self) -> Path:
        return self.state_dir / "ended"

    def turn_file(self, seq: int, kind: str, suffix: str) -> Path:
        """`suffix` is `.log`, `-prompt.md`, `-reply.md`, `-receipt.json` or `-supervisor.log`.
        A kind that is not one plain name is refused (its files stay in `transcripts/`)."""
        if not kind or "/" in kind or "\0" in kind or kind.startswith("."):
            raise ValueError(f"not a turn kind: {kind[:64]!r}")
        return self.transcripts_dir / f"{seq:04d}-{kind}{suffix}"

    def transcript_file(self, seq: int, kind: str) -> Path:
        return self.turn_file(seq, kind, LOG_SUFFIX)

    def receipt_file(self, seq: int, kind: str) -> Path:
        return self.turn_file(seq, kind, RECEIPT_SUFFIX)
