"""The simulated clouds' fault draws: random by default, evenly spread on demand."""

from __future__ import annotations

import pytest

from wm.sim.behaviour import Behaviour, Faults, Outcome


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
