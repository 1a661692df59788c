"""`lazy(pattern)`: a regular expression compiled on its first use, not at import.

SPEC 7: every command starts within 5x `python -c pass`, and compiling the patterns a module
keeps for rare inputs (a token shape, a URL with userinfo, a clone URL) costs each command that
never meets one a millisecond or so apiece. The object answers every `re.Pattern` method by
compiling once (two threads racing compile the same pattern twice, harmlessly); mypy sees an
`re.Pattern`. Nothing but `re`.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import AnyStr


class _Lazy:
    __slots__ = ("_compiled", "_flags", "_pattern")

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | re.Pattern[bytes] | None = None

    def __getattr__(self, name: str) -> object:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self._pattern, self._flags)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._pattern!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    made: re.Pattern[AnyStr] = _Lazy(pattern, flags)  # type: ignore[assignment]
    return made
