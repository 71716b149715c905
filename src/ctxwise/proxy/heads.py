"""Which session a proxied call continues: the ``ctxwise_proxy_heads`` table (revisions 0006, 0007).

A client re-sends its whole history on every call. Each stored row names one prefix of a
conversation (``head``, :func:`ctxwise.proxy.wire.heads`, ``count`` messages long) and the
session that holds it, per tenant; ``name`` is the client's ``X-Ctxwise-Session`` ('' when it
sent none). A call maps to the session of its longest stored prefix (:meth:`HeadStore.lookup`);
the session's newest head is the row with its largest ``count``; ``ends_call`` marks the row
naming a call's whole history (what lies beyond the newest such row is that call's reply),
``in_flight`` that the call is upstream (until it ends without a reply, :meth:`HeadStore.landed`). Only
hashes are stored: no message text, no provider key.

A call's rows are written in its session write's transaction (:meth:`HeadStore.commit`), which
holds the session's write lock, and only if the session's newest head is still the one the
call was mapped on (a compare-and-set): of two processes that mapped the same call on the same
session at once, one stores it and the other gets SessionConflict with nothing stored.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import (Boolean, Column, DateTime, Integer, MetaData, String, Table, bindparam, create_engine, delete,
                        false, func, insert, select, update)
from sqlalchemy.engine import Connection, Engine, make_url

from ..errors import SessionConflict
from ..store import QuickRead

metadata = MetaData()
proxy_heads = Table(
    "ctxwise_proxy_heads", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("name", String(255), nullable=False, default=""),
    Column("head", String(64), nullable=False),
    Column("count", Integer, nullable=False),
    Column("user_id", String(255), nullable=False),
    Column("session_id", String(255), nullable=False),
    Column("branched_from", String(255), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("ends_call", Boolean, nullable=False, server_default=false()),
    Column("in_flight", Boolean, nullable=False, server_default=false()),
)
"""The table as revisions 0006 and 0007 make it (the migrations are the source of the DDL)."""


_TOP = 'SELECT max("count") FROM ctxwise_proxy_heads WHERE tenant = {0} AND user_id = {0} AND session_id = {0}'
"""A session's newest head (the session index covers it, revision 0007)."""

_INSERT = insert(proxy_heads)
"""The heads rows' INSERT (executemany), built once."""

CHUNK = 500
"""Heads asked for per query after the first (the newest first)."""

NEWEST = 8
"""Heads asked for by the first query: the chain's newest (a continuing call adds a few
messages to its stored prefix, so it is found there). A statement of fixed shape: compiled
once, its parameters not expanded per call."""


@dataclass(frozen=True)
class Found:
    """The longest stored prefix of a call: ``count`` messages, in session ``(user_id,
    session_id)`` (the API user id, without the tenant), whose newest head has ``latest``."""

    count: int
    user_id: str
    session_id: str
    name: str
    latest: int

    @property
    def continues(self) -> bool:
        """Whether the call extends the session's newest head (else the client rewrote its history)."""
        return self.count == self.latest


def _lookup_statement(named: bool, fixed: int = 0) -> Any:
    """The lookup query, built once (parameters ``tenant``, ``heads`` (a list), or with
    ``fixed`` heads ``h0`` .. ``h<fixed-1>``, and ``name`` when ``named``): the longest matching
    head's row and its session's newest count."""
    t = proxy_heads.c
    wanted = [bindparam(f"h{i}") for i in range(fixed)] if fixed else bindparam("heads", expanding=True)
    newest = proxy_heads.alias("newest")
    latest = select(func.max(newest.c.count)).where(
        newest.c.tenant == t.tenant, newest.c.user_id == t.user_id,
        newest.c.session_id == t.session_id).scalar_subquery()
    q = select(t.count, t.user_id, t.session_id, t.name, latest).where(
        t.tenant == bindparam("tenant"), t.head.in_(wanted))
    if named:
        q = q.where(t.name == bindparam("name"))
    return q.order_by(t.count.desc(), t.id.desc()).limit(1)


def heads_rows(tenant: str, name: str, user_id: str, session_id: str, chain: list[str], start: int,
               branched_from: str | None = None, at: list[tuple[str, int]] | None = None,
               ends: int | None = None) -> list[dict[str, Any]]:
    """The table rows of ``chain[start:]`` (heads of counts ``start+1 ..``) and of ``at``
    (``(head, count)`` pairs) for the session; ``branched_from``: the session it branched from;
    ``ends``: the count of the chain row that names a call's whole history (``ends_call``)."""
    now = datetime.now(timezone.utc)
    rows = [{"tenant": tenant, "name": name, "head": h, "count": start + i + 1, "user_id": user_id,
             "session_id": session_id, "branched_from": branched_from, "created_at": now,
             "ends_call": start + i + 1 == ends, "in_flight": start + i + 1 == ends}
            for i, h in enumerate(chain[start:])]
    return rows + [{"tenant": tenant, "name": name, "head": h, "count": n, "user_id": user_id,
                    "session_id": session_id, "branched_from": branched_from, "created_at": now, "ends_call": False,
                    "in_flight": False}
                   for h, n in at or []]


class HeadStore:
    """The heads table in the ctxwise database at ``url`` (the store's own SQLAlchemy URL; open
    a store on it first: its migrations create the table). ``engine``: the store's own engine
    (:attr:`ctxwise.SqlStore.engine`: its SQLite settings, its PostgreSQL schema, its pool),
    which the proxy passes; then :meth:`close` leaves it open."""

    def __init__(self, url: str, *, engine: Engine | None = None) -> None:
        self.owned = engine is None
        if engine is None:
            kwargs: dict[str, Any] = {}
            if make_url(url).get_backend_name() == "sqlite":
                kwargs = {"connect_args": {"timeout": 10.0}}
            engine = create_engine(url, **kwargs)
        self.engine = engine
        self.reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        """Single-statement reads, outside any transaction (no write lock taken on SQLite)."""
        self._lookup = {named: _lookup_statement(named) for named in (False, True)}
        self._newest = {named: QuickRead(engine, stmt, lambda params, stmt=stmt: self._read_first(stmt, params))
                        for named, stmt in ((n, _lookup_statement(n, NEWEST)) for n in (False, True))}
        mark = {"qmark": "?", "format": "%s", "pyformat": "%s"}.get(engine.dialect.paramstyle)
        self._top = None if mark is None else _TOP.format(mark)
        """The check of :meth:`commit` as the driver's own SQL (a third of the time of a built
        statement; on the hot path of every proxied call), None for a driver of another paramstyle."""

    def _read_first(self, stmt: Any, params: dict[str, Any]) -> Any:
        with self.reader.connect() as conn:
            return conn.execute(stmt, params).first()

    def lookup(self, tenant: str, name: str | None, chain: list[str]) -> Found | None:
        """The longest prefix of ``chain`` (:func:`ctxwise.proxy.wire.heads`) stored for
        ``tenant`` (and for ``name`` when given), with its session's newest count; None when no
        prefix is stored."""
        if not chain:
            return None
        named = {} if name is None else {"name": name}
        newest = chain[-NEWEST:]
        padded = newest + [newest[-1]] * (NEWEST - len(newest))  # a head asked twice matches once
        row = self._newest[name is not None]({"tenant": tenant, **named, **{f"h{i}": h for i, h in enumerate(padded)}})
        if row is None and len(chain) > len(newest):
            with self.reader.connect() as conn:
                for end in range(len(chain) - len(newest), 0, -CHUNK):
                    row = conn.execute(self._lookup[name is not None], {
                        "tenant": tenant, **named, "heads": chain[max(0, end - CHUNK):end]}).first()
                    if row is not None:
                        break
        if row is None:
            return None
        count, user_id, session_id, found_name, top = row
        return Found(int(count), str(user_id), str(session_id), str(found_name), int(top or count))

    def reply(self, tenant: str, name: str | None, head: str) -> Found | None:
        """The session of ``tenant`` (of client name ``name`` when given) holding the reply head
        ``head`` (:func:`ctxwise.proxy.wire.response_head`) as its newest, the latest stored
        when several do; else the latest one holding it at all; None when none holds it. A reply
        id is the upstream's: two upstreams, or one restarted, can give two sessions the same."""
        t = proxy_heads.c
        newest = proxy_heads.alias("newest")
        latest = select(func.max(newest.c.count)).where(
            newest.c.tenant == t.tenant, newest.c.user_id == t.user_id,
            newest.c.session_id == t.session_id).scalar_subquery()
        q = select(t.count, t.user_id, t.session_id, t.name, latest).where(t.tenant == tenant, t.head == head)
        if name is not None:
            q = q.where(t.name == name)
        with self.reader.connect() as conn:
            rows = conn.execute(q.order_by(t.id.desc()).limit(64)).all()
        found = [Found(int(c), str(u), str(sid), str(n), int(top or c)) for c, u, sid, n, top in rows]
        return next((f for f in found if f.continues), found[0] if found else None)

    def named(self, tenant: str, name: str) -> int:
        """How many sessions ``tenant`` has under the client name ``name`` (branches included)."""
        t = proxy_heads.c
        with self.reader.connect() as conn:
            n = conn.execute(select(func.count(func.distinct(t.session_id))).where(
                t.tenant == tenant, t.name == name)).scalar()
        return int(n or 0)

    def newest_named(self, tenant: str, name: str, user_id: str | None = None) -> tuple[str, str] | None:
        """``(user_id, session_id)`` of the session of ``tenant`` under the client name ``name``
        (of ``user_id`` when given) that stored a head last; None when the name has none."""
        t = proxy_heads.c
        q = select(t.user_id, t.session_id).where(t.tenant == tenant, t.name == name)
        if user_id is not None:
            q = q.where(t.user_id == user_id)
        with self.reader.connect() as conn:
            row = conn.execute(q.order_by(t.id.desc()).limit(1)).first()
        return None if row is None else (str(row[0]), str(row[1]))

    def record(self, tenant: str, name: str, user_id: str, session_id: str, chain: list[str], start: int,
               branched_from: str | None = None) -> None:
        """Store ``chain[start:]`` (heads of counts ``start+1 ..``) for the session;
        ``branched_from``: the session it branched from (the client rewrote its history)."""
        self.write(heads_rows(tenant, name, user_id, session_id, chain, start, branched_from))

    def write(self, rows: list[dict[str, Any]], conn: Connection | None = None) -> None:
        """Insert ``rows`` (:func:`heads_rows`) in ``conn``'s transaction (a connection of
        :attr:`engine`), or in a transaction of their own when None."""
        if not rows:
            return
        if conn is not None:
            conn.execute(_INSERT, rows)
            return
        with self.engine.begin() as own:
            own.execute(_INSERT, rows)

    def commit(self, conn: Connection, key: tuple[str, str, str], newest: int, rows: list[dict[str, Any]],
               forget_above: int | None = None, reopen: int | None = None) -> None:
        """In ``conn``'s transaction (the session write's, which holds the session's write
        lock): check that the newest head of session ``key`` (``(tenant, user_id,
        session_id)``) still has ``newest`` messages (0: the session has none), then delete its
        heads above ``forget_above`` (a reply it no longer holds), insert ``rows``, and mark its
        call of ``reopen`` messages upstream again (a retry of it, :meth:`in_flight`). Raises
        :class:`~ctxwise.SessionConflict` when the newest head is another (another call of the
        session was stored since the call was mapped); the caller's transaction is then rolled back."""
        tenant, user_id, session_id = key
        t = proxy_heads.c
        top = conn.exec_driver_sql(self._top, (tenant, user_id, session_id)).scalar() if self._top is not None else \
            conn.execute(select(func.max(t.count)).where(t.tenant == tenant, t.user_id == user_id,
                                                         t.session_id == session_id)).scalar()
        if int(top or 0) != newest:
            raise SessionConflict(f"session {session_id!r}: its newest head has {int(top or 0)} messages, not "
                                  f"{newest}: another call of the session was stored first")
        if forget_above is not None:
            conn.execute(delete(proxy_heads).where(t.tenant == tenant, t.user_id == user_id, t.session_id == session_id,
                                                   t.count > forget_above))
        if reopen is not None:
            conn.execute(update(proxy_heads).where(t.tenant == tenant, t.user_id == user_id, t.session_id == session_id,
                                                   t.count == reopen, t.ends_call).values(in_flight=True))
        self.write(rows, conn)

    def newest_call(self, tenant: str, user_id: str, session_id: str) -> int | None:
        """How many messages the newest call of the session sent (its ``ends_call`` row), None
        when no row says (rows stored before revision 0007)."""
        t = proxy_heads.c
        with self.reader.connect() as conn:
            n = conn.execute(select(func.max(t.count)).where(
                t.tenant == tenant, t.user_id == user_id, t.session_id == session_id, t.ends_call)).scalar()
        return None if n is None else int(n)

    def in_flight(self, tenant: str, user_id: str, session_id: str, count: int, within_s: float) -> bool:
        """Whether the call of the session that sent ``count`` messages (its ``ends_call``
        row) is still upstream, as far as any process wrote: its row says so and was written
        less than ``within_s`` seconds ago (a process killed mid-call never says it ended)."""
        t = proxy_heads.c
        since = datetime.now(timezone.utc) - timedelta(seconds=within_s)
        with self.reader.connect() as conn:
            row = conn.execute(select(t.id).where(
                t.tenant == tenant, t.user_id == user_id, t.session_id == session_id, t.count == count,
                t.ends_call, t.in_flight, t.created_at > since).limit(1)).first()
        return row is not None

    def landed(self, tenant: str, user_id: str, session_id: str, count: int) -> None:
        """Record that the session's call of ``count`` messages is no longer upstream (it ended
        without a reply: an error, a client that left)."""
        t = proxy_heads.c
        with self.engine.begin() as conn:
            conn.execute(update(proxy_heads).where(
                t.tenant == tenant, t.user_id == user_id, t.session_id == session_id, t.count == count,
                t.in_flight).values(in_flight=False))

    def forget(self, tenant: str, user_id: str, session_id: str, above: int) -> int:
        """Delete the session's heads longer than ``above`` messages (a reply it no longer
        holds); returns how many rows went."""
        t = proxy_heads.c
        with self.engine.begin() as conn:
            n = conn.execute(delete(proxy_heads).where(t.tenant == tenant, t.user_id == user_id,
                                                       t.session_id == session_id, t.count > above)).rowcount
        return int(n or 0)

    def branches(self, tenant: str, user_id: str, session_id: str) -> list[str]:
        """The sessions that branched from ``(user_id, session_id)`` of ``tenant``, oldest first."""
        t = proxy_heads.c
        with self.reader.connect() as conn:
            rows = conn.execute(select(t.session_id, func.min(t.id).label("first")).where(
                t.tenant == tenant, t.user_id == user_id, t.branched_from == session_id)
                .group_by(t.session_id).order_by("first")).all()
        return [str(r[0]) for r in rows]

    def close(self) -> None:
        if self.owned:
            self.engine.dispose()
