"""`python -m memlane` runs the CLI."""

from memlane.cli import main

main()
