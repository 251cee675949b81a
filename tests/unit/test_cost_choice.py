"""The cost choice multiplies each launch config's Taskcluster weight by its availability and by
(e_min / e_c)^β, e_c its expected price per useful capacity-hour; what is unknown is neutral, so
with nothing known it launches exactly as the weights do."""

from __future__ import annotations

import dataclasses

import pytest

from wm.model import Offering
from wm.provisioning.cost_choice import (
    AVAILABILITY_FLOOR,
    ConfigView,
    Evidence,
    PoolFacts,
    Scored,
    interrupted_work_s,
    score,
)
from wm.provisioning.offering_bench import Admission, BenchState

NOW = 1_800_000_000.0
OPEN = BenchState()
NOTHING_KNOWN = PoolFacts()
HOUR = 3600.0


def config(
    lc_id: str,
    *,
    weight: float = 1.0,
    zone: str | None = "us-east-1a",
    market: str = "spot",
    per_worker: int = 1,
    price: float | None = None,
    availability: float | None = None,
    prior: float | None = None,
    bench: BenchState = OPEN,
    no_offering: bool = False,
    **evidence: float,
) -> ConfigView:
    offering = None if no_offering else Offering("us-east-1", zone, "m5.large", market)
    return ConfigView(
        launch_config_id=lc_id,
        weight=weight,
        offering=offering,
        capacity_per_worker=per_worker,
        price_per_hour=price,
        availability=availability,
        preemption_prior=prior,
        evidence=Evidence(**evidence),
        bench=bench,
    )


def factors(*configs: ConfigView, pool: PoolFacts = NOTHING_KNOWN, beta: float = 3.0):
    return {s.launch_config_id: s.factor for s in score(configs, pool, NOW, beta)}


def by_id(*configs: ConfigView, pool: PoolFacts = NOTHING_KNOWN) -> dict[str, Scored]:
    return {s.launch_config_id: s for s in score(configs, pool, NOW)}


BENCHED = BenchState(failures=2, benched_until=NOW + 300)
PROBE_DUE = BenchState(failures=1, benched_until=NOW - 1)


def test_with_nothing_known_every_factor_is_one_and_the_weights_launch():
    configs = [
        config("a", weight=1.0),
        config("b", weight=3.0, per_worker=4, zone="us-east-1b"),
        config("c", weight=0.5, market="on-demand"),
        config("d", weight=2.0, no_offering=True),
    ]
    for pool in (PoolFacts(), PoolFacts(median_task_s=1800, mean_lifetime_s=4 * HOUR)):
        scored = score(configs, pool, NOW)
        assert [s.factor for s in scored] == [1.0, 1.0, 1.0, 1.0]
        assert [s.final_weight for s in scored] == [1.0, 3.0, 0.5, 2.0]
        assert all(s.admission is Admission.OPEN for s in scored)
        assert all(s.effective_price is None for s in scored)


@pytest.mark.parametrize(
    ("scenario", "configs", "expected"),
    [
        (
            "twice the price per capacity: 2^-3",
            [config("a", price=1.0), config("b", price=2.0)],
            {"a": 1.0, "b": 0.125},
        ),
        (
            "10 % dearer: about x0.75",
            [config("a", price=1.0), config("b", price=1.1)],
            {"a": 1.0, "b": pytest.approx(0.7513, abs=1e-4)},
        ),
        (
            "price is per unit of capacity",
            [config("a", price=1.0), config("b", price=2.0, per_worker=2)],
            {"a": 1.0, "b": 1.0},
        ),
        (
            "an unknown price counts at the pool's median: neutral",
            [config("a", price=1.0), config("b", price=1.0), config("c")],
            {"a": 1.0, "b": 1.0, "c": 1.0},
        ),
        (
            "the cloud's availability multiplies",
            [config("a", availability=0.5), config("b", availability=1.0)],
            {"a": 0.5, "b": 1.0},
        ),
        (
            "an unknown availability counts at the pool's median: neutral",
            [config("a", availability=0.2), config("b", availability=0.6), config("c")],
            {"a": 0.2, "b": 0.6, "c": pytest.approx(0.4)},
        ),
        (
            "a cloud's zero never quite starves a config",
            [config("a", availability=0.0)],
            {"a": AVAILABILITY_FLOOR},
        ),
        (
            "wm's own capacity refusals lower availability: (1+S)/(1+S+F)",
            [config("a", creates_ok=1.0, capacity_failures=2.0), config("b")],
            {"a": 0.5, "b": 1.0},
        ),
        (
            "half the launches never registered: twice the cost",
            [config("a", launched=4.0, registered=0.0), config("b")],
            {"a": 0.125, "b": 1.0},
        ),
        (
            "more registered than launched counts as all registered",
            [config("a", launched=2.0, registered=5.0), config("b")],
            {"a": 1.0, "b": 1.0},
        ),
        (
            "a benched offering gets nothing, and the cheapest open one sets e_min",
            [config("a", price=1.0, bench=BENCHED), config("b", price=2.0)],
            {"a": 0.0, "b": 1.0},
        ),
        (
            "a probe is scored as if open",
            [config("a", price=1.0, bench=PROBE_DUE), config("b", price=2.0)],
            {"a": 1.0, "b": 0.125},
        ),
        (
            "weight 0 does not set e_min",
            [config("a", weight=0, price=1.0), config("b", price=2.0)],
            {"a": 2.0**3, "b": 1.0},
        ),
        (
            "every config benched: nothing",
            [config("a", bench=BENCHED), config("b", bench=BENCHED)],
            {"a": 0.0, "b": 0.0},
        ),
    ],
)
def test_factor(scenario, configs, expected):
    assert factors(*configs) == expected, scenario


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("scenario", "garbage"),
    [
        ("a price of 0", {"price": 0.0}),
        ("a negative price", {"price": -1.0}),
        ("a price that is no number", {"price": NAN}),
        ("an infinite price", {"price": INF}),
        ("an availability that is no number", {"availability": NAN}),
        ("a pre-emption prior that is no number", {"prior": NAN}),
        ("a negative pre-emption prior", {"prior": -3.0}),
        ("a time to ready that is no number", {"median_ready_s": NAN}),
        ("a count that is no number", {"capacity_failures": NAN, "launched": INF}),
    ],
)
def test_garbage_is_unknown_and_unknown_is_neutral(scenario, garbage):
    pool = PoolFacts(median_task_s=600, mean_lifetime_s=HOUR)
    siblings = [config("b", price=1.0, availability=0.5, prior=0.1, median_ready_s=60.0)]
    with_garbage = by_id(config("a", **garbage), *siblings, pool=pool)
    with_nothing = by_id(config("a"), *siblings, pool=pool)
    # Unknown: a counts at its sibling's values, so it weighs as its sibling does.
    assert with_garbage["a"].factor == with_nothing["a"].factor == with_nothing["b"].factor
    assert with_garbage["b"] == with_nothing["b"], scenario


def test_pre_emptions_cost_half_a_task_and_the_boot_per_pre_emption():
    # λ0 = 0.5/h with no own hours; L = half of 2 h; R = 0 -> e = p · 1.5.
    pool = PoolFacts(median_task_s=2 * HOUR)
    got = factors(
        config("a", prior=0.5, price=1.0), config("b", market="on-demand", price=1.5), pool=pool
    )
    assert got == {"a": 1.0, "b": 1.0}


def test_a_pre_emption_loses_the_elapsed_part_of_the_task_it_interrupts():
    # Run times 1 h and 3 h: E[T²]/2E[T] = (1 + 9) / (2 · 4) = 1.25 h lost, not half the
    # median (1 h); λ0 = 0.4/h -> e = p · (1 + 0.4 · 1.25) = p · 1.5.
    lost = interrupted_work_s([HOUR, 3 * HOUR])
    assert lost == 1.25 * HOUR
    pool = PoolFacts(median_task_s=2 * HOUR, interrupted_work_s=lost)
    got = factors(
        config("a", prior=0.4, price=1.0), config("b", market="on-demand", price=1.5), pool=pool
    )
    assert got == {"a": 1.0, "b": 1.0}


@pytest.mark.parametrize(
    ("scenario", "run_times", "expected"),
    [
        ("no run time known", [], None),
        ("equal run times: half of one", [600.0, 600.0], 300.0),
        ("garbage is left out", [600.0, NAN, -5.0, INF], 300.0),
    ],
)
def test_interrupted_work(scenario, run_times, expected):
    assert interrupted_work_s(run_times) == expected, scenario


def test_own_pre_emptions_outweigh_the_prior_as_hours_grow():
    # (n + k·λ0) / (h + k) with k = 20 h: 60 pre-emptions in 100 h over a prior of 0 -> 0.5/h.
    (scored,) = score(
        [config("a", prior=0.0, preempted=60.0, running_hours=100.0)], PoolFacts(), NOW
    )
    assert scored.preemption_rate == pytest.approx(0.5)


def test_an_unknown_prior_is_the_pools_median_for_spot_and_zero_on_demand():
    got = by_id(
        config("a", prior=0.1),
        config("b", prior=0.3),
        config("c"),
        config("d", market="on-demand"),
    )
    assert got["c"].preemption_rate == pytest.approx(0.2)
    assert got["d"].preemption_rate == 0.0


def test_time_to_ready_is_paid_once_per_worker_life():
    # R = 30 min, H = 1 h: e x 1.5 against a config ready at once.
    pool = PoolFacts(mean_lifetime_s=HOUR)
    got = factors(
        config("a", price=1.0, median_ready_s=1800.0),
        config("b", price=1.5, median_ready_s=0.0),
        pool=pool,
    )
    assert got == {"a": pytest.approx(1.0), "b": pytest.approx(1.0)}


def test_an_unknown_time_to_ready_is_the_pools_median():
    got = by_id(config("a", median_ready_s=60.0), config("b", median_ready_s=180.0), config("c"))
    assert got["c"].ready_s == 120.0


def test_beta_sets_how_hard_price_pulls():
    configs = [config("a", price=1.0), config("b", price=2.0)]
    assert factors(*configs, beta=1.0) == {"a": 1.0, "b": 0.5}
    assert factors(*configs, beta=0.0) == {"a": 1.0, "b": 1.0}


def test_weight_zero_stays_zero_however_cheap():
    got = by_id(config("a", weight=0, price=0.01), config("b", price=1.0))
    assert got["a"].final_weight == 0.0
    assert "initialWeight 0: never launched" in got["a"].why
    assert got["b"].final_weight == pytest.approx(1.0)


def test_hand_weights_still_count():
    got = by_id(config("a", weight=3.0, price=1.0), config("b", weight=1.0, price=1.0))
    assert (got["a"].final_weight, got["b"].final_weight) == (3.0, 1.0)


def test_deterministic_and_independent_of_order():
    configs = [
        config("a", price=1.0, availability=0.7, prior=0.1, creates_ok=2.0, launched=3.0),
        config("b", price=1.3, zone="us-east-1b", capacity_failures=1.0, median_ready_s=90.0),
        config("c", bench=PROBE_DUE, zone="us-east-1c"),
    ]
    pool = PoolFacts(median_task_s=900, mean_lifetime_s=2 * HOUR)
    first = score(configs, pool, NOW)
    assert score(configs, pool, NOW) == first
    assert sorted(score(configs[::-1], pool, NOW), key=lambda s: s.launch_config_id) == first


def test_every_reason_is_said_in_words():
    got = by_id(
        config("cheap", price=1.0),
        config("dear", price=2.1, availability=0.8, prior=0.2, capacity_failures=1.0),
        config("benched", price=0.5, bench=BENCHED),
        config("probe", price=1.0, bench=PROBE_DUE),
        config("unknown", no_offering=True, launched=5.0, registered=3.0),
    )
    median_availability = "availability unknown: counted at the pool's median, 0.80"
    assert got["cheap"].why == (median_availability, "the cheapest")
    assert got["dear"].why == (
        "the cloud rates its availability 0.80",
        "1.0 capacity refusals to 0.0 creates lately",
        "0.200 pre-emptions per instance-hour",
        "2.10x dearer than the cheapest",
    )
    assert got["benched"].why[0] == "benched until 08:05:00 UTC after 2 capacity refusals"
    assert got["probe"].why[0] == "probe: one worker to try it again after 1 capacity refusal"
    assert got["unknown"].why == (
        median_availability,
        "price unknown: counted at the pool's median",
        "2 of 5 recent launches never registered",
        "1.29x dearer than the cheapest",  # 1 / q, q = (4 + 3) / (4 + 5),
        "wm cannot tell its offering from its launch config",
    )


def test_a_probe_out_and_unanswered_is_said_so():
    out = dataclasses.replace(PROBE_DUE, probe_sent_at=NOW - 1)
    (scored,) = score([config("a", bench=out)], PoolFacts(), NOW)
    assert scored.admission is Admission.BENCHED
    assert scored.factor == 0.0
    assert scored.why == ("benched: its probe of 07:59:59 UTC not answered yet",)
