"""What every command shares: the consoles, the one-line error, help text that reflows, and
opening a store with one line for any failure.

Help text: typer prints a docstring's later paragraphs with their line breaks as written, so a
sentence wrapped in the source would break in the middle on the screen. :func:`command`
registers a function with its docstring reflowed (:func:`help_text`): each paragraph one line,
which rich then wraps to the terminal's width.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import CtxwiseError, with_hint

if TYPE_CHECKING:
    from .. import SqlStore

F = TypeVar("F", bound=Callable[..., None])

DEFAULT_DB = "sqlite:///ctxwise.db"
"""The store every command uses when ``--db`` is not given."""


def _console(stderr: bool = False) -> Console:
    """A console; when output is not a terminal (a pipe, a file, a test) it is 120 wide so the
    tables are not squeezed into 80 columns."""
    c = Console(stderr=stderr)
    return c if c.is_terminal else Console(stderr=stderr, width=120)


out = _console()
err = _console(stderr=True)


def fail(message: str | BaseException, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr as one line and exit with ``code``; a ctxwise error
    is printed with its hint: ``error: <message> (hint: <what to do>)``."""
    text = with_hint(message) if isinstance(message, BaseException) else message
    err.print("[red]error:[/] " + escape(text), soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def first_line(e: BaseException) -> str:
    """``TypeName: the first line of its message`` (the message may be empty)."""
    lines = str(e).splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def help_text(doc: str | None) -> str:
    """``doc`` with each paragraph joined into one line (paragraphs stay apart), so the help
    screen wraps sentences at the terminal's width and never where the source did."""
    paragraphs = inspect.cleandoc(doc or "").split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)


def command(group: typer.Typer, name: str | None = None) -> Callable[[F], F]:
    """Register the decorated function as command ``name`` of ``group`` with its docstring
    reflowed as the help (:func:`help_text`)."""

    def register(fn: F) -> F:
        group.command(name, help=help_text(fn.__doc__))(fn)
        return fn

    return register


def shown(db: str) -> str:
    """The store URL ``db`` as it may be printed: its password replaced by ``***``."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(db).render_as_string(hide_password=True)
    except ArgumentError:  # not a URL: what follows the last "@" (a password may precede it)
        return db.rsplit("@", 1)[-1]


def store_error(db: str, e: CtxwiseError) -> str | CtxwiseError:
    """What the ``error:`` line says for a store error: a StoreUnavailable names the store
    itself (without its password); any other error gets the store's URL, password hidden."""
    from ..errors import StoreUnavailable

    return e if isinstance(e, StoreUnavailable) else f"{shown(db)}: {with_hint(e)}"


def open_sql_store(db: str, *, must_exist: bool = True) -> SqlStore:
    """The store at ``db``; one ``error:`` line (exit 2) when it cannot be opened, and when
    ``must_exist`` and a SQLite file is not there (nothing stored there yet)."""
    from .. import SqlStore

    path = Path(db.removeprefix("sqlite:///"))
    if must_exist and db.startswith("sqlite:///") and not path.exists() and path.parent.is_dir():
        fail(f"{db}: no such database (nothing stored there yet)")
    try:
        return SqlStore(db)
    except CtxwiseError as e:  # a schema from a newer ctxwise, a foreign table: its one line
        fail(store_error(db, e))
    except Exception as e:  # a bad URL or an unreachable server: one line, no traceback
        fail(f"{shown(db)}: cannot open the store ({first_line(e)})")
