import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.unit.test_scan_diff import row
from wm.model import PoolRecord, WorkerState
from wm.workers.lifecycle import (
    QUEUE_INACTIVITY,
    REGISTRATION_TIMEOUT,
    REREGISTRATION_TIMEOUT,
    advice_reach,
    overdue,
    scale_down,
    scale_down_newest,
)

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


@pytest.mark.parametrize(
    ("running_capacity", "zero_capacity", "target", "reach"),
    [
        (5, 0, 5, 0),  # nothing to spare: no worker is read
        (5, 0, 5.5, 0),  # below target: nothing to flag
        (5, 0, 4.5, 0),  # less than 1 to spare
        (5, 0, 0, 5),  # demand gone: all five
        (5, 0, 2.5, 2),  # 2.5 to spare: at most two of capacity 1
        (5, 2, 3, 4),  # two of capacity 0 may be flagged on top
        (5, 2, 5, 2),  # and only they, with nothing to spare
        (0, 3, 0, 3),  # only capacity-0 workers, no demand
        (10, 0, 8.999, 1),
    ],
)
def test_the_advice_reads_at_most_the_newest_it_can_flag(
    running_capacity, zero_capacity, target, reach
):
    assert advice_reach(running_capacity, zero_capacity, target) == reach


def test_the_advice_from_the_newest_workers_alone_is_the_advice_over_all_of_them():
    workers = [
        row(f"w{i}", state=WorkerState.RUNNING, created=NOW - timedelta(minutes=10 - i))
        for i in range(5)
    ]
    newest = sorted(workers, key=lambda w: w.created, reverse=True)
    assert scale_down_newest(newest[:2], 5, target=3) == ["w4", "w3"]
    assert scale_down_newest(newest[:0], 5, target=5) == []
    assert scale_down_newest(newest[:0], 5, target=6) == []
    assert scale_down_newest(newest[:2], 5, target=2.5) == ["w4", "w3"]
    assert scale_down_newest(newest[:5], 5, target=2.5) == ["w4", "w3"]
    # Given fewer than it can flag, it flags those (the reach is what makes them enough).
    assert scale_down_newest(newest[:1], 5, target=0) == ["w4"]


def test_the_newest_within_reach_give_the_same_advice_on_random_fleets():
    rng = random.Random(28)
    for _ in range(500):
        workers = [
            replace(
                row(
                    f"w{rng.choice('aAb_-0')}{i}",
                    state=WorkerState.RUNNING,
                    created=NOW - timedelta(minutes=rng.randrange(4)),  # ties within a batch
                ),
                capacity=rng.choice((0, 1, 1, 1, 2, 4)),
            )
            for i in range(rng.randrange(12))
        ]
        target = rng.choice((0, 0.5, 1, 2.5, 3, 7, 20))
        total = sum(w.capacity for w in workers)
        zeros = sum(1 for w in workers if w.capacity <= 0)
        newest = sorted(workers, key=lambda w: (w.created, w.worker_id), reverse=True)
        reach = advice_reach(total, zeros, target)
        assert scale_down_newest(newest[:reach], total, target) == scale_down(workers, target)


def test_each_deadline_passes_only_after_its_instant():
    at_deadline = dict(expires=NOW)
    booting = row("booting", **at_deadline)
    registered = row("registered", state=WorkerState.RUNNING, last_active=NOW, **at_deadline)
    idle_since = NOW - timedelta(seconds=POOL.queue_inactivity_timeout_s)
    idle = row(
        "idle", state=WorkerState.RUNNING, expires=NOW + timedelta(days=1), last_active=idle_since
    )
    assert reasons(booting, registered, idle) == []


@pytest.mark.parametrize(
    ("scenario", "registered_ago", "active_ago", "overdue_"),
    [
        ("registered lately, never claimed a task", 60, None, False),
        ("registered long ago, never claimed a task", 3 * 3600, None, True),
        ("registered long ago, claimed a task lately", 3 * 3600, 60, False),
    ],
)
def test_inactivity_counts_from_the_last_task_else_from_registration(
    scenario, registered_ago, active_ago, overdue_
):
    worker = row(
        "w",
        state=WorkerState.RUNNING,
        created=NOW - timedelta(days=1),
        expires=NOW + timedelta(days=1),
        registered_at=NOW - timedelta(seconds=registered_ago),
        last_active=None if active_ago is None else NOW - timedelta(seconds=active_ago),
    )
    assert reasons(worker) == ([("w", QUEUE_INACTIVITY)] if overdue_ else []), scenario


def test_a_worker_of_an_unknown_pool_does_not_hide_the_rest():
    stranger = row("a-stranger", pool="nope", expires=NOW - timedelta(days=1))
    late = row("b-late", expires=NOW - timedelta(seconds=1))
    assert reasons(stranger, late) == [("b-late", REGISTRATION_TIMEOUT)]
