"""Worker-pool errors: what went wrong launching for a pool, for `wm pools errors`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine, func, select

from wm.db.tables import worker_pool_errors
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
        conn.execute(
            worker_pool_errors.insert(),
            [
                {
                    "pool_id": e.pool_id,
                    "provider_id": e.provider_id,
                    "launch_config_id": e.launch_config_id,
                    "kind": e.kind,
                    "title": e.title,
                    "description": e.description,
                    "extra": e.extra,
                }
                for e in errors
            ],
        )


def list_errors(engine: Engine, pool_id: str, limit: int = LIST_LIMIT) -> list[PoolError]:
    query = (
        select(worker_pool_errors)
        .where(worker_pool_errors.c.pool_id == pool_id)
        .order_by(worker_pool_errors.c.reported.desc(), worker_pool_errors.c.error_id.desc())
        .limit(limit)
    )
    with engine.connect() as conn:
        return [
            PoolError(
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
            for row in conn.execute(query)
        ]


def recent_error_counts(
    engine: Engine, pool_ids: Sequence[str], window: timedelta = RECENT_WINDOW
) -> dict[tuple[str, str], int]:
    """Errors per (pool, launch config) within the window, for launch config weights."""
    query = (
        select(worker_pool_errors.c.pool_id, worker_pool_errors.c.launch_config_id, func.count())
        .where(
            worker_pool_errors.c.pool_id.in_(list(pool_ids)),
            worker_pool_errors.c.launch_config_id.is_not(None),
            worker_pool_errors.c.reported > func.now() - window,
        )
        .group_by(worker_pool_errors.c.pool_id, worker_pool_errors.c.launch_config_id)
    )
    with engine.connect() as conn:
        return {(pool, lc): n for pool, lc, n in conn.execute(query)}
