"""The :class:`SqlStore`: sessions, context rows, transcript, events and user memory in SQL.

Every write is one transaction that (1) locks the session row and checks its version,
(2) writes only what changed (k appended messages → k context rows plus k originals, a
clearing batch → one UPDATE of ``current`` per cleared row, the originals untouched),
(3) bumps the version. A failure anywhere, a killed process included, rolls the whole write
back. Every query filters by ``user_id``. Implements :class:`~ctxwise.store.SessionStore` and
:class:`~ctxwise.store.MemoryStore`; ``Store`` is the same class under its old name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any, Iterable, Sequence

from sqlalchemy import Connection, and_, bindparam, create_engine, delete, event, func, insert, or_, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from .._optional import require
from ..changes import Change, Hide, InsertSummary, Replace
from ..errors import CtxwiseError, MessageNotStorable, NotNewestMessage, SessionConflict, SessionNotFound
from ..messages import Marker, Message
from ..transcript import Entry, derive
from . import checks, migrate, sql
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
from .types import (
    HIDDEN_STATES,
    REMOVED_STATES,
    VISIBLE_STATES,
    ContextRow,
    SessionInfo,
    SessionState,
    TranscriptRow,
)

S, C, O = SessionRow, ContextMessageRow, OriginalRow
_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def _locked(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "database is locked" in text or "lock timeout" in text or "could not obtain lock" in text \
        or "lock_timeout" in text


def _entry_id(entry_id: Any) -> int | None:
    """A memory entry id as the database holds it (None: not an id, so not found)."""
    if isinstance(entry_id, bool):
        return None
    if isinstance(entry_id, str) and entry_id.strip().isascii() and entry_id.strip().isdigit():
        entry_id = int(entry_id)
    if isinstance(entry_id, int) and 0 < entry_id < 2**63:
        return entry_id
    return None


class SqlStore:
    """Persistent sessions on SQLite (default) or PostgreSQL (``postgresql+psycopg://...``).

    ``url``: an SQLAlchemy URL; a SQLite file is created if missing. The schema is upgraded to
    the newest revision on open (Alembic, in place; revision kept in
    ``ctxwise_alembic_version``). ``schema`` (PostgreSQL only): keep ctxwise's tables in that
    schema (created if missing), e.g. inside an application's database.
    ``wait``: when True, :meth:`append` with a stale ``expected_version`` does not raise; it
    appends after the newest write (the batch stays whole and contiguous) and returns the new
    version, which then exceeds ``expected_version + 1``. ``apply`` always needs the exact
    version. When False, a session locked by another writer (PostgreSQL) is a conflict at once.
    ``wait_timeout_s``: the longest wait for another writer's lock (SQLite busy timeout,
    PostgreSQL ``lock_timeout``); beyond it the write raises :class:`SessionConflict`.
    Raises :class:`~ctxwise.errors.StoreSchemaError` when the database holds a schema this
    ctxwise cannot use.
    """

    def __init__(self, url: str = "sqlite:///ctxwise.db", *, wait: bool = False,
                 wait_timeout_s: float = 10.0, schema: str | None = None, upgrade: bool = True) -> None:
        self.url = url
        self.wait = wait
        self.wait_timeout_s = wait_timeout_s
        backend = make_url(url).get_backend_name()
        if backend == "postgresql" and make_url(url).get_driver_name().startswith("psycopg"):
            require("psycopg", "postgres", "a PostgreSQL store")
        if schema is not None and (backend != "postgresql" or not _SCHEMA_NAME.match(schema)):
            raise ValueError(f"schema={schema!r}: a plain identifier, and only for PostgreSQL")
        self.schema = schema
        kwargs: dict[str, Any] = {"json_serializer": checks.dumps}
        if backend == "sqlite":
            kwargs["connect_args"] = {"timeout": wait_timeout_s}
        self.engine = create_engine(url, **kwargs)
        self._with_queries: dict[int, tuple[Any, Any]] = {}
        self.backend = backend
        if backend == "sqlite":
            sql.setup_sqlite(self.engine, wait_timeout_s)
        elif backend == "postgresql":
            sql.setup_postgresql(self.engine, wait_timeout_s, schema=schema)
        if upgrade:
            try:
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
            raise

    def _session_row(self, conn: Connection, user_id: str, session_id: str, *, lock: bool = False) -> Any:
        if not checks.holdable(user_id, session_id):  # no stored session can have it
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        q = select(S).where(S.user_id == user_id, S.session_id == session_id)
        if lock:
            q = q.with_for_update(nowait=not self.wait)
        row = conn.execute(q).first()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return row

    def _bump(self, conn: Connection, sess: Any, expected: int, state: dict[str, Any] | None = None,
              **values: Any) -> int:
        if state is not None:
            values["state"] = checks.json_doc(state, "session state")
        res = conn.execute(
            update(S)
            .where(S.id == sess.id, S.user_id == sess.user_id, S.version == expected)
            .values(version=expected + 1, updated_at=utcnow(), **values)
        )
        if res.rowcount != 1:
            raise SessionConflict(f"session {sess.session_id!r} changed while writing; reload and retry")
        return expected + 1

    @staticmethod
    def _check_version(sess: Any, expected: int, *, rebase: bool) -> int:
        if sess.version == expected:
            return expected
        if rebase:
            return int(sess.version)
        raise SessionConflict(
            f"session {sess.session_id!r} is at version {sess.version}, not {expected}: another writer got "
            "in first; reload and retry")

    def _insert_events(self, conn: Connection, sess: Any, version: int, rows: list[dict[str, Any]]) -> None:
        if rows:
            conn.execute(insert(CompactionEventRow), [
                dict(r, session_pk=sess.id, user_id=sess.user_id, version=version) for r in rows])

    def _insert_transcript(self, conn: Connection, sess: Any, entries: list[Entry]) -> None:
        if entries:
            now = utcnow()
            conn.execute(insert(TranscriptRowModel), [
                dict(session_pk=sess.id, user_id=sess.user_id, seq=sess.transcript_seq + 1 + i,
                     role=e.role, text=e.text, blocks=e.blocks, status=e.status,
                     message_ids=e.message_ids, created_at=now)
                for i, e in enumerate(entries)])

    def _set_sizes(self, conn: Connection, sess: Any, sizes: dict[str, int] | None) -> None:
        for mid, n in (sizes or {}).items():
            conn.execute(update(C).where(C.session_pk == sess.id, C.user_id == sess.user_id,
                                         C.message_id == mid).values(size=int(n)))

    # -- sessions ----------------------------------------------------------------------

    def open_session(self, user_id: str, session_id: str, *, provider: str,
                     policy: dict[str, Any]) -> SessionState:
        """Create the session at version 0 if missing, else load it (its stored provider and
        policy are returned). Safe when two processes open the same new session at once.
        Raises :class:`~ctxwise.errors.NotStorable` for a key the store cannot hold."""
        checks.key(user_id, session_id)
        policy_json = checks.json_doc(policy, "policy")
        try:
            with self._write() as conn:
                exists = conn.execute(select(S.id).where(S.user_id == user_id,
                                                         S.session_id == session_id)).first()
                if exists is None:
                    now = utcnow()
                    conn.execute(insert(S).values(
                        user_id=user_id, session_id=session_id, provider=provider, policy=policy_json,
                        version=0, last_seq=0, open_from_seq=None, transcript_seq=0, state=None,
                        created_at=now, updated_at=now))
        except IntegrityError:
            pass  # created by another process in between
        return self.load(user_id, session_id)

    def load(self, user_id: str, session_id: str, *, include_hidden: bool = False) -> SessionState:
        """The session with its visible context rows in context order (all rows when
        ``include_hidden``). Raises :class:`SessionNotFound`. O(visible rows): an edited row's
        ``original`` is read only with ``include_hidden`` (else None; see :meth:`original`)."""
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            q = (select(C.message_id, C.seq, C.state, C.current, C.size, C.anchor_seq, C.generation)
                 .where(C.session_pk == sess.id, C.user_id == user_id))
            if not include_hidden:
                q = q.where(C.state.in_(VISIBLE_STATES))
            # ordered here, not by the database: an ORDER BY makes the planner walk every row the
            # session ever had in ix_context_order; without it, ix_context_visible (session_pk,
            # state, ...) reads only the visible ones, and reopen does not grow with the history
            listed = sorted(conn.execute(q), key=lambda r: (r.anchor_seq, r.generation))
            wanted = [r.seq for r in listed if include_hidden or r.current is None]
            originals: dict[int, Any] = {}
            for chunk in range(0, len(wanted), 500):
                part = wanted[chunk:chunk + 500]
                originals.update(conn.execute(select(O.seq, O.body).where(
                    O.session_pk == sess.id, O.user_id == user_id, O.seq.in_(part))).all())
            rows = []
            for mid, seq, state, cur, size, _anchor, _generation in listed:
                original = Message.model_validate(originals[seq]) if seq in originals else None
                current = original if cur is None else Message.model_validate(cur)
                assert current is not None
                rows.append(ContextRow(mid, seq, state, current, original, size))
            return SessionState(user_id, session_id, sess.provider, dict(sess.policy), sess.version, rows,
                                created_at=_aware(sess.created_at) if sess.created_at else None,
                                state=dict(sess.state or {}))

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
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
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

    def list_sessions(self, user_id: str | None = None, *, limit: int = 100, offset: int = 0,
                      user_prefix: str | None = None) -> list[SessionInfo]:
        """Sessions, most recently updated first (``limit`` from ``offset``), one user's only
        when ``user_id`` is given, those of users whose id starts with ``user_prefix`` when
        that is given (the server's tenants)."""
        q = select(S.user_id, S.session_id, S.provider, S.version, S.created_at, S.updated_at)
        if user_id is not None:
            q = q.where(S.user_id == user_id)
        if user_prefix is not None:
            q = q.where(S.user_id.startswith(user_prefix, autoescape=True))
        q = q.order_by(S.updated_at.desc(), S.id.desc()).limit(max(0, int(limit))).offset(max(0, int(offset)))
        with self._read() as conn:
            return [SessionInfo(u, s, p, v, _aware(c), _aware(t)) for u, s, p, v, c, t in conn.execute(q)]

    # -- writes ------------------------------------------------------------------------

    def append(self, user_id: str, session_id: str, messages: list[Message], *, expected_version: int,
               sizes: Sequence[int] | None = None, state: dict[str, Any] | None = None) -> int:
        """Append ``messages`` (one model call's output, or a user input) in one transaction:
        k context rows (state ``verbatim``) and their originals, the transcript rows they
        complete, one version bump (and ``state``, replacing the stored one, when given).
        Returns the new version.

        Raises :class:`SessionConflict` (version is not ``expected_version`` and ``wait`` is
        off, or the lock wait timed out), :class:`SessionNotFound`, ``TypeError`` (not a
        Message), :class:`~ctxwise.errors.MessageNotStorable` (a message id already in the
        session, text the database cannot hold; ``index`` in the batch) — all before anything
        is stored."""
        bodies = checks.bodies(messages)
        if sizes is not None and len(sizes) != len(messages):
            raise ValueError(f"append: {len(sizes)} sizes for {len(messages)} messages")
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            base = self._check_version(sess, expected_version, rebase=self.wait)
            values = self._add_rows(conn, sess, session_id, messages, bodies, sizes, base + 1)
            return self._bump(conn, sess, base, state, **values)

    def _add_rows(self, conn: Connection, sess: Any, session_id: str, messages: list[Message],
                  bodies: list[Any], sizes: Sequence[int] | None, version: int) -> dict[str, Any]:
        """Insert ``messages`` as new context rows (and their originals, result index and the
        transcript rows they complete) of ``sess`` at ``version``; returns the session-row values
        the caller's one version bump writes. ``sess`` may be a namespace holding the row's
        values as a write earlier in the same transaction left them."""
        user_id = sess.user_id
        taken = {mid for (mid,) in conn.execute(select(C.message_id).where(
            C.session_pk == sess.id, C.user_id == user_id, C.message_id.in_([m.id for m in messages])))}
        for i, m in enumerate(messages):
            if m.id in taken:
                raise MessageNotStorable(i, "duplicate-message-id",
                                         f"id {m.id!r} is already stored in session {session_id!r}")
        open_msgs, open_seqs = self._open_messages(conn, sess)
        entries, still_open = derive(open_msgs, list(messages))
        first_seq = sess.last_seq + 1
        new_open = _open_from(open_msgs, open_seqs, messages, still_open, first_seq)
        values = dict(last_seq=sess.last_seq + len(messages), open_from_seq=new_open,
                      transcript_seq=sess.transcript_seq + len(entries))
        if not messages:
            return values
        rows: list[dict[str, Any]] = []
        originals: list[dict[str, Any]] = []
        results: list[dict[str, Any]] = []
        for k, (m, body) in enumerate(zip(messages, bodies)):
            seq = first_seq + k
            rows.append(dict(session_pk=sess.id, user_id=user_id, seq=seq, anchor_seq=seq,
                             generation=0, version=version, message_id=m.id, role=m.role,
                             state="verbatim", current=None,
                             size=int(sizes[k]) if sizes is not None else None))
            originals.append(dict(session_pk=sess.id, user_id=user_id, seq=seq, body=body))
            results.extend(dict(session_pk=sess.id, user_id=user_id, tool_use_id=r.tool_use_id,
                                seq=seq) for r in m.tool_results)
        conn.execute(insert(C), rows)
        conn.execute(insert(O), originals)
        if results:
            conn.execute(insert(ToolResultRow), results)
        self._insert_transcript(conn, sess, entries)
        return values

    def _open_messages(self, conn: Connection, sess: Any) -> tuple[list[Message], list[int]]:
        if sess.open_from_seq is None:
            return [], []
        got = list(conn.execute(
            select(O.seq, O.body).join(C, (C.session_pk == O.session_pk) & (C.seq == O.seq))
            .where(O.session_pk == sess.id, O.user_id == sess.user_id, O.seq >= sess.open_from_seq,
                   C.generation == 0, C.state.not_in(REMOVED_STATES))
            .order_by(O.seq)))
        return [Message.model_validate(b) for _, b in got], [s for s, _ in got]

    def apply(self, user_id: str, session_id: str, changes: list[Change], events: list[dict[str, Any]], *,
              expected_version: int, sizes: dict[str, int] | None = None,
              state: dict[str, Any] | None = None) -> int:
        """Store one compaction's results in one transaction: each :class:`Replace` is one
        UPDATE of that row's ``current`` (the original is another table's row, untouched); each
        :class:`Hide` one UPDATE of the listed rows; each :class:`InsertSummary` one INSERT
        placed where its anchor stands; each event one INSERT; one version bump. ``sizes``
        maps message ids to their new size. Returns the new version.

        Raises :class:`SessionConflict` (version is not ``expected_version``, whatever
        ``wait``), :class:`SessionNotFound`, ``ValueError`` (unknown message id, bad state,
        unserializable data) — nothing is stored then."""
        prepared = _prepare_changes(changes)
        event_rows = [_event_row(i, ev) for i, ev in enumerate(events)]
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            self._check_version(sess, expected_version, rebase=False)
            version = expected_version + 1
            seq = sess.last_seq
            mine = (C.session_pk == sess.id, C.user_id == user_id)
            for i, (ch, body) in enumerate(prepared):
                if isinstance(ch, Replace):
                    res = conn.execute(update(C).where(*mine, C.message_id == ch.message_id)
                                       .values(current=body, state=ch.state))
                    if res.rowcount != 1:
                        raise ValueError(f"change {i}: no message {ch.message_id!r} in session {session_id!r}")
                elif isinstance(ch, Hide):
                    wanted = set(ch.message_ids)
                    if not wanted:
                        continue
                    res = conn.execute(update(C).where(*mine, C.message_id.in_(sorted(wanted)))
                                       .values(state=ch.state))
                    if res.rowcount != len(wanted):
                        raise ValueError(f"change {i}: some of {sorted(wanted)} are not in session {session_id!r}")
                else:
                    anchor = conn.execute(select(C.anchor_seq).where(
                        *mine, C.message_id == ch.anchor_message_id)).scalar()
                    if anchor is None:
                        raise ValueError(f"change {i}: no anchor message {ch.anchor_message_id!r}")
                    if conn.execute(select(C.id).where(*mine, C.message_id == ch.summary.id)).first():
                        raise ValueError(f"change {i}: message id {ch.summary.id!r} already stored")
                    seq += 1
                    conn.execute(insert(C).values(
                        session_pk=sess.id, user_id=user_id, seq=seq, anchor_seq=anchor,
                        generation=seq, version=version, message_id=ch.summary.id,
                        role=ch.summary.role, state="verbatim", current=None, size=None))
                    conn.execute(insert(O).values(session_pk=sess.id, user_id=user_id, seq=seq, body=body))
            self._set_sizes(conn, sess, sizes)
            self._insert_events(conn, sess, version, event_rows)
            return self._bump(conn, sess, expected_version, state, last_seq=seq)

    def pop(self, user_id: str, session_id: str, *, expected_version: int,
            events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None,
            message_id: str | None = None, then_append: list[Message] | None = None,
            sizes: Sequence[int] | None = None) -> tuple[int, Message | None]:
        """Retract the newest appended message still in the context: its row becomes
        ``popped`` (original kept, id stays taken), the transcript gets a ``retracted`` row
        naming it, ``events`` are stored. With ``then_append``, those messages (``sizes``: theirs)
        are appended in the same transaction, as :meth:`append` would, so the last message is
        replaced in one write (one version bump). Returns ``(new version, message)``, or
        ``(expected_version, None)`` without writing when nothing is left to pop.
        Raises SessionConflict, SessionNotFound, ValueError (``message_id`` given and not the
        message that would be popped), MessageNotStorable (a ``then_append`` message) — nothing
        is written then."""
        event_rows = [_event_row(i, ev) for i, ev in enumerate(events or [])]
        then = list(then_append or [])
        bodies = checks.bodies(then)
        if sizes is not None and len(sizes) != len(then):
            raise ValueError(f"pop: {len(sizes)} sizes for {len(then)} messages")
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            self._check_version(sess, expected_version, rebase=False)
            last = self._newest_row(conn, sess, user_id, message_id, "pop")
            if last is None:
                return expected_version, None
            seq, mid, _, body = last
            msg = Message.model_validate(body)
            conn.execute(update(C).where(C.session_pk == sess.id, C.user_id == user_id, C.seq == seq)
                         .values(state="popped"))
            open_from = sess.open_from_seq
            if open_from is not None and open_from >= seq:
                open_from = None
            entry = Entry(msg.role, msg.text, [], "retracted", [mid])
            self._insert_transcript(conn, sess, [entry])
            version = expected_version + 1
            self._insert_events(conn, sess, version, event_rows)
            values: dict[str, Any] = dict(open_from_seq=open_from, transcript_seq=sess.transcript_seq + 1)
            if then:
                after = SimpleNamespace(**{**sess._asdict(), **values})
                values = self._add_rows(conn, after, session_id, then, bodies, sizes, version)
            self._bump(conn, sess, expected_version, state, **values)
            return version, msg

    def _newest_row(self, conn: Any, sess: Any, user_id: str, message_id: str | None,
                    op: str) -> tuple[int, str, Any, Any] | None:
        """``(seq, message_id, current body, original body)`` of the newest appended message
        still in the context, or None when there is none (pop and amend act on it). Raises
        ValueError when ``message_id`` is given and is not that message."""
        last = conn.execute(
            select(C.seq, C.message_id, C.current).where(
                C.session_pk == sess.id, C.user_id == user_id, C.generation == 0,
                C.state.in_(VISIBLE_STATES))
            .order_by(C.seq.desc()).limit(1)).first()
        if last is None:
            return None
        seq, mid, current = last
        if message_id is not None and mid != message_id:
            raise NotNewestMessage(op, mid, message_id)
        body = conn.execute(select(O.body).where(O.session_pk == sess.id, O.user_id == user_id,
                                                 O.seq == seq)).scalar_one()
        return seq, mid, current, body

    def amend(self, user_id: str, session_id: str, *, expected_version: int, metadata: dict[str, Any],
              beside: list[Any] | None = None, message_id: str | None = None, size: int | None = None, events: list[dict[str, Any]] | None = None,
              state: dict[str, Any] | None = None) -> tuple[int, Message | None]:
        """Set ``metadata``'s top-level keys (and, unless None, ``beside`` as
        ``metadata["ctxwise"]["beside"]``) on the newest appended message still in the context
        (its stored original and its current body; role and blocks unchanged, so no transcript
        row), ``size`` (when given) as its stored size, and store ``events``. Returns ``(new
        version, the amended original)``, or ``(expected_version, None)`` without writing when the
        context is empty. Raises SessionConflict, SessionNotFound, ValueError (``message_id``
        given and not that message), MessageNotStorable (what the metadata makes of it) —
        nothing is written then."""
        event_rows = [_event_row(i, ev) for i, ev in enumerate(events or [])]
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            self._check_version(sess, expected_version, rebase=False)
            last = self._newest_row(conn, sess, user_id, message_id, "amend")
            if last is None:
                return expected_version, None
            seq, mid, current, body = last
            msg = _with_metadata(Message.model_validate(body), metadata, beside)
            (new_body,) = checks.bodies([msg])
            conn.execute(update(O).where(O.session_pk == sess.id, O.user_id == user_id, O.seq == seq)
                         .values(body=new_body))
            values: dict[str, Any] = {}
            if current is not None:
                (values["current"],) = checks.bodies([_with_metadata(Message.model_validate(current), metadata, beside)])
            if size is not None:
                values["size"] = int(size)
            if values:
                conn.execute(update(C).where(C.session_pk == sess.id, C.user_id == user_id, C.seq == seq)
                             .values(**values))
            version = expected_version + 1
            self._insert_events(conn, sess, version, event_rows)
            self._bump(conn, sess, expected_version, state)
            return version, msg

    def clear(self, user_id: str, session_id: str, *, expected_version: int,
              events: list[dict[str, Any]] | None = None, state: dict[str, Any] | None = None) -> int:
        """Hide the whole context (every visible row becomes ``reset``; originals kept), close
        the open turn, add a ``cleared`` transcript row, store ``events``. Returns the new
        version. Raises SessionConflict, SessionNotFound."""
        event_rows = [_event_row(i, ev) for i, ev in enumerate(events or [])]
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            self._check_version(sess, expected_version, rebase=False)
            conn.execute(update(C).where(C.session_pk == sess.id, C.user_id == user_id,
                                         C.state.in_(VISIBLE_STATES)).values(state="reset"))
            self._insert_transcript(conn, sess, [Entry("system", "", [], "cleared", [])])
            version = expected_version + 1
            self._insert_events(conn, sess, version, event_rows)
            return self._bump(conn, sess, expected_version, state, open_from_seq=None,
                              transcript_seq=sess.transcript_seq + 1)

    def set_policy(self, user_id: str, session_id: str, *, provider: str, policy: dict[str, Any],
                   expected_version: int, events: list[dict[str, Any]] | None = None,
                   sizes: dict[str, int] | None = None, state: dict[str, Any] | None = None) -> int:
        """Replace the stored provider and policy (an explicit migration), with ``events`` and
        new ``sizes``, in one write. Returns the new version."""
        policy_json = checks.json_doc(policy, "policy")
        event_rows = [_event_row(i, ev) for i, ev in enumerate(events or [])]
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            self._check_version(sess, expected_version, rebase=False)
            self._set_sizes(conn, sess, sizes)
            self._insert_events(conn, sess, expected_version + 1, event_rows)
            return self._bump(conn, sess, expected_version, state, provider=provider, policy=policy_json)

    # -- reads -------------------------------------------------------------------------

    def events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """The events of the session, oldest first, each as given to the writes."""
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return [d for (d,) in conn.execute(
                select(CompactionEventRow.data)
                .where(CompactionEventRow.session_pk == sess.id, CompactionEventRow.user_id == user_id)
                .order_by(CompactionEventRow.id))]

    def original(self, user_id: str, session_id: str, tool_use_id: str | None = None, *,
                 message_id: str | None = None) -> Message | None:
        """The original (uncleared) message: by ``message_id``, or the one holding the
        ``tool_result`` for ``tool_use_id``. When a session reuses a call id: the newest one
        in the current context whose body was cleared (the body a placeholder points to), else
        the newest in the context, else the newest. None if there is none."""
        if (tool_use_id is None) == (message_id is None):
            raise ValueError("original(): give exactly one of tool_use_id and message_id")
        if not checks.holdable(tool_use_id if message_id is None else message_id):
            self.version(user_id, session_id)  # SessionNotFound as for any id
            return None
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            if message_id is not None:
                seq = conn.execute(select(C.seq).where(C.session_pk == sess.id, C.user_id == user_id,
                                                       C.message_id == message_id)).scalar()
            else:
                found = list(conn.execute(
                    select(ToolResultRow.seq, C.state)
                    .join(C, (C.session_pk == ToolResultRow.session_pk) & (C.seq == ToolResultRow.seq))
                    .where(ToolResultRow.session_pk == sess.id, ToolResultRow.user_id == user_id,
                           ToolResultRow.tool_use_id == tool_use_id)
                    .order_by(ToolResultRow.seq.desc())))
                seq = _pick_original(found)
            if seq is None:
                return None
            body = conn.execute(select(O.body).where(O.session_pk == sess.id, O.user_id == user_id,
                                                     O.seq == seq)).scalar()
            return Message.model_validate(body) if body is not None else None

    def transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """The transcript rows, in order. Agent work whose final reply has not arrived yet is
        not listed until the reply (or the next user input, as ``interrupted``) comes."""
        T = TranscriptRowModel
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return [TranscriptRow(r.seq, r.role, r.text, list(r.blocks), r.status, list(r.message_ids),
                                  _aware(r.created_at) or r.created_at)
                    for r in conn.execute(select(T).where(T.session_pk == sess.id, T.user_id == user_id)
                                          .order_by(T.seq))]

    # -- user memory (MemoryStore) -----------------------------------------------------

    def list_memory(self, user_id: str, *, include_inactive: bool = False, exclude_session: str | None = None,
                    created_before: datetime | None = None) -> list[Any]:
        """The user's entries (``MemoryEntry``), oldest first (active only unless
        ``include_inactive``), filtered in SQL as :meth:`MemoryStore.list_memory` describes."""
        if not checks.holdable(user_id):
            return []
        with self._read() as conn:
            return _list_memory(conn, user_id, include_inactive, exclude_session, created_before)

    def add_memory(self, user_id: str, text: str, kind: str = "preference", *, supersedes_id: Any = None,
                   source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        """Store ``text`` as a new active entry; returns it (``MemoryEntry``) with its id."""
        with self._write() as conn:
            return _add(conn, user_id, text, kind, supersedes_id, source_session_id, source_message_id)

    def supersede_memory(self, user_id: str, entry_id: Any, text: str, kind: str | None = None, *,
                         source_session_id: str | None = None, source_message_id: str | None = None) -> Any:
        """Mark ``entry_id`` superseded and add ``text`` in its place; raises
        :class:`~ctxwise.memory.repo.MemoryEntryNotFound`."""
        with self._write() as conn:
            return _supersede(conn, user_id, entry_id, text, kind, source_session_id, source_message_id)

    def retract_memory(self, user_id: str, entry_id: Any) -> bool:
        """Mark one entry retracted; False when the user has no active entry with that id."""
        with self._write() as conn:
            return _set_status(conn, user_id, entry_id, "retracted")

    def clear_memory(self, user_id: str, *, purge: bool = False) -> int:
        """Retract every active entry (``purge``: delete the user's rows); the count."""
        M = UserMemoryRow
        with self._write() as conn:
            if purge:
                return int(conn.execute(delete(M).where(M.user_id == user_id)).rowcount)
            return int(conn.execute(update(M).where(M.user_id == user_id, M.status == "active")
                                    .values(status="retracted", updated_at=utcnow())).rowcount)

    def apply_memory(self, user_id: str, ops: Iterable[Any], *, source_session_id: str | None = None,
                     source_message_id: str | None = None, owner: str | None = None) -> list[Any]:
        """Apply ``Op``s in one transaction; returns those that changed something. With
        ``owner``: the transaction first locks the user's claim row and renews it, and raises
        :class:`~ctxwise.errors.MemoryBusy` (nothing written) when ``owner`` does not hold it;
        a takeover waits for the lock, then sees the renewed claim."""
        from ..errors import MemoryBusy, MemoryEntryNotFound

        done: list[Any] = []
        M = UserMemoryRow
        with self._write() as conn:
            if owner is not None:
                K = MemoryClaimRow
                held = conn.execute(select(K.owner).where(K.user_id == user_id).with_for_update()).scalar()
                if held != owner:
                    raise MemoryBusy(f"memory claim of user {user_id!r} was taken over from {owner!r} "
                                     f"(its lease ran out); nothing of this extraction was written")
                conn.execute(update(K).where(K.user_id == user_id, K.owner == owner).values(claimed_at=utcnow()))
            for op in ops:
                if op.op == "ADD":
                    _add(conn, user_id, op.text or "", op.kind or "preference", None, source_session_id,
                         source_message_id)
                elif op.op == "SUPERSEDE":
                    try:
                        _supersede(conn, user_id, op.target_id, op.text or "", op.kind, source_session_id,
                                   source_message_id)
                    except MemoryEntryNotFound:
                        continue
                elif op.op == "RETRACT":
                    if not _set_status(conn, user_id, op.target_id, "retracted"):
                        continue
                elif op.op == "CLEAR":
                    conn.execute(update(M).where(M.user_id == user_id, M.status == "active")
                                 .values(status="retracted", updated_at=utcnow()))
                else:
                    continue
                done.append(op)
        return done

    def claim_memory(self, user_id: str, owner: str, *, stale_after_s: float = 15.0) -> bool:
        """Take the user's memory-extraction claim for ``owner`` (refreshed when ``owner``
        holds it already). False when another owner holds a claim renewed less than
        ``stale_after_s`` seconds ago (an older one is taken over: its holder stopped renewing,
        see :meth:`renew_memory`). Database-level: ``user_id`` is the primary key of
        ``memory_claims``, a unique violation means someone else got there. Times are this
        process's UTC clock: nodes that share a database need clocks agreeing to well within
        the lease."""
        M = MemoryClaimRow
        now = utcnow()
        try:
            with self._write() as conn:
                conn.execute(delete(M).where(M.user_id == user_id,
                                             M.claimed_at < now - timedelta(seconds=stale_after_s)))
                held = conn.execute(select(M.owner).where(M.user_id == user_id)).scalar()
                if held is not None:
                    if held != owner:
                        return False
                    conn.execute(update(M).where(M.user_id == user_id, M.owner == owner).values(claimed_at=now))
                    return True
                conn.execute(insert(M).values(user_id=user_id, owner=owner, claimed_at=now))
                return True
        except IntegrityError:
            return False

    def renew_memory(self, user_id: str, owner: str) -> bool:
        """Renew ``owner``'s claim (one UPDATE of its time); False when ``owner`` does not hold
        it any more. On PostgreSQL a takeover's DELETE of the stale row and this UPDATE lock the
        same row, so whichever commits second sees the other's result."""
        M = MemoryClaimRow
        with self._write() as conn:
            return conn.execute(update(M).where(M.user_id == user_id, M.owner == owner)
                                .values(claimed_at=utcnow())).rowcount == 1

    def release_memory(self, user_id: str, owner: str) -> bool:
        """Drop ``owner``'s claim on the user; False when ``owner`` did not hold it."""
        M = MemoryClaimRow
        with self._write() as conn:
            return conn.execute(delete(M).where(M.user_id == user_id, M.owner == owner)).rowcount == 1

    def close(self) -> None:
        """Close all pooled connections. The store must not be used afterwards."""
        self.engine.dispose()

    def __enter__(self) -> "SqlStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


def _aware(t: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; they were written as UTC."""
    return t if t is None or t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def _open_from(open_msgs: list[Message], open_seqs: list[int], new: list[Message],
               still_open: list[Message], first_seq: int) -> int | None:
    """The seq of the first still-open message (an old open one or a new one), None if none."""
    if not still_open:
        return None
    first = still_open[0]
    for m, s in zip(open_msgs, open_seqs):
        if m is first:
            return s
    for k, m in enumerate(new):
        if m is first:
            return first_seq + k
    raise AssertionError("open message not found")  # pragma: no cover


def _pick_original(found: "Sequence[Any]") -> int | None:
    """Of ``(seq, state)`` rows holding one call id (newest first), the one ``original()``
    means: the oldest cleared one in the context (a later result cleared under the same id,
    while this one was still in the context, has a placeholder naming its message id too:
    ``compaction.placeholder.recall_key``), else the newest in the context, else the newest."""
    cleared = [seq for seq, st in found if st == "cleared"]
    if cleared:
        return cleared[-1]
    hit = next((seq for seq, st in found if st in VISIBLE_STATES), None)
    if hit is not None:
        return hit
    return found[0][0] if found else None


def _prepare_changes(changes: list[Change]) -> list[tuple[Change, Any]]:
    """Check each change and serialize its body (one rule for every backend)."""
    prepared: list[tuple[Change, Any]] = []
    for i, ch in enumerate(changes):
        if isinstance(ch, Replace):
            if ch.state not in ("cleared", "pruned"):
                raise ValueError(f"change {i}: Replace state must be cleared or pruned, not {ch.state!r}")
            prepared.append((ch, checks.message_body(ch.current, i)))
        elif isinstance(ch, Hide):
            if ch.state not in HIDDEN_STATES:
                raise ValueError(f"change {i}: Hide state must be summarized or trimmed, not {ch.state!r}")
            prepared.append((ch, None))
        elif isinstance(ch, InsertSummary):
            prepared.append((ch, checks.message_body(ch.summary, i)))
        else:
            raise TypeError(f"change {i}: unknown change {type(ch).__name__}")
    return prepared


def _event_row(i: int, ev: dict[str, Any]) -> dict[str, Any]:
    """Columns extracted from one event dict (keys: stage, trigger, size_before/before,
    size_after/after, affected_ids/message_ids, summary_id, duration_ms, usage)."""
    if not isinstance(ev, dict):
        raise TypeError(f"event {i}: expected a dict, got {type(ev).__name__}")
    data = checks.json_doc(ev, f"event {i}")

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


def _memory_entry(r: Any) -> Any:
    from ..memory.user import MemoryEntry

    return MemoryEntry(id=r.id, text=r.text, kind=r.kind, status=r.status, supersedes_id=r.supersedes_id,
                       source_session_id=r.source_session_id, source_message_id=r.source_message_id,
                       created_at=_aware(r.created_at))


def _list_memory(conn: Connection, user_id: str, include_inactive: bool, exclude_session: str | None = None,
                 created_before: datetime | None = None) -> list[Any]:
    M = UserMemoryRow
    q = select(M).where(M.user_id == user_id)
    if not include_inactive:
        q = q.where(M.status == "active")
    if exclude_session is not None:
        q = q.where(or_(M.source_session_id.is_(None), M.source_session_id != exclude_session))
    if created_before is not None:
        q = q.where(or_(M.created_at.is_(None), M.created_at <= created_before))
    return [_memory_entry(r) for r in conn.execute(q.order_by(M.id))]


def _add(conn: Connection, user_id: str, text: str, kind: str, supersedes_id: Any,
         source_session_id: str | None, source_message_id: str | None) -> Any:
    from ..memory.user import MemoryEntry

    checks.json_doc([user_id, text, kind, source_session_id, source_message_id], "memory entry")
    M = UserMemoryRow
    now = utcnow()
    new_id = conn.execute(insert(M).values(
        user_id=user_id, text=text, kind=kind, status="active", supersedes_id=supersedes_id,
        source_session_id=source_session_id, source_message_id=source_message_id,
        created_at=now, updated_at=now).returning(M.id)).scalar_one()
    return MemoryEntry(id=new_id, text=text, kind=kind, supersedes_id=supersedes_id,
                       source_session_id=source_session_id, source_message_id=source_message_id, created_at=now)


def _set_status(conn: Connection, user_id: str, entry_id: Any, status: str) -> bool:
    M = UserMemoryRow
    ident = _entry_id(entry_id)
    if ident is None:
        return False
    res = conn.execute(update(M).where(M.user_id == user_id, M.id == ident, M.status == "active")
                       .values(status=status, updated_at=utcnow()))
    return bool(res.rowcount == 1)


def _supersede(conn: Connection, user_id: str, entry_id: Any, text: str, kind: str | None,
               source_session_id: str | None, source_message_id: str | None) -> Any:
    from ..errors import MemoryEntryNotFound

    M = UserMemoryRow
    ident = _entry_id(entry_id)
    old = None if ident is None else conn.execute(
        select(M).where(M.user_id == user_id, M.id == ident, M.status == "active")).first()
    if old is None or not _set_status(conn, user_id, ident, "superseded"):
        raise MemoryEntryNotFound(f"user {user_id!r} has no active memory entry {entry_id!r}")
    return _add(conn, user_id, text, kind or old.kind, ident, source_session_id, source_message_id)


__all__ = ["SqlStore", "Store"]


def _with_metadata(m: Message, metadata: dict[str, Any], beside: list[Any] | None) -> Message:
    """``m`` with ``metadata``'s top-level keys set and, unless None, ``beside`` as its
    ``metadata["ctxwise"]["beside"]`` (:meth:`SqlStore.amend`)."""
    md = {**m.metadata, **metadata}
    if beside is not None:
        md = Marker.with_(md, beside=list(beside))
    return m.model_copy(update={"metadata": md})
