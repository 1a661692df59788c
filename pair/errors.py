"""Pair refusals: the registry's typed errors under pair's own names, for readability."""

from __future__ import annotations

from registry.errors import RetryableError, Rewrite, StateError, ToolError, UsageError

__all__ = ["RetryableError", "Rewrite", "StateError", "ToolError", "UsageError"]
