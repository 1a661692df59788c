"""`pair resolve` (SPEC 4.1): how a model request resolves for a partner, without a session."""

from __future__ import annotations

from pair.commands.init import binary_and_model

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any


def resolve_model(
    *, partner: str, model: str, effort: str | None = None, identity: str | None = None
) -> dict[str, Any]:
    """`pair resolve`: how a model request resolves for a partner, without a session."""
    from pair.identity import identity_home
    from pair.partners import adapter_for

    adapter = adapter_for(partner)
    requested_identity = identity or "default"
    adapter.validate_staffing(
        model=model, effort=effort, identity=requested_identity, writable=False
    )
    home = identity_home(partner, requested_identity)
    binary, _, resolution = binary_and_model(adapter, model, effort, home)
    document: dict[str, Any] = {
        "ok": True,
        "partner": partner,
        "identity": requested_identity,
        **resolution.to_json(),
    }
    if home is not None:
        document["identity_home"] = home
    if partner == "codex":
        document["codex_bin"] = binary
    if resolution.evidence:
        document["model_evidence"] = resolution.evidence
    return document
