"""Read-only views of units (list, status, intake, watch, wait); they import no lifecycle."""
