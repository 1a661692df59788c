"""Write scopes (`--paths`, SPEC 2.2): pattern overlap between units.

Patterns use git's `:(glob)` pathspec semantics. Two patterns overlap when the literal prefix of
one (its segments up to the first with a wildcard) equals, contains or is contained in the
other's.
"""

from __future__ import annotations

from itertools import product

WILDCARDS = set("*?[")


def literal_prefix(pattern: str) -> tuple[str, ...]:
    segments = []
    for segment in pattern.strip("/").split("/"):
        if not segment or WILDCARDS & set(segment):
            break
        segments.append(segment)
    return tuple(segments)


def patterns_overlap(first: str, second: str) -> bool:
    a, b = literal_prefix(first), literal_prefix(second)
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def overlapping_pairs(ours: list[str], theirs: list[str]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in product(ours, theirs) if patterns_overlap(a, b)]
