"""The only hand-written SQL in ctxwise: connection set-up and transaction start; and the
errors a database gives before or outside ctxwise's own logic (a URL it cannot use, a server
that does not answer, a disk that is full), each told as a :class:`~ctxwise.errors.StoreUnavailable`
that says what to do.

Everything else is built with SQLAlchemy expressions (bound parameters, no string formatting).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError

from ..errors import StoreUnavailable

SUPPORTED = "sqlite:///PATH, postgresql+psycopg://USER:PASSWORD@HOST/DB, or memory:// (one process)"
"""The store URLs ctxwise opens, as the errors name them."""

_FULL = ("database or disk is full", "no space left on device", "disk full", "could not extend file")
_READ_ONLY = ("readonly database", "read-only transaction", "read-only file system", "permission denied")


def shown(url: URL | str) -> str:
    """``url`` as it may be shown: the password replaced by ``***``."""
    try:
        parsed = url if isinstance(url, URL) else make_url(url)
        if parsed.get_backend_name() == "sqlite":
            return f"sqlite:///{parsed.database or ''}"
        return parsed.render_as_string(hide_password=True)
    except ArgumentError:
        return str(url).split("@")[-1] if "@" in str(url) else str(url)


def parse_url(url: str) -> URL:
    """``url`` parsed, for a scheme ctxwise stores sessions in (``sqlite``, ``postgresql``).
    Raises :class:`StoreUnavailable` naming the supported URLs for any other scheme or a URL
    SQLAlchemy cannot parse, and for a SQLite file whose folder does not exist."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreUnavailable(f"cannot read the store URL {shown(url)!r}: {exc}; ctxwise opens {SUPPORTED}",
                               hint=f"give a URL such as {SUPPORTED}") from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreUnavailable(f"the store URL {shown(parsed)!r} uses {backend!r}, which ctxwise does not support; "
                               f"it opens {SUPPORTED}", hint=f"give a URL such as {SUPPORTED}")
    db = parsed.database or ""
    if backend == "sqlite" and db and db != ":memory:" and not db.startswith("file:") \
            and not Path(db).expanduser().parent.is_dir():
        folder = Path(db).expanduser().parent
        raise StoreUnavailable(f"cannot open the SQLite store {db!r}: its folder {str(folder)!r} does not exist",
                               hint=f"create the folder first (mkdir -p {folder}) or give another path")
    return parsed


def probe(engine: Engine) -> None:
    """Connect once (the connection goes back to the pool). Raises :class:`StoreUnavailable`
    naming the URL without its password when the database cannot be reached or opened: a
    server that does not answer, a SQLite file (or its folder) this user may not write, a full
    disk."""
    try:
        with engine.connect():
            pass
    except Exception as exc:
        first = _first_line(exc)
        cause = _cause(exc)
        where = shown(engine.url)
        if cause == "full":
            raise StoreUnavailable(f"cannot open the store {where}: the disk is full ({first})",
                                   hint="free disk space, then open the store again") from None
        if engine.url.get_backend_name() == "sqlite":
            what = "it is read-only" if cause == "read-only" else "the file cannot be opened"
            raise StoreUnavailable(f"cannot open the SQLite store {_sqlite_file(engine)!r}: {what} ({first})",
                                   hint=_read_only_hint(engine)) from None
        if cause == "read-only":
            raise StoreUnavailable(f"cannot open the store {where}: it is read-only ({first})",
                                   hint=_read_only_hint(engine)) from None
        raise StoreUnavailable(f"cannot connect to the store {where}: {first}",
                               hint="check that the database server is running and reachable, and the URL's "
                                    "host, port, user and password (the password is not shown here)") from None


def _first_line(exc: BaseException) -> str:
    """The first line of the driver's message (the exception's own when it wraps none)."""
    return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]


def _cause(exc: BaseException) -> str | None:
    """``"full"`` when a driver error says the disk or database is full, ``"read-only"`` when
    it says the database or file may not be written, else None."""
    text = str(getattr(exc, "orig", None) or exc).lower()
    if any(k in text for k in _FULL):
        return "full"
    if any(k in text for k in _READ_ONLY):
        return "read-only"
    return None


def refused_write(exc: BaseException, engine: Engine) -> StoreUnavailable | None:
    """The :class:`StoreUnavailable` a driver error stands for when the database refused a
    write for room (disk full) or permission (read-only); None for any other error."""
    cause, first = _cause(exc), _first_line(exc)
    if cause == "full":
        return StoreUnavailable(f"the store {shown(engine.url)} refused a write: it is out of room ({first}); "
                                "nothing of this write was stored",
                                hint="free disk space (or raise the database's size limit), then retry the call")
    if cause == "read-only":
        return StoreUnavailable(f"the store {shown(engine.url)} refused a write: it is read-only ({first}); "
                                "nothing of this write was stored", hint=_read_only_hint(engine))
    return None


def _sqlite_file(engine: Engine) -> str:
    """The path of a SQLite store's file (a ``file:`` URI without its query)."""
    db = engine.url.database or ""
    return db.removeprefix("file:").split("?")[0] if db.startswith("file:") else db


def _read_only_hint(engine: Engine) -> str:
    """What to do about a store this process may not write."""
    if engine.url.get_backend_name() != "sqlite":
        return "give ctxwise a database it may write to, or connect as a user with write permission"
    folder = Path(_sqlite_file(engine)).parent
    return (f"ctxwise writes the SQLite file and, beside it, its -wal and -shm files: let this user write the file "
            f"and its folder {str(folder)!r} (chmod/chown), or give another path")

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


class QuickRead:
    """A one-row read of fixed shape (a SQLAlchemy ``select`` whose bound parameters are plain
    values: no expanding ``IN``), run outside any transaction. Calling it with the parameters
    (a dict by bind name) returns the first row (a tuple in the statement's column order), or
    None when there is none.

    On SQLite the statement is compiled once for the engine's dialect (SQLAlchemy's own SQL:
    nothing is written here by hand) and executed straight on a pooled DBAPI connection in
    autocommit (a single ``SELECT`` is its own snapshot; nothing is locked): about a quarter of
    the CPU time of a ``Connection.execute``, which dispatches events and builds a result object
    per call. Used for the reads made on every proxied call (the key check, the heads lookup).
    On another backend, for a statement whose parameters or columns need a type conversion
    (a bind or result processor), and when the driver raises, it runs through ``fallback``
    (the caller's own SQLAlchemy path, with its error handling), so a failure reads as before."""

    def __init__(self, engine: Engine, stmt: Any, fallback: Any) -> None:
        self.engine = engine
        self.fallback = fallback
        """``fallback(params) -> row or None``: the read through SQLAlchemy."""
        self.sql: str | None = None
        self.order: tuple[tuple[str, Any], ...] = ()
        dialect = engine.dialect
        if dialect.name != "sqlite":
            return
        compiled = stmt.compile(dialect=dialect)
        if compiled.positiontup is None or any(
                b.expanding or b.type.dialect_impl(dialect).bind_processor(dialect) is not None
                for b in compiled.binds.values()) or any(
                c.type.dialect_impl(dialect).result_processor(dialect, None) is not None
                for c in stmt.selected_columns):
            return
        defaults = compiled.params
        self.order = tuple((name, defaults.get(name)) for name in compiled.positiontup)
        self.sql = compiled.string

    def __call__(self, params: dict[str, Any]) -> Any:
        if self.sql is None:
            return self.fallback(params)
        values = [params.get(name, default) for name, default in self.order]
        conn = self.engine.raw_connection()
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(self.sql, values)
                return cursor.fetchone()
            finally:
                cursor.close()
        except self.engine.dialect.loaded_dbapi.Error:
            conn.invalidate()
            return self.fallback(params)
        finally:
            conn.close()
