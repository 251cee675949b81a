"""The builtin queue's tasks."""

from __future__ import annotations

from sqlalchemy import Engine, func, select
from sqlalchemy.dialects.postgresql import insert

from wm.db.tables import tasks
from wm.model import Task

LIST_LIMIT = 10_000


def _task(row) -> Task:
    return Task(
        task_id=row.task_id,
        pool_id=row.pool_id,
        state=row.state,
        duration_s=row.duration_s,
        created=row.created,
        claimed_by=row.claimed_by,
        claimed_at=row.claimed_at,
        completed_at=row.completed_at,
    )


def submit_tasks(engine: Engine, pool_id: str, count: int, duration_s: float) -> list[int]:
    """Add `count` pending tasks in one statement; return their ids."""
    if count <= 0:
        return []
    with engine.begin() as conn:
        rows = conn.execute(
            insert(tasks).returning(tasks.c.task_id),
            [{"pool_id": pool_id, "duration_s": duration_s}] * count,
        )
        return [row.task_id for row in rows]


def list_tasks(
    engine: Engine, *, pool_id: str | None = None, state: str | None = None, limit: int = LIST_LIMIT
) -> list[Task]:
    query = select(tasks).order_by(tasks.c.task_id).limit(limit)
    if pool_id is not None:
        query = query.where(tasks.c.pool_id == pool_id)
    if state is not None:
        query = query.where(tasks.c.state == state)
    with engine.connect() as conn:
        return [_task(row) for row in conn.execute(query)]


def count_by_state(engine: Engine) -> dict[tuple[str, str], int]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(tasks.c.pool_id, tasks.c.state, func.count()).group_by(
                tasks.c.pool_id, tasks.c.state
            )
        )
        return {(row[0], row[1]): row[2] for row in rows}
