"""When a worker's VM booted, as its worker-runner reported at registration (systemBootTime).

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("booted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("workers", "booted_at")
