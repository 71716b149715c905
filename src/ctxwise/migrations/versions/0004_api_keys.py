"""ctxwise_api_keys: the server's tenant API keys (stored hashed)

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

One row per key: its public ``key_id``, the tenant it belongs to, the SHA-256 of the key,
created / revoked times. Tenancy of sessions and memory needs no column: the server stores a
tenant's user ids as ``<tenant>:<user_id>``, so every store query, scoped by user id, is scoped
by tenant too (see ctxwise.server.keys).
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ctxwise_api_keys",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("name", sa.String(255), nullable=False, server_default=""),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.UniqueConstraint("key_id", name="uq_ctxwise_api_keys_key_id"),
    )
    op.create_index("ix_ctxwise_api_keys_tenant", "ctxwise_api_keys", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_ctxwise_api_keys_tenant", table_name="ctxwise_api_keys")
    op.drop_table("ctxwise_api_keys")
