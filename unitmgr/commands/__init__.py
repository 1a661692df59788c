"""One module per `unit` verb: parse (its options come from unitmgr/options.py), call one
lifecycle or view function, render. unitmgr/cli.py assembles them into the Typer app."""
