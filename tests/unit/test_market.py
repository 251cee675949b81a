"""The simulated market (wmsim.market): seeded, its regimes and events, its hazard, its
refusals, its signals and its ledger."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from wmsim.market import Market, ScenarioError, SimOffering
from wmsim.market.ledger import MINIMUM_S
from wmsim.market.model import RECLAIM_WINDOW_S

DAY = 86400.0
AWS_A = SimOffering.parse("aws/us-east-1/us-east-1a/m5.2xlarge/spot")
AWS_B = SimOffering.parse("aws/us-east-1/us-east-1b/m5.2xlarge/spot")


def trajectory(market: Market) -> list[tuple]:
    out = []
    for t in range(0, int(DAY), 1800):
        out += [(market.price(o, t), market.spare(o, t)) for o in market.offerings]
    return out


def test_the_same_seed_gives_the_same_market_and_another_seed_another():
    first, again = Market.from_scenario("S5", 3), Market.from_scenario("S5", 3)
    other = Market.from_scenario("S5", 4)

    assert trajectory(first) == trajectory(again)
    assert first.dry_starts == again.dry_starts
    assert trajectory(first) != trajectory(other)


def test_time_moves_in_ticks_whatever_times_the_caller_asks_at():
    stepwise, at_once = Market.from_scenario("S2", 1), Market.from_scenario("S2", 1)
    for t in range(0, 36000, 7):
        stepwise.advance(t)
    at_once.advance(36000)

    assert [stepwise.price(o, 36000) for o in stepwise.offerings] == [
        at_once.price(o, 36000) for o in at_once.offerings
    ]


def test_a_scripted_dry_spell_leaves_no_spare_capacity_then_gives_it_back():
    market = Market.from_scenario("S1", 1)  # us-east-1a dry from minute 120 for 40

    assert market.regime(AWS_A.place, 119 * 60) == "ample"
    assert market.regime(AWS_A.place, 121 * 60) == "dry"
    assert market.spare(AWS_A, 130 * 60) == 0
    assert market.spare(AWS_B, 130 * 60) > 0  # another zone is not touched
    assert market.regime(AWS_A.place, 161 * 60) == "ample"
    assert market.spare(AWS_A, 161 * 60) > 0
    assert (7200.0, AWS_A.place) in market.dry_starts


def test_creates_beyond_spare_capacity_are_refused_all_or_nothing_or_in_part():
    market = Market.from_scenario("S1", 1)
    spare = market.spare(AWS_A, 0)

    assert market.refusal(AWS_A, spare + 5, 0) == "InsufficientInstanceCapacity"
    assert market.try_launch(AWS_A, spare + 5, 0, all_or_nothing=True) == 0
    assert market.try_launch(AWS_A, spare + 5, 0, all_or_nothing=False) == spare
    assert market.spare(AWS_A, 0) == 0
    market.release(AWS_A, 3)
    assert market.spare(AWS_A, 0) == 3


def test_a_location_out_of_spot_quota_refuses_with_the_quota_code():
    market = Market.from_scenario("S4", 1)
    east = SimOffering.parse("azure/eastus/*/Standard_D8ads_v5/spot")
    west = SimOffering.parse("azure/westus2/*/Standard_D8ads_v5/spot")

    assert market.spare(east, 0) > 0  # capacity is there; the quota is not
    assert market.refusal(east, 1, 0) == "OperationNotAllowed"
    assert market.try_launch(east, 1, 0, all_or_nothing=False) == 0
    assert market.try_launch(west, 1, 0, all_or_nothing=False) == 1


def test_hazard_rises_as_spare_capacity_falls():
    market = Market.from_scenario("S1", 1)
    rates = []
    for _ in range(4):
        rates.append(market.hazard(AWS_B, 0))
        market.try_launch(AWS_B, market.spare(AWS_B, 0) // 2 or 1, 0, all_or_nothing=False)
    rates.append(market.hazard(AWS_B, 0))

    assert rates == sorted(rates)
    assert rates[-1] > 5 * rates[0]


def test_an_unused_offering_in_an_ample_place_runs_at_its_cloud_and_scenario_hazard():
    # Offerings differ a little in depth (seeded); the control's equal hazards must not.
    market = Market.from_scenario("S0", 2)

    for o in market.offerings:
        expected = market.cloud(o).hazard_per_h * market.spec(o).hazard
        assert market.hazard(o, 0) == pytest.approx(expected), o.key


def test_s3s_cheap_zone_keeps_5x_the_hazard_with_a_whole_pool_in_it():
    # "a zone 15 % cheaper with 5x the pre-emption hazard": the arm's own use must not move it
    market = Market.from_scenario("S3", 1)
    cheap = SimOffering.parse("aws/us-east-1/us-east-1a/m5.2xlarge/spot")
    other = SimOffering.parse("aws/us-east-1/us-east-1b/m5.2xlarge/spot")
    market.try_launch(cheap, 80, 0, all_or_nothing=True)

    assert market.hazard(cheap, 0) / market.hazard(other, 0) == pytest.approx(5, rel=0.05)
    assert market.price(cheap, 0) / market.price(other, 0) == pytest.approx(0.85)


def test_on_demand_is_never_reclaimed():
    market = Market.from_scenario("S1", 1)
    on_demand = SimOffering("aws", "us-east-1", "us-east-1a", "m5.2xlarge", "on-demand")

    assert market.hazard(on_demand, 7300) == 0.0  # not even in a dry spell's first minutes
    assert market.reclaims(on_demand, 100, 7300, 60, random.Random(0)) == 0
    assert market.price(on_demand, 0) == pytest.approx(0.384)  # the published on-demand price


def test_a_dry_spell_reclaims_its_share_of_running_spot_within_minutes():
    market = Market.from_scenario("S1", 1)  # reclaim = 0.3 at minute 120
    rng = random.Random(0)
    running, start, dt = 2000, 7200.0, 20.0
    lost = 0
    t = start
    while t < start + RECLAIM_WINDOW_S:
        lost += market.reclaims(AWS_A, running - lost, t, dt, rng)
        t += dt
    before = sum(market.reclaims(AWS_A, running, 3600 + i * dt, dt, rng) for i in range(9))

    assert 0.25 * running < lost < 0.35 * running
    assert before < 0.01 * running


def test_prices_stay_in_their_clouds_bands_and_ec2_prices_each_zone():
    market = Market.from_scenario("S2", 1)
    for t in range(0, int(DAY), 3600):
        for o in market.offerings:
            cloud = market.cloud(o)
            low, high = cloud.spot_band
            share = market.price(o, t) / cloud.on_demand[o.instance_type]
            assert low - 1e-9 <= share <= high + 1e-9
    prices = {o.zone: market.price(o, 0) for o in market.offerings if o.cloud == AWS_A.cloud}
    assert len(set(prices.values())) > 1


def test_signals_follow_the_state_with_noise():
    market = Market.from_scenario("S1", 1)
    ample = [market.placement_score(AWS_A, t) for t in range(0, 7200, 300)]
    dry = [market.placement_score(AWS_A, t) for t in range(7500, 9600, 300)]

    assert all(1 <= s <= 10 for s in ample + dry)
    assert min(ample) > max(dry)
    assert len(set(ample)) > 1  # noisy, not a copy of the state
    assert market.eviction_bucket(AWS_A, 0) in {"0-5", "5-10", "10-15", "15-20", "20+"}
    assert 0.0 <= market.obtainability(AWS_A, 0) <= 1.0
    assert market.estimated_uptime_s(AWS_A, 0) > 3600


@pytest.mark.parametrize(
    ("ran_s", "billed_s"), [(0.0, MINIMUM_S), (10.0, MINIMUM_S), (61.5, 61.5), (3600.0, 3600.0)]
)
def test_the_ledger_bills_by_the_second_with_a_minute_minimum(ran_s: float, billed_s: float):
    market = Market.from_scenario("S0", 1)  # prices hold still
    o = market.offerings[0]
    market.try_launch(o, 1, 100.0, all_or_nothing=True)
    market.start("i-1", o, 100.0)
    market.stop("i-1", 100.0 + ran_s)

    assert market.ledger.billed_s("i-1", 10_000.0) == billed_s
    assert market.cost(10_000.0) == pytest.approx(billed_s * market.price(o, 100.0) / 3600)
    assert market.spare(o, 200.0) == market.capacity(o, 200.0)  # its capacity given back


def test_a_moving_price_is_billed_piecewise():
    market = Market.from_scenario("S2", 1)
    o = AWS_A
    market.try_launch(o, 1, 0.0, all_or_nothing=True)
    market.start("i-1", o, 0.0)
    market.stop("i-1", 7200.0)
    expected = sum(market.price(o, t) * 60 / 3600 for t in range(0, 7200, 60))

    assert market.cost(7200.0) == pytest.approx(expected, rel=1e-9)


def test_firefox_cis_real_offerings_make_scenario_s5():
    market = Market.from_scenario("S5", 1)
    by_cloud: dict[str, int] = {}
    for o in market.offerings:
        by_cloud[o.cloud] = by_cloud.get(o.cloud, 0) + 1

    assert sorted(by_cloud.values()) == [61, 157]
    assert all(o.market == "spot" for o in market.offerings)
    assert market.scenario.pools


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("colour = 1\noffering = []", "unknown key(s): colour"),
        ('[[offerings]]\nkey = "aws/us-east-1"', "not an offering"),
        ('[[offerings]]\nkey = "mars/r/z/t/spot"', "unknown cloud 'mars'"),
        ('[[offerings]]\nkey = "aws/r/z/no-such-type/spot"', "no on-demand price"),
        (
            '[[offerings]]\nkey = "aws/r/z/m5.large/spot"\n'
            '[[events]]\nplace = "aws/r/z"\nregime = "soggy"\nat_min = 1\nfor_min = 1',
            "events[0].regime: 'soggy'",
        ),
    ],
)
def test_a_bad_scenario_is_refused_naming_what_is_wrong(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)

    with pytest.raises(ScenarioError, match=re.escape(message)):
        Market.from_scenario(str(path), 1)


def test_an_unknown_scenario_name_lists_the_known_ones():
    with pytest.raises(ScenarioError, match="known: S0, S1, S2, S3, S4, S5"):
        Market.from_scenario("S9", 1)


def test_a_refusal_names_the_zones_that_have_the_type():
    market = Market.from_scenario("S1", 1)  # us-east-1a dry from minute 120

    assert market.zones_with_capacity(AWS_A, 130 * 60) == [
        "us-east-1b",
        "us-east-1c",
        "us-east-1d",
    ]
    market.try_launch(AWS_B, market.spare(AWS_B, 130 * 60), 130 * 60, all_or_nothing=True)
    assert "us-east-1b" not in market.zones_with_capacity(AWS_A, 130 * 60)
    assert "us-east-1a" not in market.zones_with_capacity(AWS_B, 130 * 60)  # it is dry


def test_a_market_with_an_origin_reads_epoch_seconds_and_refuses_them_without_one():
    relative = Market.from_scenario("S1", 1)
    epoch = 1_800_000_000.0
    absolute = Market.from_scenario("S1", 1, origin=epoch)

    assert absolute.regime(AWS_A.place, epoch + 130 * 60) == "dry"
    assert absolute.spare(AWS_A, epoch + 130 * 60) == relative.spare(AWS_A, 130 * 60) == 0
    assert absolute.price(AWS_B, epoch + 3600) == relative.price(AWS_B, 3600)
    absolute.try_launch(AWS_B, 1, epoch, all_or_nothing=True)
    absolute.start("i-1", AWS_B, epoch)
    absolute.stop("i-1", epoch + 3600)
    assert absolute.cost(epoch + 7200) == pytest.approx(relative.price(AWS_B, 0))
    with pytest.raises(ValueError, match="origin"):
        relative.price(AWS_B, epoch)
