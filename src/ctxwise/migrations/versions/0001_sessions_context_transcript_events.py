"""sessions, context_messages, tool_results, transcript, compaction_events

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
EXACT = sa.JSON()
DOC = sa.JSON().with_variant(JSONB(), "postgresql")
TS = sa.DateTime(timezone=True)


def _fk() -> sa.Column:
    return sa.Column("session_pk", PK, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("provider", sa.String(64), nullable=False),
        sa.Column("policy", EXACT, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("last_seq", sa.Integer, nullable=False),
        sa.Column("open_from_seq", sa.Integer, nullable=True),
        sa.Column("transcript_seq", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.UniqueConstraint("user_id", "session_id", name="uq_sessions_user_session"),
    )
    op.create_table(
        "context_messages",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        _fk(),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("anchor_seq", sa.Integer, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("message_id", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("original", EXACT, nullable=False),
        sa.Column("current", EXACT, nullable=True),
        sa.UniqueConstraint("session_pk", "seq", name="uq_context_seq"),
        sa.UniqueConstraint("session_pk", "message_id", name="uq_context_message_id"),
    )
    op.create_index("ix_context_order", "context_messages", ["session_pk", "anchor_seq", "generation"])
    op.create_table(
        "tool_results",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        _fk(),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("tool_use_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
    )
    op.create_index("ix_tool_results_lookup", "tool_results", ["session_pk", "tool_use_id"])
    op.create_table(
        "transcript",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        _fk(),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("blocks", EXACT, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("message_ids", DOC, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("session_pk", "seq", name="uq_transcript_seq"),
    )
    op.create_table(
        "compaction_events",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        _fk(),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("stage", sa.String(32), nullable=True),
        sa.Column("trigger", sa.Text(), nullable=True),
        sa.Column("size_before", sa.BigInteger, nullable=True),
        sa.Column("size_after", sa.BigInteger, nullable=True),
        sa.Column("affected_ids", DOC, nullable=True),
        sa.Column("summary_id", sa.String(255), nullable=True),
        sa.Column("duration_ms", sa.Float, nullable=True),
        sa.Column("usage", DOC, nullable=True),
        sa.Column("data", EXACT, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_events_session", "compaction_events", ["session_pk", "id"])


def downgrade() -> None:
    for table in ("compaction_events", "transcript", "tool_results", "context_messages", "sessions"):
        op.drop_table(table)
