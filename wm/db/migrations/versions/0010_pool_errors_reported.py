"""Pool errors by their time alone: the expiry job deletes every error older than the retention,
of every pool, and without this index each run would read the whole table (the existing index
leads with the pool).

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_worker_pool_errors_reported", "worker_pool_errors", ["reported"])


def downgrade() -> None:
    op.drop_index("ix_worker_pool_errors_reported", table_name="worker_pool_errors")
