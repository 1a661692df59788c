"""Read-only views of units: list and status (observe), tables, watch, wait, tail, intake, serve,
config, and the attention they derive. They import no lifecycle and never send a turn."""
