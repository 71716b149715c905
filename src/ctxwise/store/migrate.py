"""Schema upgrades: the Alembic scripts shipped in ``ctxwise/migrations``, run in place.

:func:`upgrade` runs inside one transaction that holds the database's write lock (SQLite
``BEGIN IMMEDIATE``; a PostgreSQL advisory lock), so processes that open the same new database
at once do not race to create tables.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, func, select

MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"
_PG_LOCK_KEY = 0x63747877  # "ctxw"


def config() -> Config:
    """An Alembic config pointing at the packaged migrations."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head() -> str:
    """The newest revision id shipped with this ctxwise."""
    return ScriptDirectory.from_config(config()).get_current_head() or ""


def current(engine: Engine) -> str | None:
    """The database's revision (None for an empty database)."""
    with engine.connect() as conn:
        conn.execution_options(ctxwise_read=True)
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (default: head) in one locked transaction.

    Cheap when already there (one read of ``alembic_version``). Raises whatever Alembic or
    the database raise; a failed upgrade is rolled back."""
    target = head() if revision == "head" else revision
    if current(engine) == target:
        return
    cfg = config()
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(select(func.pg_advisory_xact_lock(_PG_LOCK_KEY)))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
