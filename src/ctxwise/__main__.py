"""The ``ctxwise`` command (and ``python -m ctxwise``): the CLI of :mod:`ctxwise.cli`.

The CLI is the ``cli`` extra (typer, rich and the tokenizers). Without it the command prints
one line saying what to install and exits with code 2, instead of an ImportError traceback.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the CLI, or print ``error: ... (hint: pip install 'ctxwise[cli]')`` without the extra.

    Arguments that are not valid UTF-8 (Python keeps their bytes as lone surrogates) are a
    one-line error before any command runs, and a ctxwise error a command did not handle itself
    is printed as one ``error:`` line with exit code 2, never as a traceback."""
    from ._optional import require
    from .errors import CtxwiseError, MissingExtra, with_hint

    for k, arg in enumerate(sys.argv[1:], 1):
        if any("\ud800" <= ch <= "\udfff" for ch in arg):
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            print(f"error: argument {k} ({shown!r}) is not valid UTF-8 text; ctxwise stores text only "
                  "as valid Unicode", file=sys.stderr)
            raise SystemExit(2)

    try:
        for module in ("typer", "rich"):
            require(module, "cli", "the ctxwise command")
    except MissingExtra as e:
        print(f"error: {with_hint(e)}", file=sys.stderr)
        raise SystemExit(2) from None
    from .cli import app

    try:
        app()
    except CtxwiseError as e:
        print(f"error: {with_hint(e)}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
