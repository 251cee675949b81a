"""Worker rows: reads for operators (the passes' statements come with the passes)."""

from __future__ import annotations

from sqlalchemy import Engine, select

from wm.db.tables import workers
from wm.model import WorkerRecord
from wm.providers.base import WorkerState

LIST_LIMIT = 10_000


def worker_from_row(row) -> WorkerRecord:
    return WorkerRecord(
        worker_id=row.worker_id,
        pool_id=row.pool_id,
        worker_group=row.worker_group,
        provider_id=row.provider_id,
        state=WorkerState(row.state),
        capacity=row.capacity,
        launch_config_id=row.launch_config_id,
        created=row.created,
        last_modified=row.last_modified,
        idempotency_token=row.idempotency_token,
        last_checked=row.last_checked,
        expires=row.expires,
        registered_at=row.registered_at,
        cloud_id=row.cloud_id,
        batch_token=row.batch_token,
        launch_index=row.launch_index,
        provider_data=row.provider_data,
        stop_reason=row.stop_reason,
        version=row.version,
    )


def list_workers(
    engine: Engine,
    *,
    pool_id: str | None = None,
    state: WorkerState | None = None,
    limit: int = LIST_LIMIT,
) -> list[WorkerRecord]:
    query = select(workers).order_by(workers.c.created, workers.c.worker_id).limit(limit)
    if pool_id is not None:
        query = query.where(workers.c.pool_id == pool_id)
    if state is not None:
        query = query.where(workers.c.state == str(state))
    with engine.connect() as conn:
        return [worker_from_row(row) for row in conn.execute(query)]
