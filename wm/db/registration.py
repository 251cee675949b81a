"""Registration, re-registration and removal: conditional updates, never read-then-write.

Rows are found here by Taskcluster's names (pool, group, `tc_worker_id`) and changed by wm's
own key (`worker_id`) through the one writer of worker rows (wm/db/worker_writes.py: its
REGISTER, REREGISTER and REMOVE transitions), which this module names as the API calls them:
one registration per instance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, and_, func, select

from wm.db.tables import launch_configs, worker_pools, workers
from wm.db.worker_writes import register as register
from wm.db.worker_writes import request_removal as request_removal
from wm.db.worker_writes import reregister as reregister
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
