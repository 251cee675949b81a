"""API budgets: one token bucket per (cloud account, scope, call class), shared by processes.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_budgets",
        sa.Column("account", sa.Text, nullable=False),
        sa.Column("scope", sa.Text, nullable=False),
        sa.Column("call_class", sa.Text, nullable=False),
        sa.Column("tokens", sa.Float, nullable=False),
        sa.Column("burst", sa.Float, nullable=False),
        sa.Column("per_s", sa.Float, nullable=False),
        sa.Column("shrink", sa.Float, nullable=False, server_default="1"),
        sa.Column("shrink_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("account", "scope", "call_class", name="pk_api_budgets"),
    )


def downgrade() -> None:
    op.drop_table("api_budgets")
