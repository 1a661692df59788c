"""What `unit feedback` keeps between polls (SPEC 3.17, 7): ETags with the answers they name,
the saved GitHub Actions job logs, and the seal of the ledger the lead last wrote (the digest
that tells a planted `sent`/`rounds` from the lead's own).

Both live in the user's private state directory (`$XDG_STATE_HOME/unitmgr/feedback/<repository
id>/<unit id>/`), never in the git common dir: an executor can write that, and a cached answer
planted there would be replayed as GitHub's on the next 304. The files are still read as hostile
(a stale copy, a hand edit): the ETag file is bounded in size, entries and each value, an ETag
that is not a plain quoted token is dropped, and anything unreadable is a cache miss — the worst
it can do is make us refetch. It knows no git and makes no network call.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

from registry.atomic import write_text_atomic
from registry.userdirs import private_dir, repository_id, state_home

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

MAX_FILE_BYTES = 4 * 1024 * 1024  # a larger ETag file is ignored whole (a refetch, not a read)
MAX_ENTRIES = 64  # URLs remembered per unit: one poll reads fewer than 20
MAX_SETTLED = 1000  # resolved review comments remembered per unit
MAX_ENTRY_BYTES = 512 * 1024  # a larger answer is not cached: it is simply fetched again
LOG_CAP_BYTES = 10 * 1024 * 1024  # a job log is saved whole up to this, then cut
LOG_TAIL_READ = 512 * 1024  # the excerpt is found in the log's last bytes, not the whole file
ERROR_CONTEXT = 30  # lines quoted before the last `##[error]`
PLAIN_TAIL = 40  # lines quoted when the log has no `##[error]`
MAX_SUMMARY_BYTES = 16 * 1024  # a kept excerpt is 6 KiB; more is not what was written
_TIMESTAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ?")
_ETAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e]{1,128}"')  # RFC 9110 entity-tag, bounded


def unit_dir(common_git_dir: Path, unit_id: str) -> Path:
    return state_home() / "feedback" / repository_id(common_git_dir) / unit_id


def logs_dir(common_git_dir: Path, unit_id: str) -> Path:
    return private_dir(unit_dir(common_git_dir, unit_id) / "logs")


def cache_key(url: str, parameters: dict[str, Any] | None) -> str:
    query = "&".join(f"{k}={v}" for k, v in sorted((parameters or {}).items()))
    return f"{url}?{query}" if query else url


class EtagCache:
    """URL -> (ETag, Link header, answer), least recently stored first."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[str, dict[str, Any]] = {}
        # review-comment key -> signature, for comments found in resolved or outdated threads:
        # they are not asked about again until edited (GraphQL has no ETags)
        self.settled: dict[str, str] = {}
        if path is not None:
            self._read()
        self.changed = False
        self.conditional = 0  # requests sent with If-None-Match
        self.not_modified = 0  # of those, answered 304

    def _read(self) -> None:
        assert self.path is not None
        try:
            if os.lstat(self.path).st_size > MAX_FILE_BYTES:
                return
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return
        if not isinstance(raw, dict):
            return
        settled = raw.get("settled")
        if isinstance(settled, dict):
            self.settled = {
                str(key): sig
                for key, sig in list(settled.items())[-MAX_SETTLED:]
                if isinstance(sig, str) and re.fullmatch(r"[0-9a-f]{64}", sig)
            }
        self.entries = self._entries(raw.get("entries"))

    @staticmethod
    def _entries(entries: Any) -> dict[str, dict[str, Any]]:
        if not isinstance(entries, dict):
            return {}
        kept: dict[str, dict[str, Any]] = {}
        for key, entry in list(entries.items())[-MAX_ENTRIES:]:
            if (
                isinstance(entry, dict)
                and isinstance(entry.get("etag"), str)
                and _ETAG.fullmatch(entry["etag"])
                and isinstance(entry.get("link"), str | None)
                and "data" in entry
            ):
                kept[str(key)] = entry
        return kept

    def lookup(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def store(self, key: str, etag: str | None, link: str | None, data: Any) -> None:
        self.entries.pop(key, None)
        if etag is None or not _ETAG.fullmatch(etag):
            return
        if len(json.dumps(data)) > MAX_ENTRY_BYTES:
            return
        self.entries[key] = {"etag": etag, "link": link, "data": data}
        while len(self.entries) > MAX_ENTRIES:
            self.entries.pop(next(iter(self.entries)))
        self.changed = True

    def save(self) -> None:
        if self.path is None or not self.changed:
            return
        private_dir(self.path.parent)
        while len(self.settled) > MAX_SETTLED:
            self.settled.pop(next(iter(self.settled)))
        document = {"version": 1, "entries": self.entries, "settled": self.settled}
        write_text_atomic(self.path, json.dumps(document))
        self.changed = False


def etag_cache(common_git_dir: Path, unit_id: str) -> EtagCache:
    return EtagCache(unit_dir(common_git_dir, unit_id) / "etags.json")


def save_log(path: Path, chunks: Iterable[bytes]) -> tuple[int, bool, bytes]:
    """Stream a job log into `path` (written beside it, then renamed), its first LOG_CAP_BYTES;
    returns the bytes kept, whether the log was cut, and its last LOG_TAIL_READ bytes (from the
    whole stream: a log's end is where its step failed, even past the cap)."""
    private_dir(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    kept, cut, tail = 0, False, b""
    with open(temporary, "wb") as out:
        for chunk in chunks:
            if not chunk:
                continue
            tail = (tail + chunk)[-LOG_TAIL_READ:]
            room = LOG_CAP_BYTES - kept
            if room > 0:
                out.write(chunk[:room])
                kept += min(room, len(chunk))
            cut = cut or len(chunk) > room
    os.replace(temporary, path)
    return kept, cut, tail


def log_excerpt(tail: bytes, *, partial: bool, max_lines: int, max_bytes: int) -> str:
    """The failing step's lines (SPEC 3.17), timestamps stripped: from 30 lines before the last
    `##[error]`, at most `max_lines` lines and `max_bytes` bytes onwards; else the last 40 lines
    (within the same bounds, from the end)."""
    lines = tail.decode("utf-8", "replace").replace("\r\n", "\n").split("\n")
    if partial:
        lines = lines[1:]  # the first line of a tail is cut
    while lines and not lines[-1].strip():
        lines.pop()
    lines = [_TIMESTAMP.sub("", line) for line in lines]
    errors = [index for index, line in enumerate(lines) if "##[error]" in line]
    if errors:
        start = max(0, errors[-1] - ERROR_CONTEXT)
        data = "\n".join(lines[start : start + max_lines]).encode()
        return data[:max_bytes].decode("utf-8", "ignore")
    data = "\n".join(lines[-min(PLAIN_TAIL, max_lines) :]).encode()
    return data[-max_bytes:].decode("utf-8", "ignore")


def read_log_summary(path: Path) -> tuple[str | None, str] | None:
    """A job's excerpt and note from an earlier poll (a completed job's log never changes; a
    re-run is a new job), or None: missing, too large, or not the shape written."""
    try:
        if os.lstat(path).st_size > 4 * MAX_SUMMARY_BYTES:
            return None
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("note"), str):
        return None
    excerpt = raw.get("excerpt")
    if excerpt is not None and not isinstance(excerpt, str):
        return None
    return (excerpt[:MAX_SUMMARY_BYTES] if excerpt else excerpt), raw["note"][:1000]


def write_log_summary(path: Path, excerpt: str | None, note: str) -> None:
    private_dir(path.parent)
    write_text_atomic(path, json.dumps({"excerpt": excerpt, "note": note}))


# -- the ledger's seal -------------------------------------------------------------------------
#
# The ledger lives in the unit record (SPEC 3.17), which an executor can write. Only its
# `pending_send` carries a MAC; `sent`, `rounds` and `round_heads` decide what is sent and when
# `--auto` stops — a planted `sent` entry silences a reviewer, rewound rounds get past the cap
# and its attention. A MAC would not catch a wiped or replayed ledger, so the lead keeps the
# sha256 of the ledger it last wrote here, outside the common dir: `current`, and while a send
# is under way the one it is about to write, `pending` (a crash between the two writes leaves
# either, and both are the lead's). A ledger matching neither is not the lead's.

SEAL_FILE = "ledger.json"
_DIGEST = re.compile(r"[0-9a-f]{64}")


def ledger_core(ledger: dict[str, Any]) -> dict[str, Any]:
    """What of the ledger decides a send: each sent key's signature and round, the round
    counters and the heads they counted (not `at`, `counts`, `capped`: words for people)."""
    sent = ledger.get("sent")
    return {
        "sent": {
            str(key): [entry.get("sig"), entry.get("round")] if isinstance(entry, dict) else entry
            for key, entry in (sent.items() if isinstance(sent, dict) else ())
        },
        "rounds": ledger.get("rounds"),
        "round_heads": ledger.get("round_heads"),
    }


def ledger_digest(ledger: dict[str, Any]) -> str:
    from registry.userdirs import sha256  # CPython's own: no OpenSSL (SPEC 7)

    text = json.dumps(ledger_core(ledger), sort_keys=True, separators=(",", ":"))
    return sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def empty_ledger() -> dict[str, Any]:
    return {"sent": {}, "rounds": {"ci": 0, "review": 0}, "round_heads": {}}


class LedgerSeal:
    """The digests of the ledgers this lead wrote for one unit (`<unit dir>/ledger.json`)."""

    def __init__(self, common_git_dir: Path, unit_id: str) -> None:
        self.path = unit_dir(common_git_dir, unit_id) / SEAL_FILE

    def accepted(self) -> set[str] | None:
        """The digests a trusted ledger may have; None: the lead never sealed one."""
        from registry import bounded

        try:
            raw = json.loads(bounded.read_bytes(self.path, 4096))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, bounded.Unreadable):
            return set()  # unreadable: nothing matches, the next explicit send seals afresh
        if not isinstance(raw, dict):
            return set()
        return {
            value
            for value in (raw.get("current"), raw.get("pending"))
            if isinstance(value, str) and _DIGEST.fullmatch(value)
        }

    def trusted(self, ledger: dict[str, Any]) -> bool:
        accepted = self.accepted()
        digest = ledger_digest(ledger)
        if accepted is None:
            return digest == ledger_digest(empty_ledger())
        return digest in accepted

    def _write(self, current: str, pending: str | None) -> None:
        private_dir(self.path.parent)
        write_text_atomic(self.path, json.dumps({"current": current, "pending": pending}))

    def expect(self, ledger: dict[str, Any], after: dict[str, Any]) -> None:
        """Before a send writes the record: `ledger` as it stands, and as it will be."""
        self._write(ledger_digest(ledger), ledger_digest(after))

    def settle(self, ledger: dict[str, Any]) -> None:
        """After the record holding `ledger` is written."""
        self._write(ledger_digest(ledger), None)

    def remove(self) -> None:
        import contextlib

        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
