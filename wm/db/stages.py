"""The rows latency by stage is computed from: workers that lived within a recent window."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine, func, or_, select

from wm.db.tables import workers
from wm.db.workers import worker_from_row
from wm.model import WorkerRecord, WorkerState

STAGES_WINDOW = timedelta(hours=1)


def recent_workers(
    engine: Engine, pool_id: str | None = None, window: timedelta = STAGES_WINDOW
) -> list[WorkerRecord]:
    """Workers launched, or finished, within the window (one query)."""
    since = func.now() - window
    query = select(workers).where(
        or_(
            workers.c.created > since,
            workers.c.stopped_at > since,
            workers.c.state != WorkerState.STOPPED,
        )
    )
    if pool_id is not None:
        query = query.where(workers.c.pool_id == pool_id)
    with engine.connect() as conn:
        return [worker_from_row(row) for row in conn.execute(query)]
