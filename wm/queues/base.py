"""The queue source contract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class QueueCounts:
    pending: int  # tasks waiting for a worker
    claimed: int  # tasks a worker is running


class QueueSource(Protocol):
    def counts(self, pool_ids: Sequence[str]) -> dict[str, QueueCounts]:
        """Counts for every pool asked for (zeros for a pool with no tasks).

        Raises QueueUnavailable when the source cannot be read: a pass must not mistake an
        unreadable queue for an empty one.
        """
        ...
