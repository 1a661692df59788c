"""registry/timeutil.py: `iso_from_epoch` (no `datetime`, SPEC 7) writes what `datetime` does."""

from __future__ import annotations

import datetime
import random
import subprocess
import sys

from registry.timeutil import iso_from_epoch, iso_z


def by_datetime(seconds: float, milliseconds: bool) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return iso_z(moment, milliseconds=milliseconds)


def test_iso_from_epoch_matches_datetime_to_the_character() -> None:
    """Random stamps, stamps a hair either side of a millisecond and of a second (where the
    microsecond rounding carries), half-microsecond ties, whole seconds and ints."""
    chooser = random.Random(7)
    stamps: list[float] = [0, 1, 0.0, 1.9999995, 1.0000005, 59.9999996, 1_700_000_000]
    for _ in range(20_000):
        whole = chooser.randrange(0, 4_102_444_800)  # up to 2100
        stamps.append(whole + chooser.random())
        stamps.append(whole + chooser.randrange(1000) / 1000)
        stamps.append(whole + (chooser.randrange(1_000_000) + 0.5) / 1e6)
        stamps.append(whole + 1 - chooser.random() / 1e6)
    for seconds in stamps:
        for milliseconds in (False, True):
            assert iso_from_epoch(seconds, milliseconds=milliseconds) == by_datetime(
                seconds, milliseconds
            ), seconds


def test_timeutil_imports_no_datetime() -> None:
    probe = (
        "import sys; from registry import timeutil; timeutil.iso_from_epoch(1.5); "
        "timeutil.seconds_from_env('X', 1.0); print('datetime' in sys.modules)"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "False"
