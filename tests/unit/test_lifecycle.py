from datetime import UTC, datetime, timedelta

from tests.unit.test_scan_diff import row
from wm.lifecycle import (
    QUEUE_INACTIVITY,
    REGISTRATION_TIMEOUT,
    REREGISTRATION_TIMEOUT,
    overdue,
    scale_down,
)
from wm.model import PoolRecord, WorkerState

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
POOL = PoolRecord(
    pool_id="proj/linux",
    provider_id="aws-a",
    previous_provider_ids=(),
    min_capacity=0,
    max_capacity=10,
    scaling_ratio=1.0,
    registration_timeout_s=1800.0,
    reregistration_timeout_s=345600.0,
    queue_inactivity_timeout_s=7200.0,
)
POOLS = {"p": POOL}


def reasons(*rows):
    return [(d.worker.worker_id, d.reason) for d in overdue(rows, POOLS, NOW)]


def test_a_worker_that_never_registers_is_terminated_at_its_deadline():
    late = row("late", expires=NOW - timedelta(seconds=1))
    early = row("early", expires=NOW + timedelta(seconds=1))
    assert reasons(late, early) == [("late", REGISTRATION_TIMEOUT)]


def test_a_worker_that_stops_reregistering_is_terminated():
    silent = row(
        "silent", state=WorkerState.RUNNING, expires=NOW - timedelta(seconds=1), last_active=NOW
    )
    assert reasons(silent) == [("silent", REREGISTRATION_TIMEOUT)]


def test_an_idle_worker_is_terminated_after_the_queue_inactivity_timeout():
    idle_since = NOW - timedelta(seconds=POOL.queue_inactivity_timeout_s + 1)
    idle = row(
        "idle", state=WorkerState.RUNNING, expires=NOW + timedelta(days=1), last_active=idle_since
    )
    busy = row("busy", state=WorkerState.RUNNING, expires=NOW + timedelta(days=1), last_active=NOW)
    assert reasons(idle, busy) == [("idle", QUEUE_INACTIVITY)]


def test_workers_of_unknown_pools_and_stopping_workers_are_left_alone():
    assert reasons(row("x", pool="nope", expires=NOW - timedelta(days=1))) == []
    assert reasons(row("y", state=WorkerState.STOPPING, expires=NOW - timedelta(days=1))) == []


def test_scale_down_flags_the_newest_workers_above_the_target():
    workers = [
        row(f"w{i}", state=WorkerState.RUNNING, created=NOW - timedelta(minutes=10 - i))
        for i in range(5)
    ]
    assert scale_down(workers, target=3) == ["w4", "w3"]
    assert scale_down(workers, target=5) == []
    assert scale_down(workers, target=0) == ["w4", "w3", "w2", "w1", "w0"]
    assert scale_down(workers, target=2.5) == ["w4", "w3"]
