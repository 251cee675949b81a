"""The launch choice's signals, read with the real SDKs (boto3, google-cloud-billing and
-compute, azure-mgmt-resourcegraph and Azure's HTTP session) from the simulated clouds, which
serve them in each cloud's own API shapes: what the collectors read is what the cloud says,
and a source that is down, refuses (403), answers garbage or is too slow fails the read
with its reason, never anything else. Only endpoints differ from production."""

from __future__ import annotations

import math
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fixtures.sim_arm import azure_config
from tests.fixtures.sim_ec2 import EC2_FAST_GATE, aws_config
from tests.fixtures.sim_gce import FAST_GATE, gcp_config
from wm.config.base import SignalsConfig
from wm.errors import ON_DEMAND, SPOT
from wm.model import Offering, SignalKind
from wm.providers import build_provider, build_signals
from wm.providers.signal_sources import SignalCollector, failure_reason
from wmsim import signals as sim_signals

SLOW_TIMEOUT_S = 0.5  # the gate's timeout in the slow-source tests
HANG_S = 5.0  # well beyond it; cut short when the sim is reset or stopped


@dataclass
class Cloud:
    """One simulated cloud with a provider of it, and what the tests ask of it."""

    kind: str
    sim: Any
    build: Callable[..., Any]  # config changes -> provider config
    offerings: tuple[Offering, ...]
    sources: dict[str, str]  # SignalKind-ish role -> source name ("price", "second")


def _closed_port_url(scheme: str) -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"{scheme}://127.0.0.1:{port}"


@pytest.fixture(params=["aws", "gcp", "azure"])
def cloud(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("NO_GCE_CHECK", "true")
    kind = request.param
    if kind == "aws":
        sim = request.getfixturevalue("sim_ec2")
        yield Cloud(
            kind,
            sim,
            lambda **changes: aws_config(sim.endpoint).model_copy(update=changes),
            tuple(
                Offering("us-east-1", zone, t, SPOT)
                for zone in ("us-east-1a", "us-east-1b")
                for t in ("m5.large", "c5.large", "t3.small")
            ),
            {"price": "DescribeSpotPriceHistory", "second": "GetSpotPlacementScores"},
        )
    elif kind == "gcp":
        sim = request.getfixturevalue("sim_gce")
        yield Cloud(
            kind,
            sim,
            lambda **changes: gcp_config(sim.endpoint).model_copy(update=changes),
            (
                Offering("us-central1", "us-central1-a", "n2-standard-8", SPOT),
                Offering("us-central1", "us-central1-b", "n2-standard-8", SPOT),
                Offering("us-central1", "us-central1-a", "n2-standard-8", ON_DEMAND),
            ),
            {"price": "skus.list", "second": "advice.capacity"},
        )
    else:
        sim = request.getfixturevalue("sim_arm")
        yield Cloud(
            kind,
            sim,
            lambda **changes: azure_config(sim, **changes),
            (
                Offering("eastus", None, "Standard_D2s_v3", SPOT),
                Offering("eastus", "2", "Standard_F8s_v2", SPOT),
                Offering("westeurope", None, "Standard_D2s_v3", ON_DEMAND),
            ),
            {"price": "RetailPrices_List", "second": "Resources_Query"},
        )


@pytest.fixture
def collector_for(cloud: Cloud) -> Iterator[Callable[..., SignalCollector]]:
    built: list[Any] = []

    def make(**changes: Any) -> SignalCollector:
        config = cloud.build(**changes)
        provider = build_provider(config, "test-deploy")
        built.append(provider)
        collector = build_signals(config, provider)
        assert collector is not None
        return collector

    yield make
    for provider in built:
        provider.close()


def _sim_offering(kind: str, o: Offering) -> sim_signals.Offering:
    return sim_signals.Offering(kind, o.region, o.zone, o.instance_type, o.market)


def test_each_cloud_prices_its_offerings_as_its_price_api_says(cloud, collector_for):
    collector = collector_for()

    signals = collector.collect(cloud.sources["price"], cloud.offerings)

    got = {s.offering: s.value for s in signals}
    assert {s.kind for s in signals} == {SignalKind.PRICE}
    assert {s.source for s in signals} == {cloud.sources["price"]}
    for offering in cloud.offerings:
        if cloud.kind == "aws" and offering.market != SPOT:
            continue  # EC2's price history is spot's only
        expected = cloud.sim.signals.price(_sim_offering(cloud.kind, offering))
        assert got[offering] == pytest.approx(expected, rel=1e-6), offering


def test_windows_pools_are_priced_by_windows_meters_where_the_cloud_has_them(cloud, collector_for):
    collector = collector_for(signals=SignalsConfig(os="windows"))
    spot = [o for o in cloud.offerings if o.market == SPOT]

    signals = collector.collect(cloud.sources["price"], spot)

    got = {s.offering: s.value for s in signals}
    # GCE bills a Windows licence apart from the machine, the same for every zone: the
    # machine's price is what tells its offerings apart.
    share = 1.0 if cloud.kind == "gcp" else sim_signals.WINDOWS_SHARE
    for offering in spot:
        linux = cloud.sim.signals.price(_sim_offering(cloud.kind, offering))
        # Prices come to the millionth of a dollar, as the clouds publish them.
        assert got[offering] == pytest.approx(linux * share, abs=1e-6)


def test_each_cloud_reads_capacity_or_preemption_as_its_api_says(cloud, collector_for):
    collector = collector_for()
    spot = [o for o in cloud.offerings if o.market == SPOT]

    signals = collector.collect(cloud.sources["second"], spot)

    by_kind = {(s.offering, s.kind): s.value for s in signals}
    for offering in spot:
        o = _sim_offering(cloud.kind, offering)
        if cloud.kind == "aws":
            assert (
                by_kind[(offering, SignalKind.AVAILABILITY)]
                == cloud.sim.signals.placement_score(o) / 10
            )
        elif cloud.kind == "gcp":
            assert by_kind[(offering, SignalKind.AVAILABILITY)] == pytest.approx(
                cloud.sim.signals.obtainability(o)
            )
            uptime_s = cloud.sim.signals.estimated_uptime_s(o)
            assert by_kind[(offering, SignalKind.PREEMPTION)] == pytest.approx(3600 / uptime_s)
        else:
            bucket = cloud.sim.signals.eviction_bucket(o)
            share = {"0-5": 0.025, "5-10": 0.075}[bucket]
            assert by_kind[(offering, SignalKind.PREEMPTION)] == pytest.approx(
                -math.log(1 - share) / 24
            )


def test_ec2_scores_no_region_of_fewer_than_three_types(sim_ec2, monkeypatch):
    # EC2 scores such a set low by design: no score is neutral, a low one would mislead.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    config = aws_config(sim_ec2.endpoint)
    provider = build_provider(config, "test-deploy")
    try:
        collector = build_signals(config, provider)
        offerings = [Offering("us-east-1", "us-east-1a", t, SPOT) for t in ("m5.large", "c5.large")]
        assert collector.collect("GetSpotPlacementScores", offerings) == []
        assert sim_ec2.faults.counts().get("GetSpotPlacementScores", 0) == 0
    finally:
        provider.close()


def test_a_market_attached_to_the_sim_is_what_the_price_api_serves(sim_gce, monkeypatch):
    from wmsim.market import Market

    monkeypatch.setenv("NO_GCE_CHECK", "true")
    sim_gce.signals.use_market(Market.from_scenario("S1", seed=3), clock=lambda: 0.0)
    config = gcp_config(sim_gce.endpoint)
    provider = build_provider(config, "test-deploy")
    try:
        offering = Offering("us-central1", "us-central1-a", "n2-standard-4", SPOT)
        (signal,) = build_signals(config, provider).collect("skus.list", [offering])
        expected = sim_gce.signals.market.price(_market_offering("gcp", offering), 0.0)
        assert signal.value == pytest.approx(expected, rel=1e-6)
        assert expected != pytest.approx(
            sim_signals.on_demand_price("n2-standard-4") * 0.3, rel=1e-3
        )
    finally:
        provider.close()


def _market_offering(kind: str, o: Offering) -> Any:
    from wmsim.market import SimOffering

    return SimOffering(kind, o.region, o.zone, o.instance_type, o.market)


# -- faults: each source down, refused, garbage, slow -> a failure with its reason --------------


@pytest.mark.parametrize("role", ["price", "second"])
@pytest.mark.parametrize(
    ("fate", "reason"), [(sim_signals.FORBIDDEN, "forbidden"), (sim_signals.GARBAGE, "garbage")]
)
def test_a_source_that_refuses_or_answers_garbage_fails_with_that_reason(
    cloud, collector_for, role, fate, reason
):
    collector = collector_for()
    source = cloud.sources[role]
    cloud.sim.signal_fates.force(source, fate)

    with pytest.raises(Exception) as failure:
        collector.collect(source, cloud.offerings)

    assert failure_reason(failure.value) == reason
    # The gate's own health is untouched: the provider's launch calls are not paused.
    assert not collector.gate.paused


@pytest.mark.parametrize("role", ["price", "second"])
def test_a_source_that_is_down_fails_as_down_at_once(cloud, collector_for, role):
    scheme = "https" if cloud.kind == "azure" else "http"
    collector = collector_for(endpoint=_closed_port_url(scheme))

    with pytest.raises(Exception) as failure:
        collector.collect(cloud.sources[role], cloud.offerings)

    assert failure_reason(failure.value) == "down"
    assert not collector.gate.paused


@pytest.mark.parametrize("role", ["price", "second"])
def test_a_source_slower_than_the_gate_timeout_fails_as_timeout_after_one_attempt(
    cloud, collector_for, role
):
    gate = (EC2_FAST_GATE if cloud.kind == "aws" else FAST_GATE).model_copy(
        update={"timeout_s": SLOW_TIMEOUT_S, "pause_after_failures": 1}
    )
    collector = collector_for(gate=gate)
    source = cloud.sources[role]
    cloud.sim.faults.behaviour.update(hang_s=HANG_S)
    cloud.sim.faults.force("hang", operation=source)

    with pytest.raises(Exception) as failure:
        collector.collect(source, cloud.offerings)

    assert failure_reason(failure.value) == "timeout"
    assert cloud.sim.faults.counts()[source] == 1  # a background call is tried once
    assert not collector.gate.paused  # even a gate that pauses after one failure


# -- Azure's Spot Placement Score (Compute Recommender, a preview API) --------------------------


@pytest.fixture
def azure_collector(sim_arm, make_azure_provider) -> SignalCollector:
    config = azure_config(sim_arm)
    collector = build_signals(config, make_azure_provider(sim_arm))
    assert collector is not None
    return collector


def test_azure_placement_scores_are_read_per_location_size_and_zone(sim_arm, azure_collector):
    offerings = [
        Offering("eastus", "2", "Standard_D2s_v3", SPOT),
        Offering("westeurope", None, "Standard_F8s_v2", SPOT),
    ]

    signals = azure_collector.collect("SpotPlacementScores_Post", offerings)

    assert {(s.offering, s.kind, s.value) for s in signals} == {
        (o, SignalKind.AVAILABILITY, 0.9)
        for o in offerings  # the static table: ample, "High"
    }


@pytest.mark.parametrize(
    ("fate", "reason"), [(sim_signals.FORBIDDEN, "forbidden"), (sim_signals.GARBAGE, "garbage")]
)
def test_azure_placement_scores_refused_or_garbled_fail_with_that_reason(
    sim_arm, azure_collector, fate, reason
):
    sim_arm.signal_fates.force("SpotPlacementScores_Post", fate)

    with pytest.raises(Exception) as failure:
        azure_collector.collect(
            "SpotPlacementScores_Post", [Offering("eastus", None, "Standard_D2s_v3", SPOT)]
        )

    assert failure_reason(failure.value) == reason
