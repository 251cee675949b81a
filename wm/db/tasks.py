"""The builtin queue's tasks."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Engine, any_, func, select, update
from sqlalchemy.dialects.postgresql import insert

from wm.db.arrays import ids_param
from wm.db.engine import one_statement
from wm.db.filters import where_given
from wm.db.tables import tasks
from wm.db.worker_writes import note_task_claimed
from wm.model import Task

LIST_LIMIT = 10_000
TASKS_CHANNEL = "wm_tasks"


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
        requeued_at=row.requeued_at,
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
        ids = [row.task_id for row in rows]
        # Wakes provisioners listening on the channel as soon as this commits.
        conn.execute(select(func.pg_notify(TASKS_CHANNEL, pool_id)))
        return ids


def list_tasks(
    engine: Engine,
    *,
    pool_id: str | None = None,
    state: str | None = None,
    limit: int | None = LIST_LIMIT,  # None: every row
) -> list[Task]:
    query = select(tasks).order_by(tasks.c.task_id).limit(limit)
    query = where_given(query, (tasks.c.pool_id, pool_id), (tasks.c.state, state))
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


def _queue_counts_statement():
    pending = tasks.c.state == "pending"
    return (
        select(
            tasks.c.pool_id,
            func.count().filter(pending),
            func.count().filter(tasks.c.state == "claimed"),
            func.min(tasks.c.created).filter(pending),
        )
        .where(
            tasks.c.pool_id == any_(ids_param("pool_ids")),
            tasks.c.state.in_(("pending", "claimed")),
        )
        .group_by(tasks.c.pool_id)
    )


_QUEUE_COUNTS = _queue_counts_statement()  # every provisioning pass's: built once


def queue_counts(
    engine: Engine, pool_ids: Sequence[str]
) -> dict[str, tuple[int, int, datetime | None]]:
    """(pending, claimed, when the oldest pending task arrived) per pool, in one query; pools
    without tasks are (0, 0, None)."""
    counts: dict[str, tuple[int, int, datetime | None]] = dict.fromkeys(pool_ids, (0, 0, None))
    with one_statement(engine) as conn:
        rows = conn.execute(_QUEUE_COUNTS, {"pool_ids": list(pool_ids)})
        for pool_id, n_pending, n_claimed, oldest in rows:
            counts[pool_id] = (n_pending, n_claimed, oldest)
    return counts


def release_tasks(engine: Engine, worker_ids: Sequence[str]) -> int:
    """Tasks claimed by these (lost) workers go back to pending, in one statement; the
    provisioners listening are woken for each pool that has work again."""
    if not worker_ids:
        return 0
    with engine.begin() as conn:
        pools = list(
            conn.execute(
                update(tasks)
                .where(tasks.c.claimed_by.in_(list(worker_ids)), tasks.c.state == "claimed")
                .values(state="pending", claimed_by=None, claimed_at=None, requeued_at=func.now())
                .returning(tasks.c.pool_id)
            ).scalars()
        )
        for pool_id in sorted(set(pools)):
            conn.execute(select(func.pg_notify(TASKS_CHANNEL, pool_id)))
        return len(pools)


def claim_tasks(engine: Engine, pool_id: str, worker_id: str, limit: int = 1) -> list[Task]:
    """Hand up to `limit` pending tasks of a pool to a worker; concurrent claimers never share."""
    pending = (
        select(tasks.c.task_id)
        .where(tasks.c.pool_id == pool_id, tasks.c.state == "pending")
        .order_by(tasks.c.task_id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    with engine.begin() as conn:
        rows = conn.execute(
            update(tasks)
            .where(tasks.c.task_id.in_(pending))
            .values(state="claimed", claimed_by=worker_id, claimed_at=func.now())
            .returning(*tasks.c)
        )
        claimed = [_task(row) for row in rows]
        if claimed:  # the queue inactivity clock restarts, in the same transaction
            note_task_claimed(conn, worker_id)
        return claimed


def complete_task(engine: Engine, task_id: int, worker_id: str, *, failed: bool = False) -> bool:
    """Resolve a task claimed by this worker; False if it was not (no longer) theirs."""
    with engine.begin() as conn:
        done = conn.execute(
            update(tasks)
            .where(
                tasks.c.task_id == task_id,
                tasks.c.claimed_by == worker_id,
                tasks.c.state == "claimed",
            )
            .values(state="failed" if failed else "completed", completed_at=func.now())
        )
        return done.rowcount == 1
