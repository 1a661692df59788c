"""registry/light_dataclass.py behaves as `dataclasses` does for what this project uses, and a
record read through it imports neither `dataclasses`, `typing` nor `inspect` (SPEC 7)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest

from registry import light_dataclass as light

ROOT = Path(__file__).resolve().parent.parent


def _pair(**options: bool) -> tuple[type, type]:
    """The same class built by `dataclasses` and by light_dataclass."""
    made = []
    for maker in (dataclasses, light):

        class Base:
            name: str
            tags: list[str] = maker.field(default_factory=list)  # type: ignore[attr-defined]
            KIND: ClassVar[str] = "base"

        class Child(Base):
            size: int = 1
            secret: str = maker.field(default="s", repr=False, compare=False)  # type: ignore[attr-defined]

        maker.dataclass(**options)(Base)  # type: ignore[attr-defined]
        made.append(maker.dataclass(**options)(Child))  # type: ignore[attr-defined]
    return made[0], made[1]


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"kw_only": True}])
def test_the_same_behaviour_as_dataclasses(options: dict[str, bool]) -> None:
    real, lite = _pair(**options)
    for cls in (real, lite):
        one = cls(name="a", size=2, secret="x")
        assert [f.name for f in (dataclasses if cls is real else light).fields(cls)] == [
            "name",
            "tags",
            "size",
            "secret",
        ]
        assert repr(one).endswith("(name='a', tags=[], size=2)")
        assert one == cls(name="a", size=2, secret="other")  # secret is not compared
        assert one != cls(name="b", size=2)
        assert cls(name="a").tags is not cls(name="a").tags  # a fresh list each time
        assert cls.KIND == "base" and cls.size == 1
        assert not hasattr(cls, "tags")  # no class attribute for a factory field
        with pytest.raises(TypeError):
            cls(size=2)  # name is missing
        with pytest.raises(TypeError):
            cls(name="a", colour="red")
        if options.get("kw_only"):
            with pytest.raises(TypeError):
                cls("a")
        else:
            assert cls("a", ["t"], 3) == cls(name="a", tags=["t"], size=3)
        if options.get("frozen"):
            with pytest.raises(AttributeError):
                one.name = "b"
            assert hash(cls(name="a", tags=(), secret="x")) == hash(cls(name="a", tags=()))
        else:
            one.name = "b"
            assert one.name == "b"
            with pytest.raises(TypeError):
                hash(one)
    assert light.replace(lite(name="a"), size=5) == lite(name="a", size=5)
    frozen = light.dataclass(frozen=True)(type("Point", (), {"__annotations__": {"x": "int"}}))
    with pytest.raises(light.FrozenInstanceError):
        frozen(x=1).x = 2


def test_post_init_runs_and_pickles_as_a_plain_class() -> None:
    assert pickle.loads(pickle.dumps(Counted(start=2))) == Counted(start=2)
    assert Counted(start=2).double == 4


@light.dataclass
class Counted:
    start: int

    def __post_init__(self) -> None:
        self.double = self.start * 2


def test_reading_a_record_loads_no_dataclasses_typing_or_inspect() -> None:
    """The unit record's codec reads its annotations as written, so decoding a record (nested
    records, unions, lists) needs none of them — and still refuses a key of the wrong type."""
    record = {
        "schema_version": 1,
        "unit_id": "u1",
        "worktree": "/w",
        "branch": "b",
        "base": "main",
        "lifecycle": "working",
        "ports": [8000],
        "staffing": {"current": {"partner": "script", "model": None}, "history": []},
        "pair": {"sid": "s", "latest_seq": 2},
        "future_key": {"kept": True},
    }
    code = (
        "import json, sys\n"
        "from registry.records import RecordUnreadable, decode_record, encode_record\n"
        f"text = {json.dumps(record)!r}\n"
        "record = decode_record(text)\n"
        "assert json.loads(encode_record(record))['future_key'] == {'kept': True}\n"
        "assert record.staffing.current.partner == 'script' and record.pair.latest_seq == 2\n"
        "try:\n"
        '    decode_record(text.replace(\'"latest_seq": 2\', \'"latest_seq": "2"\'))\n'
        "except RecordUnreadable as error:\n"
        "    print(error)\n"
        "print(sorted(m for m in ('dataclasses', 'typing', 'inspect') if m in sys.modules))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert completed.stdout.splitlines() == ["record.pair.latest_seq must be an integer", "[]"]
