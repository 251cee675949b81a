"""Registration, re-registration and removal: conditional updates, never read-then-write.

Rows are found by Taskcluster's names (pool, group, `tc_worker_id`) and changed by wm's own
key (`worker_id`), under the same conditions as before: one registration per instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import DateTime, Engine, and_, func, literal, select, update

from wm.db.tables import launch_configs, worker_pools, workers
from wm.db.workers import worker_from_row
from wm.model import WorkerRecord


@dataclass(frozen=True)
class RegistrationTarget:
    """A worker row with what registration needs from its pool and launch config."""

    worker: WorkerRecord
    pool_provider_id: str | None
    previous_provider_ids: tuple[str, ...]
    reregistration_timeout_s: float
    worker_config: Mapping[str, Any]
    expired: bool  # past its registration deadline, by the database's clock


def pool_exists(engine: Engine, pool_id: str) -> bool:
    with engine.connect() as conn:
        query = select(worker_pools.c.pool_id).where(worker_pools.c.pool_id == pool_id)
        return conn.execute(query).first() is not None


def registration_target(
    engine: Engine, pool_id: str, worker_group: str, tc_worker_id: str
) -> RegistrationTarget | None:
    """The worker Taskcluster names (workerPoolId, workerGroup, workerId), with its pool's."""
    query = (
        select(
            workers,
            worker_pools.c.provider_id.label("pool_provider_id"),
            worker_pools.c.previous_provider_ids,
            worker_pools.c.reregistration_timeout_s,
            launch_configs.c.worker_config,
            (workers.c.expires < func.now()).label("expired"),
        )
        .join(worker_pools, worker_pools.c.pool_id == workers.c.pool_id)
        .join(
            launch_configs,
            and_(
                launch_configs.c.pool_id == workers.c.pool_id,
                launch_configs.c.launch_config_id == workers.c.launch_config_id,
            ),
        )
        .where(
            workers.c.pool_id == pool_id,
            workers.c.worker_group == worker_group,
            workers.c.tc_worker_id == tc_worker_id,
        )
    )
    with engine.connect() as conn:
        row = conn.execute(query).first()
    if row is None:
        return None
    return RegistrationTarget(
        worker=worker_from_row(row),
        pool_provider_id=row.pool_provider_id,
        previous_provider_ids=tuple(row.previous_provider_ids),
        reregistration_timeout_s=row.reregistration_timeout_s,
        worker_config=row.worker_config,
        expired=bool(row.expired),
    )


def register(
    engine: Engine,
    worker_id: str,
    secret_hash: str,
    timeout_s: float,
    booted_at: datetime | None = None,
) -> datetime | None:
    """requested -> running, once: of concurrent calls exactly one gets the new expiry.

    `booted_at` is the worker's own word (systemBootTime): kept only within what wm knows,
    after the cloud accepted the create (or the row was written) and not after now."""
    boot = None
    if booted_at is not None:
        boot = func.least(
            func.greatest(
                literal(booted_at, DateTime(timezone=True)),
                func.coalesce(workers.c.accepted_at, workers.c.created),
            ),
            func.now(),
        )
    statement = (
        update(workers)
        .where(
            workers.c.worker_id == worker_id,
            workers.c.state == "requested",
            workers.c.expires > func.now(),
        )
        .values(
            state="running",
            registered_at=func.now(),
            booted_at=boot,
            last_active=func.now(),
            secret_hash=secret_hash,
            expires=func.now() + timedelta(seconds=timeout_s),
            last_modified=func.now(),
            version=workers.c.version + 1,
        )
        .returning(workers.c.expires)
    )
    with engine.begin() as conn:
        return conn.execute(statement).scalar_one_or_none()


def reregister(
    engine: Engine, worker_id: str, old_hash: str, new_hash: str, timeout_s: float
) -> datetime | None:
    """Rotate the secret and extend the deadline, only with the current secret."""
    statement = (
        update(workers)
        .where(
            workers.c.worker_id == worker_id,
            workers.c.state == "running",
            workers.c.secret_hash == old_hash,
            workers.c.expires > func.now(),
        )
        .values(
            secret_hash=new_hash,
            expires=func.now() + timedelta(seconds=timeout_s),
            last_modified=func.now(),
            version=workers.c.version + 1,
        )
        .returning(workers.c.expires)
    )
    with engine.begin() as conn:
        return conn.execute(statement).scalar_one_or_none()


def request_removal(engine: Engine, worker_id: str, reason: str) -> bool:
    """Move a live worker to stopping; the scanner deletes its VM at its next scan."""
    statement = (
        update(workers)
        .where(workers.c.worker_id == worker_id, workers.c.state.in_(("requested", "running")))
        .values(
            state="stopping",
            stop_reason=reason,
            secret_hash=None,
            last_modified=func.now(),
            version=workers.c.version + 1,
        )
    )
    with engine.begin() as conn:
        return conn.execute(statement).rowcount == 1
