"""Authenticated fields (SPEC 8): an HMAC over what drives execution or opens a gate.

An executor can write the whole git common dir, the registry included, and its own pair files.
So a value that makes the lead run a command (`setup`, `validation`, the script partner's
command), open a gate (`scope_approval`, `verification`), send a task (`task`), signal a process
(a journaled child), deliver a notification (a session's notify target) or an addendum (the
stored `feedback.pending_send`) is trusted only with a MAC made by the lead, under a key that
lives outside the common dir:
`$XDG_STATE_HOME/unitmgr/keys/<repository id>` (0600, directory 0700, made on first signature).

A MAC covers `subject` (the unit id, or a pair's state dir), the field's name and the canonical
JSON of its value, so a signed value cannot be moved to another unit or another field. Its
input is the redacted form, since records reach disk redacted (registry/atomic.py).

This module knows no git and no record layout beyond the dotted field names it is given. It
never creates a key while verifying: a reader (`status --all`, `list`) writes nothing anywhere,
and with no key nothing verifies. `SIGNED_FIELDS` and `sign_changed`/`verified` are how the
registry's one write path (`registry/store.py`) and every use site share one list.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from registry.userdirs import private_dir, repository_id, sha256, state_home

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from registry.records import UnitRecord

MAC_PREFIX = "hmac-sha256:"
KEY_BYTES = 32
MAX_KEY_FILE_BYTES = 4096

# The record's fields a MAC covers, by dotted name (the keys of `UnitRecord.signatures`).
SIGNED_FIELDS = (
    "setup",
    "validation",
    "task",
    "staffing.current",  # partner and model: a script partner's model is its command
    "pending_staffing",
    "scope_approval",
    "verification",
    "verification_child",
    "feedback.pending_send",  # the addendum a crashed `unit feedback --send` resumes
)
# Where a journaled child's own MAC sits, beside `detail.child` (SPEC 8: journaled identities).
CHILD_MAC_KEY = "child_signature"


def key_dir() -> Path:
    return state_home() / "keys"


# Local secrets kept beside the repositories' keys, never a signature's (a record names its key
# by id, and an executor writes records): `pair.runners.ray_warm`'s.
LOCAL_SECRETS = frozenset({"ray-forkserver"})


def _safe_id(key_id: str) -> bool:
    return bool(key_id) and "/" not in key_id and key_id not in (".", "..") and "\0" not in key_id


class Signer:
    """The MACs of one repository, keyed by `key_id` (its repository id)."""

    _cache: dict[str, bytes] = {}  # noqa: RUF012 — one process, one key per repository

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id

    @classmethod
    def for_common_dir(cls, common_git_dir: Path | str) -> Signer:
        return cls(repository_id(Path(common_git_dir)))

    @property
    def key_file(self) -> Path:
        return key_dir() / self.key_id

    def _read_key(self) -> bytes | None:
        if not _safe_id(self.key_id):
            return None
        cached = Signer._cache.get(str(self.key_file))
        if cached is not None:
            return cached
        try:
            fd = os.open(self.key_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_KEY_FILE_BYTES:
                return None
            text = handle.read(MAX_KEY_FILE_BYTES).strip()
        try:
            key = bytes.fromhex(text.decode("ascii"))
        except ValueError:
            return None
        if len(key) < KEY_BYTES:
            return None
        Signer._cache[str(self.key_file)] = key
        return key

    def _make_key(self) -> bytes:
        """Create the key once; a concurrent creator's key wins (link refuses to overwrite)."""
        private_dir(key_dir())
        temp = key_dir() / f".{self.key_id}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as handle:
                # `secrets.token_hex`, without `secrets` (its `hmac` loads OpenSSL, SPEC 7)
                handle.write(os.urandom(KEY_BYTES).hex() + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temp, self.key_file)
            except FileExistsError:
                pass
        finally:
            os.unlink(temp)
        key = self._read_key()
        if key is None:
            raise OSError(f"the signing key {self.key_file} is not a readable key file")
        return key

    def key(self) -> bytes:
        """The key itself, made on first use (a local secret kept beside the repositories':
        `pair.runners.ray_forkserver`'s). Raises OSError when it cannot be read or made."""
        if not _safe_id(self.key_id):
            raise OSError(f"not a key id: {self.key_id!r}")
        return self._read_key() or self._make_key()

    def mac(self, subject: str, field: str, value: Any) -> str:
        """The MAC of `value` as `field` of `subject`, making the key on first use."""
        if not _safe_id(self.key_id):
            raise ValueError(f"not a key id: {self.key_id!r}")
        if self.key_id in LOCAL_SECRETS:
            raise ValueError(f"not a signing key: {self.key_id!r}")
        key = self._read_key() or self._make_key()
        return MAC_PREFIX + hmac_sha256(key, message(subject, field, value))

    def verify(self, subject: str, field: str, value: Any, mac: Any) -> bool:
        """Whether `mac` is this repository's MAC of `value`; never makes a key."""
        key = self._read_key() if self.key_id not in LOCAL_SECRETS else None
        if key is None or not isinstance(mac, str) or not mac.startswith(MAC_PREFIX):
            return False
        expected = hmac_sha256(key, message(subject, field, value))
        return compare_digest(expected, mac[len(MAC_PREFIX) :])


def hmac_sha256(key: bytes, data: bytes) -> str:
    """HMAC-SHA256 of `data` (RFC 2104), hex — what `hmac.new(key, data, hashlib.sha256)`
    gives, from CPython's own SHA-256 (registry/userdirs.py `sha256`): `hmac` and `hashlib`
    load OpenSSL, ~3-5 ms of every command that checks a MAC (SPEC 7).
    tests/test_signed_fields.py checks it against `hmac` itself."""
    block = 64  # SHA-256's block size
    if len(key) > block:
        key = sha256(key).digest()
    key = key.ljust(block, b"\0")
    inner = sha256(bytes(byte ^ 0x36 for byte in key) + data).digest()
    return sha256(bytes(byte ^ 0x5C for byte in key) + inner).hexdigest()


def compare_digest(left: str, right: str) -> bool:
    """`hmac.compare_digest` (constant time), without importing `hmac` and its OpenSSL."""
    try:
        import _operator
    except ImportError:  # pragma: no cover - other interpreters
        import hmac

        return hmac.compare_digest(left, right)
    return bool(_operator._compare_digest(left, right))


def canonical(value: Any) -> str:
    from registry.redact import redact

    return redact(_plain(value))  # what the record on disk holds (it is written redacted)


def _plain(value: Any) -> str:
    """`canonical` before redaction: what a read keeps (redacting every field of every record
    a scan reads would cost a reader like `status --all` a millisecond a unit, SPEC 7)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def message(subject: str, field: str, value: Any) -> bytes:
    header = json.dumps(["unitmgr-field-v1", subject, field], ensure_ascii=False)
    return (header + "\n" + canonical(value)).encode("utf-8", "surrogateescape")


# -- a unit record's signed fields ------------------------------------------------------------


def field_value(record: UnitRecord, field: str) -> Any:
    """The JSON value of a signed field (None: unset, nothing to trust or run)."""
    if field == "staffing.current":
        return record.staffing.current.to_json() if record.staffing is not None else None
    if field == "feedback.pending_send":
        ledger = record.feedback
        return ledger.get("pending_send") if isinstance(ledger, dict) else None
    value = getattr(record, field)
    return None if value in (None, "") else value


def snapshot(record: UnitRecord) -> dict[str, str]:
    """Each signed field's value as read, as JSON not yet redacted: a write re-signs only what
    the lead changed since (a forged value read and written back keeps its missing or wrong
    MAC). `sign_changed` redacts it as it compares, so the comparison is the canonical one."""
    return {field: _plain(field_value(record, field)) for field in SIGNED_FIELDS}


def sign_changed(signer: Signer, record: UnitRecord) -> None:
    """Sign every signed field the lead set since the record was read (or vouched for)."""
    from registry.redact import redact

    as_read = record.as_read
    for field in SIGNED_FIELDS:
        value = field_value(record, field)
        if value is None:
            record.signatures.pop(field, None)
            continue
        before, now = None if as_read is None else as_read.get(field), _plain(value)
        # Equal as read is equal redacted; else only the redacted forms (what is on disk) tell.
        if before is not None and (before == now or redact(before) == redact(now)):
            continue  # not changed by this process: its MAC stays whatever it was
        record.signatures[field] = signer.mac(record.unit_id, field, value)
    record.as_read = snapshot(record)


def vouch(record: UnitRecord, *fields: str) -> None:
    """The lead supplied these values again (a resume's options): the next write signs them."""
    if record.as_read is not None:
        for field in fields:
            record.as_read.pop(field, None)


def verified(signer: Signer, record: UnitRecord, field: str) -> bool:
    """Whether a signed field is unset or carries the lead's MAC of its current value."""
    value = field_value(record, field)
    if value is None:
        return True
    return signer.verify(record.unit_id, field, value, record.signatures.get(field))


def unverified(signer: Signer, record: UnitRecord, *fields: str) -> list[str]:
    return [field for field in fields or SIGNED_FIELDS if not verified(signer, record, field)]


def child_field(command: str, step: str) -> str:
    return f"journal.{command}.{step}.child"


# -- a pair session's notify target and its staffing -----------------------------------------

NOTIFY_FIELD = "notify"
# The session fields the supervisor and the lead run (`SIGNED_SESSION_FIELDS`, in
# pair/session_trust.py), signed together as one value under this field name.
SESSION_FIELD = "session"


def _location(state_dir: Path | str) -> str:
    return os.path.realpath(state_dir)


def sign_at(
    signer: Signer, state_dir: Path | str, field: str, value: dict[str, Any]
) -> dict[str, str]:
    """The lead's signature `{key, mac}` of `value` as `field` of the pair state dir
    `state_dir`: bound to that directory, so it cannot be copied to another pair."""
    return {"key": signer.key_id, "mac": signer.mac(_location(state_dir), field, value)}


def verified_at(state_dir: Path | str, field: str, value: dict[str, Any], signature: Any) -> bool:
    """Whether `signature` (as `sign_at` made it) is the lead's MAC of `value` as `field` at
    `state_dir`. Never makes a key; a missing, malformed or foreign signature is False."""
    if not isinstance(signature, dict) or not isinstance(signature.get("key"), str):
        return False
    signer = Signer(signature["key"])
    return signer.verify(_location(state_dir), field, value, signature.get("mac"))


def sign_target(signer: Signer, state_dir: Path | str, target: dict[str, Any]) -> dict[str, Any]:
    """`target` with the lead's MAC, bound to the pair state dir it is stored in (SPEC 8: the
    supervisor runs a notify command only when the lead put it there)."""
    return {**target, "signature": sign_at(signer, state_dir, NOTIFY_FIELD, target)}


def verified_target(state_dir: Path | str, stored: Any) -> dict[str, Any] | None:
    """The target stored in the session at `state_dir`, only when the lead's MAC covers it
    there; None otherwise (an executor can write its session: nothing is sent)."""
    if not isinstance(stored, dict):
        return None
    target = {key: value for key, value in stored.items() if key != "signature"}
    if not verified_at(state_dir, NOTIFY_FIELD, target, stored.get("signature")):
        return None
    return target
