"""The scanner's reads: a bounded number per scan, never one per worker. (Its writes are
wm/db/worker_writes.py's, the one writer of worker rows.)"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, func, select

from wm.db.tables import workers
from wm.db.workers import worker_from_row
from wm.model import WorkerRecord, WorkerState

READ_CHUNK = 5_000  # rows a fetch of a unit's rows brings


def db_now(engine: Engine) -> datetime:
    with engine.connect() as conn:
        return conn.execute(select(func.now())).scalar_one()


def live_workers(engine: Engine, provider_id: str, region: str) -> list[WorkerRecord]:
    """Every non-stopped row of one scan unit, in one query."""
    query = select(workers).where(
        workers.c.provider_id == provider_id,
        workers.c.worker_group == region,
        workers.c.state != WorkerState.STOPPED,
    )
    # Fetched a few thousand rows at a time (a server-side cursor: the same one statement),
    # not all at once: libpq would hold the whole answer in C memory beside the records built
    # from it, at 100,000 rows as much as the records themselves.
    with engine.connect() as conn:
        found = conn.execution_options(yield_per=READ_CHUNK).execute(query)
        return [worker_from_row(row) for row in found]
