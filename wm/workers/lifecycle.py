"""Lifecycle deadlines: which workers must be terminated now, and why. A pure function."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from wm.model import PoolRecord, WorkerRecord, WorkerState

REGISTRATION_TIMEOUT = "registration-timeout"
REREGISTRATION_TIMEOUT = "reregistration-timeout"
QUEUE_INACTIVITY = "queue-inactivity"


@dataclass(frozen=True)
class Deadline:
    worker: WorkerRecord
    reason: str


def overdue(
    rows: Sequence[WorkerRecord], pools: Mapping[str, PoolRecord], now: datetime
) -> list[Deadline]:
    """Workers past a deadline. A row of an unknown pool is left alone (never guess)."""
    found = []
    for row in rows:
        pool = pools.get(row.pool_id)
        if pool is None:
            continue
        reason = _reason(row, pool, now)
        if reason:
            found.append(Deadline(row, reason))
    return found


def _reason(row: WorkerRecord, pool: PoolRecord, now: datetime) -> str | None:
    if row.state == WorkerState.REQUESTED:
        # Not registered (or, without registration, not running) within the timeout.
        return REGISTRATION_TIMEOUT if row.expires and now > row.expires else None
    if row.state != WorkerState.RUNNING:
        return None
    if pool.requires_registration and row.expires and now > row.expires:
        return REREGISTRATION_TIMEOUT
    active_since = row.last_active or row.registered_at or row.created
    if now - active_since > timedelta(seconds=pool.queue_inactivity_timeout_s):
        return QUEUE_INACTIVITY
    return None


class Running(Protocol):
    """What scale-down advice reads of a running worker (a WorkerRecord has it)."""

    @property
    def worker_id(self) -> str: ...
    @property
    def capacity(self) -> int: ...
    @property
    def created(self) -> datetime: ...


def scale_down(running: Sequence[Running], target: float) -> list[str]:
    """Running workers beyond the target capacity, newest first (Taskcluster's order).

    A worker is advised to terminate only while the capacity left without it still meets the
    target, so advice never takes the pool below what its demand needs.
    """
    return scale_down_newest(running, sum(w.capacity for w in running), target)


def scale_down_newest(
    newest: Sequence[Running], running_capacity: float, target: float
) -> list[str]:
    """`scale_down` of a pool known by its running capacity and its newest running workers.

    The advice flags a run of the newest workers and stops at the first it cannot flag, so
    the `advice_reach` newest are all it can flag: given those (or more), the answer is
    `scale_down`'s over every running worker.
    """
    remaining = running_capacity
    flagged = []
    for worker in sorted(newest, key=lambda w: (w.created, w.worker_id), reverse=True):
        if remaining - worker.capacity < target:
            break
        remaining -= worker.capacity
        flagged.append(worker.worker_id)
    return flagged


def advice_reach(running_capacity: int, zero_capacity: int, target: float) -> int:
    """How many of a pool's newest running workers the advice can flag at most: none while it
    has less than 1 to spare, so a pool whose demand its workers meet reads none of them.

    Each flagged worker of capacity >= 1 takes at least 1 from the `running_capacity - target`
    the pool has to spare; a worker of capacity 0 takes nothing, so `zero_capacity` of them
    may come on top. (No capacity is negative: launch configs and createWorker ask for at
    least 1.) The float difference rounds monotonically, so its floor never falls below the
    exact one's."""
    if running_capacity < target:
        return 0
    return math.floor(running_capacity - target) + zero_capacity
