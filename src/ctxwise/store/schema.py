"""The tables (SQLAlchemy 2 declarative). The migrations in ``ctxwise/migrations`` create them.

Two JSON column types:

* ``ExactJSON`` (``json`` on PostgreSQL, JSON text on SQLite) keeps the text as written, key
  order included. Message bodies, the policy snapshot and transcript blocks use it: PostgreSQL's
  ``jsonb`` reorders object keys (``{"b":1,"a":2}`` comes back as ``{"a":2,"b":1}``), which
  would change a reloaded tool call's arguments and break byte-identical payloads.
* ``DocJSON`` (``jsonb`` on PostgreSQL, JSON text on SQLite) for audit data that is searched,
  never replayed byte for byte: event ids and usage, memory.

All ``user_id`` columns are denormalized on purpose: every query filters by it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

ExactJSON = JSON()
DocJSON = JSON().with_variant(JSONB(), "postgresql")
PK = BigInteger().with_variant(Integer(), "sqlite")


def utcnow() -> datetime:
    """Timezone-aware UTC now."""
    return datetime.now(timezone.utc)


class Base(DeclarativeBase):
    pass


class SessionRow(Base):
    """One session. ``version`` counts committed writes; ``last_seq`` is the highest context
    ``seq`` used; ``open_from_seq`` is the first context seq of agent work not yet folded
    into a transcript reply (None when the turn is closed); ``transcript_seq`` the last
    transcript row number."""

    __tablename__ = "sessions"
    __table_args__ = (UniqueConstraint("user_id", "session_id", name="uq_sessions_user_session"),)

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(255))
    session_id: Mapped[str] = mapped_column(String(255))
    provider: Mapped[str] = mapped_column(String(64))
    policy: Mapped[dict[str, Any]] = mapped_column(ExactJSON)
    version: Mapped[int] = mapped_column(Integer, default=0)
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
    open_from_seq: Mapped[int | None] = mapped_column(Integer, nullable=True)
    transcript_seq: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[dict[str, Any] | None] = mapped_column(ExactJSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class ContextMessageRow(Base):
    """One context message. Order: ``(anchor_seq, generation)``; an appended row has
    ``anchor_seq = seq, generation = 0``; a summary takes its anchor's ``anchor_seq`` and
    ``generation = seq`` (so a newer summary over the same spot sorts after an older one).
    ``current`` is NULL while it equals the original (saves writing every body twice); the
    original lives in :class:`OriginalRow`, so editing ``current`` never rewrites it (SQLite
    rewrites a whole row, overflow pages included, on any UPDATE). ``size`` is the engine's
    size of the current body in the session's policy unit. ``version`` is the session version
    of the write that inserted the row."""

    __tablename__ = "context_messages"
    __table_args__ = (
        UniqueConstraint("session_pk", "seq", name="uq_context_seq"),
        UniqueConstraint("session_pk", "message_id", name="uq_context_message_id"),
        Index("ix_context_order", "session_pk", "anchor_seq", "generation"),
        Index("ix_context_visible", "session_pk", "state", "anchor_seq", "generation"),
    )

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(Integer)
    anchor_seq: Mapped[int] = mapped_column(Integer)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    version: Mapped[int] = mapped_column(Integer)
    message_id: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16), default="verbatim")
    current: Mapped[dict[str, Any] | None] = mapped_column(ExactJSON, nullable=True)
    size: Mapped[int | None] = mapped_column(Integer, nullable=True)


class OriginalRow(Base):
    """The original body of a context message, written once, never updated."""

    __tablename__ = "context_originals"
    __table_args__ = (UniqueConstraint("session_pk", "seq", name="uq_context_originals_seq"),)

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]] = mapped_column(ExactJSON)


class ToolResultRow(Base):
    """Index from a ``tool_use_id`` to the context row holding its result (for ``original()``)."""

    __tablename__ = "tool_results"
    __table_args__ = (Index("ix_tool_results_lookup", "session_pk", "tool_use_id"),)

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(255))
    tool_use_id: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(Integer)


class TranscriptRowModel(Base):
    """One transcript row (per user input, per final reply); see :mod:`ctxwise.transcript`."""

    __tablename__ = "transcript"
    __table_args__ = (UniqueConstraint("session_pk", "seq", name="uq_transcript_seq"),)

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(255))
    seq: Mapped[int] = mapped_column(Integer)
    role: Mapped[str] = mapped_column(String(16))
    text: Mapped[str] = mapped_column(Text)
    blocks: Mapped[list[dict[str, Any]]] = mapped_column(ExactJSON)
    status: Mapped[str] = mapped_column(String(16), default="normal")
    message_ids: Mapped[list[str]] = mapped_column(DocJSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CompactionEventRow(Base):
    """One compaction event (append-only). ``data`` is the event dict as given; the other
    columns are extracted from it for queries."""

    __tablename__ = "compaction_events"
    __table_args__ = (Index("ix_events_session", "session_pk", "id"),)

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    session_pk: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(255))
    version: Mapped[int] = mapped_column(Integer)
    stage: Mapped[str | None] = mapped_column(String(32), nullable=True)
    trigger: Mapped[str | None] = mapped_column(Text, nullable=True)
    size_before: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    size_after: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    affected_ids: Mapped[list[str] | None] = mapped_column(DocJSON, nullable=True)
    summary_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    duration_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    usage: Mapped[dict[str, Any] | None] = mapped_column(DocJSON, nullable=True)
    data: Mapped[dict[str, Any]] = mapped_column(ExactJSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class UserMemoryRow(Base):
    """One long-term memory item of a user (filled by the memory module).
    ``status``: ``active`` / ``superseded`` / ``retracted``."""

    __tablename__ = "user_memory"
    __table_args__ = (Index("ix_user_memory_user_status", "user_id", "status"),)

    id: Mapped[int] = mapped_column(PK, primary_key=True, autoincrement=True)
    user_id: Mapped[str] = mapped_column(String(255))
    text: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="active")
    supersedes_id: Mapped[int | None] = mapped_column(ForeignKey("user_memory.id"), nullable=True)
    source_session_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    source_message_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MemoryClaimRow(Base):
    """A database-level claim: at most one memory extraction per user runs at a time."""

    __tablename__ = "memory_claims"

    user_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    owner: Mapped[str] = mapped_column(String(255))
    claimed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
