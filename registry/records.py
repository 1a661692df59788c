"""The unit record (SPEC 2.2): dataclasses that round-trip unknown keys, and their codec.

A record is JSON with `schema_version: 1`. Decoding checks the type of every known key against the
dataclass annotations and keeps every unknown key in `extra`, which encoding writes back unchanged
after the known ones: a reader never drops, renames or rejects a key it does not know. A newer
`schema_version` raises `RecordTooNew`; anything that does not parse or has a known key of the wrong
type raises `RecordUnreadable` with the reason. Nothing here touches the filesystem.

The classes are built by registry/light_dataclass.py and their annotations are read as written
(strings), so that reading a record imports neither `dataclasses` nor `typing` (SPEC 7: every
command starts within 5x `python -c pass`). Over ~400 lines because that annotation reader
belongs with the record classes it reads: split off, each half would only make sense beside the
other.
"""

from __future__ import annotations

import json
import os

from registry import light_dataclass as dataclasses

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, Self

SCHEMA_VERSION = 1


class RecordUnreadable(ValueError):
    """The bytes are not a record this version can read (parse error or wrong type)."""


class RecordTooNew(ValueError):
    def __init__(self, found: int) -> None:
        super().__init__(
            f"schema_version {found} is newer than this unitmgr understands ({SCHEMA_VERSION})"
        )
        self.found = found


_MISSING: Any = object()


if TYPE_CHECKING:
    _Checker = Callable[[Any, str], Any]
_CHECKERS: dict[str, _Checker] = {}
# Per record class: (field name, its checker, whether it has a default) and the known keys.
_PLANS: dict[type, tuple[list[tuple[str, _Checker, bool]], frozenset[str]]] = {}


def _annotation(cls: type, name: str) -> str:
    """The annotation of field `name` as written (a string: this module's annotations are
    postponed), from the class in `cls`'s MRO that declares it."""
    for klass in cls.__mro__:
        own = klass.__dict__.get("__annotations__", {})  # noqa: RUF063 (no inspect, SPEC 7)
        if name in own:
            return str(own[name])
    raise TypeError(f"{cls.__name__}.{name} has no annotation")


def _checker(annotation: str) -> _Checker:
    """The check that validates (and, for nested records, decodes) a value against
    `annotation`, built once per annotation: a scan decodes every record, and
    taking the annotation apart again for every value cost `status --all` most of its
    per-unit decode time (SPEC 7)."""
    found = _CHECKERS.get(annotation)
    if found is None:
        found = _CHECKERS[annotation] = _compile(annotation)
    return found


def _bool(value: Any, where: str) -> Any:
    if not isinstance(value, bool):
        raise RecordUnreadable(f"{where} must be true or false")
    return value


def _int(value: Any, where: str) -> Any:
    if not isinstance(value, int) or isinstance(value, bool):
        raise RecordUnreadable(f"{where} must be an integer")
    return value


def _float(value: Any, where: str) -> Any:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RecordUnreadable(f"{where} must be a number")
    return float(value)


def _str(value: Any, where: str) -> Any:
    if not isinstance(value, str):
        raise RecordUnreadable(f"{where} must be a string")
    return value


_SCALARS: dict[str, _Checker] = {"bool": _bool, "int": _int, "float": _float, "str": _str}


def _union_options(annotation: str) -> list[str]:
    """`a | b[c | d] | None` -> `["a", "b[c | d]", "None"]` (split outside brackets)."""
    options, depth, start = [], 0, 0
    for index, character in enumerate(annotation):
        if character == "[":
            depth += 1
        elif character == "]":
            depth -= 1
        elif character == "|" and depth == 0:
            options.append(annotation[start:index].strip())
            start = index + 1
    options.append(annotation[start:].strip())
    return options


def _compile(annotation: str) -> _Checker:
    """The check of one annotation as written: `Any`, a scalar, `list[X]`, `dict[...]`, a
    record class of this module, or a union of those with `None`."""
    options = _union_options(annotation)
    if len(options) > 1:
        nullable = "None" in options
        checks = [_checker(option) for option in options if option != "None"]

        def check_union(value: Any, where: str) -> Any:
            if value is None and nullable:
                return None
            errors = []
            for check in checks:
                try:
                    return check(value, where)
                except RecordUnreadable as error:
                    errors.append(str(error))
            raise RecordUnreadable(errors[0] if errors else f"{where} has the wrong type")

        return check_union
    if annotation == "Any":
        return lambda value, where: value
    if annotation == "list" or annotation.startswith("list["):
        check_item = _checker(annotation[len("list[") : -1] if annotation != "list" else "Any")

        def check_list(value: Any, where: str) -> Any:
            if not isinstance(value, list):
                raise RecordUnreadable(f"{where} must be a list")
            return [check_item(item, f"{where}[{i}]") for i, item in enumerate(value)]

        return check_list
    if annotation == "dict" or annotation.startswith("dict["):

        def check_dict(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise RecordUnreadable(f"{where} must be an object")
            return value

        return check_dict
    named = globals().get(annotation)
    if isinstance(named, type) and issubclass(named, Record):
        record_class = named

        def check_record(value: Any, where: str) -> Any:
            if not isinstance(value, dict):
                raise RecordUnreadable(f"{where} must be an object")
            return record_class.decode(value, where)

        return check_record
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    raise TypeError(f"unsupported annotation {annotation!r}")


def _encode(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, list):
        return [_encode(item) for item in value]
    return value


@dataclasses.dataclass(kw_only=True)
class Record:
    """Base of every persisted dataclass: typed known keys plus `extra` for the rest."""

    extra: dict[str, Any] = dataclasses.field(default_factory=dict, kw_only=True)
    # In-memory only, never a key of the JSON (e.g. what a record looked like when read).
    TRANSIENT: ClassVar[tuple[str, ...]] = ("extra",)

    @classmethod
    def known_keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if f.name not in cls.TRANSIENT]

    @classmethod
    def _plan(cls) -> tuple[list[tuple[str, _Checker, bool]], frozenset[str]]:
        plan = _PLANS.get(cls)
        if plan is None:
            fields = [
                (
                    field.name,
                    _checker(_annotation(cls, field.name)),
                    field.default is not dataclasses.MISSING
                    or field.default_factory is not dataclasses.MISSING,
                )
                for field in dataclasses.fields(cls)
                if field.name not in cls.TRANSIENT
            ]
            plan = _PLANS[cls] = (fields, frozenset(cls.known_keys()))
        return plan

    @classmethod
    def decode(cls, data: dict[str, Any], where: str = "record") -> Self:
        fields, known = cls._plan()
        values: dict[str, Any] = {}
        for name, check, has_default in fields:
            raw = data.get(name, _MISSING)
            if raw is _MISSING:
                if not has_default:
                    raise RecordUnreadable(f"{where}.{name} is missing")
                continue
            values[name] = check(raw, f"{where}.{name}")
        extra = {key: value for key, value in data.items() if key not in known}
        return cls(**values, extra=extra)

    def to_json(self) -> dict[str, Any]:
        document = {key: _encode(getattr(self, key)) for key in self.known_keys()}
        document.update(self.extra)
        return document


@dataclasses.dataclass(kw_only=True)
class Resources(Record):
    """What this unit currently owns, so rollback and dismantle touch only what it made."""

    task_file: bool = False
    worktree: bool = False
    local_branch: bool = False
    pair: bool = False


@dataclasses.dataclass(kw_only=True)
class Staffing(Record):
    """Who executes the unit: partner, identity, model and effort, and why."""

    partner: str
    identity: str = "default"
    model: str | None = None
    effort: str | None = None
    reason: str = ""
    selected_at: str | None = None
    # Where its turns run (SPEC 4.3): None here, "ray" on `node` (None: any node), in the MAC
    # of `staffing.current`. Written only when set: a local staffing encodes as before.
    runner: str | None = None
    node: str | None = None

    def to_json(self) -> dict[str, Any]:
        document = super().to_json()
        for key in ("runner", "node"):
            if document.get(key) is None and key not in self.extra:
                document.pop(key, None)
        return document

    @property
    def runner_kind(self) -> str:
        return self.runner or "local"


@dataclasses.dataclass(kw_only=True)
class StaffingHistory(Record):
    """The current staffing and every earlier one."""

    current: Staffing
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(kw_only=True)
class PairRef(Record):
    """The unit's pointer into its pair's state (the pair owns the truth; status reconciles)."""

    sid: str | None = None
    state_dir: str | None = None
    latest_seq: int = 0
    identity: str = "default"
    identity_home: str | None = None
    model_resolved: str | None = None
    model_source: str | None = None
    resolved_at: str | None = None
    latest_receipt_file: str | None = None


@dataclasses.dataclass(kw_only=True)
class UnitRecord(Record):
    """One unit: the durable journal of everything `unit` did for it (SPEC 2.2)."""

    LIFECYCLES: ClassVar[tuple[str, ...]] = (
        "creating",
        "setting-up",
        "initializing-pair",
        "starting",
        "working",
        "create-failed",
        "restaffing",
        "restaff-failed",
        "dismantling",
        "dismantle-failed",
    )

    schema_version: int = SCHEMA_VERSION
    unit_id: str
    issue: int | None = None
    repository: str = ""
    common_git_dir: str = ""
    worktree: str
    branch: str
    base: str
    base_ref: str | None = None
    base_sha: str | None = None
    lifecycle: str
    backend: str = "headless"
    lead: str = ""
    task: str = ""
    task_file: str = ""
    scope: str = ""
    paths: list[str] = dataclasses.field(default_factory=list)
    validation: str = ""
    setup: str | None = None
    setup_baseline: dict[str, Any] | None = None  # {path: {sha256, size, mtime_ns}}, SPEC 3.3
    ports: list[int] = dataclasses.field(default_factory=list)  # leased TCP ports, SPEC 3.19
    resources: Resources = dataclasses.field(default_factory=Resources)
    staffing: StaffingHistory | None = None
    pending_staffing: dict[str, Any] | None = None
    restaff_phase: str | None = None
    pair: PairRef | None = None
    pending_notice: dict[str, Any] | None = None
    addenda: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    scope_approval: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    verification_child: dict[str, Any] | None = None
    pr: dict[str, Any] | None = None
    # SPEC 3.17's ledger: {pr, head_sha, sent {key: {sig, at, round}}, rounds, pending_send}
    feedback: dict[str, Any] | None = None
    journal: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    cleanup: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    rollback: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    abandoned: dict[str, Any] | None = None
    archive: str | None = None
    error: str | None = None
    created_at: str = ""
    updated_at: str = ""
    # The lead's MAC of each signed field, `{field: "hmac-sha256:..."}` (registry/signing.py).
    signatures: dict[str, Any] = dataclasses.field(default_factory=dict)
    # Each signed field's canonical value when read (None: made in this process). Not stored.
    as_read: dict[str, str] | None = dataclasses.field(default=None, repr=False, compare=False)
    TRANSIENT: ClassVar[tuple[str, ...]] = ("extra", "as_read")

    @property
    def partner(self) -> str | None:
        return self.staffing.current.partner if self.staffing else None

    @property
    def identity(self) -> str:
        return self.staffing.current.identity if self.staffing else "default"


def decode_record(text: str | bytes, *, expected_id: str | None = None) -> UnitRecord:
    try:
        data = json.loads(text)
    except (ValueError, UnicodeDecodeError) as error:
        raise RecordUnreadable(f"not JSON: {error}") from None
    if not isinstance(data, dict):
        raise RecordUnreadable("not a JSON object")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordUnreadable("schema_version must be an integer")
    if version > SCHEMA_VERSION:
        raise RecordTooNew(version)
    if version < 1:
        raise RecordUnreadable(f"schema_version {version} is not a known version")
    record = UnitRecord.decode(data)
    if record.lifecycle not in UnitRecord.LIFECYCLES:
        raise RecordUnreadable(f"record.lifecycle {record.lifecycle!r} is not a known lifecycle")
    _check_paths(record)
    _check_ports(record)
    if expected_id is not None and record.unit_id != expected_id:
        raise RecordUnreadable(f"record names unit {record.unit_id!r}, not {expected_id!r}")
    return record


MAX_RECORD_BYTES = 4 * 1024 * 1024  # SPEC 2.5: a larger record is unreadable


def _check_paths(record: UnitRecord) -> None:
    """Every path a record names is absolute and normalized (SPEC 2.5): `a/../b` or a relative
    path would make the same field mean different places to different readers."""
    paths: list[tuple[str, str | None]] = [
        ("worktree", record.worktree),
        ("repository", record.repository or None),
        ("common_git_dir", record.common_git_dir or None),
        ("task_file", record.task_file or None),
        ("archive", record.archive),
    ]
    if record.pair is not None:
        paths += [
            ("pair.state_dir", record.pair.state_dir),
            ("pair.identity_home", record.pair.identity_home),
            ("pair.latest_receipt_file", record.pair.latest_receipt_file),
        ]
    for name, value in paths:
        if value is None:
            continue
        if not value.startswith("/") or os.path.normpath(value) != value or "\0" in value:
            raise RecordUnreadable(f"record.{name} must be an absolute, normalized path: {value!r}")


MAX_PORTS = 64  # a unit leases at most this many ports (SPEC 3.19)


def _check_ports(record: UnitRecord) -> None:
    """Leased ports are distinct TCP port numbers, at most MAX_PORTS of them: anything else
    would put a non-number into a child's `UNIT_PORTS`, or let one record claim every port."""
    ports = record.ports
    if len(ports) > MAX_PORTS or len(set(ports)) != len(ports):
        raise RecordUnreadable(f"record.ports must be at most {MAX_PORTS} distinct ports")
    for port in ports:
        if not 1 <= port <= 65535:
            raise RecordUnreadable(f"record.ports holds {port}, not a TCP port number")


def encode_record(record: UnitRecord) -> str:
    return json.dumps(record.to_json(), indent=2, ensure_ascii=False) + "\n"
