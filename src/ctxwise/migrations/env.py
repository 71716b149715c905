"""Alembic environment: uses the connection handed over in ``config.attributes["connection"]``
(what :mod:`ctxwise.store.migrate` does), else a URL from ``-x url=...`` or the ini file."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from ctxwise.store.schema import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata,
                      version_table="ctxwise_alembic_version",
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: pass -x url=... or set sqlalchemy.url")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      version_table="ctxwise_alembic_version", literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
