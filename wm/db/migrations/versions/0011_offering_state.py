"""What the launch choice knows of each offering, shared by every process: the signals read
from the clouds (price, availability, pre-emption prior) and the bench of offerings that just
refused capacity (issue 40).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

OFFERING = ("provider_id", "region", "zone", "instance_type", "market")


def _offering_columns() -> list[sa.Column]:
    # zone '' stands for "any zone of the region": a primary key has no NULLs.
    return [sa.Column(name, sa.Text, nullable=False) for name in OFFERING]


def upgrade() -> None:
    op.create_table(
        "offering_signals",
        *_offering_columns(),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("value", sa.Float, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint(*OFFERING, "kind", name="pk_offering_signals"),
    )
    op.create_table(
        "offering_bench",
        *_offering_columns(),
        sa.Column("failures", sa.Integer, nullable=False, server_default="0"),
        sa.Column("benched_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("probe_sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_code", sa.Text, nullable=True),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint(*OFFERING, name="pk_offering_bench"),
    )


def downgrade() -> None:
    op.drop_table("offering_bench")
    op.drop_table("offering_signals")
