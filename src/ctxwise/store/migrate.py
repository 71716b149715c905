"""Schema upgrades: the Alembic scripts shipped in ``ctxwise/migrations``, run in place.

ctxwise keeps its revision in its own table, ``ctxwise_alembic_version``, so it can share a
database with an application that uses Alembic itself (whose ``alembic_version`` ctxwise never
reads or writes). A database written by an older ctxwise, which used ``alembic_version`` with
one of ctxwise's own revisions, is moved over transparently on the first open.

:func:`upgrade` runs inside one transaction that holds the database's write lock (SQLite
``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so processes that open the same new database
at once do not race to create tables. A database ctxwise cannot migrate (a revision from a
newer ctxwise, a foreign table where ctxwise's should be) raises a one-line
:class:`~ctxwise.errors.StoreSchemaError`.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, Table, MetaData, Column, String, func, inspect, select

from ..errors import StoreSchemaError
from .sql import refused_write

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
VERSION_TABLE = "ctxwise_alembic_version"
LEGACY_VERSION_TABLE = "alembic_version"
_PG_LOCK_KEY = 0x63747877  # "ctxw"


def config() -> Config:
    """An Alembic config pointing at the packaged migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def revisions() -> list[str]:
    """Every revision id shipped with this ctxwise, oldest first."""
    return [s.revision for s in reversed(list(ScriptDirectory.from_config(config()).walk_revisions()))]


def head() -> str:
    """The newest revision id shipped with this ctxwise."""
    return ScriptDirectory.from_config(config()).get_current_head() or ""


def _current(conn: Connection) -> str | None:
    return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def current(engine: Engine) -> str | None:
    """The database's ctxwise revision (None for a database without ctxwise's tables)."""
    with engine.connect() as conn:
        conn.execution_options(ctxwise_read=True)
        rev = _current(conn)
        if rev is None:
            rev = _legacy(conn)
        return rev


def _legacy(conn: Connection) -> str | None:
    """The revision an older ctxwise left in ``alembic_version`` (None when that table is
    missing or belongs to another application)."""
    if not inspect(conn).has_table(LEGACY_VERSION_TABLE):
        return None
    t = Table(LEGACY_VERSION_TABLE, MetaData(), Column("version_num", String(32)))
    found = [r for (r,) in conn.execute(select(t.c.version_num))]
    ours = set(revisions())
    if len(found) == 1 and found[0] in ours and inspect(conn).has_table("sessions"):
        return str(found[0])
    return None


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (default: head) in one locked transaction.

    Cheap when already there (one read of ``ctxwise_alembic_version``). Raises
    :class:`StoreSchemaError` (one line) when the database holds a revision this ctxwise does
    not know or a table in the way; a failed upgrade is rolled back."""
    target = head() if revision == "head" else revision
    try:
        if current(engine) == target:
            return
        cfg = config()
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(_PG_LOCK_KEY)))
            have = _current(conn)
            known = revisions()
            if have is not None and have not in known:
                raise StoreSchemaError(
                    f"the database holds ctxwise schema revision {have!r}, which this ctxwise does not know "
                    f"(it knows up to {known[-1]!r}): it was written by a newer ctxwise; upgrade ctxwise")
            if have is None:
                legacy = _legacy(conn)
                if legacy is not None:  # an older ctxwise's table: take the revision over
                    MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).stamp(
                        ScriptDirectory.from_config(cfg), legacy)
                    Table(LEGACY_VERSION_TABLE, MetaData()).drop(conn)
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    except StoreSchemaError:
        raise
    except Exception as exc:  # a foreign table in the way, a revision gap, ...
        refused = refused_write(exc, engine)
        if refused is not None:  # a read-only database or a full disk is not a schema problem
            raise refused from None
        first = (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreSchemaError(f"cannot bring the database to ctxwise schema {target!r}: {first}") from exc
