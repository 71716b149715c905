"""``ctxwise db``: create or upgrade ctxwise's tables (:meth:`ctxwise.SqlStore.upgrade`)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import CtxwiseError, with_hint
from .console import DEFAULT_DB, command, fail, first_line, out, shown, store_error
from .memory import DbOpt

app = typer.Typer(help="The ctxwise database: create or upgrade its tables.", no_args_is_help=True)


@command(app, "upgrade")
def db_upgrade(
    db: DbOpt = DEFAULT_DB,
    schema: Annotated[Optional[str], typer.Option(help="PostgreSQL schema for ctxwise's tables (created if missing).",
                                                  metavar="NAME")] = None,
) -> None:
    """Create ctxwise's tables, or upgrade them to this version's schema (every open does this
    too; run it ahead of a deploy). The revision is kept in ctxwise_alembic_version, so an
    application's own Alembic table is never touched. On PostgreSQL, --schema NAME keeps
    the tables in their own schema (e.g. --db postgresql+psycopg://app@db/app --schema ctxwise).

    Example: ctxwise db upgrade --db sqlite:///ctxwise.db
    """
    from .. import SqlStore

    try:
        store = SqlStore(db, schema=schema, upgrade=False)
    except CtxwiseError as e:  # an unsupported URL, a database that cannot be reached
        fail(store_error(db, e))
    except Exception as e:  # a schema option on SQLite
        fail(f"{shown(db)}: cannot open the store ({first_line(e)})")
    try:
        before, head = store.upgrade()
    except CtxwiseError as e:
        fail(store_error(db, e))
    except Exception as e:  # an unreachable server: one line, no traceback
        fail(f"{shown(db)}: cannot upgrade ({first_line(e)})")
    finally:
        store.close()
    if before == head:
        out.print(f"{shown(db)}: already at ctxwise schema {head}")
    else:
        out.print(f"{shown(db)}: ctxwise schema {before or 'none'} -> {head}")
