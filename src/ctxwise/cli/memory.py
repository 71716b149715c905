"""``ctxwise memory``: a user's long-term memory entries (list, add, forget, clear), over the
store's :class:`~ctxwise.MemoryStore` calls."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, ParamSpec, TypeVar

import typer

from .console import DEFAULT_DB, command, fail, open_sql_store, out

P = ParamSpec("P")
R = TypeVar("R")

app = typer.Typer(help="Long-term user memory: list, add, forget, clear.", no_args_is_help=True)

UserOpt = Annotated[str, typer.Option("--user", "-u", help="The user_id whose memory to use.", metavar="USER")]
DbOpt = Annotated[str, typer.Option(help="Store URL (SQLAlchemy): SQLite or PostgreSQL.", metavar="URL")]


def _db(fn: Callable[P, R], *args: P.args, **kw: P.kwargs) -> R:
    """``fn(*args, **kw)``; a database error (a file that is not a ctxwise store, a value the
    database refuses) is one ``error:`` line and exit 2, never a traceback."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return fn(*args, **kw)
    except SQLAlchemyError as e:
        first = str(getattr(e, "orig", e)).strip().splitlines()
        what = str(getattr(fn, "__name__", "")).split("_")[0]
        fail(f"memory {what}: the database refused it ({type(e).__name__}: {first[0] if first else ''})")


@command(app, "list")
def memory_list(
    user: UserOpt,
    db: DbOpt = DEFAULT_DB,
    all_: Annotated[bool, typer.Option("--all", help="Also superseded and retracted entries.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List a user's long-term memory entries, oldest first.

    Example: ctxwise memory list --user alice
    """
    from rich.table import Table

    entries = _db(open_sql_store(db).list_memory, user, include_inactive=all_)
    if json_out:
        out.print_json(json.dumps([{"id": e.id, "text": e.text, "kind": e.kind, "status": e.status,
                                    "source_session_id": e.source_session_id} for e in entries], default=str))
        return
    t = Table(title=f"memory of {user} ({len(entries)} entries)")
    for col in ("id", "kind", "status", "text", "from session"):
        t.add_column(col)
    for e in entries:
        t.add_row(str(e.id), e.kind, e.status, e.text, e.source_session_id or "")
    out.print(t)


@command(app, "add")
def memory_add(
    text: Annotated[str, typer.Argument(help="What to remember, in the user's words.")],
    user: UserOpt,
    kind: Annotated[str, typer.Option(help="Entry kind (preference, profile, ...).")] = "preference",
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Add one entry as given (the explicit API: no decision rules; an identical active entry
    is not added twice).

    Example: ctxwise memory add "prefers over-ear headphones" --user alice
    """
    if not text.strip():
        fail("memory add: the text is empty")
    store = open_sql_store(db, must_exist=False)
    same = [e for e in _db(store.list_memory, user)
            if " ".join(e.text.lower().split()) == " ".join(text.lower().split())]
    if same:
        out.print(f"already remembered as {same[0].id}: {same[0].text}")
        return
    e = _db(store.add_memory, user, text.strip(), kind)
    out.print(f"added {e.id}: {e.text}")


@command(app, "forget")
def memory_forget(
    entry_id: Annotated[str, typer.Argument(help="The entry id (see `ctxwise memory list`).")],
    user: UserOpt,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Retract one entry (kept in history, no longer sent).

    Example: ctxwise memory forget 3 --user alice
    """
    if not entry_id.strip().isdigit():  # ids are integers: 'abc' is a usage error, not a database error
        fail(f"memory forget: entry ids are whole numbers (see `ctxwise memory list --user {user}`), not {entry_id!r}")
    ident = int(entry_id.strip())
    if ident > 2**63 - 1 or not _db(open_sql_store(db).retract_memory, user, ident):
        fail(f"memory forget: user {user!r} has no active entry {entry_id!r}")
    out.print(f"forgot {entry_id}")


@command(app, "clear")
def memory_clear(
    user: UserOpt,
    db: DbOpt = DEFAULT_DB,
    purge: Annotated[bool, typer.Option(help="Delete the rows instead of retracting them.")] = False,
) -> None:
    """Retract (or with --purge delete) all of a user's entries.

    Example: ctxwise memory clear --user alice
    """
    n = _db(open_sql_store(db).clear_memory, user, purge=purge)
    out.print(f"{'deleted' if purge else 'retracted'} {n} entries of {user}")
