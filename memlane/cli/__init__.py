"""The `memlane` command line: the Typer app (app), one module per command group, the shared
output helpers (common), the demo and transcript file reading."""
