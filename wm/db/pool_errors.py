"""Worker-pool errors: what went wrong launching for a pool, for `wm pools errors`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Interval, any_, bindparam, func, select

from wm.config.loader import RetentionConfig
from wm.db.arrays import ids_array, ids_param
from wm.db.engine import one_statement
from wm.db.tables import worker_pool_errors, workers
from wm.model import PoolError

LIST_LIMIT = 1000
RECENT_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class NewPoolError:
    pool_id: str
    kind: str
    title: str
    description: str
    provider_id: str | None = None
    launch_config_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def record_errors(engine: Engine, errors: Sequence[NewPoolError]) -> None:
    if not errors:
        return
    with engine.begin() as conn:
        _insert(conn, errors)


def record_new_by_key(engine: Engine, errors: Sequence[NewPoolError], key: str) -> int:
    """Record the errors whose `extra[key]` no error of their provider and kind holds yet: one
    about each thing, whichever process sees it and however often, a restarted one too.
    Returns how many were recorded. Callers serialise on what the keys name (a scan unit's
    claim)."""
    if not errors:
        return 0
    keyed = worker_pool_errors.c.extra[key].astext
    with engine.begin() as conn:
        held = conn.execute(
            select(worker_pool_errors.c.provider_id, worker_pool_errors.c.kind, keyed).where(
                worker_pool_errors.c.kind == any_(ids_array(sorted({e.kind for e in errors}))),
                keyed == any_(ids_array(sorted({str(e.extra.get(key)) for e in errors}))),
            )
        )
        known = {(row[0], row[1], row[2]) for row in held}
        fresh = [e for e in errors if (e.provider_id, e.kind, str(e.extra.get(key))) not in known]
        if fresh:
            _insert(conn, fresh)
        return len(fresh)


def record_worker_report(
    engine: Engine,
    report: NewPoolError,
    *,
    worker_key: str | None,
    worker_group: str,
    worker_name: str,
    per_window: int,
) -> PoolError | None:
    """Record a worker's own report unless it already sent `per_window` within the window: a
    worker stuck in a loop must not flood the table and the pool's error list. Reports are
    recognised by the `workerGroup`/`workerId` Taskcluster adds to their `extra`. Returns the
    stored error; None: refused, nothing written."""
    with engine.begin() as conn:
        if worker_key is not None:
            # The worker's row lock makes its concurrent reports count one after the other.
            conn.execute(
                select(workers.c.worker_id)
                .where(workers.c.worker_id == worker_key)
                .with_for_update()
            )
        sent = conn.execute(
            select(func.count()).where(
                worker_pool_errors.c.pool_id == report.pool_id,
                worker_pool_errors.c.reported > func.now() - RECENT_WINDOW,
                worker_pool_errors.c.extra["workerGroup"].astext == worker_group,
                worker_pool_errors.c.extra["workerId"].astext == worker_name,
            )
        ).scalar_one()
        if sent >= per_window:
            return None
        row = conn.execute(
            worker_pool_errors.insert().returning(worker_pool_errors), [_values(report)]
        ).one()
        return error_from_row(row)


def _insert(conn: Connection, errors: Sequence[NewPoolError]) -> None:
    conn.execute(worker_pool_errors.insert(), [_values(e) for e in errors])


def _values(error: NewPoolError) -> dict[str, Any]:
    return {
        "pool_id": error.pool_id,
        "provider_id": error.provider_id,
        "launch_config_id": error.launch_config_id,
        "kind": error.kind,
        "title": error.title,
        "description": error.description,
        "extra": error.extra,
    }


def error_from_row(row) -> PoolError:
    return PoolError(
        error_id=row.error_id,
        pool_id=row.pool_id,
        provider_id=row.provider_id,
        launch_config_id=row.launch_config_id,
        kind=row.kind,
        title=row.title,
        description=row.description,
        reported=row.reported,
        extra=row.extra,
    )


def list_errors(engine: Engine, pool_id: str, limit: int = LIST_LIMIT) -> list[PoolError]:
    query = (
        select(worker_pool_errors)
        .where(worker_pool_errors.c.pool_id == pool_id)
        .order_by(worker_pool_errors.c.reported.desc(), worker_pool_errors.c.error_id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return [error_from_row(row) for row in conn.execute(query)]


_RECENT_ERRORS = (  # a launching pass's: built once (wm/db/arrays.py: ids_param)
    select(worker_pool_errors.c.pool_id, worker_pool_errors.c.launch_config_id, func.count())
    .where(
        worker_pool_errors.c.pool_id == any_(ids_param("pool_ids")),
        worker_pool_errors.c.launch_config_id.is_not(None),
        worker_pool_errors.c.reported > func.now() - bindparam("window", type_=Interval),
    )
    .group_by(worker_pool_errors.c.pool_id, worker_pool_errors.c.launch_config_id)
)


def recent_error_counts(
    engine: Engine, pool_ids: Sequence[str], window: timedelta = RECENT_WINDOW
) -> dict[tuple[str, str], int]:
    """Errors per (pool, launch config) within the window, for launch config weights."""
    params = {"pool_ids": list(pool_ids), "window": window}
    with one_statement(engine) as conn:
        return {(pool, lc): n for pool, lc, n in conn.execute(_RECENT_ERRORS, params)}


def expire_pool_errors(engine: Engine, retention: RetentionConfig) -> int:
    """Delete every error reported longer ago than the configured retention
    (`[retention] pool_errors_s`; by default 7 days, worker-manager's
    `workerPoolErrorRetentionDays`), by the database's clock (the one that stamped them);
    return how many. One statement, on the index of `reported` (TC
    `expire_worker_pool_errors`). The one expiry: the provisioner's hourly job and the
    scanner's housekeeping both call it."""
    with engine.begin() as conn:
        deleted = conn.execute(
            worker_pool_errors.delete().where(
                worker_pool_errors.c.reported
                < func.now() - timedelta(seconds=retention.pool_errors_s)
            )
        )
        return deleted.rowcount
