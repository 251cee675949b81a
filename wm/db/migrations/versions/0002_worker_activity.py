"""Worker activity and scale-down advice: last_active, should_terminate.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("last_active", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "workers",
        sa.Column("should_terminate", sa.Boolean, nullable=False, server_default="false"),
    )
    op.create_index(
        "ix_workers_stopped_expiry",
        "workers",
        ["provider_id", "last_modified"],
        postgresql_where=sa.text("state = 'stopped'"),
    )


def downgrade() -> None:
    op.drop_index("ix_workers_stopped_expiry", table_name="workers")
    op.drop_column("workers", "should_terminate")
    op.drop_column("workers", "last_active")
