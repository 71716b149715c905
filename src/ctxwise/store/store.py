"""The :class:`SqlStore`: sessions, context rows, transcript, events and user memory in SQL.

The eight primitives of :class:`~ctxwise.store.base.BaseStore` on SQLite or PostgreSQL; the
semantics are the base class's. A read is one snapshot transaction. A commit is one
transaction that (1) locks the session row and checks its version, (2) writes only what
changed (k appended messages: k context rows plus k originals; a clearing batch: one UPDATE
of ``current`` per cleared row, the originals untouched), (3) bumps the version. A failure
anywhere, a killed process included, rolls the whole write back. Every query filters by
``user_id``. ``Store`` is the same class under its old name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from sqlalchemy import Connection, and_, bindparam, create_engine, delete, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from .._optional import require
from ..errors import MemoryEntryNotFound, SessionConflict, SessionNotFound
from . import checks, migrate, sql
from .base import BaseStore, deferred_or_raise, busy
from .contract import (
    AddEntry,
    ClaimAction,
    ClearEntries,
    Head,
    MemoryChange,
    MemoryQuery,
    RetractEntry,
    RowQuery,
    RowUpdate,
    Snapshot,
    StoredRow,
    SupersedeEntry,
    Write,
)
from .schema import (
    CompactionEventRow,
    ContextMessageRow,
    MemoryClaimRow,
    OriginalRow,
    SessionRow,
    ToolResultRow,
    TranscriptRowModel,
    UserMemoryRow,
    utcnow,
)
from .types import VISIBLE_STATES, SessionInfo, TranscriptRow

S, C, O = SessionRow, ContextMessageRow, OriginalRow
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _locked(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "database is locked" in text or "lock timeout" in text or "could not obtain lock" in text \
        or "lock_timeout" in text


class SqlStore(BaseStore):
    """Persistent sessions on SQLite (default) or PostgreSQL (``postgresql+psycopg://...``).

    ``url``: an SQLAlchemy URL; a SQLite file is created if missing (its folder must exist).
    The schema is upgraded to the newest revision on open (Alembic, in place; revision kept in
    ``ctxwise_alembic_version``). ``schema`` (PostgreSQL only): keep ctxwise's tables in that
    schema (created if missing), e.g. inside an application's database.
    ``wait``: when True, :meth:`append` with a stale ``expected_version`` does not raise; it
    appends after the newest write (the batch stays whole and contiguous) and returns the new
    version, which then exceeds ``expected_version + 1``. ``apply`` always needs the exact
    version. When False, a session locked by another writer (PostgreSQL) is a conflict at once.
    ``wait_timeout_s``: the longest wait for another writer's lock (SQLite busy timeout,
    PostgreSQL ``lock_timeout``); beyond it the write raises :class:`SessionConflict`.
    Raises :class:`~ctxwise.errors.StoreUnavailable` for a URL scheme other than SQLite and
    PostgreSQL, a SQLite path whose folder does not exist or a database that cannot be
    reached (the URL shown without its password), :class:`~ctxwise.errors.StoreSchemaError`
    when the database holds a schema this ctxwise cannot use, ValueError for a bad ``schema``.
    A write the database refuses for room or permission (disk full, read-only) raises
    StoreUnavailable with a hint.
    """

    def __init__(self, url: str = "sqlite:///ctxwise.db", *, wait: bool = False,
                 wait_timeout_s: float = 10.0, schema: str | None = None, upgrade: bool = True) -> None:
        self.url = url
        self.wait = wait
        self.wait_timeout_s = wait_timeout_s
        parsed = sql.parse_url(url)
        backend = parsed.get_backend_name()
        if backend == "postgresql" and parsed.get_driver_name().startswith("psycopg"):
            require("psycopg", "postgres", "a PostgreSQL store")
        if schema is not None and (backend != "postgresql" or not _SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema={schema!r}: a plain identifier, and only for PostgreSQL")
        self.schema = schema
        kwargs: dict[str, Any] = {"json_serializer": checks.dumps}
        if backend == "sqlite":
            kwargs["connect_args"] = {"timeout": wait_timeout_s}
        self.engine = create_engine(parsed, **kwargs)
        self._with_queries: dict[int, tuple[Any, Any]] = {}
        self.backend = backend
        if backend == "sqlite":
            sql.setup_sqlite(self.engine, wait_timeout_s)
        elif backend == "postgresql":
            sql.setup_postgresql(self.engine, wait_timeout_s, schema=schema)
        try:
            sql.probe(self.engine)
            if upgrade:
                migrate.upgrade(self.engine)
        except Exception:
            self.engine.dispose()
            raise

    def upgrade(self) -> tuple[str | None, str]:
        """Bring the schema to this ctxwise's newest revision (what opening does unless
        ``upgrade=False``). Returns ``(revision before, revision now)``; raises
        :class:`~ctxwise.errors.StoreSchemaError` (one line) when it cannot."""
        before = migrate.current(self.engine)
        migrate.upgrade(self.engine)
        return before, migrate.head()

    # -- plumbing ----------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        """A read transaction that is one snapshot: SQLite's deferred ``BEGIN``; on PostgreSQL
        ``REPEATABLE READ`` (under the default READ COMMITTED each statement of a load could
        see another writer's newer commit: a session row at version v beside rows of v+1)."""
        with self.engine.connect() as conn:
            conn.execution_options(ctxwise_read=True)
            if self.backend == "postgresql":
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except OperationalError as exc:
            if _locked(exc):
                first = str(exc.orig).splitlines()[0]
                if "could not obtain lock" in first.lower():  # PostgreSQL FOR UPDATE NOWAIT: no wait happened
                    raise SessionConflict("session busy: another writer holds its lock and this store does not wait "
                                          f"(wait=False); reload and retry: {first}") from exc
                raise SessionConflict(f"session busy: another writer held its lock longer than the wait "
                                      f"allowed ({self.wait_timeout_s:g}s): {first}") from exc
            refused = sql.refused_write(exc, self.engine)
            if refused is not None:
                raise refused from exc
            raise

    def _session_row(self, conn: Connection, user_id: str, session_id: str, *, lock: bool = False) -> Any:
        if not checks.holdable(user_id, session_id):  # no stored session can have it
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        row = conn.execute(_session_query(lock, not self.wait), {"u": user_id, "s": session_id}).first()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return row

    # -- the primitives ----------------------------------------------------------------

    def read_session(self, user_id: str, session_id: str, *queries: RowQuery) -> Snapshot:
        """The header and each query's rows in one read transaction (REPEATABLE READ on
        PostgreSQL). Unordered: the context read goes through ``ix_context_visible`` and reads
        only the visible rows. Raises SessionNotFound."""
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return Snapshot(_head(sess), tuple(_rows(conn, sess, q) for q in queries))

    def commit(self, user_id: str, session_id: str, write: Write) -> None:
        """One transaction: lock the session row, check the version, write the rows, the logs
        and the header. Raises SessionConflict, SessionNotFound, StoreUnavailable."""
        if write.create:
            self._create(user_id, session_id, write.head)
            return
        with self._write() as conn:
            self._commit_in(conn, user_id, session_id, write)

    def commit_new(self, user_id: str, session_id: str, create: Write, write: Write) -> None:
        """Create the session (unless another writer just did) and apply ``write``, in one
        transaction: when ``write`` fails, no session is left behind."""
        with self._write() as conn:
            if conn.execute(select(S.id).where(S.user_id == user_id, S.session_id == session_id)).first() is None:
                try:
                    with conn.begin_nested():  # a savepoint: a racing insert fails alone, not the transaction
                        conn.execute(insert(S).values(**_new_session(user_id, session_id, create.head)))
                except IntegrityError:
                    pass  # created by another process in between: the version check below decides
            self._commit_in(conn, user_id, session_id, write)

    def update_session(self, user_id: str, session_id: str, queries: Sequence[RowQuery],
                       build: Callable[[Snapshot], Write]) -> Write:
        """One transaction: lock the session row, read ``queries``' rows under the lock (no
        other writer can commit to the session in between, so the read is one snapshot of the
        version the write builds on), write what ``build`` makes of them and the new header.
        Returns that write; raises what ``build`` raises, SessionConflict (the lock not had in
        time), SessionNotFound, StoreUnavailable, having written nothing then."""
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            write = build(Snapshot(_head(sess), tuple(_rows(conn, sess, q) for q in queries)))
            self._write_locked(conn, sess, write)
        return write

    def _commit_in(self, conn: Connection, user_id: str, session_id: str, write: Write) -> None:
        """:meth:`commit`'s body in ``conn``'s transaction."""
        self._write_locked(conn, self._session_row(conn, user_id, session_id, lock=True), write)

    def _write_locked(self, conn: Connection, sess: Any, write: Write) -> None:
        """``write`` on the session row ``sess``, locked in ``conn``'s transaction, under its
        expected version (else SessionConflict)."""
        if sess.version != write.expected_version:
            raise SessionConflict(f"session {sess.session_id!r} is at version {sess.version}, not "
                                  f"{write.expected_version}: another writer got in first; reload and retry")
        _insert_rows(conn, sess, write.inserts, write.head.version)
        _update_rows(conn, sess, write.updates)
        if write.reset_visible:
            conn.execute(update(C).where(C.session_pk == sess.id, C.user_id == sess.user_id,
                                         C.state.in_(VISIBLE_STATES)).values(state="reset"))
        _insert_transcript(conn, sess, write.transcript)
        if write.events:
            conn.execute(_INSERT_EVENTS, [
                dict(_event_columns(d), session_pk=sess.id, user_id=sess.user_id, version=write.head.version)
                for d in write.events])
        _bump(conn, sess, write)

    def _create(self, user_id: str, session_id: str, head: Head) -> None:
        try:
            with self._write() as conn:
                exists = conn.execute(select(S.id).where(S.user_id == user_id, S.session_id == session_id)).first()
                if exists is None:
                    conn.execute(insert(S).values(**_new_session(user_id, session_id, head)))
        except IntegrityError:
            pass  # created by another process in between

    def read_events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """The session's events, oldest first. Raises SessionNotFound."""
        E = CompactionEventRow
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return [d for (d,) in conn.execute(select(E.data).where(E.session_pk == sess.id, E.user_id == user_id)
                                               .order_by(E.id))]

    def read_transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """The session's transcript rows, by seq. Raises SessionNotFound."""
        T = TranscriptRowModel
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return [TranscriptRow(r.seq, r.role, r.text, list(r.blocks), r.status, list(r.message_ids),
                                  _aware(r.created_at) or r.created_at)
                    for r in conn.execute(select(T).where(T.session_pk == sess.id, T.user_id == user_id)
                                          .order_by(T.seq))]

    def query_sessions(self, user_id: str | None, user_prefix: str | None, limit: int,
                       offset: int) -> list[SessionInfo]:
        """Sessions, most recently updated first (the users whose id starts with
        ``user_prefix``: the server's tenants)."""
        q = select(S.user_id, S.session_id, S.provider, S.version, S.created_at, S.updated_at)
        if user_id is not None:
            q = q.where(S.user_id == user_id)
        if user_prefix is not None:
            q = q.where(S.user_id.startswith(user_prefix, autoescape=True))
        q = q.order_by(S.updated_at.desc(), S.id.desc()).limit(limit).offset(offset)
        with self._read() as conn:
            return [SessionInfo(u, s, p, v, _aware(c), _aware(t)) for u, s, p, v, c, t in conn.execute(q)]

    def read_memory(self, user_id: str, query: MemoryQuery) -> list[Any]:
        """The user's entries ``query`` selects, filtered in SQL, oldest first (one statement, in
        autocommit: it is its own snapshot, with no ``BEGIN`` / ``COMMIT`` round trips)."""
        q = _memory_query(query.include_inactive, query.exclude_session is not None, query.created_before is not None)
        params = {"u": user_id, "ex": query.exclude_session, "before": query.created_before}
        with self.engine.connect() as conn:
            return [_memory_entry(r) for r in conn.execution_options(isolation_level="AUTOCOMMIT").execute(q, params)]

    def write_memory(self, user_id: str, changes: Sequence[MemoryChange], owner: str | None) -> list[object]:
        """One transaction. With ``owner``, it first locks the user's claim row and renews it
        (a takeover waits for the lock, then sees the renewed claim). Raises MemoryBusy."""
        with self._write() as conn:
            if owner is not None:
                K = MemoryClaimRow
                held = conn.execute(select(K.owner).where(K.user_id == user_id).with_for_update()).scalar()
                if held != owner:
                    raise busy(user_id, owner)
                conn.execute(update(K).where(K.user_id == user_id, K.owner == owner).values(claimed_at=utcnow()))
            return [_memory_change(conn, user_id, c) for c in changes]

    def memory_claim(self, user_id: str, owner: str, action: ClaimAction, stale_after_s: float) -> bool:
        """The claim is a row of ``memory_claims`` keyed by ``user_id`` (a unique violation
        means someone else took it). Times are this process's UTC clock: nodes that share a
        database need clocks agreeing to well within the lease."""
        M = MemoryClaimRow
        now = utcnow()
        mine = (M.user_id == user_id, M.owner == owner)
        if action == "renew":
            with self._write() as conn:
                return bool(conn.execute(update(M).where(*mine).values(claimed_at=now)).rowcount == 1)
        if action == "release":
            with self._write() as conn:
                return bool(conn.execute(delete(M).where(*mine)).rowcount == 1)
        try:
            with self._write() as conn:
                conn.execute(delete(M).where(M.user_id == user_id,
                                             M.claimed_at < now - timedelta(seconds=stale_after_s)))
                held = conn.execute(select(M.owner).where(M.user_id == user_id)).scalar()
                if held is not None:
                    if held != owner:
                        return False
                    conn.execute(update(M).where(*mine).values(claimed_at=now))
                    return True
                conn.execute(insert(M).values(user_id=user_id, owner=owner, claimed_at=now))
                return True
        except IntegrityError:
            return False

    # -- reads the SQL store answers faster than the base class ------------------------

    def version(self, user_id: str, session_id: str) -> int:
        """The session's current version (one indexed read, in autocommit: one statement is
        its own snapshot, so no ``BEGIN`` / ``COMMIT`` round trips around it). Raises
        :class:`SessionNotFound`."""
        if not checks.holdable(user_id, session_id):
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        with self.engine.connect() as conn:
            v = conn.execution_options(isolation_level="AUTOCOMMIT").execute(
                _VERSION, {"u": user_id, "s": session_id}).scalar()
        if v is None:
            return int(deferred_or_raise(self, user_id, session_id, 0))
        return int(v)

    def freshness(self, user_id: str, session_id: str) -> tuple[int, tuple[int, int]] | None:
        """``(version, memory)`` of the session, None when there is none, in one statement
        (autocommit: one round trip): the stored version, and a fingerprint of the user-memory
        entries a reopen of the session shows (active, not written by the session itself,
        created up to its start; the same filter as its :meth:`list_memory` call): their count
        and the sum of their ids. That set only shrinks (entries are retracted or superseded,
        never reactivated, and new ones are newer than the session), so any change to it
        changes the pair. For a process that keeps sessions open between requests (the
        server): both unchanged means its copy is current."""
        with self.engine.connect() as conn:
            row = conn.execution_options(isolation_level="AUTOCOMMIT").execute(
                _freshness_query(), {"u": user_id, "s": session_id}).first()
        if row is None:
            return None
        return int(row[0]), (int(row[1] or 0), int(row[2] or 0))

    def freshness_with(self, lookup: Any, user_id: str, session_id: str,
                       params: dict[str, Any] | None = None) -> tuple[tuple[Any, ...], Any] | None:
        """:meth:`freshness` of the session ``(<prefix><user_id>, session_id)`` together with a
        caller's own one-row read, in one statement (one round trip instead of two): ``lookup``
        is a SQLAlchemy ``select`` of at most one row (bound parameters in ``params``; it must
        not use the names ``u`` and ``s``) whose first column is the user-id ``prefix`` (the
        server's API-key check, whose first column is the key's ``<tenant>:``).

        Returns None when ``lookup`` finds no row, else ``(lookup's row, freshness)``:
        freshness as :meth:`freshness` returns it, None when there is no such session. The
        statement is built once per ``lookup`` object (pass the same one each time)."""
        built = self._with_queries.get(id(lookup))
        if built is None or built[0] is not lookup:
            built = self._with_queries[id(lookup)] = (lookup, _freshness_with_query(lookup))
        with self.engine.connect() as conn:
            row = conn.execution_options(isolation_level="AUTOCOMMIT").execute(
                built[1], {**(params or {}), "u": user_id, "s": session_id}).first()
        if row is None:
            return None
        n = len(row) - 3
        head, version, count, total = tuple(row[:n]), row[n], row[n + 1], row[n + 2]
        return head, (None if version is None else (int(version), (int(count or 0), int(total or 0))))

    def close(self) -> None:
        """Close all pooled connections. The store must not be used afterwards."""
        self.engine.dispose()

    def __enter__(self) -> SqlStore:
        return self


Store = SqlStore
"""The SQL store under its first name."""


# -- helpers -------------------------------------------------------------------------------


_VERSION = select(SessionRow.__table__.c.version).where(SessionRow.__table__.c.user_id == bindparam("u"),
                                                       SessionRow.__table__.c.session_id == bindparam("s"))
""":meth:`SqlStore.version`'s statement, built once (SQLAlchemy keeps its compiled form)."""


def _fingerprint(Sc: Any) -> tuple[Any, Any]:
    """The user-memory fingerprint of the session row ``Sc`` (:meth:`SqlStore.freshness`): the
    count and the id sum of the active entries a reopen shows, as two scalar subqueries."""
    M = UserMemoryRow.__table__.c
    shown = and_(M.user_id == Sc.user_id, M.status == "active",
                 or_(M.source_session_id.is_(None), M.source_session_id != Sc.session_id),
                 or_(Sc.created_at.is_(None), M.created_at.is_(None), M.created_at <= Sc.created_at))
    return (select(func.count()).where(shown).scalar_subquery(),
            select(func.coalesce(func.sum(M.id), 0)).where(shown).scalar_subquery())


@functools.lru_cache(maxsize=1)
def _freshness_query() -> Any:
    """:meth:`SqlStore.freshness`'s statement, built once (SQLAlchemy keeps its compiled form)."""
    Sc = SessionRow.__table__.c
    return select(Sc.version, *_fingerprint(Sc)).where(Sc.user_id == bindparam("u"), Sc.session_id == bindparam("s"))


def _freshness_with_query(lookup: Any) -> Any:
    """:meth:`SqlStore.freshness_with`'s statement around ``lookup``."""
    lk = lookup.subquery("lookup")
    S_ = SessionRow.__table__
    Sc = S_.c
    prefix = list(lk.c)[0]
    joined = lk.outerjoin(S_, and_(Sc.user_id == prefix + bindparam("u"), Sc.session_id == bindparam("s")))
    return select(*lk.c, Sc.version, *_fingerprint(Sc)).select_from(joined)


def _new_session(user_id: str, session_id: str, head: Head) -> dict[str, Any]:
    """The columns of a new session row (version 0) with ``head``'s provider, policy and times."""
    return dict(user_id=user_id, session_id=session_id, provider=head.provider, policy=head.policy, version=0,
                last_seq=0, open_from_seq=None, transcript_seq=0, state=None, created_at=head.created_at,
                updated_at=head.updated_at)


def _aware(t: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; they were written as UTC."""
    return t if t is None or t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def _head(sess: Any) -> Head:
    return Head(sess.provider, dict(sess.policy), int(sess.version), dict(sess.state or {}), int(sess.last_seq),
                sess.open_from_seq, int(sess.transcript_seq), _aware(sess.created_at), _aware(sess.updated_at))


def _rows(conn: Connection, sess: Any, q: RowQuery) -> tuple[StoredRow, ...]:
    """The rows of ``sess`` that ``q`` selects (one SELECT, plus one per 500 originals)."""
    if (q.open_turn and sess.open_from_seq is None) or (q.message_ids is not None and not q.message_ids):
        return ()
    joined = q.bodies and q.originals  # every original wanted: read beside its row, in the same SELECT
    stmt = _rows_query(q.bodies, q.states, q.message_ids is not None, q.tool_use_id is not None, q.open_turn,
                       q.appended, q.newest, joined)
    params: dict[str, Any] = {"pk": sess.id, "uid": sess.user_id}
    if q.message_ids is not None:
        params["ids"] = list(q.message_ids)
    if q.tool_use_id is not None:
        params["tool"] = q.tool_use_id
    if q.open_turn:
        params["open_from"] = sess.open_from_seq
    listed = conn.execute(stmt, params).all()
    originals: dict[int, Any] = {r.seq: r.original for r in listed} if joined else {}
    if q.bodies and not joined:
        wanted = [r.seq for r in listed if q.originals or r.current is None]
        for chunk in range(0, len(wanted), 500):
            originals.update(conn.execute(_ORIGINALS, {"pk": sess.id, "uid": sess.user_id,
                                                       "seqs": wanted[chunk:chunk + 500]}).all())
    return tuple(StoredRow(r.message_id, r.seq, r.anchor_seq, r.generation, r.state, r.role,
                           r.current if q.bodies else None, originals.get(r.seq), r.size) for r in listed)


@functools.lru_cache(maxsize=4)
def _session_query(lock: bool, nowait: bool) -> Any:
    """The session row by ``u`` and ``s`` (locked ``FOR UPDATE`` when ``lock``), built once per
    shape: SQLAlchemy then reuses its compiled form instead of building the expression per call."""
    q = select(S).where(S.user_id == bindparam("u"), S.session_id == bindparam("s"))
    return q.with_for_update(nowait=nowait) if lock else q


@functools.lru_cache(maxsize=64)
def _rows_query(bodies: bool, states: tuple[str, ...] | None, by_ids: bool, by_tool: bool, open_turn: bool,
                appended: bool, newest: bool, originals: bool = False) -> Any:
    """:func:`_rows`' statement for one :class:`RowQuery` shape, built once (parameters ``pk``,
    ``uid``, and ``ids`` / ``tool`` / ``open_from`` as the shape needs them); with
    ``originals``, each row's original body beside it (column ``original``, an outer join)."""
    cols = [C.message_id, C.seq, C.anchor_seq, C.generation, C.state, C.role, C.size]
    extra = ([C.current] if bodies else []) + ([O.body.label("original")] if originals else [])
    stmt = select(*cols, *extra).where(C.session_pk == bindparam("pk"), C.user_id == bindparam("uid"))
    if originals:
        stmt = stmt.outerjoin(O, (O.session_pk == C.session_pk) & (O.seq == C.seq))
    if states is not None:
        stmt = stmt.where(C.state.in_(states))
    if by_ids:
        stmt = stmt.where(C.message_id.in_(bindparam("ids", expanding=True)))
    if by_tool:
        T = ToolResultRow
        stmt = stmt.join(T, (T.session_pk == C.session_pk) & (T.seq == C.seq)).where(
            T.user_id == bindparam("uid"), T.tool_use_id == bindparam("tool"))
    if open_turn:
        stmt = stmt.where(C.seq >= bindparam("open_from"))
    if appended:
        stmt = stmt.where(C.generation == 0)
    if newest:
        stmt = stmt.order_by(C.seq.desc()).limit(1)
    return stmt


_ORIGINALS = select(O.seq, O.body).where(O.session_pk == bindparam("pk"), O.user_id == bindparam("uid"),
                                         O.seq.in_(bindparam("seqs", expanding=True)))
"""The originals of some rows of one session (``seqs``), built once."""


_INSERT_CONTEXT, _INSERT_ORIGINALS, _INSERT_TOOL_RESULTS, _INSERT_TRANSCRIPT, _INSERT_EVENTS = (
    insert(C), insert(O), insert(ToolResultRow), insert(TranscriptRowModel), insert(CompactionEventRow))
"""The INSERTs of a commit (executemany over their rows), built once."""


def _insert_rows(conn: Connection, sess: Any, inserts: Sequence[StoredRow], version: int) -> None:
    """New context rows, their originals and their tool-result index entries."""
    if not inserts:
        return
    mine = dict(session_pk=sess.id, user_id=sess.user_id)
    conn.execute(_INSERT_CONTEXT, [dict(mine, seq=r.seq, anchor_seq=r.anchor_seq, generation=r.generation,
                                  version=version, message_id=r.message_id, role=r.role, state=r.state,
                                  current=r.current, size=r.size) for r in inserts])
    conn.execute(_INSERT_ORIGINALS, [dict(mine, seq=r.seq, body=r.original) for r in inserts])
    results = [dict(mine, tool_use_id=t, seq=r.seq) for r in inserts for t in r.tool_use_ids]
    if results:
        conn.execute(_INSERT_TOOL_RESULTS, results)


def _update_rows(conn: Connection, sess: Any, updates: Sequence[RowUpdate]) -> None:
    """Updates that carry no body are grouped (one UPDATE per distinct state and size); each
    other one is an UPDATE of its row (and of its original when that changes)."""
    if not updates:
        return
    mine = (C.session_pk == sess.id, C.user_id == sess.user_id)
    groups: dict[tuple[str | None, int | None], list[str]] = {}
    for u in updates:
        if u.current is None and u.original is None:
            groups.setdefault((u.state, u.size), []).append(u.message_id)
            continue
        values = {k: v for k, v in (("state", u.state), ("current", u.current), ("size", u.size)) if v is not None}
        if values:
            conn.execute(update(C).where(*mine, C.message_id == u.message_id).values(**values))
        if u.original is not None:
            seq = select(C.seq).where(*mine, C.message_id == u.message_id).scalar_subquery()
            conn.execute(update(O).where(O.session_pk == sess.id, O.user_id == sess.user_id, O.seq == seq)
                         .values(body=u.original))
    for (state, size), ids in groups.items():
        values = {k: v for k, v in (("state", state), ("size", size)) if v is not None}
        if values:
            conn.execute(update(C).where(*mine, C.message_id.in_(ids)).values(**values))


def _insert_transcript(conn: Connection, sess: Any, rows: Sequence[TranscriptRow]) -> None:
    if rows:
        conn.execute(_INSERT_TRANSCRIPT, [
            dict(session_pk=sess.id, user_id=sess.user_id, seq=r.seq, role=r.role, text=r.text, blocks=r.blocks,
                 status=r.status, message_ids=r.message_ids, created_at=r.created_at) for r in rows])


def _bump(conn: Connection, sess: Any, write: Write) -> None:
    """The header's new version, time and changed fields, under the expected version."""
    fields = tuple(sorted(write.changed))
    params = {f"b_{f}": getattr(write.head, f) for f in fields}
    res = conn.execute(_bump_query(fields), dict(params, b_pk=sess.id, b_uid=sess.user_id,
                                                 b_expected=write.expected_version, b_version=write.head.version,
                                                 b_at=write.head.updated_at))
    if res.rowcount != 1:
        raise SessionConflict(f"session {sess.session_id!r} changed while writing; reload and retry")


@functools.lru_cache(maxsize=32)
def _bump_query(fields: tuple[str, ...]) -> Any:
    """:func:`_bump`'s UPDATE for one set of changed header fields, built once."""
    Sc = SessionRow.__table__.c
    return (update(SessionRow)
            .where(Sc.id == bindparam("b_pk"), Sc.user_id == bindparam("b_uid"), Sc.version == bindparam("b_expected"))
            .values(version=bindparam("b_version"), updated_at=bindparam("b_at"),
                    **{f: bindparam(f"b_{f}", type_=Sc[f].type) for f in fields}))


def _event_columns(data: dict[str, Any]) -> dict[str, Any]:
    """Columns extracted from one checked event dict (keys: stage, trigger, size_before/before,
    size_after/after, affected_ids/message_ids, summary_id, duration_ms, usage)."""

    def num(*keys: str) -> Any:
        for k in keys:
            v = data.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
        return None

    def text(key: str, limit: int | None = None) -> str | None:
        v = data.get(key)
        return (str(v)[:limit] if limit else str(v)) if v is not None else None

    ids = data.get("affected_ids", data.get("message_ids"))
    usage = data.get("usage")
    size_before, size_after = num("size_before", "before"), num("size_after", "after")
    return dict(stage=text("stage", 32), trigger=text("trigger"),
                size_before=int(size_before) if size_before is not None else None,
                size_after=int(size_after) if size_after is not None else None,
                affected_ids=ids if isinstance(ids, list) else None, summary_id=text("summary_id", 255),
                duration_ms=num("duration_ms"), usage=usage if isinstance(usage, dict) else None,
                data=data, created_at=utcnow())


@functools.lru_cache(maxsize=8)
def _memory_query(include_inactive: bool, exclude: bool, before: bool) -> Any:
    """:meth:`SqlStore.read_memory`'s statement for one :class:`MemoryQuery` shape, built once
    (parameters ``u``, ``ex``, ``before``)."""
    M = UserMemoryRow
    q = select(M).where(M.user_id == bindparam("u"))
    if not include_inactive:
        q = q.where(M.status == "active")
    if exclude:
        q = q.where(or_(M.source_session_id.is_(None), M.source_session_id != bindparam("ex")))
    if before:
        q = q.where(or_(M.created_at.is_(None), M.created_at <= bindparam("before", type_=M.created_at.type)))
    return q.order_by(M.id)


def _memory_entry(r: Any) -> Any:
    from ..memory.user import MemoryEntry

    return MemoryEntry(id=r.id, text=r.text, kind=r.kind, status=r.status, supersedes_id=r.supersedes_id,
                       source_session_id=r.source_session_id, source_message_id=r.source_message_id,
                       created_at=_aware(r.created_at))


def _memory_change(conn: Connection, user_id: str, c: MemoryChange) -> object:
    """Apply one memory change in ``conn``; its result (see the change types)."""
    M = UserMemoryRow
    if isinstance(c, AddEntry):
        return _add(conn, user_id, c.text, c.kind, c.supersedes_id, c.source_session_id, c.source_message_id)
    if isinstance(c, SupersedeEntry):
        try:
            return _supersede(conn, user_id, c.entry_id, c.text, c.kind, c.source_session_id, c.source_message_id)
        except MemoryEntryNotFound:
            return None
    if isinstance(c, RetractEntry):
        return _set_status(conn, user_id, c.entry_id, "retracted")
    assert isinstance(c, ClearEntries)
    if c.purge:
        return int(conn.execute(delete(M).where(M.user_id == user_id)).rowcount)
    return int(conn.execute(update(M).where(M.user_id == user_id, M.status == "active")
                            .values(status="retracted", updated_at=utcnow())).rowcount)


def _add(conn: Connection, user_id: str, text: str, kind: str, supersedes_id: Any,
         source_session_id: str | None, source_message_id: str | None) -> Any:
    from ..memory.user import MemoryEntry

    M = UserMemoryRow
    now = utcnow()
    new_id = conn.execute(insert(M).values(
        user_id=user_id, text=text, kind=kind, status="active", supersedes_id=supersedes_id,
        source_session_id=source_session_id, source_message_id=source_message_id,
        created_at=now, updated_at=now).returning(M.id)).scalar_one()
    return MemoryEntry(id=new_id, text=text, kind=kind, supersedes_id=supersedes_id,
                       source_session_id=source_session_id, source_message_id=source_message_id, created_at=now)


def _set_status(conn: Connection, user_id: str, entry_id: int, status: str) -> bool:
    M = UserMemoryRow
    res = conn.execute(update(M).where(M.user_id == user_id, M.id == entry_id, M.status == "active")
                       .values(status=status, updated_at=utcnow()))
    return bool(res.rowcount == 1)


def _supersede(conn: Connection, user_id: str, entry_id: int, text: str, kind: str | None,
               source_session_id: str | None, source_message_id: str | None) -> Any:
    M = UserMemoryRow
    old = conn.execute(select(M).where(M.user_id == user_id, M.id == entry_id, M.status == "active")).first()
    if old is None or not _set_status(conn, user_id, entry_id, "superseded"):
        raise MemoryEntryNotFound(f"user {user_id!r} has no active memory entry {entry_id!r}")
    return _add(conn, user_id, text, kind or old.kind, entry_id, source_session_id, source_message_id)


__all__ = ["SqlStore", "Store"]
