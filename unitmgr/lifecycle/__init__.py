"""The unit lifecycle: every command that changes a unit, and the journaled step runner."""
