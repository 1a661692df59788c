"""Port leases (SPEC 3.19): which TCP ports a new unit gets, and the variables that carry them.

A unit's ports are chosen once, under the registry lock, in `unit create`'s `reserve` step (from
the fresh read of every record admission already made there): from the configured range, none
another recorded unit holds, none something on this machine is bound to (a bind test). The
record holds them from then on; its deletion (dismantle) releases them. `UNIT_PORT` (the first)
and `UNIT_PORTS` (all, space-separated) carry them into the setup hook, the validation and every
turn of the unit's pair.

The choice starts at a hash of the unit id within the range and walks up (wrapping): units
spread over the range, so a lease rarely walks past another's ports however many units there are,
a dismantled unit's ports are not handed to the very next unit, and a dry run, which takes no
lock, computes the same choice the create would make.

This module decides and describes; it writes nothing, holds no lock and starts no process. The
bind test is a few microseconds per candidate, so it may run under the registry lock (SPEC 2.4).
"""

from __future__ import annotations

import errno
import re
from collections.abc import Iterable

from registry.environment import child_environment
from registry.errors import Rewrite, StateError, UsageError
from registry.records import MAX_PORTS, UnitRecord
from registry.userdirs import sha256  # not hashlib: its OpenSSL costs start-up (SPEC 7)

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    import socket

VARIABLES = ("UNIT_PORT", "UNIT_PORTS")


def count(value: str | int, option: str = "--ports") -> int:
    """How many ports a unit asks for: 0 (none) to MAX_PORTS."""
    text = str(value)
    if not re.fullmatch(r"0|[1-9][0-9]{0,2}", text) or int(text) > MAX_PORTS:
        raise UsageError(
            "invalid-ports",
            f"{option} must be a whole number from 0 to {MAX_PORTS}, got {text!r}",
            next_step=f"{option} 2 (a count from 0 to {MAX_PORTS})",
            next_command=Rewrite(set_options={option: "2"}) if option.startswith("--") else None,
        )
    return int(text)


def held(records: Iterable[UnitRecord]) -> set[int]:
    """Every port a recorded unit holds (a unit keeps its ports until its record is deleted)."""
    return {port for record in records for port in record.ports}


def lease(unit_id: str, wanted: int, port_range: tuple[int, int], taken: set[int]) -> list[int]:
    """`wanted` ports from `port_range` that are neither `taken` nor bound by anything on this
    machine, walking up from the unit id's place in the range; `ports-unavailable` when fewer
    are free."""
    if wanted == 0:
        return []
    low, high = port_range
    size = high - low + 1
    start = int.from_bytes(sha256(unit_id.encode()).digest()[:8], "big") % size
    chosen: list[int] = []
    busy: list[int] = []
    for offset in range(size):
        port = low + (start + offset) % size
        if port in taken:
            continue
        if not is_free(port):
            busy.append(port)
            continue
        chosen.append(port)
        if len(chosen) == wanted:
            return chosen
    raise StateError(
        "ports-unavailable",
        f"unit {unit_id} needs {wanted} port(s) but port_range {low}-{high} has only "
        f"{len(chosen)} free: {len(taken & set(range(low, high + 1)))} held by recorded units, "
        f"{len(busy)} in use on this machine",
        detail={
            "wanted": wanted,
            "port_range": f"{low}-{high}",
            "free": chosen,
            "in_use": busy[:20],
        },
        next_step=f'port_range = "{low}-{min(65535, high + max(size, wanted))}" in .unitmgr.toml '
        "(or dismantle a unit that holds ports)",
    )


def is_free(port: int) -> bool:
    """Nothing on this machine is bound to TCP `port`, on any address of either family.

    One bind on `::` with IPV6_V6ONLY off collides with any IPv4 or IPv6 socket on the port
    (loopback, wildcard or a specific address) where a bind on 127.0.0.1 would miss a server on
    `::1` or on another address; without IPv6, the IPv4 wildcard. SO_REUSEADDR stays off, so a
    socket that another process merely bound (or left in TIME_WAIT) counts as busy too.
    """
    import socket  # only to probe a port: the commands that read a record need none (SPEC 7)

    try:
        probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return _binds(socket.AF_INET, ("0.0.0.0", port))
    try:
        probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        probe.bind(("::", port))
        return True
    except OSError as error:
        if error.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):  # IPv6 disabled
            return _binds(socket.AF_INET, ("0.0.0.0", port))
        return False
    finally:
        probe.close()


def _binds(family: socket.AddressFamily, address: tuple[str, int]) -> bool:
    import socket

    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(address)
        except OSError:
            return False
    return True


def variables(ports: list[int]) -> dict[str, str]:
    """`UNIT_PORT` and `UNIT_PORTS` for a unit's leased ports; {} for a unit with none."""
    if not ports:
        return {}
    return {"UNIT_PORT": str(ports[0]), "UNIT_PORTS": " ".join(str(port) for port in ports)}


def unit_environment(ports: list[int]) -> dict[str, str]:
    """The environment of a unit's setup hook and validation: the no-prompt child environment
    with the unit's own port variables — and none inherited from whoever ran `unit` (a lead
    that is itself some unit's executor must not hand its ports to this unit's children)."""
    cleaned = {key: value for key, value in child_environment().items() if key not in VARIABLES}
    cleaned.update(variables(ports))
    return cleaned
