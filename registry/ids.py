"""Random identifiers: a version-4 UUID as `uuid.uuid4()` makes it, without the `uuid` module.

`uuid` imports `platform` (and tries `_uuid`), about 4 ms of `pair init` and `pair send`, which
make one id each (SPEC 7: every command within 5x `python -c pass`). The bits are exactly
uuid4's: 122 random bits from `os.urandom`, the version nibble 4 and the RFC 4122 variant. This
module imports nothing but `os` and must stay that way.
"""

from __future__ import annotations

import os


def uuid4_hex() -> str:
    """`uuid.uuid4().hex`: 32 lower-case hex digits."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    return raw.hex()


def uuid4() -> str:
    """`str(uuid.uuid4())`: 8-4-4-4-12 hex digits."""
    digits = uuid4_hex()
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
