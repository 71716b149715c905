"""The ``ctxwise`` command (and ``python -m ctxwise``): the CLI of :mod:`ctxwise.cli`.

The CLI is the ``cli`` extra (typer, rich and the tokenizers). Without it the command prints
one line saying what to install and exits with code 2, instead of an ImportError traceback.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the CLI, or print ``error: ... (hint: pip install 'ctxwise[cli]')`` without the extra."""
    from ._optional import require
    from .errors import MissingExtra, with_hint

    try:
        for module in ("typer", "rich"):
            require(module, "cli", "the ctxwise command")
    except MissingExtra as e:
        print(f"error: {with_hint(e)}", file=sys.stderr)
        raise SystemExit(2) from None
    from .cli import app

    app()


if __name__ == "__main__":
    main()
