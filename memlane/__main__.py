"""`python -m memlane` runs the CLI."""

from memlane.cli.app import main

main()
