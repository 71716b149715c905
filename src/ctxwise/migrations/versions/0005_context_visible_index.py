"""ix_context_visible: the visible rows of a session without scanning its history

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

Reopening a session reads only its visible context rows (state verbatim / cleared / pruned),
but the only index on ``context_messages`` was ``(session_pk, anchor_seq, generation)``: the
database walked every row the session ever had (10,000 summarized or trimmed rows for 20
visible ones) and filtered by state. With ``state`` second in the key, the read touches the
visible rows only, and reopen no longer grows with the history (bench/scale.py --reopen-only).
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_context_visible", "context_messages", ["session_pk", "state", "anchor_seq", "generation"])


def downgrade() -> None:
    op.drop_index("ix_context_visible", table_name="context_messages")
