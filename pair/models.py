"""Model requests: an exact id, a CLI alias, `CLI-default`, or `latest:<family>` (SPEC 4.1).

`latest:<family>` is resolved from the partner's live catalog — Codex `app-server model/list`,
`grok models`, `cursor-agent --list-models` — and for Claude from the model its bootstrap reports.
The roster of families is documentation (`references/models.md`); this code never reads it.
Version comparison is numeric per dot-segment (`5.10` > `5.6`, `5.0` == `5`); two candidates at
the newest version are ambiguous and refused.
"""

from __future__ import annotations

import re

from pair import codex_rpc
from pair.errors import UsageError
from registry.light_dataclass import dataclass, field
from registry.timeutil import iso_z

TYPE_CHECKING = False  # typing's own flag would import typing (SPEC 7)
if TYPE_CHECKING:
    from typing import Any

MODEL_FIX = "--model: an exact model id, or latest:<family> for a family the catalog has"

CLAUDE_FAMILIES = ("fable", "opus", "sonnet")
LISTING_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Resolution:
    model: str | None  # the request as given (None: the CLI's default)
    cli_model: str | None  # what the CLI's own model flag gets
    model_resolved: str | None
    model_source: str
    resolved_at: str | None
    family: str | None = None  # for a Claude alias: checked against what the bootstrap reports
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "cli_model": self.cli_model,
            "model_resolved": self.model_resolved,
            "model_source": self.model_source,
            "resolved_at": self.resolved_at,
        }


def parse(model: str | None) -> tuple[str, str | None]:
    """("default" | "family" | "explicit", value)."""
    if model is None or model == "CLI-default":
        return "default", None
    if model.lower() == "latest":
        raise UsageError(
            "invalid-model",
            "plain `latest` names no family — use latest:<family>, for example latest:sol",
            next_step=MODEL_FIX,
        )
    if model.lower().startswith("latest:"):
        family = model.split(":", 1)[1]
        if not re.fullmatch(r"[A-Za-z0-9]+", family):
            raise UsageError(
                "invalid-model",
                f"{model} is not a family — use latest:<family> with letters and digits only",
                next_step=MODEL_FIX,
            )
        return "family", family.lower()
    return "explicit", model


def version_key(version: str) -> tuple[int, ...]:
    parts = [int(part) for part in re.split(r"[.-]", version) if part.isdigit()]
    while parts and parts[-1] == 0:
        parts.pop()  # 5.0 == 5
    return tuple(parts)


def newest(candidates: list[tuple[str, str]], what: str) -> str:
    """The id with the highest version among (version, id) pairs; a tie is ambiguous."""
    if not candidates:
        raise UsageError("model-unresolved", f"no {what}", next_step=MODEL_FIX)
    top = max(version_key(version) for version, _ in candidates)
    winners = sorted({ident for version, ident in candidates if version_key(version) == top})
    if len(winners) > 1:
        raise UsageError(
            "model-unresolved",
            f"{what} is ambiguous at its newest version: {', '.join(winners)} — name one "
            "explicitly",
            next_step=f"--model {winners[0]} (an exact id: one of {', '.join(winners)})",
        )
    return winners[0]


def _listing(argv: list[str], environment: dict[str, str]) -> str:
    from pair.partners.preflight import run_probe

    code, out, err = run_probe(argv, environment=environment, timeout=LISTING_TIMEOUT_SECONDS)
    if code is None:
        raise UsageError(
            "model-unresolved", f"cannot run {' '.join(argv)}: {err}", next_step=MODEL_FIX
        )
    if code != 0:
        raise UsageError(
            "model-unresolved",
            f"{' '.join(argv)} exited {code}: {err.strip()[-300:]}",
            next_step=MODEL_FIX,
        )
    return out


def resolve(
    *,
    partner: str,
    model: str | None,
    effort: str | None,
    binary: str | None,
    identity_home: str | None,
    environment: dict[str, str],
) -> Resolution:
    if partner == "script":  # a command line, never a model request to parse
        return Resolution(model, model, None, "script command", None)
    kind, value = parse(model)
    now = iso_z()
    if partner == "claude":
        # Claude has no catalog: the alias goes to the CLI, the bootstrap reports the model.
        if kind == "family" or (kind == "explicit" and value in CLAUDE_FAMILIES):
            family = value
            if family not in CLAUDE_FAMILIES:
                raise UsageError(
                    "model-unresolved",
                    "claude resolves only the documented aliases "
                    f"{', '.join(CLAUDE_FAMILIES)} — latest:{family} has no live catalog here",
                    next_step=f"--model: an exact id or one of {', '.join(CLAUDE_FAMILIES)}",
                )
            return Resolution(model, family, None, "claude system.init.model", None, family=family)
        return Resolution(model, value, None, "claude system.init.model", None)
    if kind == "default":
        return Resolution(None, None, None, "CLI default", None)
    if kind == "explicit":
        return Resolution(model, value, value, "explicit", now)
    assert value is not None
    if partner == "codex":
        assert binary is not None
        return _codex_family(model, value, effort, binary, identity_home, environment, now)
    if partner == "grok":
        assert binary is not None
        return _grok_family(model, value, binary, environment, now)
    if partner == "cursor":
        assert binary is not None
        return _cursor_family(model, value, effort, binary, environment, now)
    raise UsageError(
        "model-unresolved",
        f"{partner} has no latest:<family> resolution — name an exact model "
        f"(`{partner} models` lists them)",
        next_step=MODEL_FIX,
    )


def _codex_family(
    model: str | None,
    family: str,
    effort: str | None,
    binary: str,
    identity_home: str | None,
    environment: dict[str, str],
    now: str,
) -> Resolution:
    try:
        entries, pages = codex_rpc.model_catalog(
            binary=binary, codex_home=identity_home, environment=environment
        )
    except codex_rpc.CodexRpcError as error:
        raise UsageError(
            "model-unresolved", f"cannot read the Codex model catalog through {binary}: {error}"
        ) from None
    suffix = f" (catalog of {binary}, {pages} page(s), home {identity_home or 'inherited'})"
    pattern = re.compile(rf"gpt-(\d+(?:\.\d+)*)-{re.escape(family)}")
    candidates = []
    efforts_by_id: dict[str, list[str]] = {}
    for entry in entries:
        ident = entry.get("model") or entry.get("id")
        if entry.get("hidden") is True or not isinstance(ident, str):
            continue
        match = pattern.fullmatch(ident)
        if match:
            candidates.append((match.group(1), ident))
            efforts_by_id[ident] = [
                e if isinstance(e, str) else str(e.get("reasoningEffort"))
                for e in entry.get("supportedReasoningEfforts") or []
                if isinstance(e, str | dict)
            ]
    if not candidates:
        raise UsageError("model-unresolved", f"no visible Codex model in family {family}" + suffix)
    pick = newest(candidates, f"Codex family {family}")
    if effort is not None and efforts_by_id.get(pick) and effort not in efforts_by_id[pick]:
        raise UsageError(
            "effort-refused",
            f"{pick} does not accept effort {effort} — the catalog lists "
            f"{', '.join(efforts_by_id[pick])}" + suffix,
        )
    return Resolution(
        model,
        pick,
        pick,
        "codex app-server model/list",
        now,
        evidence={"considered": sorted(i for _, i in candidates), "pages": pages},
    )


GROK_LINE = re.compile(r"^\s*[*-]\s+([a-z][a-z0-9]*)-(\d+(?:\.\d+)*)(?:\s+\([^)]*\))?\s*$")


def _grok_family(
    model: str | None, family: str, binary: str, environment: dict[str, str], now: str
) -> Resolution:
    listing = _listing([binary, "models"], environment)
    candidates = []
    for line in listing.splitlines():
        match = GROK_LINE.match(line)
        if match and match.group(1) == family:
            candidates.append((match.group(2), f"{family}-{match.group(2)}"))
    if not candidates:
        raise UsageError("model-unresolved", f"no {family} model in the `grok models` listing")
    pick = newest(list(set(candidates)), f"grok family {family}")
    return Resolution(
        model,
        pick,
        pick,
        "grok models",
        now,
        evidence={"considered": sorted({c[1] for c in candidates})},
    )


CURSOR_ID = re.compile(
    r"^(?:[a-z]+-)?(?:"
    r"(?P<v1>[a-z]?\d+(?:[.-]\d+)*)-(?P<f1>[a-z]+)"
    r"|(?P<f2>[a-z]+)-(?P<v2>[a-z]?\d+(?:[.-]\d+)*)"
    r")(?P<thinking>-thinking)?-(?P<effort>low|medium|high|xhigh|max)(?P<fast>-fast)?$"
)


def _cursor_family(
    model: str | None,
    family: str,
    effort: str | None,
    binary: str,
    environment: dict[str, str],
    now: str,
) -> Resolution:
    if effort is None:
        raise UsageError(
            "effort-required",
            f"cursor encodes effort in the model id, so latest:{family} needs --effort",
        )
    listing = _listing([binary, "--list-models"], environment)
    plain: list[tuple[str, str, str]] = []  # (version, id, effort)
    for line in listing.splitlines():
        ident = line.split(" - ", 1)[0].strip()
        match = CURSOR_ID.match(ident)
        if not match or (match.group("f1") or match.group("f2")) != family:
            continue
        if match.group("thinking") or match.group("fast"):
            continue
        version = (match.group("v1") or match.group("v2")).lstrip("abcdefghijklmnopqrstuvwxyz")
        plain.append((version.replace("-", "."), ident, match.group("effort")))
    if not plain:
        raise UsageError(
            "model-unresolved", f"no plain {family} id in `cursor-agent --list-models`"
        )
    top = max(version_key(version) for version, _, _ in plain)
    at_top = [(v, ident) for v, ident, e in plain if version_key(v) == top and e == effort]
    if not at_top:
        offered = sorted({e for v, _, e in plain if version_key(v) == top})
        raise UsageError(
            "effort-refused",
            f"the newest plain {family} offers {', '.join(offered)}, not {effort}",
        )
    pick = newest(at_top, f"cursor family {family}")
    return Resolution(model, pick, pick, "cursor-agent --list-models", now)


def check_claude_family(resolution: Resolution, reported: str | None) -> None:
    """A Claude alias must resolve to a model of that family (SPEC: mismatch is refused)."""
    if resolution.family and (reported is None or resolution.family not in reported):
        raise UsageError(
            "model-mismatch",
            f"claude resolved alias {resolution.family} to {reported or 'no reported model'} — "
            f"not a {resolution.family} model",
            next_step=f"--model: an exact {resolution.family} model id",
        )
