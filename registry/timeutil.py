"""UTC timestamps in the one format every record, receipt and event uses: ISO 8601 with `Z`.

`datetime` is imported by the functions that need it, not here: most commands only read a
duration setting (`seconds_from_env`) from this module, and `datetime` alone is a few percent
of a command's start-up budget (SPEC 7). `iso_from_epoch` needs no `datetime` at all.
"""

from __future__ import annotations

import math
import os
import time

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    import datetime as _dt


def utc_now() -> _dt.datetime:
    import datetime as _dt

    return _dt.datetime.now(_dt.UTC)


def iso_z(moment: _dt.datetime | None = None, *, milliseconds: bool = False) -> str:
    """`2026-11-29T08:52:35Z`, or with `.123` milliseconds when `milliseconds` is set."""
    if moment is None:  # now: the clock's reading, with no `datetime` to import
        return iso_from_epoch(time.time(), milliseconds=milliseconds)
    import datetime as _dt

    moment = moment.astimezone(_dt.UTC)
    text = moment.isoformat(timespec="milliseconds" if milliseconds else "seconds")
    return text.replace("+00:00", "Z")


def iso_from_epoch(seconds: float, *, milliseconds: bool = False) -> str:
    """`iso_z` of a POSIX timestamp, to the character: `datetime.fromtimestamp(seconds, UTC)`
    splits off the fraction with `modf` and rounds it half to even to whole microseconds
    (CPython's `_PyTime_ObjectToTimeval` with `_PyTime_ROUND_HALF_EVEN`, which `round` on a float
    is), and `isoformat` truncates those to milliseconds
    (tests/test_timeutil.py compares the two)."""
    fraction, whole = math.modf(seconds)
    micros = round(fraction * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    elif micros < 0:
        whole, micros = whole - 1, micros + 1_000_000
    at = time.gmtime(int(whole))
    text = (
        f"{at.tm_year:04d}-{at.tm_mon:02d}-{at.tm_mday:02d}"
        f"T{at.tm_hour:02d}:{at.tm_min:02d}:{at.tm_sec:02d}"
    )
    return f"{text}.{micros // 1000:03d}Z" if milliseconds else f"{text}Z"


def parse_iso(text: str) -> _dt.datetime:
    """Parse what `iso_z` writes (and any ISO 8601 time with an offset)."""
    import datetime as _dt

    moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment


def stamp(moment: _dt.datetime | None = None) -> str:
    """A compact UTC stamp for directory names: `20261129T085235Z`."""
    import datetime as _dt

    moment = (moment or utc_now()).astimezone(_dt.UTC)
    return moment.strftime("%Y%m%dT%H%M%SZ")


def ago(seconds: float) -> str:
    """A duration for a person: `42s`, `17m`, `3h05m`."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def seconds_from_env(variable: str, default: float, *, allow_zero: bool = False) -> float:
    """A duration setting (`UNITMGR_*_TIMEOUT`): its value in seconds, else `default` when it is
    unset, unparseable, or not positive (zero allowed only with `allow_zero`)."""
    try:
        value = float(os.environ.get(variable, ""))
    except ValueError:
        return default
    return value if value > 0 or (allow_zero and value == 0) else default
