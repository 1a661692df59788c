"""Partner adapters: one small module per headless coding-agent CLI (SPEC 4.1).

An adapter knows its CLI's command lines (create, resume, read-only or writable), how the prompt
is passed, and how the session id, reply and failure are read from its output. Everything else —
the in-flight lock, budgets, kills, transcripts, receipts — is the supervisor's, the same for all.
"""

from __future__ import annotations

from importlib import import_module

from pair.errors import UsageError

# typing's own flag would import typing; `unit list` checks partner names on its fast path.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the adapter modules load only when a partner is actually used
    from pair.partners.base import Partner

PARTNERS = ("claude", "codex", "cursor", "opencode", "grok", "script")
LEADS = ("claude", "codex", "cursor", "opencode", "grok", "human")
_MODULES = {name: f"pair.partners.{name}" for name in PARTNERS}


def adapter_for(name: str) -> Partner:
    if name not in PARTNERS:
        raise UsageError(
            "unknown-partner",
            f"unknown partner {name!r} — use one of {', '.join(PARTNERS)}",
        )
    adapter: Partner = import_module(_MODULES[name]).ADAPTER
    return adapter


__all__ = ["LEADS", "PARTNERS", "adapter_for"]
