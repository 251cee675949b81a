"""Pools hold Taskcluster worker pool definitions; launch configs hold theirs verbatim.

A launch config's machine, image, spot and public IP columns give way to `configuration`, the
launch config as the definition holds it (the clouds' own parameters). Rows written before
have no definition: their configuration is empty, the provisioner launches nothing from them
until the pool's definition is applied (`wm pools convert` writes one that keeps their ids).

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "worker_pools", sa.Column("description", sa.Text, nullable=False, server_default="")
    )
    op.add_column("worker_pools", sa.Column("owner", sa.Text, nullable=False, server_default=""))
    op.add_column(
        "worker_pools",
        sa.Column("email_on_error", sa.Boolean, nullable=False, server_default="false"),
    )
    op.add_column("worker_pools", sa.Column("config", JSONB, nullable=False, server_default="{}"))
    op.add_column(
        "launch_configs",
        sa.Column("configuration", JSONB, nullable=False, server_default="{}"),
    )
    for column in ("machine_type", "image", "public_ip", "spot"):
        op.drop_column("launch_configs", column)


def downgrade() -> None:
    op.add_column(
        "launch_configs", sa.Column("machine_type", sa.Text, nullable=False, server_default="")
    )
    op.add_column("launch_configs", sa.Column("image", sa.Text, nullable=False, server_default=""))
    op.add_column(
        "launch_configs",
        sa.Column("public_ip", sa.Boolean, nullable=False, server_default="false"),
    )
    op.add_column(
        "launch_configs", sa.Column("spot", sa.Boolean, nullable=False, server_default="false")
    )
    op.drop_column("launch_configs", "configuration")
    for column in ("config", "email_on_error", "owner", "description"):
        op.drop_column("worker_pools", column)
