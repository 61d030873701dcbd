"""The `memlane` command line: the Typer app (app), one module per command group, the shared
output helpers (common), the demo and transcript file reading."""

from memlane.config.extras import CLI_MODULES, EMBEDDED_MODULES, require

require("the memlane command line", "embedded", *EMBEDDED_MODULES, *CLI_MODULES)
