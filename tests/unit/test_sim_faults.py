"""The simulated clouds' fault draws: random by default, evenly spread on demand."""

from __future__ import annotations

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
