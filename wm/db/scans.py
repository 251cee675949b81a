"""The scanner's statements: a bounded number per scan, never one per worker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Engine,
    Integer,
    Text,
    case,
    column,
    delete,
    func,
    select,
    update,
    values,
)
from sqlalchemy.dialects.postgresql import JSONB

from wm.db.tables import worker_pool_errors, workers
from wm.db.workers import worker_from_row
from wm.model import WorkerRecord


@dataclass(frozen=True)
class RowChange:
    """Move a row, if it is still as it was read (its version), to a new state."""

    worker_id: str
    version: int
    state: str
    cloud_id: str | None = None
    reason: str | None = None
    preempted: bool = False  # stamp preempted_at: the cloud took the VM back
    tc_worker_id: str | None = None  # Taskcluster's workerId, when the row learns its VM's


def db_now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(select(func.now())).scalar_one()


def live_workers(engine: Engine, provider_id: str, region: str) -> list[WorkerRecord]:
    """Every non-stopped row of one scan unit, in one query."""
    query = select(workers).where(
        workers.c.provider_id == provider_id,
        workers.c.worker_group == region,
        workers.c.state != "stopped",
    )
    with engine.connect() as conn:
        return [worker_from_row(row) for row in conn.execute(query)]


def apply_changes(engine: Engine, changes: Sequence[RowChange]) -> list[WorkerRecord]:
    """One statement for all changes; a row changed since it was read is left alone.

    Returns the rows that did change, as they are now.
    """
    if not changes:
        return []
    data = values(
        column("worker_id", Text),
        column("version", Integer),
        column("state", Text),
        column("cloud_id", Text),
        column("reason", Text),
        column("preempted", Boolean),
        column("tc_worker_id", Text),
        name="changes",
    ).data(
        [
            (c.worker_id, c.version, c.state, c.cloud_id, c.reason, c.preempted, c.tc_worker_id)
            for c in changes
        ]
    )
    statement = (
        update(workers)
        .where(workers.c.worker_id == data.c.worker_id, workers.c.version == data.c.version)
        .values(
            state=data.c.state,
            cloud_id=func.coalesce(workers.c.cloud_id, data.c.cloud_id),
            # Kept once known: a VM's workerId never changes.
            tc_worker_id=func.coalesce(workers.c.tc_worker_id, data.c.tc_worker_id),
            stop_reason=func.coalesce(data.c.reason, workers.c.stop_reason),
            preempted_at=case(
                (data.c.preempted, func.coalesce(workers.c.preempted_at, func.now())),
                else_=workers.c.preempted_at,
            ),
            last_checked=func.now(),
            last_modified=func.now(),
            version=workers.c.version + 1,
        )
        .returning(*workers.c)
    )
    with engine.begin() as conn:
        return [worker_from_row(row) for row in conn.execute(statement)]


def record_provider_data(
    engine: Engine, records: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[WorkerRecord]:
    """Merge each (worker id, data) over its row's provider data, top-level keys replaced, in
    one statement. Stopped rows are left alone. The version is not moved: this changes no
    state, so it never makes another writer's conditional change fail. Returns the rows
    written, as they are now."""
    if not records:
        return []
    data = values(column("worker_id", Text), column("data", JSONB), name="records").data(
        [(worker_id, dict(found)) for worker_id, found in records]
    )
    statement = (
        update(workers)
        .where(workers.c.worker_id == data.c.worker_id, workers.c.state != "stopped")
        .values(provider_data=workers.c.provider_data.op("||")(data.c.data))
        .returning(*workers.c)
    )
    with engine.begin() as conn:
        return [worker_from_row(row) for row in conn.execute(statement)]


def mark_cloud_running(engine: Engine, worker_ids: Sequence[str]) -> list[WorkerRecord]:
    """The cloud runs these workers' VMs: stamp the first time a scan saw it. Returns the
    rows stamped now (each row once, ever)."""
    return _stamp_once(engine, worker_ids, workers.c.cloud_running_at)


def mark_delete_called(engine: Engine, worker_ids: Sequence[str]) -> list[WorkerRecord]:
    """A delete was sent for these workers' VMs: stamp the first one. Returns the rows
    stamped now (each row once, ever)."""
    return _stamp_once(engine, worker_ids, workers.c.delete_called_at)


def _stamp_once(engine: Engine, worker_ids: Sequence[str], stamp: Column) -> list[WorkerRecord]:
    if not worker_ids:
        return []
    with engine.begin() as conn:
        rows = conn.execute(
            update(workers)
            .where(workers.c.worker_id.in_(list(worker_ids)), stamp.is_(None))
            .values({stamp.name: func.now()})
            .returning(*workers.c)
        )
        return [worker_from_row(row) for row in rows]


def mark_checked(engine: Engine, worker_ids: Sequence[str]) -> None:
    if not worker_ids:
        return
    with engine.begin() as conn:
        conn.execute(
            update(workers)
            .where(workers.c.worker_id.in_(list(worker_ids)))
            .values(last_checked=func.now())
        )


def expire_stopped(engine: Engine, provider_id: str, older_than_s: float) -> int:
    """Forget stopped workers after the retention period."""
    with engine.begin() as conn:
        done = conn.execute(
            delete(workers).where(
                workers.c.provider_id == provider_id,
                workers.c.state == "stopped",
                workers.c.last_modified < func.now() - timedelta(seconds=older_than_s),
            )
        )
        return done.rowcount


def expire_pool_errors(engine: Engine, older_than_s: float) -> int:
    with engine.begin() as conn:
        done = conn.execute(
            delete(worker_pool_errors).where(
                worker_pool_errors.c.reported < func.now() - timedelta(seconds=older_than_s)
            )
        )
        return done.rowcount


def running_workers(engine: Engine, pool_ids: Sequence[str]) -> list[WorkerRecord]:
    query = select(workers).where(
        workers.c.pool_id.in_(list(pool_ids)), workers.c.state == "running"
    )
    with engine.connect() as conn:
        return [worker_from_row(row) for row in conn.execute(query)]


def change_scale_down(engine: Engine, flag: Sequence[str], unflag: Sequence[str]) -> None:
    """Advise these running workers to terminate and those no longer to, in every pool at once:
    at most two statements a pass however many pools, and none when the advice stands."""
    if not flag and not unflag:
        return
    with engine.begin() as conn:
        for worker_ids, advice in ((flag, True), (unflag, False)):
            if worker_ids:
                conn.execute(
                    update(workers)
                    .where(workers.c.worker_id.in_(list(worker_ids)), workers.c.state == "running")
                    .values(should_terminate=advice)
                )
