"""UTC timestamps in the one format every record, receipt and event uses: ISO 8601 with `Z`."""

from __future__ import annotations

import datetime as _dt
import os


def utc_now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def iso_z(moment: _dt.datetime | None = None, *, milliseconds: bool = False) -> str:
    """`2026-11-29T08:52:35Z`, or with `.123` milliseconds when `milliseconds` is set."""
    moment = (moment or utc_now()).astimezone(_dt.UTC)
    text = moment.isoformat(timespec="milliseconds" if milliseconds else "seconds")
    return text.replace("+00:00", "Z")


def iso_from_epoch(seconds: float, *, milliseconds: bool = False) -> str:
    """`iso_z` of a POSIX timestamp."""
    return iso_z(_dt.datetime.fromtimestamp(seconds, _dt.UTC), milliseconds=milliseconds)


def parse_iso(text: str) -> _dt.datetime:
    """Parse what `iso_z` writes (and any ISO 8601 time with an offset)."""
    moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment


def stamp(moment: _dt.datetime | None = None) -> str:
    """A compact UTC stamp for directory names: `20261129T085235Z`."""
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
