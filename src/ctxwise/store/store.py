"""The :class:`Store`: sessions, context rows, transcript and compaction events in SQL.

Every write is one transaction that (1) locks the session row and checks its version,
(2) writes only what changed (k appended messages → k context rows, a clearing batch → one
UPDATE per cleared row), (3) bumps the version. A failure anywhere, a killed process included,
rolls the whole write back. Every query filters by ``user_id``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection, create_engine, delete, insert, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError

from ..errors import SessionConflict, SessionNotFound
from ..messages import Message
from ..transcript import derive
from . import migrate, sql
from .schema import (
    CompactionEventRow,
    ContextMessageRow,
    MemoryClaimRow,
    SessionRow,
    ToolResultRow,
    TranscriptRowModel,
    utcnow,
)
from .types import (
    HIDDEN_STATES,
    Change,
    ContextRow,
    Hide,
    InsertSummary,
    Replace,
    SessionState,
    TranscriptRow,
)

S, C = SessionRow, ContextMessageRow


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _message_json(m: Any, where: str) -> dict[str, Any]:
    """``m.model_dump(mode="json")``, checked to be strict JSON. Raises TypeError/ValueError."""
    if not isinstance(m, Message):
        raise TypeError(f"{where}: expected a ctxwise Message, got {type(m).__name__}")
    try:
        data = m.model_dump(mode="json")
        _dumps(data)
    except Exception as exc:  # pydantic serialization errors, NaN, ...
        raise ValueError(f"{where} (id {m.id!r}): cannot be stored as JSON: {exc}") from exc
    return data


def _locked(exc: BaseException) -> bool:
    text = str(getattr(exc, "orig", exc)).lower()
    return "database is locked" in text or "lock timeout" in text or "could not obtain lock" in text \
        or "lock_timeout" in text


class Store:
    """Persistent sessions on SQLite (default) or PostgreSQL (``postgresql+psycopg://...``).

    ``url``: an SQLAlchemy URL; a SQLite file is created if missing. The schema is upgraded to
    the newest revision on open (Alembic, in place).
    ``wait``: when True, :meth:`append` with a stale ``expected_version`` does not raise; it
    appends after the newest write (the batch stays whole and contiguous) and returns the new
    version, which then exceeds ``expected_version + 1``. ``apply`` always needs the exact
    version. When False, a session locked by another writer (PostgreSQL) is a conflict at once.
    ``wait_timeout_s``: the longest wait for another writer's lock (SQLite busy timeout,
    PostgreSQL ``lock_timeout``); beyond it the write raises :class:`SessionConflict`.
    """

    def __init__(self, url: str = "sqlite:///ctxwise.db", *, wait: bool = False,
                 wait_timeout_s: float = 10.0) -> None:
        self.url = url
        self.wait = wait
        self.wait_timeout_s = wait_timeout_s
        backend = make_url(url).get_backend_name()
        kwargs: dict[str, Any] = {"json_serializer": _dumps}
        if backend == "sqlite":
            kwargs["connect_args"] = {"timeout": wait_timeout_s}
        else:
            kwargs["pool_pre_ping"] = True
        self.engine = create_engine(url, **kwargs)
        self.backend = backend
        if backend == "sqlite":
            sql.setup_sqlite(self.engine, wait_timeout_s)
        elif backend == "postgresql":
            sql.setup_postgresql(self.engine, wait_timeout_s)
        migrate.upgrade(self.engine)

    # -- plumbing ----------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with self.engine.connect() as conn:
            conn.execution_options(ctxwise_read=True)
            with conn.begin():
                yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except OperationalError as exc:
            if _locked(exc):
                raise SessionConflict(f"session busy: another writer held the lock longer than "
                                      f"{self.wait_timeout_s}s ({exc.orig})") from exc
            raise

    def _session_row(self, conn: Connection, user_id: str, session_id: str, *, lock: bool = False):
        q = select(S).where(S.user_id == user_id, S.session_id == session_id)
        if lock:
            q = q.with_for_update(nowait=not self.wait)
        row = conn.execute(q).first()
        if row is None:
            raise SessionNotFound(f"no session {session_id!r} for user {user_id!r}")
        return row

    def _bump(self, conn: Connection, sess: Any, expected: int, **values: Any) -> int:
        res = conn.execute(
            update(S)
            .where(S.id == sess.id, S.user_id == sess.user_id, S.version == expected)
            .values(version=expected + 1, updated_at=utcnow(), **values)
        )
        if res.rowcount != 1:
            raise SessionConflict(f"session {sess.session_id!r} changed while writing; reload and retry")
        return expected + 1

    def _check_version(self, sess: Any, expected: int, *, rebase: bool) -> int:
        if sess.version == expected:
            return expected
        if rebase:
            return sess.version
        raise SessionConflict(
            f"session {sess.session_id!r} is at version {sess.version}, not {expected}; reload and retry")

    # -- sessions ----------------------------------------------------------------------

    def open_session(self, user_id: str, session_id: str, *, provider: str,
                     policy: dict[str, Any]) -> SessionState:
        """Create the session at version 0 if missing, else load it (its stored provider and
        policy win). Safe when two processes open the same new session at once."""
        policy_json = json.loads(_dumps(policy))
        try:
            with self._write() as conn:
                exists = conn.execute(select(S.id).where(S.user_id == user_id,
                                                         S.session_id == session_id)).first()
                if exists is None:
                    now = utcnow()
                    conn.execute(insert(S).values(
                        user_id=user_id, session_id=session_id, provider=provider, policy=policy_json,
                        version=0, last_seq=0, open_from_seq=None, transcript_seq=0,
                        created_at=now, updated_at=now))
        except IntegrityError:
            pass  # created by another process in between
        return self.load(user_id, session_id)

    def load(self, user_id: str, session_id: str) -> SessionState:
        """The session with all its context rows in context order (hidden rows included).
        Raises :class:`SessionNotFound` if absent for this ``user_id``. O(rows)."""
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            result = conn.execute(
                select(C.message_id, C.seq, C.state, C.original, C.current)
                .where(C.session_pk == sess.id, C.user_id == user_id)
                .order_by(C.anchor_seq, C.generation)
            )
            rows = []
            for mid, seq, state, orig, cur in result:
                original = Message.model_validate(orig)
                current = original if cur is None else Message.model_validate(cur)
                rows.append(ContextRow(mid, seq, state, current, original))
            return SessionState(user_id, session_id, sess.provider, dict(sess.policy), sess.version, rows,
                                created_at=_aware(sess.created_at) if sess.created_at else None)

    # -- writes ------------------------------------------------------------------------

    def append(self, user_id: str, session_id: str, messages: list[Message], *,
               expected_version: int) -> int:
        """Append ``messages`` (one model call's output, or a user input) in one transaction:
        k context rows (state ``verbatim``), the transcript rows they complete, one version
        bump. Returns the new version.

        Raises :class:`SessionConflict` (version is not ``expected_version`` and ``wait`` is
        off, or the lock wait timed out), :class:`SessionNotFound`, ``TypeError`` /
        ``ValueError`` (a non-Message item, an unserializable message, a message id already
        in the session) — all before anything is stored."""
        bodies = [_message_json(m, f"message {i}") for i, m in enumerate(messages)]
        ids = [m.id for m in messages]
        if len(set(ids)) != len(ids):
            raise ValueError("append: the batch repeats a message id")
        with self._write() as conn:
            sess = self._session_row(conn, user_id, session_id, lock=True)
            base = self._check_version(sess, expected_version, rebase=self.wait)
            version = base + 1
            open_msgs: list[Message] = []
            if sess.open_from_seq is not None:
                open_msgs = [Message.model_validate(o) for (o,) in conn.execute(
                    select(C.original).where(C.session_pk == sess.id, C.user_id == user_id,
                                             C.seq >= sess.open_from_seq, C.generation == 0)
                    .order_by(C.seq))]
            entries, still_open = derive(open_msgs, list(messages))
            first_seq = sess.last_seq + 1
            new_open = self._open_from(sess, open_msgs, messages, still_open, first_seq) if still_open else None
            self._bump(conn, sess, base, last_seq=sess.last_seq + len(messages),
                       open_from_seq=new_open, transcript_seq=sess.transcript_seq + len(entries))
            if not messages:
                return version
            rows, results = [], []
            for k, (m, body) in enumerate(zip(messages, bodies)):
                seq = first_seq + k
                rows.append(dict(session_pk=sess.id, user_id=user_id, seq=seq, anchor_seq=seq,
                                 generation=0, version=version, message_id=m.id, role=m.role,
                                 state="verbatim", original=body, current=None))
                results.extend(dict(session_pk=sess.id, user_id=user_id, tool_use_id=r.tool_use_id,
                                    seq=seq) for r in m.tool_results)
            try:
                conn.execute(insert(C), rows)
            except IntegrityError as exc:
                raise ValueError(f"append: a message id of the batch is already stored in session "
                                 f"{session_id!r}") from exc
            if results:
                conn.execute(insert(ToolResultRow), results)
            if entries:
                now = utcnow()
                conn.execute(insert(TranscriptRowModel), [
                    dict(session_pk=sess.id, user_id=user_id, seq=sess.transcript_seq + 1 + i,
                         role=e.role, text=e.text, blocks=e.blocks, status=e.status,
                         message_ids=e.message_ids, created_at=now)
                    for i, e in enumerate(entries)])
            return version

    @staticmethod
    def _open_from(sess: Any, open_msgs: list[Message], new: list[Message],
                   still_open: list[Message], first_seq: int) -> int:
        """The seq of the first still-open message (it is either an old open one or new)."""
        first = still_open[0]
        for m in open_msgs:
            if m is first:
                return sess.open_from_seq
        for k, m in enumerate(new):
            if m is first:
                return first_seq + k
        raise AssertionError("open message not found")  # pragma: no cover

    def apply(self, user_id: str, session_id: str, changes: list[Change], events: list[dict],
              *, expected_version: int) -> int:
        """Store one compaction's results in one transaction: each :class:`Replace` is one
        UPDATE of that row; each :class:`Hide` one UPDATE of the listed rows; each
        :class:`InsertSummary` one INSERT placed where its anchor stands; each event one
        INSERT into ``compaction_events``; one version bump. Returns the new version.

        Raises :class:`SessionConflict` (version is not ``expected_version``, whatever
        ``wait``), :class:`SessionNotFound`, ``ValueError`` (unknown message id, bad state,
        unserializable data) — nothing is stored then."""
        prepared: list[tuple[Change, Any]] = []
        for i, ch in enumerate(changes):
            if isinstance(ch, Replace):
                if ch.state not in ("cleared", "pruned"):
                    raise ValueError(f"change {i}: Replace state must be cleared or pruned, not {ch.state!r}")
                prepared.append((ch, _message_json(ch.current, f"change {i}")))
            elif isinstance(ch, Hide):
                if ch.state not in HIDDEN_STATES:
                    raise ValueError(f"change {i}: Hide state must be summarized or trimmed, not {ch.state!r}")
                prepared.append((ch, None))
            elif isinstance(ch, InsertSummary):
                prepared.append((ch, _message_json(ch.summary, f"change {i}")))
            else:
                raise TypeError(f"change {i}: unknown change {type(ch).__name__}")
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
                    seq += 1
                    try:
                        conn.execute(insert(C).values(
                            session_pk=sess.id, user_id=user_id, seq=seq, anchor_seq=anchor,
                            generation=seq, version=version, message_id=ch.summary.id,
                            role=ch.summary.role, state="verbatim", original=body, current=None))
                    except IntegrityError as exc:
                        raise ValueError(f"change {i}: message id {ch.summary.id!r} already stored") from exc
            if event_rows:
                conn.execute(insert(CompactionEventRow), [
                    dict(r, session_pk=sess.id, user_id=user_id, version=version) for r in event_rows])
            return self._bump(conn, sess, expected_version, last_seq=seq)

    # -- reads -------------------------------------------------------------------------

    def events(self, user_id: str, session_id: str) -> list[dict[str, Any]]:
        """The compaction events of the session, oldest first, each as given to ``apply``."""
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return [d for (d,) in conn.execute(
                select(CompactionEventRow.data)
                .where(CompactionEventRow.session_pk == sess.id, CompactionEventRow.user_id == user_id)
                .order_by(CompactionEventRow.id))]

    def original(self, user_id: str, session_id: str, tool_use_id: str) -> Message | None:
        """The original (uncleared) message holding the ``tool_result`` for ``tool_use_id``;
        the latest one when a recording reused the id; None if there is none."""
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            seq = conn.execute(
                select(ToolResultRow.seq)
                .where(ToolResultRow.session_pk == sess.id, ToolResultRow.user_id == user_id,
                       ToolResultRow.tool_use_id == tool_use_id)
                .order_by(ToolResultRow.seq.desc()).limit(1)).scalar()
            if seq is None:
                return None
            body = conn.execute(select(C.original).where(C.session_pk == sess.id, C.user_id == user_id,
                                                         C.seq == seq)).scalar()
            return Message.model_validate(body)

    def transcript(self, user_id: str, session_id: str) -> list[TranscriptRow]:
        """The transcript rows, in order. Agent work whose final reply has not arrived yet is
        not listed until the reply (or the next user input, as ``interrupted``) comes."""
        T = TranscriptRowModel
        with self._read() as conn:
            sess = self._session_row(conn, user_id, session_id)
            return [TranscriptRow(r.seq, r.role, r.text, list(r.blocks), r.status, list(r.message_ids),
                                  _aware(r.created_at))
                    for r in conn.execute(select(T).where(T.session_pk == sess.id, T.user_id == user_id)
                                          .order_by(T.seq))]

    # -- memory claims -----------------------------------------------------------------

    def claim_memory(self, user_id: str, owner: str, *, stale_after_s: float = 600.0) -> bool:
        """Take the user's memory-extraction claim for ``owner``. Returns False when another
        owner holds a claim younger than ``stale_after_s`` (an older one is taken over)."""
        M = MemoryClaimRow
        now = utcnow()
        try:
            with self._write() as conn:
                conn.execute(delete(M).where(M.user_id == user_id,
                                             M.claimed_at < now - timedelta(seconds=stale_after_s)))
                held = conn.execute(select(M.owner).where(M.user_id == user_id)).scalar()
                if held is not None:
                    return held == owner
                conn.execute(insert(M).values(user_id=user_id, owner=owner, claimed_at=now))
                return True
        except IntegrityError:
            return False

    def release_memory(self, user_id: str, owner: str) -> None:
        """Drop ``owner``'s claim on the user (no-op when not held by ``owner``)."""
        M = MemoryClaimRow
        with self._write() as conn:
            conn.execute(delete(M).where(M.user_id == user_id, M.owner == owner))

    def close(self) -> None:
        """Close all pooled connections. The store must not be used afterwards."""
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _aware(t: datetime) -> datetime:
    """SQLite returns naive datetimes; they were written as UTC."""
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def _event_row(i: int, ev: dict[str, Any]) -> dict[str, Any]:
    """Columns extracted from one event dict (keys: stage, trigger, size_before/before,
    size_after/after, affected_ids/message_ids, summary_id, duration_ms, usage)."""
    if not isinstance(ev, dict):
        raise TypeError(f"event {i}: expected a dict, got {type(ev).__name__}")
    try:
        data = json.loads(_dumps(ev))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"event {i}: cannot be stored as JSON: {exc}") from exc

    def num(*keys: str) -> Any:
        for k in keys:
            v = data.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
        return None

    def text(key: str) -> str | None:
        v = data.get(key)
        return str(v) if v is not None else None

    ids = data.get("affected_ids", data.get("message_ids"))
    usage = data.get("usage")
    size_before, size_after = num("size_before", "before"), num("size_after", "after")
    return dict(stage=text("stage"), trigger=text("trigger"),
                size_before=int(size_before) if size_before is not None else None,
                size_after=int(size_after) if size_after is not None else None,
                affected_ids=ids if isinstance(ids, list) else None, summary_id=text("summary_id"),
                duration_ms=num("duration_ms"), usage=usage if isinstance(usage, dict) else None,
                data=data, created_at=utcnow())
