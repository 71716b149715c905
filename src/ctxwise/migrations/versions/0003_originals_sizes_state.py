"""context_originals (originals out of the edited row), context_messages.size, sessions.state

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02

Editing a row's ``current`` (clearing a 5 MB tool result) used to rewrite the whole row,
original included, on SQLite; originals now live in their own table, written once. ``size``
and ``sessions.state`` let a session reopen in O(visible context) (no recount, no replay of
every row and event).
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

PK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
EXACT = sa.JSON()


def upgrade() -> None:
    op.create_table(
        "context_originals",
        sa.Column("id", PK, primary_key=True, autoincrement=True),
        sa.Column("session_pk", PK, sa.ForeignKey("sessions.id", ondelete="CASCADE"), nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("body", EXACT, nullable=False),
        sa.UniqueConstraint("session_pk", "seq", name="uq_context_originals_seq"),
    )
    op.execute("INSERT INTO context_originals (session_pk, user_id, seq, body) "
               "SELECT session_pk, user_id, seq, original FROM context_messages")
    with op.batch_alter_table("context_messages") as batch:
        batch.drop_column("original")
        batch.add_column(sa.Column("size", sa.Integer, nullable=True))
    with op.batch_alter_table("sessions") as batch:
        batch.add_column(sa.Column("state", EXACT, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("state")
    with op.batch_alter_table("context_messages") as batch:
        batch.drop_column("size")
        batch.add_column(sa.Column("original", EXACT, nullable=True))
    op.execute("UPDATE context_messages SET original = (SELECT body FROM context_originals o "
               "WHERE o.session_pk = context_messages.session_pk AND o.seq = context_messages.seq)")
    op.drop_table("context_originals")
