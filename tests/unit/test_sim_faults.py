"""The simulated clouds' fault draws: random by default, evenly spread on demand; hangs and
lost answers."""

from __future__ import annotations

import threading
import time

import pytest

from wmsim.behaviour import Behaviour, Faults, Outcome


@pytest.mark.parametrize(
    ("failure_rate", "throttle_rate", "calls", "failed", "throttled"),
    [
        (0.5, 0.0, 100, 50, 0),
        (0.3, 0.0, 100, 30, 0),
        (0.0, 0.25, 40, 0, 10),
        (0.2, 0.2, 50, 10, 10),
        (0.0, 0.0, 20, 0, 0),
    ],
)
def test_even_spread_holds_the_rates_exactly(failure_rate, throttle_rate, calls, failed, throttled):
    faults = Faults(
        Behaviour(failure_rate=failure_rate, throttle_rate=throttle_rate, fault_spread="even")
    )

    outcomes = [faults.before("op") for _ in range(calls)]

    # A low-discrepancy sequence: within two calls of the exact share, for any run length.
    assert abs(outcomes.count(Outcome.FAIL) - failed) <= 2
    assert abs(outcomes.count(Outcome.THROTTLE) - throttled) <= 2


def test_even_spread_starts_with_a_fault_and_repeats_after_a_reset():
    faults = Faults(Behaviour(failure_rate=0.5, fault_spread="even"))
    first = [faults.before("op") for _ in range(6)]

    faults.reset_counts()
    again = [faults.before("op") for _ in range(6)]

    assert first[:2] == [Outcome.FAIL, Outcome.OK]
    assert first == again


def test_an_unknown_spread_is_refused():
    with pytest.raises(ValueError, match="fault_spread"):
        Behaviour().update(fault_spread="sometimes")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("asks", "waits_s", "outcomes"),
    [
        # A full bucket of 10 VMs answers creates until it is empty, then throttles.
        ([4, 4, 4], [0, 0, 0], ["ok", "ok", "throttle"]),
        # A throttled create takes nothing: a smaller one that fits still goes.
        ([8, 4, 2], [0, 0, 0], ["ok", "throttle", "ok"]),
        # The bucket refills at 2 VMs/s: 2 s later four more fit.
        ([10, 4, 4], [0, 2, 0], ["ok", "ok", "throttle"]),
        # ... but never above its burst.
        ([10, 11, 10], [0, 60, 0], ["ok", "throttle", "ok"]),
        # Calls that create nothing are never rate-limited.
        ([10, 0, 0], [0, 0, 0], ["ok", "ok", "ok"]),
    ],
)
def test_the_create_bucket_throttles_creates_beyond_its_burst_and_rate(asks, waits_s, outcomes):
    clock = FakeClock()
    faults = Faults(Behaviour(create_burst=10, create_per_s=2.0), clock=clock)

    seen = []
    for vms, wait_s in zip(asks, waits_s, strict=True):
        clock.now += wait_s
        seen.append(faults.before("RunInstances", vms=vms))

    assert seen == outcomes
    assert [e.vms for e in faults.journal()] == asks


def test_an_unlimited_cloud_never_throttles_creates():
    faults = Faults(Behaviour())

    assert {faults.before("RunInstances", vms=5000) for _ in range(3)} == {Outcome.OK}


def test_a_lost_answer_is_carried_out_and_journaled_as_lost():
    faults = Faults(Behaviour())
    faults.force("lose", operation="insert")

    fates = [faults.before("list"), faults.before("insert", key="k1"), faults.before("insert")]

    assert fates == [Outcome.OK, Outcome.LOST, Outcome.OK]
    assert [(e.operation, e.outcome, e.lost) for e in faults.journal()] == [
        ("list", "ok", False),
        ("insert", "ok", True),  # carried out: a count of what the cloud made includes it
        ("insert", "ok", False),
    ]


@pytest.mark.parametrize(
    ("lose_rate", "operations", "calls", "lost"),
    [
        (0.5, (), 40, 20),
        (0.25, ("insert",), 40, 10),
        (1.0, ("delete",), 10, 0),  # the rate applies to the fault operations only
        (0.0, (), 20, 0),
    ],
)
def test_the_lose_rate_loses_that_share_of_answers(lose_rate, operations, calls, lost):
    faults = Faults(
        Behaviour(lose_rate=lose_rate, fault_operations=operations, fault_spread="even")
    )

    fates = [faults.before("insert") for _ in range(calls)]

    assert abs(fates.count(Outcome.LOST) - lost) <= 2
    assert sum(e.lost for e in faults.journal()) == fates.count(Outcome.LOST)


def test_a_refused_request_has_no_answer_to_lose():
    clock = FakeClock()
    faults = Faults(Behaviour(lose_rate=1.0, create_burst=1), clock=clock)

    fates = [faults.before("RunInstances", vms=1), faults.before("RunInstances", vms=1)]

    assert fates == [Outcome.LOST, Outcome.THROTTLE]  # the bucket is empty: nothing made
    assert [e.lost for e in faults.journal()] == [True, False]


def test_a_held_lost_answer_lasts_hang_s_unless_cut_short():
    faults = Faults(Behaviour(hang_s=0.2))
    started = time.monotonic()
    faults.hold_lost_answer()
    assert time.monotonic() - started >= 0.2

    faults.behaviour.update(hang_s=30.0)
    holder = threading.Thread(target=faults.hold_lost_answer)
    holder.start()
    wait_until(lambda: faults.hanging == 1)
    started = time.monotonic()
    faults.cut_hangs()

    holder.join(timeout=5)
    assert not holder.is_alive() and faults.hanging == 0
    assert time.monotonic() - started < 15  # far below the 30 s hang, on a busy machine too


def test_lost_is_what_before_returns_not_a_fate_to_force():
    with pytest.raises(ValueError, match="lose"):
        Faults().force("lost")


def wait_until(predicate, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)
