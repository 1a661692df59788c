"""Accounts and the same-CLI rule (SPEC 3.3, 4.1).

Only Codex keeps one account per home: identity `default` is `~/.codex`, a name is
`~/.codex-profiles/<name>` (which must already exist). Pairing a CLI with itself echoes, so it is
refused — except Codex with Codex when the partner's home differs from the lead's.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from pair.environment import detect_lead
from pair.errors import Rewrite, UsageError
from registry.lazy_re import lazy

IDENTITY_NAME = lazy(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


def codex_home(identity: str) -> str:
    """The canonical Codex home of an identity."""
    home = Path.home()
    if identity == "default":
        path = home / ".codex"
        return os.path.realpath(path) if path.exists() else str(path)
    if not IDENTITY_NAME.match(identity):
        raise UsageError("invalid-identity", f"invalid --identity name {identity!r}")
    path = home / ".codex-profiles" / identity
    if not path.is_dir():
        raise UsageError(
            "identity-refused",
            f"identity {identity} has no Codex home at {path} — create it (log in with "
            f"CODEX_HOME={path} codex login) or use default",
            next_step=f"CODEX_HOME={shlex.quote(str(path))} codex login",
        )
    return os.path.realpath(path)


def lead_codex_home() -> str:
    home = os.environ.get("CODEX_HOME", "").strip() or str(Path.home() / ".codex")
    return os.path.realpath(home) if Path(home).exists() else home


def identity_home(partner: str, identity: str) -> str | None:
    if partner != "codex":
        if identity != "default":
            raise UsageError(
                "identity-refused",
                f"{partner} has no named identities — only codex keeps one account per home; "
                "drop --identity or use default",
                next_command=Rewrite(drop=("--identity",)),
            )
        return None
    return codex_home(identity)


def refuse_same_cli(*, lead: str, partner: str, partner_home: str | None) -> None:
    """Refuse pairing a CLI with itself: the named lead or the one this process runs inside."""
    detected = detect_lead()
    for who, source in ((lead, "--lead"), (detected, "the environment")):
        if who != partner:
            continue
        if partner == "codex" and partner_home is not None and partner_home != lead_codex_home():
            continue
        others = "a different CLI"
        if partner == "codex":
            others += ", or a different Codex account named with --identity"
        raise UsageError(
            "lead-is-partner",
            f"refusing to pair {partner} with itself (the lead is {partner}, from {source}) — "
            f"the partner must be {others}",
        )
