"""The scanner's signal job against the simulated EC2 (real boto3) and real Postgres: it reads
each source on its cadence, keeps the values in Postgres for every process, and takes a source
that fails as neutral: a log line and a count naming provider, source and reason, the last good
values kept, nothing raised, and no scan held up."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from tests.fixtures.sim_ec2 import EC2_FAST_GATE, aws_config
from wm.db import offering_state
from wm.errors import SPOT
from wm.model import Offering, SignalKind
from wm.providers import build_provider, build_signals
from wm.providers.signal_sources import Cadence
from wm.scanning.signals_job import SignalsJob, Wanted
from wmsim.signals import FORBIDDEN, GARBAGE

PROVIDER = "aws-test"
OFFERINGS = tuple(
    Offering("us-east-1", zone, t, SPOT)
    for zone in ("us-east-1a", "us-east-1b")
    for t in ("m5.large", "c5.large", "t3.small")
)
PRICES, SCORES = "DescribeSpotPriceHistory", "GetSpotPlacementScores"
DEADLINE_S = 30.0


@pytest.fixture
def provider_and_collector(sim_ec2, monkeypatch) -> Iterator[tuple]:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    gate = EC2_FAST_GATE.model_copy(update={"timeout_s": 1.0, "pause_after_failures": 1})
    config = aws_config(sim_ec2.endpoint).model_copy(update={"gate": gate})
    provider = build_provider(config, "test-deploy")
    try:
        yield provider, build_signals(config, provider)
    finally:
        provider.close()


def _job(
    engine,
    collector,
    *,
    retry_s: float = 120.0,
    clock=time.time,
    price_interval_s: float | None = None,
) -> SignalsJob:
    return SignalsJob(
        engine,
        collector,
        lambda: Wanted(OFFERINGS, OFFERINGS),
        {Cadence.PRICE: price_interval_s, Cadence.CAPACITY: None, Cadence.PREEMPTION: None},
        retry_s,
        clock=clock,
    )


def _failures(source: str, reason: str) -> float:
    value = REGISTRY.get_sample_value(
        "wm_signal_fetch_failures_total",
        {"provider": PROVIDER, "source": source, "reason": reason},
    )
    return value or 0.0


def _held(engine) -> dict:
    return {
        (o, k): (s.value, s.source, s.observed_at)
        for (o, k), s in offering_state.read_signals(engine, PROVIDER).items()
    }


def test_a_run_reads_every_source_and_keeps_the_values_for_every_process(
    engine, sim_ec2, provider_and_collector
):
    _, collector = provider_and_collector

    _job(engine, collector).run()

    held = offering_state.read_signals(engine, PROVIDER)
    for offering in OFFERINGS:
        assert held[(offering, SignalKind.PRICE)].source == PRICES
        assert held[(offering, SignalKind.AVAILABILITY)].value == 0.9
    # Another process (a restarted scanner, a replica) finds them fresh and asks nothing.
    calls = dict(sim_ec2.faults.counts())
    _job(engine, collector).run()
    assert sim_ec2.faults.counts() == calls


def test_a_source_due_again_is_read_again_on_its_cadence(engine, sim_ec2, provider_and_collector):
    _, collector = provider_and_collector
    now = [time.time()]
    job = _job(engine, collector, clock=lambda: now[0])
    job.run()
    assert sim_ec2.faults.counts()[PRICES] == 1

    now[0] += 60
    job.run()
    assert sim_ec2.faults.counts()[PRICES] == 1  # EC2 prices: every 10 minutes

    now[0] += 600
    job.run()
    assert sim_ec2.faults.counts()[PRICES] == 2
    assert sim_ec2.faults.counts()[SCORES] == 1  # scores: every 15 minutes


@pytest.mark.parametrize(("fate", "reason"), [(FORBIDDEN, "forbidden"), (GARBAGE, "garbage")])
def test_a_failing_source_is_logged_counted_and_its_last_good_values_kept(
    engine, sim_ec2, provider_and_collector, caplog, fate, reason
):
    provider, collector = provider_and_collector
    now = [time.time()]
    job = _job(engine, collector, retry_s=30.0, clock=lambda: now[0])
    job.run()
    before = _held(engine)
    counted = _failures(PRICES, reason)

    now[0] += 700  # prices due again, and the source now fails
    sim_ec2.signal_fates.force(PRICES, fate)
    job.run()  # raises nothing

    assert _held(engine) == before
    assert _failures(PRICES, reason) == counted + 1
    (line,) = [r for r in caplog.records if getattr(r, "wm_event", None) == "signal-fetch-failed"]
    assert line.wm_fields["provider"] == PROVIDER
    assert line.wm_fields["source"] == PRICES
    assert line.wm_fields["reason"] == reason
    assert not provider.gate.paused

    now[0] += 31  # tried again after retry_s, not after the whole cadence
    job.run()
    assert sim_ec2.faults.counts()[PRICES] == 3


def test_a_source_that_stays_down_has_its_last_values_go_unread_after_three_intervals(
    engine, sim_ec2, provider_and_collector
):
    # Scenario: prices are read every second; the price source then goes down for good.
    _, collector = provider_and_collector
    job = _job(engine, collector, retry_s=0.5, price_interval_s=1.0)
    job.run()
    assert all((o, SignalKind.PRICE) in _held(engine) for o in OFFERINGS)
    sim_ec2.signal_fates.force(PRICES, *[GARBAGE] * 1000)  # more than the runs below ask

    # Action: the job keeps running (each run fails to read prices) until they go unread.
    deadline = time.monotonic() + DEADLINE_S
    while any(kind == SignalKind.PRICE for _, kind in _held(engine)):
        assert time.monotonic() < deadline, "the stale prices were still read"
        job.run()
        time.sleep(0.2)

    # Outcome: the prices are as unknown (the launch choice takes them as neutral), and the
    # placement scores, read on their own cadence, are still held.
    held = _held(engine)
    assert all((o, SignalKind.AVAILABILITY) in held for o in OFFERINGS)
    assert _failures(PRICES, "garbage") >= 1


def test_a_source_that_is_down_leaves_nothing_half_written_and_raises_nothing(
    engine, sim_ec2, monkeypatch, caplog
):
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    config = aws_config("http://127.0.0.1:9")  # the discard port: nothing listens
    provider = build_provider(config, "test-deploy")
    try:
        _job(engine, build_signals(config, provider)).run()
    finally:
        provider.close()

    assert offering_state.read_signals(engine, PROVIDER) == {}
    reasons = {
        r.wm_fields["reason"]
        for r in caplog.records
        if getattr(r, "wm_event", None) == "signal-fetch-failed"
    }
    assert reasons == {"down"}


def test_a_slow_source_holds_up_no_scan_and_pauses_nothing(engine, sim_ec2, provider_and_collector):
    provider, collector = provider_and_collector
    sim_ec2.faults.behaviour.update(hang_s=DEADLINE_S)
    sim_ec2.faults.force("hang", operation=PRICES)
    job = threading.Thread(target=_job(engine, collector).run, daemon=True)
    job.start()
    deadline = time.monotonic() + DEADLINE_S
    while sim_ec2.faults.hanging == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sim_ec2.faults.hanging == 1

    # Meanwhile the provider lists its region as ever: the signal read is on its own thread.
    assert provider.list_instances("us-east-1") == []

    job.join(DEADLINE_S)
    assert not job.is_alive()  # given up at the gate's timeout, well before the hang ends
    assert not provider.gate.paused
    held = offering_state.read_signals(engine, PROVIDER)
    assert not any(s.source == PRICES for s in held.values())
    assert any(s.source == SCORES for s in held.values())  # the other source still read


def test_the_offerings_wanted_are_those_of_pools_choosing_by_cost_and_with_demand(
    tmp_path, db_url, engine, sim_ec2, monkeypatch
):
    from tests.support.stack import Stack, aws_provider, pool
    from wm.db import tasks
    from wm.queues.builtin import BuiltinQueue
    from wm.scanning.signals_job import wanted_offerings

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    aws = aws_provider(sim_ec2)
    image = "ami-0abcdef1234567890"

    def one_config(machine_type: str) -> list[dict]:
        return [{"region": "us-east-1", "machine_type": machine_type, "image": image}]

    stack = Stack.write(
        tmp_path,
        db_url,
        [aws],
        [
            pool("proj/busy", aws, launch_configs=one_config("m5.large")),
            pool("proj/idle", aws, launch_configs=one_config("c5.large")),
            pool("proj/weights", aws, launch_configs=one_config("t3.small")),
        ],
    )
    stack.sync_pools(engine)
    tasks.submit_tasks(engine, "proj/busy", 2, 5.0)
    provider = build_provider(stack.config().provider("aws-sim"), "test-deploy")
    try:
        wanted = wanted_offerings(
            engine,
            "aws-sim",
            lambda pool_id: pool_id != "proj/weights",
            lambda lc: provider.offering(lc.configuration, lc.region),
            BuiltinQueue(engine),
        )
    finally:
        provider.close()

    assert sorted(o.instance_type for o in wanted.all) == ["c5.large", "m5.large"]
    assert [o.instance_type for o in wanted.with_demand] == ["m5.large"]
