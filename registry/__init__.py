"""The locked JSON registry and the generic plumbing both CLIs share.

What lives here knows no git and no partner CLI: atomic writes, flock locks with holder
information, the unit record and its codec, the JSON envelope and the error -> exit code map,
token redaction, and child-process identity and group kills.

It must never import `pair` or `unitmgr` (tests/test_architecture.py enforces it). Modules are
imported directly (`from registry.atomic import write_text_atomic`) so a command pays only for
what it uses.
"""
