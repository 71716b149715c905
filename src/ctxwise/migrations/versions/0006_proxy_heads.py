"""ctxwise_proxy_heads: which session a proxied conversation continues

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06

The drop-in endpoint (``ctxwise.proxy``) receives a client's whole history on every call. Each
row names one prefix of a conversation a session has seen (``head``: a SHA-256 chain over the
messages as the client sends them, ``count`` of them) and the session holding it, so a call is
mapped to the session with the longest stored prefix of its history, per tenant; ``name`` is the
client's ``X-Ctxwise-Session`` ('' when none); ``branched_from`` the session a branch left (the
client rewrote its history), on the branch's rows. No message text and no provider key is stored here.
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ctxwise_proxy_heads",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False, server_default=""),
        sa.Column("head", sa.String(64), nullable=False),
        sa.Column("count", sa.Integer, nullable=False),
        sa.Column("user_id", sa.String(255), nullable=False),
        sa.Column("session_id", sa.String(255), nullable=False),
        sa.Column("branched_from", sa.String(255), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_ctxwise_proxy_heads_head", "ctxwise_proxy_heads", ["tenant", "head"])
    op.create_index("ix_ctxwise_proxy_heads_session", "ctxwise_proxy_heads", ["tenant", "user_id", "session_id"])


def downgrade() -> None:
    op.drop_index("ix_ctxwise_proxy_heads_session", table_name="ctxwise_proxy_heads")
    op.drop_index("ix_ctxwise_proxy_heads_head", table_name="ctxwise_proxy_heads")
    op.drop_table("ctxwise_proxy_heads")
