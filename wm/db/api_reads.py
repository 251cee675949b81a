"""What the worker-manager API reads: workers by Taskcluster's names, pools, errors, counts.

Pages are offset/limit, as Taskcluster's own `paginateResults` does them; every query has a
total order so that consecutive pages neither repeat nor skip a row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Engine, and_, func, select

from wm.db.engine import one_statement
from wm.db.filters import where_given
from wm.db.pool_errors import error_from_row
from wm.db.pools import launch_config_from_row, pool_from_row
from wm.db.tables import launch_configs, worker_pool_errors, worker_pools, workers
from wm.db.workers import first_worker, worker_from_row
from wm.model import LaunchConfigRecord, PoolError, PoolRecord, WorkerRecord
from wm.pools.definition import HAND_MADE_LAUNCH_CONFIG_ID
from wm.workers.registration_policy import RegistrationTarget


@dataclass(frozen=True)
class PoolView:
    """A pool as the API shows it: its record, its times and its launch configs."""

    pool: PoolRecord
    created: datetime
    last_modified: datetime
    launch_configs: tuple[LaunchConfigRecord, ...]


@dataclass(frozen=True)
class LaunchConfigRow:
    """A launch config with its times, for listWorkerPoolLaunchConfigs."""

    record: LaunchConfigRecord
    created: datetime
    last_modified: datetime


@dataclass(frozen=True)
class StateCounts:
    """Workers and their capacity in one state, for one pool (and launch config)."""

    pool_id: str
    launch_config_id: str
    state: str
    count: int
    capacity: int


def worker_by_name(
    engine: Engine, pool_id: str, worker_group: str, tc_worker_id: str
) -> WorkerRecord | None:
    """The worker Taskcluster calls (workerPoolId, workerGroup, workerId)."""
    query = select(workers).where(
        workers.c.pool_id == pool_id,
        workers.c.worker_group == worker_group,
        workers.c.tc_worker_id == tc_worker_id,
    )
    with engine.connect() as conn:
        return first_worker(conn, query)


def workers_page(
    engine: Engine,
    pool_id: str,
    *,
    offset: int,
    limit: int,
    worker_group: str | None = None,
    state: str | None = None,
    launch_config_id: str | None = None,
) -> list[WorkerRecord]:
    """Named workers of a pool (those whose cloud id is known), in a stable order."""
    query = (
        select(workers)
        .where(workers.c.pool_id == pool_id, workers.c.tc_worker_id.is_not(None))
        .order_by(workers.c.worker_group, workers.c.tc_worker_id)
        .offset(offset)
        .limit(limit)
    )
    query = where_given(
        query,
        (workers.c.worker_group, worker_group),
        (workers.c.state, state),
        (workers.c.launch_config_id, launch_config_id),
    )
    with engine.connect() as conn:
        return [worker_from_row(row) for row in conn.execute(query)]


def pools_page(
    engine: Engine, *, offset: int, limit: int, pool_id: str | None = None
) -> list[PoolView]:
    query = select(worker_pools).order_by(worker_pools.c.pool_id).offset(offset).limit(limit)
    if pool_id is not None:
        query = query.where(worker_pools.c.pool_id == pool_id)
    with engine.connect() as conn:
        rows = list(conn.execute(query))
        ids = [row.pool_id for row in rows]
        configs = conn.execute(
            select(launch_configs)
            .where(launch_configs.c.pool_id.in_(ids), launch_configs.c.archived.is_(False))
            .order_by(launch_configs.c.pool_id, launch_configs.c.launch_config_id)
        )
        by_pool: dict[str, list[LaunchConfigRecord]] = {}
        for lc in configs:
            by_pool.setdefault(lc.pool_id, []).append(launch_config_from_row(lc))
    return [
        PoolView(
            pool=pool_from_row(row),
            created=row.created,
            last_modified=row.last_modified,
            launch_configs=tuple(by_pool.get(row.pool_id, ())),
        )
        for row in rows
    ]


def state_counts(engine: Engine, pool_ids: Sequence[str]) -> list[StateCounts]:
    """Worker counts and capacity per (pool, launch config, state)."""
    query = (
        select(
            workers.c.pool_id,
            workers.c.launch_config_id,
            workers.c.state,
            func.count(),
            func.coalesce(func.sum(workers.c.capacity), 0),
        )
        .where(workers.c.pool_id.in_(list(pool_ids)))
        .group_by(workers.c.pool_id, workers.c.launch_config_id, workers.c.state)
    )
    with engine.connect() as conn:
        return [
            StateCounts(pool, lc, state, int(count), int(capacity))
            for pool, lc, state, count, capacity in conn.execute(query)
        ]


def errors_page(
    engine: Engine,
    pool_id: str,
    *,
    offset: int,
    limit: int,
    launch_config_id: str | None = None,
    error_id: int | None = None,
) -> list[PoolError]:
    query = (
        select(worker_pool_errors)
        .where(worker_pool_errors.c.pool_id == pool_id)
        .order_by(worker_pool_errors.c.reported.desc(), worker_pool_errors.c.error_id.desc())
        .offset(offset)
        .limit(limit)
    )
    query = where_given(
        query,
        (worker_pool_errors.c.launch_config_id, launch_config_id),
        (worker_pool_errors.c.error_id, error_id),
    )
    with engine.connect() as conn:
        return [error_from_row(row) for row in conn.execute(query)]


def launch_configs_page(
    engine: Engine, pool_id: str, *, offset: int, limit: int, include_archived: bool
) -> list[LaunchConfigRow]:
    query = (
        select(launch_configs)
        .where(
            launch_configs.c.pool_id == pool_id,
            # A static pool's is wm's own: its definition has none, and worker-manager lists none.
            launch_configs.c.launch_config_id != HAND_MADE_LAUNCH_CONFIG_ID,
        )
        .order_by(launch_configs.c.launch_config_id)
        .offset(offset)
        .limit(limit)
    )
    if not include_archived:
        query = query.where(launch_configs.c.archived.is_(False))
    with engine.connect() as conn:
        return [
            LaunchConfigRow(launch_config_from_row(row), row.created, row.last_modified)
            for row in conn.execute(query)
        ]


def launch_config_archived(engine: Engine, pool_id: str, launch_config_id: str) -> bool:
    """Whether the worker's launch config was dropped from its pool's definition (or the pool
    deleted): worker-manager then tells its workers to terminate."""
    query = select(launch_configs.c.archived).where(
        launch_configs.c.pool_id == pool_id,
        launch_configs.c.launch_config_id == launch_config_id,
    )
    with engine.connect() as conn:
        return bool(conn.execute(query).scalar())


def pool_exists(engine: Engine, pool_id: str) -> bool:
    """Whether the pool exists (deleted pools too: they exist until their workers drained)."""
    with engine.connect() as conn:
        query = select(worker_pools.c.pool_id).where(worker_pools.c.pool_id == pool_id)
        return conn.execute(query).first() is not None


def pool_provider(engine: Engine, pool_id: str) -> tuple[bool, str | None]:
    """Whether the pool exists, and its provider id (None: deleted, the null provider)."""
    with engine.connect() as conn:
        query = select(worker_pools.c.provider_id).where(worker_pools.c.pool_id == pool_id)
        row = conn.execute(query).first()
    return (False, None) if row is None else (True, row.provider_id)


def pool_providers(engine: Engine, pool_ids: Sequence[str]) -> dict[str, str | None]:
    """The provider of each of these pools wm has (None: deleted, the null provider); a pool
    it does not have is not in the answer."""
    if not pool_ids:
        return {}
    with engine.connect() as conn:
        query = select(worker_pools.c.pool_id, worker_pools.c.provider_id).where(
            worker_pools.c.pool_id.in_(list(pool_ids))
        )
        return {row.pool_id: row.provider_id for row in conn.execute(query)}


def registration_target(
    engine: Engine, pool_id: str, worker_group: str, tc_worker_id: str
) -> RegistrationTarget:
    """The pool and the worker Taskcluster names (workerPoolId, workerGroup, workerId), with
    what registration needs of the pool and the worker's launch config, in one query: whether
    the pool exists and whether it holds the worker are one answer."""
    named = and_(
        workers.c.pool_id == worker_pools.c.pool_id,
        workers.c.worker_group == worker_group,
        workers.c.tc_worker_id == tc_worker_id,
    )
    of_its_launch_config = and_(
        launch_configs.c.pool_id == workers.c.pool_id,
        launch_configs.c.launch_config_id == workers.c.launch_config_id,
    )
    query = (
        select(
            workers,
            worker_pools.c.provider_id.label("pool_provider_id"),
            worker_pools.c.previous_provider_ids,
            worker_pools.c.reregistration_timeout_s,
            launch_configs.c.worker_config,
            (workers.c.expires < func.now()).label("expired"),
        )
        # A worker without its launch config row is not registrable: the inner join drops it.
        .select_from(
            worker_pools.outerjoin(workers.join(launch_configs, of_its_launch_config), named)
        )
        .where(worker_pools.c.pool_id == pool_id)
    )
    with one_statement(engine) as conn:  # a single read: no transaction to end
        row = conn.execute(query).first()
    if row is None:
        return RegistrationTarget(pool_exists=False, worker=None)
    return RegistrationTarget(
        pool_exists=True,
        worker=worker_from_row(row) if row.worker_id is not None else None,
        pool_provider_id=row.pool_provider_id,
        previous_provider_ids=tuple(row.previous_provider_ids),
        reregistration_timeout_s=row.reregistration_timeout_s,
        worker_config=row.worker_config or {},
        expired=bool(row.expired),
    )
