"""`python -m memlane` and the `memlane` command: the CLI, once its extra is known to be
installed (a client-only install prints the line to run instead of a traceback)."""

import sys


def main() -> None:
    from memlane.config.extras import MissingExtraError

    try:
        from memlane.cli.app import main as cli_main
    except MissingExtraError as missing:
        print(f"memlane: {missing}", file=sys.stderr)
        raise SystemExit(2) from None
    cli_main()


if __name__ == "__main__":
    main()
