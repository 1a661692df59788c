"""The executor pair: one headless coding-agent CLI driven turn by turn in one worktree.

`pair` is a library first (`pair.api`), with a thin CLI on top (`pair.cli`). Each turn runs under a
detached supervisor (`python -m pair _supervise`), which enforces idle and total budgets, kills the
partner's whole process group on a hang, and leaves a transcript and a receipt.

`pair` may import `registry` but never `unitmgr`; `unit` calls `pair.api` in-process.
"""

# The distribution's version (the `unitmgr` package ships `pair`; tests check they agree).
__version__ = "0.1.0"
