"""Lifecycle deadlines: which workers must be terminated now, and why. A pure function."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

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


def scale_down(running: Sequence[WorkerRecord], target: float) -> list[str]:
    """Running workers beyond the target capacity, newest first (Taskcluster's order).

    A worker is advised to terminate only while the capacity left without it still meets the
    target, so advice never takes the pool below what its demand needs.
    """
    remaining = sum(w.capacity for w in running)
    flagged = []
    for worker in sorted(running, key=lambda w: (w.created, w.worker_id), reverse=True):
        if remaining - worker.capacity < target:
            break
        remaining -= worker.capacity
        flagged.append(worker.worker_id)
    return flagged
