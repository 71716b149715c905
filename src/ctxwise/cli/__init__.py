"""The ``ctxwise`` command line (typer + rich): one module per command group, each command a
short function that parses its options and calls the library.

    ctxwise inspect                      # the built-in sample session
    ctxwise inspect recordings/run.json  # any supported format
    ctxwise replay                       # the built-in demo, compaction on and off
    ctxwise replay recordings/ --budget 4000 --report out.html
    ctxwise memory list --user alice     # long-term memory
    ctxwise db upgrade                   # create or upgrade the tables
    ctxwise serve / ctxwise keys create  # the HTTP service and its API keys

Modules: :mod:`.inspect`, :mod:`.replay` (over :mod:`ctxwise.replay`), :mod:`.memory`,
:mod:`.db`, :mod:`.serve`, :mod:`.keys`; :mod:`.console` holds what they share. User mistakes
(a missing file, a bad format, an unknown option value) print one line naming the place and
the rule and exit with code 2. ``replay`` exits 1 when some sessions failed and the others ran.
"""

from __future__ import annotations

import typer

from . import db, keys, memory
from .console import command
from .inspect import inspect
from .replay import replay
from .serve import serve

__all__ = ["app", "main"]

app = typer.Typer(
    help="Keep the working context of tool-using LLM agents inside a budget.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
command(app)(inspect)
command(app)(replay)
command(app)(serve)
app.add_typer(memory.app, name="memory")
app.add_typer(db.app, name="db")
app.add_typer(keys.app, name="keys")


def main() -> None:
    """Run the command line as ``python -m ctxwise.cli`` does (the ``ctxwise`` script goes
    through :func:`ctxwise.__main__.main`, which also turns usage mistakes into one line)."""
    app()
