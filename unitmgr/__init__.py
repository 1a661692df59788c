"""unitmgr: the `unit` command and the unit lifecycle.

A unit is one git worktree, one branch, one executor pair and at most one pull request, recorded
in a locked JSON registry in the repository's git common dir. This package is the application:
it uses `registry` (records, locks, output) and `pair` (executor turns, in-process).
"""

__version__ = "0.1.0"
