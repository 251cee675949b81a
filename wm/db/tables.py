"""The schema. Migrations in wm/db/migrations create exactly this (a test compares them)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from wm.model import WorkerState

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

WORKER_STATES = tuple(s.value for s in WorkerState)
TASK_STATES = ("pending", "claimed", "completed", "failed")


worker_pools = Table(
    "worker_pools",
    metadata,
    Column("pool_id", Text, primary_key=True),
    # NULL once the pool is deleted (Taskcluster's null-provider); its workers still drain.
    Column("provider_id", Text, nullable=True),
    Column("previous_provider_ids", ARRAY(Text), nullable=False, server_default="{}"),
    Column("min_capacity", Integer, nullable=False),
    Column("max_capacity", Integer, nullable=False),
    Column("scaling_ratio", Float, nullable=False),
    Column("registration_timeout_s", Float, nullable=False),
    Column("reregistration_timeout_s", Float, nullable=False),
    Column("queue_inactivity_timeout_s", Float, nullable=False),
    Column("requires_registration", Boolean, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_modified", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("removed_at", DateTime(timezone=True), nullable=True),
    # When the last provisioning pass of this pool started (set under its claim).
    Column("last_provisioned", DateTime(timezone=True), nullable=True),
    # The rest of Taskcluster's definition; `config` verbatim as applied.
    Column("description", Text, nullable=False, server_default=""),
    Column("owner", Text, nullable=False, server_default=""),
    Column("email_on_error", Boolean, nullable=False, server_default="false"),
    Column("config", JSONB, nullable=False, server_default="{}"),
)

launch_configs = Table(
    "launch_configs",
    metadata,
    Column("pool_id", Text, ForeignKey("worker_pools.pool_id"), primary_key=True),
    Column("launch_config_id", Text, primary_key=True),
    Column("region", Text, nullable=False),  # the worker group: region, zone or location
    Column("capacity_per_worker", Integer, nullable=False),
    # The launch config as the definition holds it (workerManager.launchConfigId filled in).
    Column("configuration", JSONB, nullable=False, server_default="{}"),
    Column("worker_config", JSONB, nullable=False, server_default="{}"),
    Column("weight", Float, nullable=False),
    Column("max_capacity", Integer, nullable=True),
    Column("archived", Boolean, nullable=False, server_default="false"),
    Column("created", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_modified", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

workers = Table(
    "workers",
    metadata,
    Column("worker_id", Text, primary_key=True),
    Column("pool_id", Text, ForeignKey("worker_pools.pool_id"), nullable=False),
    Column("worker_group", Text, nullable=False),  # the region or zone: the scan unit
    Column("provider_id", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("capacity", Integer, nullable=False),
    Column("launch_config_id", Text, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_modified", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("last_checked", DateTime(timezone=True), nullable=True),
    Column("expires", DateTime(timezone=True), nullable=True),  # the next lifecycle deadline
    Column("registered_at", DateTime(timezone=True), nullable=True),
    Column("cloud_id", Text, nullable=True),
    Column("idempotency_token", Text, nullable=False),
    Column("batch_token", Text, nullable=True),
    Column("launch_index", Integer, nullable=True),
    Column("provider_data", JSONB, nullable=False, server_default="{}"),
    Column("stop_reason", Text, nullable=True),
    Column("version", Integer, nullable=False, server_default="1"),  # optimistic concurrency
    # When the worker last claimed a task or re-registered: the queue inactivity clock.
    Column("last_active", DateTime(timezone=True), nullable=True),
    # Scale-down advice from the provisioner: the pool has more running capacity than it needs.
    Column("should_terminate", Boolean, nullable=False, server_default="false"),
    Column("secret_hash", Text, nullable=True),  # sha256 of the worker's current secret
    # When it passed each stage (migration 0004; stopping_at and stopped_at come from a trigger).
    Column("demand_at", DateTime(timezone=True), nullable=True),  # oldest task it covers
    Column("accepted_at", DateTime(timezone=True), nullable=True),  # the cloud took the create
    Column("cloud_running_at", DateTime(timezone=True), nullable=True),  # first seen running
    Column("first_claimed_at", DateTime(timezone=True), nullable=True),
    Column("stopping_at", DateTime(timezone=True), nullable=True),  # removal decided
    Column("delete_called_at", DateTime(timezone=True), nullable=True),
    Column("stopped_at", DateTime(timezone=True), nullable=True),  # nothing left in the cloud
    Column("preempted_at", DateTime(timezone=True), nullable=True),  # the cloud took it back
    # The pass gave up waiting for its create's answer: the VM may exist all the same.
    Column("unanswered_at", DateTime(timezone=True), nullable=True),
    # Taskcluster's workerId for it, known once the cloud named it: the EC2 instance id, the
    # GCE numeric instance id, the Azure VM name. (worker_id stays wm's own intent key.)
    Column("tc_worker_id", Text, nullable=True),
    # When its VM booted, as worker-runner said at registration (systemBootTime), bounded by
    # when the cloud accepted the create and when it registered.
    Column("booted_at", DateTime(timezone=True), nullable=True),
    # The class of the cloud's refusal that ended its launch (capacity, quota, ...), whether the
    # create was refused or failed after the cloud took it (migration 0012).
    Column("launch_refused", Text, nullable=True),
    CheckConstraint(f"state IN {WORKER_STATES!r}", name="state"),
    ForeignKeyConstraint(
        ["pool_id", "launch_config_id"],
        ["launch_configs.pool_id", "launch_configs.launch_config_id"],
        name="fk_workers_launch_config",
    ),
    Index("ix_workers_provider_state", "provider_id", "state"),
    Index("ix_workers_pool_state", "pool_id", "state"),
    Index(
        "ix_workers_scan_unit_live",
        "provider_id",
        "worker_group",
        postgresql_where=text("state <> 'stopped'"),
    ),
    Index("ix_workers_batch", "batch_token", "launch_index"),
    Index(
        "ix_workers_preempted",
        "pool_id",
        "launch_config_id",
        "preempted_at",
        postgresql_where=text("preempted_at IS NOT NULL"),
    ),
    Index("ix_workers_cloud_id", "provider_id", "cloud_id"),
    Index(
        "ix_workers_tc_identity",
        "pool_id",
        "worker_group",
        "tc_worker_id",
        unique=True,
        postgresql_where=text("tc_worker_id IS NOT NULL"),
    ),
    Index(
        "ix_workers_stopped_expiry",
        "provider_id",
        "last_modified",
        postgresql_where=text("state = 'stopped'"),
    ),
)

worker_pool_errors = Table(
    "worker_pool_errors",
    metadata,
    Column("error_id", BigInteger, Identity(), primary_key=True),
    Column("pool_id", Text, ForeignKey("worker_pools.pool_id"), nullable=False),
    Column("provider_id", Text, nullable=True),
    Column("launch_config_id", Text, nullable=True),
    Column("kind", Text, nullable=False),  # an ErrorCategory, or "worker-report"
    Column("title", Text, nullable=False),
    Column("description", Text, nullable=False),
    Column("extra", JSONB, nullable=False, server_default="{}"),
    Column("reported", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Index("ix_worker_pool_errors_pool_reported", "pool_id", "reported"),
    Index("ix_worker_pool_errors_reported", "reported"),  # the expiry's DELETE
)

tasks = Table(
    "tasks",
    metadata,
    Column("task_id", BigInteger, Identity(), primary_key=True),
    Column("pool_id", Text, nullable=False),
    Column("state", Text, nullable=False, server_default="pending"),
    Column("duration_s", Float, nullable=False, server_default="0"),
    Column("created", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("claimed_at", DateTime(timezone=True), nullable=True),
    Column("claimed_by", Text, nullable=True),
    Column("completed_at", DateTime(timezone=True), nullable=True),
    # When it last went back to pending because its worker was lost (pre-empted).
    Column("requeued_at", DateTime(timezone=True), nullable=True),
    CheckConstraint(f"state IN {TASK_STATES!r}", name="state"),
    Index("ix_tasks_pool_state", "pool_id", "state"),
)

# One row per (provider, region): scanners claim these with SKIP LOCKED.
scan_units = Table(
    "scan_units",
    metadata,
    Column("provider_id", Text, primary_key=True),
    Column("region", Text, primary_key=True),
    Column("last_scan_started", DateTime(timezone=True), nullable=True),
    Column("last_scan_finished", DateTime(timezone=True), nullable=True),
    Column("last_scan_by", Text, nullable=True),
)

# One token bucket per (cloud account, scope, call class), shared by every process and
# replica: taken from in one statement (wm/db/budgets.py). Scope is a region where the
# cloud limits per region, "*" where it limits the whole account.
api_budgets = Table(
    "api_budgets",
    metadata,
    Column("account", Text, primary_key=True),
    Column("scope", Text, primary_key=True),
    Column("call_class", Text, primary_key=True),
    Column("tokens", Float, nullable=False),  # negative: a debt that callers wait out
    Column("burst", Float, nullable=False),
    Column("per_s", Float, nullable=False),
    # The cloud throttled us anyway: the bucket works at this share of its size and rate,
    # until shrink_until, then recovers gradually (like TCP's congestion window).
    Column("shrink", Float, nullable=False, server_default="1"),
    Column("shrink_until", DateTime(timezone=True), nullable=True),
    Column("updated", DateTime(timezone=True), nullable=False, server_default=func.now()),
)


# Postgres' lock view, read (never written) to see which provisioning claims are held.
pg_locks = Table(
    "pg_locks",
    MetaData(),
    Column("locktype", Text),
    Column("classid", BigInteger),
    Column("objid", BigInteger),
    Column("objsubid", Integer),
    Column("granted", Boolean),
)


# Keys of this deployment, shared by every web replica: in standalone mode, the access token of
# the issuer that signs workers' Taskcluster credentials. Generated once, on first use.
deployment_keys = Table(
    "deployment_keys",
    metadata,
    Column("name", Text, primary_key=True),
    Column("secret", Text, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False, server_default=func.now()),
)


def _offering_columns() -> list[Column]:
    # An offering of a provider; zone '' stands for "any zone of the region" (a primary key
    # has no NULLs).
    return [
        Column(name, Text, primary_key=True)
        for name in ("provider_id", "region", "zone", "instance_type", "market")
    ]


# What a cloud publishes about an offering (wm.model.OfferingSignal), one row per signal kind:
# written by the scanners' signal jobs, read by every provisioner's pass (issue 40).
offering_signals = Table(
    "offering_signals",
    metadata,
    *_offering_columns(),
    Column("kind", Text, primary_key=True),  # a wm.model.SignalKind
    Column("value", Float, nullable=False),
    Column("source", Text, nullable=False),
    Column("observed_at", DateTime(timezone=True), nullable=False),
    # Read no more after this (its source's cadence, a few times over: migration 0013).
    Column("fresh_until", DateTime(timezone=True), nullable=False),
)

# Offerings that refused capacity lately (wm/provisioning/offering_bench.py): no launches there
# until benched_until, but one probe per window; a success clears the row's count.
offering_bench = Table(
    "offering_bench",
    metadata,
    *_offering_columns(),
    Column("failures", Integer, nullable=False, server_default="0"),
    Column("benched_until", DateTime(timezone=True), nullable=True),
    Column("probe_sent_at", DateTime(timezone=True), nullable=True),
    Column("last_code", Text, nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
