"""Long-term user memory in the database: the ``user_memory`` and ``memory_claims`` tables.

Every call takes ``db``: a :class:`ctxwise.store.Store`, an SQLAlchemy ``Engine`` whose
database has the store's schema, or a URL string (a :class:`~ctxwise.store.Store` is opened
and closed around the call). Every query is scoped by ``user_id``. Works on SQLite and
PostgreSQL.

Entries are never rewritten: a supersede inserts a new row (``supersedes_id`` = the old id)
and marks the old one ``superseded``; a retraction marks the row ``retracted``; a clear
retracts every active row (or deletes the user's rows with ``purge=True``).

Two extractions for one user never run at once: :func:`extract_and_store` takes a
database-level claim (one row per user in ``memory_claims``; a unique violation means
someone else holds it; a claim older than ``ttl_s`` is taken over), decides with
:func:`ctxwise.memory.user.decide`, applies the ops in one transaction, then releases.

Example::

    store = Store("sqlite:///ctxwise.db")
    extract_and_store(store, "u1", ["I prefer over-ear headphones."])
    [e.text for e in list_memory(store, "u1")]     # ['I prefer over-ear headphones.']
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Iterator

from sqlalchemy import Connection, Engine, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from ..errors import MemoryBusy, MemoryEntryNotFound  # re-exported: they live in ctxwise.errors
from ..messages import Message
from ..units import is_user_input
from .facts import Counter
from .user import MemoryEntry, Op, decide, render_user_memory

STATUSES = ("active", "superseded", "retracted")


def _tables():
    # imported late: the store package is built alongside and imports heavy modules
    from ..store.schema import MemoryClaimRow, UserMemoryRow

    return UserMemoryRow, MemoryClaimRow


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(t: datetime | None) -> datetime | None:
    return t if t is None or t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


@contextmanager
def _engine(db: Any) -> Iterator[Engine]:
    if isinstance(db, str):
        from ..store import Store

        store = Store(db)
        try:
            yield store.engine
        finally:
            store.close()
    else:
        yield getattr(db, "engine", db)


@contextmanager
def _tx(db: Any, *, read: bool = False) -> Iterator[Connection]:
    with _engine(db) as engine:
        with engine.connect() as conn:
            if read:
                conn = conn.execution_options(ctxwise_read=True)  # deferred BEGIN on SQLite
            with conn.begin():
                yield conn


def _entry(r: Any) -> MemoryEntry:
    return MemoryEntry(
        id=r.id, text=r.text, kind=r.kind, status=r.status, supersedes_id=r.supersedes_id,
        source_session_id=r.source_session_id, source_message_id=r.source_message_id,
        created_at=_aware(r.created_at),
    )


# -- connection-level operations (used inside one transaction) ---------------------------


def list_in(conn: Connection, user_id: str, *, include_inactive: bool = False) -> list[MemoryEntry]:
    """The user's entries on ``conn``, oldest first (active only unless ``include_inactive``)."""
    M, _ = _tables()
    q = select(M).where(M.user_id == user_id)
    if not include_inactive:
        q = q.where(M.status == "active")
    return [_entry(r) for r in conn.execute(q.order_by(M.id))]


def add_in(conn: Connection, user_id: str, text: str, kind: str = "preference", *,
           supersedes_id: Any = None, source_session_id: str | None = None,
           source_message_id: str | None = None) -> MemoryEntry:
    """Insert one active entry on ``conn``; returns it with its new id."""
    M, _ = _tables()
    now = _now()
    new_id = conn.execute(
        insert(M).values(
            user_id=user_id, text=text, kind=kind, status="active", supersedes_id=supersedes_id,
            source_session_id=source_session_id, source_message_id=source_message_id,
            created_at=now, updated_at=now,
        ).returning(M.id)
    ).scalar_one()
    return MemoryEntry(id=new_id, text=text, kind=kind, supersedes_id=supersedes_id,
                       source_session_id=source_session_id, source_message_id=source_message_id,
                       created_at=now)


def _set_status(conn: Connection, user_id: str, entry_id: Any, status: str) -> bool:
    M, _ = _tables()
    res = conn.execute(
        update(M).where(M.user_id == user_id, M.id == entry_id, M.status == "active")
        .values(status=status, updated_at=_now())
    )
    return res.rowcount == 1


def supersede_in(conn: Connection, user_id: str, entry_id: Any, text: str, kind: str | None = None,
                 **source: Any) -> MemoryEntry:
    """Mark ``entry_id`` superseded and insert ``text`` in its place; raises
    :class:`MemoryEntryNotFound` when the user has no active entry with that id."""
    M, _ = _tables()
    old = conn.execute(select(M).where(M.user_id == user_id, M.id == entry_id, M.status == "active")).first()
    if old is None or not _set_status(conn, user_id, entry_id, "superseded"):
        raise MemoryEntryNotFound(f"user {user_id!r} has no active memory entry {entry_id!r}")
    return add_in(conn, user_id, text, kind or old.kind, supersedes_id=entry_id, **source)


def retract_in(conn: Connection, user_id: str, entry_id: Any) -> bool:
    """Mark ``entry_id`` retracted; False when the user has no active entry with that id."""
    return _set_status(conn, user_id, entry_id, "retracted")


def clear_in(conn: Connection, user_id: str, *, purge: bool = False) -> int:
    """Retract every active entry of the user (``purge=True``: delete all the user's rows).
    Returns the number of rows affected."""
    M, _ = _tables()
    if purge:
        return conn.execute(delete(M).where(M.user_id == user_id)).rowcount
    return conn.execute(
        update(M).where(M.user_id == user_id, M.status == "active").values(status="retracted", updated_at=_now())
    ).rowcount


def apply_in(conn: Connection, user_id: str, ops: Iterable[Op], **source: Any) -> list[Op]:
    """Apply ``ops`` on ``conn``; returns the ops that changed something (a RETRACT or
    SUPERSEDE of an entry no longer active is skipped)."""
    done: list[Op] = []
    for op in ops:
        if op.op == "ADD":
            add_in(conn, user_id, op.text or "", op.kind or "preference", **source)
        elif op.op == "SUPERSEDE":
            try:
                supersede_in(conn, user_id, op.target_id, op.text or "", op.kind, **source)
            except MemoryEntryNotFound:
                continue
        elif op.op == "RETRACT":
            if not retract_in(conn, user_id, op.target_id):
                continue
        elif op.op == "CLEAR":
            clear_in(conn, user_id)
        else:
            continue
        done.append(op)
    return done


# -- one-call API ---------------------------------------------------------------------------


def list_memory(db: Any, user_id: str, *, include_inactive: bool = False) -> list[MemoryEntry]:
    """The user's entries, oldest first: ``[MemoryEntry]`` (active only by default)."""
    with _tx(db, read=True) as conn:
        return list_in(conn, user_id, include_inactive=include_inactive)


def add_memory(db: Any, user_id: str, text: str, kind: str = "preference", *,
               source_session_id: str | None = None, source_message_id: str | None = None) -> MemoryEntry:
    """Store ``text`` as a new active entry as given (the explicit API; no decision rules)."""
    with _tx(db) as conn:
        return add_in(conn, user_id, text, kind, source_session_id=source_session_id,
                      source_message_id=source_message_id)


def supersede_memory(db: Any, user_id: str, entry_id: Any, text: str, kind: str | None = None) -> MemoryEntry:
    """Replace entry ``entry_id`` with ``text``; raises :class:`MemoryEntryNotFound`."""
    with _tx(db) as conn:
        return supersede_in(conn, user_id, entry_id, text, kind)


def retract_memory(db: Any, user_id: str, entry_id: Any) -> bool:
    """Retract one entry; False when the user has no active entry with that id."""
    with _tx(db) as conn:
        return retract_in(conn, user_id, entry_id)


def clear_memory(db: Any, user_id: str, *, purge: bool = False) -> int:
    """Retract all of the user's entries (``purge=True`` deletes them); returns the count."""
    with _tx(db) as conn:
        return clear_in(conn, user_id, purge=purge)


def user_memory_block(db: Any, user_id: str, budget: int, counter: Counter | None = None) -> Message | None:
    """The pinned block for the start of a session: :func:`render_user_memory` over
    :func:`list_memory` (None when the user has no active entry)."""
    return render_user_memory(list_memory(db, user_id), budget, counter)


# -- the claim --------------------------------------------------------------------------------


def default_owner() -> str:
    """``host:pid:random``: a claim owner unique to this call."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claim(db: Any, user_id: str, owner: str, ttl_s: float = 600.0) -> bool:
    """Take the user's memory claim for ``owner``: True when taken (or already held by
    ``owner``, whose claim time is refreshed), False when another owner holds a claim younger
    than ``ttl_s`` seconds. A claim older than ``ttl_s`` is taken over (its holder is presumed
    dead). Database-level: INSERT into ``memory_claims`` with ``user_id`` as the primary key;
    a unique violation means someone else got there first."""
    _, C = _tables()
    now = _now()
    try:
        with _tx(db) as conn:
            conn.execute(delete(C).where(C.user_id == user_id, C.claimed_at < now - timedelta(seconds=ttl_s)))
            held = conn.execute(select(C.owner).where(C.user_id == user_id)).scalar()
            if held is not None:
                if held != owner:
                    return False
                conn.execute(update(C).where(C.user_id == user_id, C.owner == owner).values(claimed_at=now))
                return True
            conn.execute(insert(C).values(user_id=user_id, owner=owner, claimed_at=now))
            return True
    except IntegrityError:
        return False


def release(db: Any, user_id: str, owner: str) -> bool:
    """Drop ``owner``'s claim on the user; False when ``owner`` did not hold it."""
    _, C = _tables()
    with _tx(db) as conn:
        return conn.execute(delete(C).where(C.user_id == user_id, C.owner == owner)).rowcount == 1


@dataclass
class StoredExtraction:
    """What :func:`extract_and_store` did: ``ops`` decided (one per clause, NOOPs included),
    ``applied`` the ops that changed a row, ``entries`` the user's active entries afterwards,
    ``owner`` the claim owner used and ``waited_s`` the seconds spent waiting for the claim."""

    ops: list[Op] = field(default_factory=list)
    applied: list[Op] = field(default_factory=list)
    entries: list[MemoryEntry] = field(default_factory=list)
    owner: str = ""
    waited_s: float = 0.0


def extract_and_store(
    db: Any,
    user_id: str,
    utterances: Iterable[str | Message],
    *,
    session_id: str | None = None,
    owner: str | None = None,
    ttl_s: float = 600.0,
    wait_s: float = 10.0,
    poll_s: float = 0.05,
    threshold: float | None = None,
    on_claimed: Callable[[], None] | None = None,
) -> StoredExtraction:
    """Decide and store the memory ops implied by ``utterances`` for ``user_id``.

    ``utterances`` are strings (taken as the user's words) or messages (only user input is
    read: assistant, tool, system and ctxwise-made messages are skipped; the message id is
    recorded as ``source_message_id``). The claim is awaited up to ``wait_s`` seconds
    (polling every ``poll_s``), then :class:`MemoryBusy` is raised. Decisions see the
    entries as they are once the claim is held, and all ops are applied in one transaction,
    so two concurrent extractions for one user give the same result as two in a row (a
    repeated preference is stored once). ``on_claimed`` is called right after the claim is
    taken (a hook for metrics and tests). The claim is released on every exit path.
    """
    with _engine(db) as engine:
        owner = owner or default_owner()
        start = time.monotonic()
        while not claim(engine, user_id, owner, ttl_s):
            if time.monotonic() - start > wait_s:
                raise MemoryBusy(f"memory of user {user_id!r} is being extracted by another process; "
                                 f"waited {wait_s:g}s")
            time.sleep(poll_s)
        out = StoredExtraction(owner=owner, waited_s=time.monotonic() - start)
        try:
            if on_claimed is not None:
                on_claimed()
            kw = {} if threshold is None else {"threshold": threshold}
            with _tx(engine) as conn:
                entries = list_in(conn, user_id)
                for u in utterances:
                    if isinstance(u, Message):
                        if not is_user_input(u) or u.kind is not None:
                            continue
                        text, mid = u.text, u.id
                    else:
                        text, mid = str(u), None
                    ops = decide(text, entries, **kw)
                    out.ops.extend(ops)
                    out.applied.extend(apply_in(conn, user_id, ops, source_session_id=session_id,
                                                source_message_id=mid))
                    entries = list_in(conn, user_id)
                out.entries = entries
        finally:
            release(engine, user_id, owner)
        return out


__all__ = [
    "MemoryBusy", "MemoryEntryNotFound", "StoredExtraction", "list_memory", "add_memory",
    "supersede_memory", "retract_memory", "clear_memory", "user_memory_block", "claim", "release",
    "extract_and_store", "default_owner", "list_in", "add_in", "supersede_in", "retract_in",
    "clear_in", "apply_in",
]
