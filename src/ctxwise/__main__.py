"""The ``ctxwise`` command (and ``python -m ctxwise``): the CLI of :mod:`ctxwise.cli`.

The CLI is the ``cli`` extra (typer, rich and the tokenizers). Without it the command prints
one line saying what to install and exits with code 2, instead of an ImportError traceback.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the CLI, or print ``error: ... (hint: pip install 'ctxwise[cli]')`` without the extra.

    Arguments that are not valid UTF-8 (Python keeps their bytes as lone surrogates) are a
    one-line error before any command runs; a usage mistake (unknown option or command, a value
    of the wrong type) and a ctxwise error a command did not handle itself are printed as one
    ``error:`` line with exit code 2, never as a framed usage box or a traceback."""
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

    import typer

    from typer._click.exceptions import ClickException, UsageError  # the pinned typer vendors click

    try:
        # standalone_mode=False: a usage mistake (an unknown option or command, a value of the
        # wrong type) reaches us as click's UsageError and is printed as one line, not as a
        # framed usage box; --help and commands exit as they would otherwise.
        rc = app(standalone_mode=False)
    except UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else "ctxwise"
        print(f"error: {e.format_message()} (see '{where} --help')", file=sys.stderr)
        raise SystemExit(2) from None
    except ClickException as e:
        print(f"error: {e.format_message()}", file=sys.stderr)
        raise SystemExit(e.exit_code) from None
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        raise SystemExit(1) from None
    except CtxwiseError as e:
        print(f"error: {with_hint(e)}", file=sys.stderr)
        raise SystemExit(2) from None
    if isinstance(rc, int) and not isinstance(rc, bool) and rc != 0:
        raise SystemExit(rc)


if __name__ == "__main__":
    main()
