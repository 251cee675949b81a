"""Intents whose create went unanswered: when the pass gave up waiting for the cloud's answer.

Such an intent may have a VM; it is looked up (and stopped if none is found) only once the
longest retry sequence of the provider's gate has passed since then.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("unanswered_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("workers", "unanswered_at")
