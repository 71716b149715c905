"""user_memory and memory_claims (room for long-term user memory)

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "user_memory",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("supersedes_id", PK, sa.ForeignKey("user_memory.id"), nullable=True),
        sa.Column("source_session_id", sa.String(255), nullable=True),
        sa.Column("source_message_id", sa.String(255), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_index("ix_user_memory_user_status", "user_memory", ["user_id", "status"])
    op.create_table(
        "memory_claims",
        sa.Column("user_id", sa.String(255), primary_key=True),
        sa.Column("owner", sa.String(255), nullable=False),
        sa.Column("claimed_at", TS, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("memory_claims")
    op.drop_index("ix_user_memory_user_status", table_name="user_memory")
    op.drop_table("user_memory")
