"""Which runner a pair's turns use (SPEC 4.3): `RunnerChoice`, signed into the pair session.

The session is executor-writable, and the lead's supervisor connects to the Ray address the
session names and unpickles what that cluster returns: a planted address would be code execution
on the lead. So a choice other than the default is trusted only with the lead's MAC
(`registry.signing`, bound to the pair's state dir as the notify target is): an unsigned or
forged one is refused `runner-untrusted` before anything is contacted. A non-loopback address is
refused `ray-auth-required` unless Ray's token authentication is configured.

Self-contained on purpose (a small sign/verify pair beside the value type), so the session's
other signed fields can later share one scheme. It imports no runner and no `ray`.
"""

from __future__ import annotations

import os
from pathlib import Path

from pair.errors import StateError, UsageError
from registry.lazy_re import lazy  # compiled on first use: off start-up (SPEC 7)
from registry.light_dataclass import dataclass

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

RUNNER_KINDS = ("local", "ray")
RUNNER_FIELD = "runner"
NODE_NAME = lazy(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
ADDRESS = lazy(r"^(ray://)?[A-Za-z0-9_.:\[\]-]{1,253}$")
INSTALL_RAY = "pip install 'unitmgr[ray]'"


@dataclass(frozen=True)
class RunnerChoice:
    """Where a pair's turns run: `local` (this machine) or `ray` on node `node` (a custom
    resource `unitmgr-node-NAME`; None: any node offering `unitmgr-executor`) of the cluster at
    `address` (`ray://host:10001`, a GCS `host:6379`, or `auto`/None for a local cluster)."""

    kind: str = "local"
    node: str | None = None
    address: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in RUNNER_KINDS:
            raise UsageError(
                "unknown-runner",
                f"unknown runner {self.kind!r} — use local or ray",
                next_step="--runner: local or ray",
            )
        if self.node is not None and not NODE_NAME.match(self.node):
            raise UsageError(
                "invalid-node",
                f"not a node name: {self.node!r} (letters, digits, . _ -; at most 63)",
                next_step="--node: a node's name, as in its unitmgr-node-NAME resource",
            )
        if self.address is not None and not ADDRESS.match(self.address):
            raise UsageError(
                "invalid-ray-address",
                f"not a Ray address: {self.address!r}",
                next_step="--ray-address: ray://HOST:10001, HOST:6379 or auto",
            )
        if self.kind == "local" and (self.node or self.address):
            raise UsageError(
                "invalid-node",
                "--node and --ray-address need --runner ray",
                next_step="--runner: ray",
            )

    @property
    def resource(self) -> str:
        """The custom resource that pins the unit's actor (SPEC 4.3)."""
        return f"unitmgr-node-{self.node}" if self.node else "unitmgr-executor"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "node": self.node, "address": self.address}

    @classmethod
    def from_json(cls, raw: Any) -> RunnerChoice:
        if not isinstance(raw, dict):
            raise ValueError("a runner choice is an object")
        kind, node, address = raw.get("kind"), raw.get("node"), raw.get("address")
        strings = all(value is None or isinstance(value, str) for value in (node, address))
        if not isinstance(kind, str) or not strings:
            raise ValueError("a runner choice holds strings")
        return cls(kind=kind, node=node, address=address)


def _location(state_dir: Path | str) -> str:
    return os.path.realpath(state_dir)


def sign_choice(state_dir: Path | str, choice: RunnerChoice) -> dict[str, Any] | None:
    """The session's `runner` value: the choice with the lead's MAC over it, bound to this
    pair's state dir (None for the default: nothing to trust)."""
    from pair.git import common_dir
    from registry.signing import Signer

    if choice.kind == "local":
        return None
    signer = Signer.for_common_dir(common_dir(Path(state_dir).parent))
    value = choice.to_json()
    mac = signer.mac(_location(state_dir), RUNNER_FIELD, value)
    return {**value, "signature": {"key": signer.key_id, "mac": mac}}


def verified_choice(
    state_dir: Path | str, stored: Any, *, untrusted_next: str | None = None
) -> RunnerChoice:
    """The runner the session at `state_dir` names: local when it names none; a `ray` choice
    only when the lead's MAC covers it there, else `runner-untrusted` (nothing is contacted)."""
    from registry.signing import Signer

    if stored is None:
        return RunnerChoice()
    refused = StateError(
        "runner-untrusted",
        f"the pair session in {state_dir} names a runner the lead did not sign — an executor "
        "may have written it; nothing was contacted",
        next_step=untrusted_next,
    )
    if not isinstance(stored, dict):
        raise refused
    signature = stored.get("signature")
    if not isinstance(signature, dict) or not isinstance(signature.get("key"), str):
        raise refused
    value = {key: item for key, item in stored.items() if key != "signature"}
    signer = Signer(signature["key"])
    if not signer.verify(_location(state_dir), RUNNER_FIELD, value, signature.get("mac")):
        raise refused
    try:
        return RunnerChoice.from_json(value)
    except (ValueError, UsageError):
        raise refused from None


def address_host(address: str) -> str:
    rest = address.removeprefix("ray://")
    if rest.startswith("["):
        return rest[: rest.find("]") + 1] if "]" in rest else rest
    return rest.rsplit(":", 1)[0] if rest.count(":") == 1 else rest


def is_loopback(address: str | None) -> bool:
    if address in (None, "auto"):
        return True
    import ipaddress

    host = address_host(str(address)).lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: whatever it resolves to, it is not proven this machine


def token_configured(environment: dict[str, str] | None = None) -> bool:
    """Ray's token authentication (`RAY_AUTH_MODE=token` and a token: `RAY_AUTH_TOKEN`,
    `RAY_AUTH_TOKEN_PATH`'s file, or `~/.ray/auth_token`)."""
    env = os.environ if environment is None else environment
    if env.get("RAY_AUTH_MODE") != "token":
        return False
    if env.get("RAY_AUTH_TOKEN"):
        return True
    path = env.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    return Path(path).is_file()


def refuse_unauthenticated(choice: RunnerChoice) -> None:
    """`ray-auth-required` for a non-loopback address without Ray's token authentication
    (Ray runs with no authentication by default: anyone reaching the port runs code)."""
    if choice.kind != "ray" or is_loopback(choice.address) or token_configured():
        return
    raise UsageError(
        "ray-auth-required",
        f"the Ray address {choice.address} is not on this machine and Ray's token "
        "authentication is not configured — an open Ray port runs anyone's code",
        next_step="RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=FILE (the cluster's token, on the lead)",
    )
