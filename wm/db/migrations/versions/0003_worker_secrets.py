"""Worker secrets: only a hash is stored.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("secret_hash", sa.Text, nullable=True))


def downgrade() -> None:
    op.drop_column("workers", "secret_hash")
