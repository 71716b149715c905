"""The only hand-written SQL in ctxwise: connection set-up and transaction start.

Everything else is built with SQLAlchemy expressions (bound parameters, no string formatting).
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.exc import DisconnectionError

IDLE_PING_S = 5.0
"""A pooled PostgreSQL connection idle longer than this is pinged before it is handed out."""


def setup_sqlite(engine: Engine, busy_timeout_s: float) -> None:
    """WAL journal, ``synchronous=NORMAL`` (durable across a killed process; a power loss may
    drop the last commits, never corrupt), foreign keys on, a busy timeout, and explicit
    transactions: writes start with ``BEGIN IMMEDIATE`` (the write lock is taken up front, so
    two writers serialize instead of failing mid-transaction); a connection whose execution
    options carry ``ctxwise_read=True`` starts a deferred ``BEGIN`` (a read snapshot), one in
    ``AUTOCOMMIT`` none (a single read statement is its own snapshot)."""

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # pysqlite must not emit its own BEGIN
        cur = dbapi_connection.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Any) -> None:
        if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
            return  # one statement alone (a version or freshness read): no transaction, no write lock
        if conn.get_execution_options().get("ctxwise_read"):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")


def setup_postgresql(engine: Engine, lock_timeout_s: float, schema: str | None = None) -> None:
    """Bound every lock wait by ``lock_timeout`` (a timed-out wait raises and is reported as
    :class:`~ctxwise.errors.SessionConflict`). With ``schema`` (a plain identifier, checked by
    the caller): create it if missing and make it the connection's ``search_path``, so every
    ctxwise table and the migrations' version table live there.

    A pooled connection idle for more than :data:`IDLE_PING_S` is pinged before it is handed
    out, and replaced when the ping fails (the database restarted meanwhile). SQLAlchemy's
    ``pool_pre_ping`` pinged on every checkout: a round trip before each transaction, which
    under load is most of a short read's cost; a connection in steady use is known alive from
    its last use. A connection that dies while in use fails its statement as before, and
    SQLAlchemy then drops every pooled connection older than the failure."""

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        now = time.monotonic()
        last = record.info.get("ctxwise_used")
        record.info["ctxwise_used"] = now
        if last is None or now - last <= IDLE_PING_S:  # opened just now, or in use moments ago
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # noqa: BLE001 - the pool opens a new connection instead
            raise DisconnectionError(f"a pooled connection failed its ping: {type(exc).__name__}") from exc

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        cur = dbapi_connection.cursor()
        cur.execute(f"SET lock_timeout = {int(lock_timeout_s * 1000)}")
        if schema is not None:
            try:
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                dbapi_connection.commit()
            except Exception:  # created by another connection at the same moment
                dbapi_connection.rollback()
            cur.execute(f'SET search_path TO "{schema}"')
        cur.close()
        dbapi_connection.commit()
