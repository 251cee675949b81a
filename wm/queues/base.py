"""The queue source contract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class QueueCounts:
    pending: int  # tasks waiting for a worker
    claimed: int  # tasks a worker is running
    oldest_pending_at: datetime | None = None  # when the oldest pending task arrived, if known


class QueueSource(Protocol):
    def counts(self, pool_ids: Sequence[str]) -> dict[str, QueueCounts]:
        """Counts for every pool asked for (zeros for a pool with no tasks).

        Raises QueueUnavailable when the source cannot be read: a pass must not mistake an
        unreadable queue for an empty one.
        """
        ...

    def release(self, worker_ids: Sequence[str]) -> int:
        """Put the tasks these workers were running back to pending, because their VMs are
        gone (pre-empted); return how many went back. A source whose own queue does this
        (Taskcluster resolves a lost worker's runs when their claims expire) returns 0.
        """
        ...
