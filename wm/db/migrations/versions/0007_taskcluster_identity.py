"""Taskcluster identity: each worker's workerId as the cloud names it, and the deployment's keys.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("tc_worker_id", sa.Text, nullable=True))
    op.create_index(
        "ix_workers_tc_identity",
        "workers",
        ["pool_id", "worker_group", "tc_worker_id"],
        unique=True,
        postgresql_where=sa.text("tc_worker_id IS NOT NULL"),
    )
    op.create_table(
        "deployment_keys",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("secret", sa.Text, nullable=False),
        sa.Column(
            "created", sa.DateTime(timezone=True), nullable=False, server_default=sa.func.now()
        ),
        sa.PrimaryKeyConstraint("name", name="pk_deployment_keys"),
    )


def downgrade() -> None:
    op.drop_table("deployment_keys")
    op.drop_index("ix_workers_tc_identity", table_name="workers")
    op.drop_column("workers", "tc_worker_id")
