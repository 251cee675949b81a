"""The builtin queue: the tasks table in wm's own Postgres (standalone use, the simulator)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from wm.db import tasks as task_store
from wm.errors import QueueUnavailable
from wm.model import Task
from wm.queues.base import QueueCounts


class BuiltinQueue:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def counts(self, pool_ids: Sequence[str]) -> dict[str, QueueCounts]:
        try:
            raw = task_store.queue_counts(self._engine, pool_ids)
        except SQLAlchemyError as exc:
            raise QueueUnavailable(f"builtin queue: {exc.__class__.__name__}") from exc
        return {
            pool: QueueCounts(pending, claimed, oldest)
            for pool, (pending, claimed, oldest) in raw.items()
        }

    def release(self, worker_ids: Sequence[str]) -> int:
        return task_store.release_tasks(self._engine, worker_ids)

    def claim(self, pool_id: str, worker_id: str, limit: int = 1) -> list[Task]:
        return task_store.claim_tasks(self._engine, pool_id, worker_id, limit)

    def complete(self, task_id: int, worker_id: str, *, failed: bool = False) -> bool:
        return task_store.complete_task(self._engine, task_id, worker_id, failed=failed)
