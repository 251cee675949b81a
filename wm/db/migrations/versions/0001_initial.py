"""Initial schema: pools, launch configs, workers, pool errors, builtin tasks, scan units.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)


def _stamps() -> list[sa.Column]:
    return [
        sa.Column("created", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("last_modified", TZ, nullable=False, server_default=sa.func.now()),
    ]


def upgrade() -> None:
    op.create_table(
        "worker_pools",
        sa.Column("pool_id", sa.Text, primary_key=True),
        sa.Column("provider_id", sa.Text, nullable=True),
        sa.Column(
            "previous_provider_ids",
            postgresql.ARRAY(sa.Text),
            nullable=False,
            server_default="{}",
        ),
        sa.Column("min_capacity", sa.Integer, nullable=False),
        sa.Column("max_capacity", sa.Integer, nullable=False),
        sa.Column("scaling_ratio", sa.Float, nullable=False),
        sa.Column("registration_timeout_s", sa.Float, nullable=False),
        sa.Column("reregistration_timeout_s", sa.Float, nullable=False),
        sa.Column("queue_inactivity_timeout_s", sa.Float, nullable=False),
        sa.Column("requires_registration", sa.Boolean, nullable=False),
        *_stamps(),
        sa.Column("removed_at", TZ, nullable=True),
        sa.Column("last_provisioned", TZ, nullable=True),
        sa.PrimaryKeyConstraint("pool_id", name="pk_worker_pools"),
    )
    op.create_table(
        "launch_configs",
        sa.Column("pool_id", sa.Text, nullable=False),
        sa.Column("launch_config_id", sa.Text, nullable=False),
        sa.Column("region", sa.Text, nullable=False),
        sa.Column("machine_type", sa.Text, nullable=False),
        sa.Column("image", sa.Text, nullable=False),
        sa.Column("capacity_per_worker", sa.Integer, nullable=False),
        sa.Column("public_ip", sa.Boolean, nullable=False),
        sa.Column("spot", sa.Boolean, nullable=False),
        sa.Column("worker_config", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("weight", sa.Float, nullable=False),
        sa.Column("max_capacity", sa.Integer, nullable=True),
        sa.Column("archived", sa.Boolean, nullable=False, server_default="false"),
        *_stamps(),
        sa.PrimaryKeyConstraint("pool_id", "launch_config_id", name="pk_launch_configs"),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["worker_pools.pool_id"], name="fk_launch_configs_pool_id_worker_pools"
        ),
    )
    op.create_table(
        "workers",
        sa.Column("worker_id", sa.Text, nullable=False),
        sa.Column("pool_id", sa.Text, nullable=False),
        sa.Column("worker_group", sa.Text, nullable=False),
        sa.Column("provider_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("capacity", sa.Integer, nullable=False),
        sa.Column("launch_config_id", sa.Text, nullable=False),
        *_stamps(),
        sa.Column("last_checked", TZ, nullable=True),
        sa.Column("expires", TZ, nullable=True),
        sa.Column("registered_at", TZ, nullable=True),
        sa.Column("cloud_id", sa.Text, nullable=True),
        sa.Column("idempotency_token", sa.Text, nullable=False),
        sa.Column("batch_token", sa.Text, nullable=True),
        sa.Column("launch_index", sa.Integer, nullable=True),
        sa.Column("provider_data", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("stop_reason", sa.Text, nullable=True),
        sa.Column("version", sa.Integer, nullable=False, server_default="1"),
        sa.PrimaryKeyConstraint("worker_id", name="pk_workers"),
        sa.CheckConstraint(
            "state IN ('requested', 'running', 'stopping', 'stopped')", name="ck_workers_state"
        ),
        sa.ForeignKeyConstraint(
            ["pool_id"], ["worker_pools.pool_id"], name="fk_workers_pool_id_worker_pools"
        ),
        sa.ForeignKeyConstraint(
            ["pool_id", "launch_config_id"],
            ["launch_configs.pool_id", "launch_configs.launch_config_id"],
            name="fk_workers_launch_config",
        ),
    )
    op.create_index("ix_workers_provider_state", "workers", ["provider_id", "state"])
    op.create_index("ix_workers_pool_state", "workers", ["pool_id", "state"])
    op.create_index(
        "ix_workers_scan_unit_live",
        "workers",
        ["provider_id", "worker_group"],
        postgresql_where=sa.text("state <> 'stopped'"),
    )
    op.create_index("ix_workers_batch", "workers", ["batch_token", "launch_index"])
    op.create_index("ix_workers_cloud_id", "workers", ["provider_id", "cloud_id"])
    op.create_table(
        "worker_pool_errors",
        sa.Column("error_id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("pool_id", sa.Text, nullable=False),
        sa.Column("provider_id", sa.Text, nullable=True),
        sa.Column("launch_config_id", sa.Text, nullable=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("extra", postgresql.JSONB, nullable=False, server_default="{}"),
        sa.Column("reported", TZ, nullable=False, server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("error_id", name="pk_worker_pool_errors"),
        sa.ForeignKeyConstraint(
            ["pool_id"],
            ["worker_pools.pool_id"],
            name="fk_worker_pool_errors_pool_id_worker_pools",
        ),
    )
    op.create_index(
        "ix_worker_pool_errors_pool_reported", "worker_pool_errors", ["pool_id", "reported"]
    )
    op.create_table(
        "tasks",
        sa.Column("task_id", sa.BigInteger, sa.Identity(), nullable=False),
        sa.Column("pool_id", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False, server_default="pending"),
        sa.Column("duration_s", sa.Float, nullable=False, server_default="0"),
        sa.Column("created", TZ, nullable=False, server_default=sa.func.now()),
        sa.Column("claimed_at", TZ, nullable=True),
        sa.Column("claimed_by", sa.Text, nullable=True),
        sa.Column("completed_at", TZ, nullable=True),
        sa.PrimaryKeyConstraint("task_id", name="pk_tasks"),
        sa.CheckConstraint(
            "state IN ('pending', 'claimed', 'completed', 'failed')", name="ck_tasks_state"
        ),
    )
    op.create_index("ix_tasks_pool_state", "tasks", ["pool_id", "state"])
    op.create_table(
        "scan_units",
        sa.Column("provider_id", sa.Text, nullable=False),
        sa.Column("region", sa.Text, nullable=False),
        sa.Column("last_scan_started", TZ, nullable=True),
        sa.Column("last_scan_finished", TZ, nullable=True),
        sa.Column("last_scan_by", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("provider_id", "region", name="pk_scan_units"),
    )


def downgrade() -> None:
    for table in ("scan_units", "tasks", "worker_pool_errors", "workers", "launch_configs"):
        op.drop_table(table)
    op.drop_table("worker_pools")
