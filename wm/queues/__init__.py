"""Queue sources: where pending and claimed task counts per pool come from."""

from __future__ import annotations

from sqlalchemy import Engine

from wm.config.loader import Config
from wm.queues.base import QueueCounts, QueueSource

__all__ = ["QueueCounts", "QueueSource", "build_queue"]


def build_queue(config: Config, engine: Engine) -> QueueSource:
    if config.queue.source == "taskcluster":
        from wm.queues.taskcluster import TaskclusterQueue

        return TaskclusterQueue.from_config(config)
    from wm.queues.builtin import BuiltinQueue

    return BuiltinQueue(engine)
