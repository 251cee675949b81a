"""An offering refused for want of capacity is benched for a TTL doubling from 3 minutes to 30
with each refusal in a row, then gets one probe worker per window; success reopens it; zones a
refusal names as having capacity reopen at once."""

from __future__ import annotations

import pytest

from wm.errors import ErrorCategory, ErrorScope
from wm.model import Offering
from wm.provisioning.offering_bench import (
    PROBE_ANSWER_WAIT_S,
    Admission,
    BenchState,
    admission,
    after_probe,
    after_refusal,
    after_success,
    first_ttl_s,
    refused_offering,
    ttl_s,
    unbenched_by_hint,
)

T0 = 1_800_000_000.0  # any epoch second


@pytest.mark.parametrize(
    ("failures", "first", "expected"),
    [
        (0, 180.0, 0.0),
        (1, 180.0, 180.0),
        (2, 180.0, 360.0),
        (3, 180.0, 720.0),
        (4, 180.0, 1440.0),
        (5, 180.0, 1800.0),  # 2880 capped at 30 min
        (50, 180.0, 1800.0),
        (5000, 180.0, 1800.0),  # no float overflow
        (1, 600.0, 600.0),
        (2, 600.0, 1200.0),
        (3, 600.0, 1800.0),
    ],
)
def test_ttl_doubles_to_thirty_minutes(failures, first, expected):
    assert ttl_s(failures, first) == expected


@pytest.mark.parametrize(
    ("failures", "first", "speed", "expected"),
    [
        (1, 180.0, 1.0, 180.0),
        (1, 180.0, 60.0, 3.0),  # a market 60 times faster: 3 of its minutes in 3 real seconds
        (5, 180.0, 60.0, 30.0),  # the cap too
        (2, 600.0, 2.0, 600.0),
    ],
)
def test_a_faster_clock_shortens_the_bench_in_real_time(failures, first, speed, expected):
    assert ttl_s(failures, first, speed) == pytest.approx(expected)


def test_on_a_faster_clock_the_probe_and_its_wait_come_sooner():
    state = after_refusal(BenchState(), T0, speed=60.0)
    assert state.benched_until == pytest.approx(T0 + 3)
    assert admission(state, T0 + 3, speed=60.0) is Admission.PROBE
    probed = after_probe(state, T0 + 3)
    assert admission(probed, T0 + 3 + PROBE_ANSWER_WAIT_S / 60 - 0.1, speed=60.0) is (
        Admission.BENCHED
    )
    assert admission(probed, T0 + 3 + PROBE_ANSWER_WAIT_S / 60, speed=60.0) is Admission.PROBE


def test_a_refusal_benches_the_offering_for_the_first_ttl():
    state = after_refusal(BenchState(), T0)
    assert state == BenchState(failures=1, benched_until=T0 + 180, probe_sent_at=None)
    assert admission(state, T0) is Admission.BENCHED
    assert admission(state, T0 + 179.9) is Admission.BENCHED


def test_when_the_ttl_runs_out_one_probe_is_due_and_then_its_answer_awaited():
    state = after_refusal(BenchState(), T0)
    assert admission(state, T0 + 180) is Admission.PROBE
    probed = after_probe(state, T0 + 200)
    assert admission(probed, T0 + 200) is Admission.BENCHED
    assert admission(probed, T0 + 200 + PROBE_ANSWER_WAIT_S - 1) is Admission.BENCHED


def test_a_probe_whose_answer_never_comes_is_sent_again():
    probed = after_probe(after_refusal(BenchState(), T0), T0 + 200)
    assert admission(probed, T0 + 200 + PROBE_ANSWER_WAIT_S) is Admission.PROBE


def test_a_refused_probe_benches_for_twice_as_long():
    state = after_probe(after_refusal(BenchState(), T0), T0 + 180)
    state = after_refusal(state, T0 + 190)
    assert state == BenchState(failures=2, benched_until=T0 + 190 + 360, probe_sent_at=None)
    assert admission(state, T0 + 549) is Admission.BENCHED
    assert admission(state, T0 + 550) is Admission.PROBE


def test_a_successful_probe_reopens_the_offering():
    state = after_probe(after_refusal(BenchState(), T0), T0 + 180)
    assert after_success(state) == BenchState()
    assert admission(after_success(state), T0 + 181) is Admission.OPEN


def test_refusals_of_launches_already_in_flight_are_the_same_dry_spell():
    state = after_refusal(BenchState(), T0)
    again = after_refusal(state, T0 + 5)  # another config in the offering, same pass
    assert again.failures == 1
    assert again.benched_until == T0 + 5 + 180


def test_repeated_refusals_never_bench_longer_than_thirty_minutes():
    state = BenchState()
    now = T0
    for _ in range(10):
        state = after_refusal(state, now)
        now = state.benched_until
        assert admission(state, now) is Admission.PROBE
        state = after_probe(state, now)
    assert state.failures == 10
    assert state.benched_until == state.probe_sent_at  # each probe at its window's end
    assert ttl_s(state.failures) == 1800


def test_an_offering_never_refused_is_open():
    assert admission(BenchState(), T0) is Admission.OPEN


def scope(category=ErrorCategory.CAPACITY, **kw):
    fields = {
        "region": "us-east-1",
        "zone": "us-east-1a",
        "instance_type": "m5.large",
        "market": "spot",
        **kw,
    }
    return ErrorScope(category, **fields)


@pytest.mark.parametrize(
    ("scenario", "error_scope", "code", "expected"),
    [
        ("EC2 capacity", scope(), "InsufficientInstanceCapacity", 180.0),
        ("GCE capacity", scope(), "ZONE_RESOURCE_POOL_EXHAUSTED", 180.0),
        ("Azure spot AllocationFailed", scope(), "AllocationFailed", 600.0),
        ("Azure spot SkuNotAvailable", scope(), "SkuNotAvailable", 600.0),
        ("Azure's codes in any case", scope(), "skunotavailable", 600.0),
        ("Azure zonal allocation", scope(), "ZonalAllocationFailed", 180.0),
        ("Azure on demand AllocationFailed", scope(market="on-demand"), "AllocationFailed", 180.0),
        ("a quota", scope(ErrorCategory.QUOTA, zone=None), "InstanceLimitExceeded", 600.0),
    ],
)
def test_first_ttl_by_class(scenario, error_scope, code, expected):
    assert first_ttl_s(error_scope, code) == expected, scenario


def test_a_capacity_refusal_names_its_offering():
    assert refused_offering(scope()) == Offering("us-east-1", "us-east-1a", "m5.large", "spot")
    assert refused_offering(scope(zone=None)) == Offering("us-east-1", None, "m5.large", "spot")


@pytest.mark.parametrize(
    "wide",
    [
        scope(ErrorCategory.QUOTA),
        scope(instance_type=None),
        scope(market=None),
        scope(region=None),
    ],
)
def test_a_quota_or_a_scope_wider_than_one_offering_names_none(wide):
    assert refused_offering(wide) is None


def test_zones_the_refusal_names_as_having_capacity_are_unbenched_for_that_type():
    hint = scope(zones_with_capacity=("us-east-1c", "us-east-1b", "us-east-1a", "us-east-1b"))
    assert unbenched_by_hint(hint) == [
        Offering("us-east-1", "us-east-1b", "m5.large", "spot"),
        Offering("us-east-1", "us-east-1c", "m5.large", "spot"),
    ]


def test_no_hint_unbenches_nothing():
    assert unbenched_by_hint(scope()) == []
    assert unbenched_by_hint(scope(ErrorCategory.QUOTA, zones_with_capacity=("a",))) == []
