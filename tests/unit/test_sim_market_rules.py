"""The market as a simulated cloud obeys it (wmsim/market_sim.py), on a clock the test moves:
what it grants, whom it reclaims and when, what it bills."""

from __future__ import annotations

from pathlib import Path

import pytest

from wmsim.market import SimOffering
from wmsim.market_sim import CAPACITY, MarketSettings, SimMarket, vcpus

SCENARIO = """
name = "rules"
hours = 2
drift = 0.0  # prices hold still: the bill is exact
[regimes]
enabled = false
[[offerings]]
key = "aws/us-east-1/us-east-1a/m5.large/spot"
capacity = 20
[[offerings]]
key = "aws/us-east-1/us-east-1b/m5.large/spot"
capacity = 20
[[events]]
place = "aws/us-east-1/us-east-1a"
regime = "dry"
at_min = 10
for_min = 40
reclaim = 0.999
"""
ZONE_A = SimOffering("aws", "us-east-1", "us-east-1a", "m5.large", "spot")
ZONE_B = SimOffering("aws", "us-east-1", "us-east-1b", "m5.large", "spot")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def market(tmp_path: Path) -> tuple[SimMarket, Clock]:
    path = tmp_path / "rules.toml"
    path.write_text(SCENARIO)
    clock = Clock()
    return SimMarket(MarketSettings(str(path), seed=3), clock), clock


def test_a_create_is_all_or_nothing_when_min_is_max_and_partial_otherwise(market):
    sim, _ = market
    spare = sim.market.spare(ZONE_A, sim.now())

    refused = sim.grant(ZONE_A, spare + 1, spare + 1)
    partial = sim.grant(ZONE_A, 1, spare + 5)

    assert refused.count == 0 and refused.refusal is not None
    assert refused.refusal.reason == CAPACITY
    assert refused.refusal.zones_with_capacity == ()  # zone b has fewer than spare + 1 too
    assert (partial.count, partial.refusal) == (spare, None)


def test_an_offering_the_scenario_does_not_list_is_not_governed(market):
    sim, _ = market
    assert sim.offering("aws", "us-east-1", "us-east-1a", "c5.large", True) is None
    assert sim.grant(None, 3, 3).count == 3


def test_a_zoneless_create_goes_where_there_is_most_to_spare(market):
    sim, clock = market
    clock.now += 11 * 60  # zone a is dry
    assert sim.offering("aws", "us-east-1", None, "m5.large", True) == ZONE_B


def test_a_dry_spell_reclaims_the_dry_zones_spot_within_minutes_and_no_other(market):
    sim, clock = market
    for i in range(5):
        grant = sim.grant(ZONE_A, 1, 1)
        sim.started("aws", f"a-{i}", grant.offering, {})
        grant = sim.grant(ZONE_B, 1, 1)
        sim.started("aws", f"b-{i}", grant.offering, {})
    clock.now += 9 * 60
    before = sim.reclaims("aws")

    clock.now += 4 * 60  # the spell started at minute 10
    during = sim.reclaims("aws")

    assert before == []
    assert sorted(during) == [f"a-{i}" for i in range(5)]
    assert sim.reclaims("aws") == []  # each once


def test_the_ledger_bills_per_second_with_a_minute_minimum_by_pool_and_launch_config(market):
    sim, clock = market
    tags = {"wm-pool": "p/one", "wm-launch-config": "lc-a"}
    for key in ("short", "long"):
        sim.started("aws", key, sim.grant(ZONE_B, 1, 1).offering, tags)
    clock.now += 10
    sim.stopped("short")
    clock.now += 590

    bill = sim.ledger("aws")

    price = sim.market.price(ZONE_B, sim.now())
    assert {row["id"]: row["billed_s"] for row in bill["instances"]} == {
        "short": 60.0,
        "long": pytest.approx(600.0),
    }
    assert bill["total"] == pytest.approx(660 * price / 3600)
    assert bill["by_pool"] == {"p/one": pytest.approx(bill["total"])}
    assert bill["by_launch_config"] == {"p/one/lc-a": pytest.approx(bill["total"])}


@pytest.mark.parametrize(
    ("instance_type", "cores"),
    [
        ("m5.large", 2),
        ("m5.2xlarge", 8),
        ("n2-standard-4", 4),
        ("n1-custom-40-262144", 40),
        ("Standard_D8ads_v5", 8),
        ("g1-small", 1),
    ],
)
def test_quota_messages_count_the_cores_a_type_name_says(instance_type, cores):
    assert vcpus(instance_type) == cores
