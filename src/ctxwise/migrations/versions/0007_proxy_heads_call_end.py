"""ctxwise_proxy_heads.ends_call, in_flight: which head names a proxied call's whole history, and whether that call is still upstream

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07

A session's heads beyond the newest call's history are that call's reply. The drop-in endpoint
(``ctxwise.proxy``) needs to know where the newest call ended to tell a retry of that call (the
reply it got is popped, the session continues) from a call that forks an earlier turn (a
branch), whatever the reply's length (a Responses reply is several items). ``ends_call`` is
true on the row naming the whole history a call sent; rows from before this revision are false
(the proxy then reads a one-message reply as before). ``in_flight`` is true on that row from
the call's write until its upstream call ended without a reply (a reply's own rows above it
say the rest): another process can tell a call still upstream from one that failed.

The session index gets ``count`` as its last column: a session's newest head (``max(count)``,
read by every lookup and by the check each proxied write makes) is then read from the index
alone.
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ctxwise_proxy_heads") as batch:
        batch.add_column(sa.Column("ends_call", sa.Boolean, nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("in_flight", sa.Boolean, nullable=False, server_default=sa.false()))
    op.drop_index("ix_ctxwise_proxy_heads_session", table_name="ctxwise_proxy_heads")
    op.create_index("ix_ctxwise_proxy_heads_session", "ctxwise_proxy_heads",
                    ["tenant", "user_id", "session_id", "count"])


def downgrade() -> None:
    op.drop_index("ix_ctxwise_proxy_heads_session", table_name="ctxwise_proxy_heads")
    op.create_index("ix_ctxwise_proxy_heads_session", "ctxwise_proxy_heads", ["tenant", "user_id", "session_id"])
    with op.batch_alter_table("ctxwise_proxy_heads") as batch:
        batch.drop_column("in_flight")
        batch.drop_column("ends_call")
