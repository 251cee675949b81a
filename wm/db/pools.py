"""Pools, launch configs and scan units: reads, the apply transaction, and `wm status`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import timedelta

from sqlalchemy import Connection, Engine, and_, any_, case, func, literal, select, text
from sqlalchemy.dialects.postgresql import insert

from wm.db.arrays import ids_array, ids_param
from wm.db.engine import one_statement
from wm.db.tables import (
    launch_configs,
    scan_units,
    tasks,
    worker_pool_errors,
    worker_pools,
    workers,
)
from wm.model import LaunchConfigRecord, PoolRecord, PoolStatus, WorkerState
from wm.pools.apply_plan import ApplyPlan, plain_json

ERRORS_WINDOW = timedelta(hours=1)
# pg_advisory_xact_lock key that serialises every change of pool definitions.
DEFINITIONS_LOCK = 0x776D_706F6F6C73  # "wmpools"


def pool_from_row(row) -> PoolRecord:
    return PoolRecord(
        pool_id=row.pool_id,
        provider_id=row.provider_id,
        previous_provider_ids=tuple(row.previous_provider_ids),
        min_capacity=row.min_capacity,
        max_capacity=row.max_capacity,
        scaling_ratio=row.scaling_ratio,
        registration_timeout_s=row.registration_timeout_s,
        reregistration_timeout_s=row.reregistration_timeout_s,
        queue_inactivity_timeout_s=row.queue_inactivity_timeout_s,
        requires_registration=row.requires_registration,
        removed=row.removed_at is not None,
        description=row.description,
        owner=row.owner,
        email_on_error=row.email_on_error,
        config=row.config,
    )


def launch_config_from_row(row) -> LaunchConfigRecord:
    return LaunchConfigRecord(
        pool_id=row.pool_id,
        launch_config_id=row.launch_config_id,
        region=row.region,
        capacity_per_worker=row.capacity_per_worker,
        configuration=row.configuration,
        worker_config=row.worker_config,
        weight=row.weight,
        max_capacity=row.max_capacity,
        archived=row.archived,
    )


_ALL_POOLS = select(worker_pools).order_by(worker_pools.c.pool_id)
# A provisioning pass's: built once (see ids_param).
_POOLS_BY_ID = _ALL_POOLS.where(worker_pools.c.pool_id == any_(ids_param("pool_ids")))
_LIVE_CONFIGS_BY_POOL = (
    select(launch_configs)
    .where(
        launch_configs.c.pool_id == any_(ids_param("pool_ids")),
        launch_configs.c.archived.is_(False),
    )
    .order_by(launch_configs.c.pool_id, launch_configs.c.launch_config_id)
)


def load_pools(engine: Engine, pool_ids: Sequence[str] | None = None) -> list[PoolRecord]:
    """Every pool, or only these (a provisioning pass reads the pools it claimed, not every
    provider's: their definitions are most of what a pool row costs to read)."""
    with one_statement(engine) as conn:
        if pool_ids is None:
            rows = conn.execute(_ALL_POOLS)
        else:
            rows = conn.execute(_POOLS_BY_ID, {"pool_ids": list(pool_ids)})
        return [pool_from_row(row) for row in rows]


def load_launch_configs(
    engine: Engine, *, include_archived: bool = True, pool_ids: Sequence[str] | None = None
) -> list[LaunchConfigRecord]:
    if pool_ids is not None and not include_archived:
        with one_statement(engine) as conn:
            rows = conn.execute(_LIVE_CONFIGS_BY_POOL, {"pool_ids": list(pool_ids)})
            return [launch_config_from_row(row) for row in rows]
    query = select(launch_configs).order_by(
        launch_configs.c.pool_id, launch_configs.c.launch_config_id
    )
    if not include_archived:
        query = query.where(launch_configs.c.archived.is_(False))
    if pool_ids is not None:
        query = query.where(launch_configs.c.pool_id == any_(ids_array(pool_ids)))
    with one_statement(engine) as conn:
        return [launch_config_from_row(row) for row in conn.execute(query)]


def load_scan_units(engine: Engine) -> list[tuple[str, str]]:
    with engine.connect() as conn:
        rows = conn.execute(select(scan_units.c.provider_id, scan_units.c.region))
        return [(row.provider_id, row.region) for row in rows]


def _pool_values(pool: PoolRecord) -> dict:
    values = asdict(pool)
    removed = values.pop("removed")
    values["previous_provider_ids"] = list(pool.previous_provider_ids)
    values["removed_at"] = func.now() if removed else None
    values["config"] = plain_json(pool.config)
    return values


def _lc_values(lc: LaunchConfigRecord) -> dict:
    values = asdict(lc)
    values["worker_config"] = plain_json(lc.worker_config)
    values["configuration"] = plain_json(lc.configuration)
    return values


def apply_plan(engine: Engine, plan: ApplyPlan) -> None:
    """Apply a plan in one transaction: all of it or none of it."""
    with engine.begin() as conn:
        apply_plan_in(conn, plan)


@dataclass(frozen=True)
class HeldDefinitions:
    """The pools and launch configs as they are, read under the definitions lock, and the
    transaction that writes a plan made from them."""

    pools: list[PoolRecord]
    launch_configs: list[LaunchConfigRecord]
    conn: Connection = field(repr=False)

    def apply(self, plan: ApplyPlan) -> None:
        apply_plan_in(self.conn, plan)


@contextmanager
def definitions_transaction(engine: Engine) -> Iterator[HeldDefinitions]:
    """One transaction, all or nothing, for planning and applying a change of definitions.

    Appliers (the API, `wm pools apply`: wm/pools/changes.py) queue on one transaction lock, so
    two of them never plan from the same state; what is not applied is not written.
    """
    with engine.begin() as conn:
        conn.execute(select(func.pg_advisory_xact_lock(DEFINITIONS_LOCK)))
        pools = [pool_from_row(r) for r in conn.execute(select(worker_pools))]
        lcs = [launch_config_from_row(r) for r in conn.execute(select(launch_configs))]
        yield HeldDefinitions(pools, lcs, conn)


def apply_plan_in(conn: Connection, plan: ApplyPlan) -> None:
    """Apply a plan inside the caller's transaction."""
    if plan.conflicts:
        raise ValueError(f"a plan with conflicts is never applied: {plan.conflicts[0]}")
    if plan.create_pools:
        conn.execute(insert(worker_pools), [_pool_values(p) for p in plan.create_pools])
    for pool in plan.update_pools:
        values = _pool_values(pool)
        if not pool.removed:
            values["removed_at"] = None
        conn.execute(
            worker_pools.update()
            .where(worker_pools.c.pool_id == pool.pool_id)
            .values(**values, last_modified=func.now())
        )
    if plan.create_launch_configs:
        conn.execute(insert(launch_configs), [_lc_values(lc) for lc in plan.create_launch_configs])
    for lc in (*plan.update_launch_configs, *plan.archive_launch_configs):
        conn.execute(
            launch_configs.update()
            .where(
                and_(
                    launch_configs.c.pool_id == lc.pool_id,
                    launch_configs.c.launch_config_id == lc.launch_config_id,
                )
            )
            .values(**_lc_values(lc), last_modified=func.now())
        )


def ensure_scan_units(engine: Engine, units: Iterable[tuple[str, str]]) -> None:
    """Give every (provider, region) its scan claim row; existing rows are left alone.

    Only missing rows are inserted: an insert that meets an existing row a scan holds waits
    for that scan's transaction, and a process starting beside a stuck scan must not."""
    existing = set(load_scan_units(engine))
    rows = [{"provider_id": p, "region": r} for p, r in units if (p, r) not in existing]
    if rows:
        with engine.begin() as conn:
            conn.execute(insert(scan_units).on_conflict_do_nothing(), rows)


def pool_statuses(engine: Engine, pool_id: str | None = None) -> list[PoolStatus]:
    """Pending tasks, capacity by state and recent errors of every pool, in one query."""
    capacity = (
        select(
            workers.c.pool_id,
            *(
                func.coalesce(
                    func.sum(case((workers.c.state == state, workers.c.capacity), else_=0)), 0
                ).label(state.value)
                for state in (WorkerState.REQUESTED, WorkerState.RUNNING, WorkerState.STOPPING)
            ),
        )
        .where(workers.c.state != WorkerState.STOPPED)
        .group_by(workers.c.pool_id)
        .subquery()
    )
    queue = (
        select(
            tasks.c.pool_id,
            func.count().filter(tasks.c.state == "pending").label("pending"),
            func.count().filter(tasks.c.state == "claimed").label("claimed"),
        )
        .where(tasks.c.state.in_(("pending", "claimed")))
        .group_by(tasks.c.pool_id)
        .subquery()
    )
    errors = (
        select(worker_pool_errors.c.pool_id, func.count().label("errors"))
        .where(worker_pool_errors.c.reported > func.now() - literal(ERRORS_WINDOW))
        .group_by(worker_pool_errors.c.pool_id)
        .subquery()
    )
    zero = text("0")
    query = (
        select(
            worker_pools.c.pool_id,
            worker_pools.c.provider_id,
            func.coalesce(queue.c.pending, zero).label("pending"),
            func.coalesce(queue.c.claimed, zero).label("claimed"),
            func.coalesce(capacity.c.requested, zero).label("requested"),
            func.coalesce(capacity.c.running, zero).label("running"),
            func.coalesce(capacity.c.stopping, zero).label("stopping"),
            func.coalesce(errors.c.errors, zero).label("errors"),
        )
        .select_from(worker_pools)
        .outerjoin(capacity, capacity.c.pool_id == worker_pools.c.pool_id)
        .outerjoin(queue, queue.c.pool_id == worker_pools.c.pool_id)
        .outerjoin(errors, errors.c.pool_id == worker_pools.c.pool_id)
        .order_by(worker_pools.c.pool_id)
    )
    if pool_id is not None:
        query = query.where(worker_pools.c.pool_id == pool_id)
    with engine.connect() as conn:
        return [
            PoolStatus(
                pool_id=row.pool_id,
                provider_id=row.provider_id,
                pending=int(row.pending),
                claimed=int(row.claimed),
                requested=int(row.requested),
                running=int(row.running),
                stopping=int(row.stopping),
                errors_last_hour=int(row.errors),
            )
            for row in conn.execute(query)
        ]
