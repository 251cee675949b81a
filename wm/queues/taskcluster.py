"""The Taskcluster queue, through the `taskcluster` client.

Counts for all pools come from one `taskQueueCountsBatch` call (1,000 task queues a call);
where a deployment's queue lacks that endpoint (404), wm falls back to `taskQueueCounts` per
pool and remembers not to try the batch again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import taskcluster
from taskcluster.exceptions import TaskclusterFailure, TaskclusterRestFailure

from wm.config.loader import Config
from wm.errors import QueueUnavailable
from wm.queues.base import QueueCounts

BATCH_MAX_QUEUES = 1000
CLIENT_MAX_RETRIES = 2
NOT_FOUND = 404


class TaskclusterQueue:
    def __init__(self, client: Any, task_queue_prefix: str = "") -> None:
        self._client = client
        self._prefix = task_queue_prefix
        self._batch_supported = True

    @classmethod
    def from_config(cls, config: Config) -> TaskclusterQueue:
        env = config.env
        if not env.taskcluster_root_url:
            raise QueueUnavailable(
                "queue.source is taskcluster but TASKCLUSTER_ROOT_URL is not set"
            )
        options: dict[str, Any] = {
            "rootUrl": env.taskcluster_root_url,
            "maxRetries": CLIENT_MAX_RETRIES,
        }
        if env.taskcluster_client_id and env.taskcluster_access_token:
            options["credentials"] = {
                "clientId": env.taskcluster_client_id,
                "accessToken": env.taskcluster_access_token,
            }
        return cls(taskcluster.Queue(options), config.queue.task_queue_prefix)

    def counts(self, pool_ids: Sequence[str]) -> dict[str, QueueCounts]:
        by_queue = {self._prefix + pool_id: pool_id for pool_id in pool_ids}
        try:
            raw = self._batch(list(by_queue)) if self._batch_supported else None
            if raw is None:
                raw = {queue: self._one(queue) for queue in by_queue}
        except TaskclusterFailure as exc:
            # The client's messages carry no credentials; keep only the first line.
            raise QueueUnavailable(f"taskcluster queue: {str(exc).splitlines()[0]}") from exc
        return {pool_id: raw.get(queue, QueueCounts(0, 0)) for queue, pool_id in by_queue.items()}

    def release(self, worker_ids: Sequence[str]) -> int:
        # The queue itself resolves a lost worker's runs (claim-expired) and retries them.
        return 0

    def _batch(self, queues: list[str]) -> dict[str, QueueCounts] | None:
        found: dict[str, QueueCounts] = {}
        for start in range(0, len(queues), BATCH_MAX_QUEUES):
            chunk = queues[start : start + BATCH_MAX_QUEUES]
            try:
                reply = self._client.taskQueueCountsBatch({"taskQueueIds": chunk})
            except TaskclusterRestFailure as exc:
                if exc.status_code == NOT_FOUND:
                    self._batch_supported = False
                    return None
                raise
            for item in reply["taskQueueCounts"]:
                found[item["taskQueueId"]] = QueueCounts(item["pendingTasks"], item["claimedTasks"])
        return found

    def _one(self, queue: str) -> QueueCounts:
        reply = self._client.taskQueueCounts(queue)
        return QueueCounts(reply["pendingTasks"], reply["claimedTasks"])
