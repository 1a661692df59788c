"""pair's commands, one module per command (SPEC 4.1); `pair.api` re-exports them.

Each module parses and checks its arguments, works on the pair's files (`pair.paths`,
`pair.state`) and returns the document the CLI prints. None imports `pair.cli`; none knows the
CLI's options beyond the names SPEC gives them in messages.
"""
