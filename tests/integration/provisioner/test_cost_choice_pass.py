"""The launch choice by cost in real passes: the AWS provider against the simulated EC2 through
boto3, real Postgres. A pool in "cost" mode whose cheap zone runs dry is benched there by EC2's
own refusal and launches in the other zone at the next pass; in "weights" mode nothing of it
is read or written."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import event

from tests.fixtures.sim_ec2 import EC2_REGION
from wm.config.launch_choice import LaunchChoiceConfig, PoolChoiceConfig
from wm.db import offering_state, tasks
from wm.db.offering_state import BenchEntry
from wm.db.workers import list_workers
from wm.model import Offering, OfferingSignal, SignalKind, WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.providers.base import TAG_LAUNCH_CONFIG
from wm.provisioning.offering_bench import BenchState
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.aws.ec2 import SimEc2
from wmsim.aws.run_instances import example_launch_config

POOL = "proj-ci/linux-spot"
CHEAP = Offering(EC2_REGION, "us-east-1a", "m5.large", "spot")
DEAR = Offering(EC2_REGION, "us-east-1b", "m5.large", "spot")


def launch_config(lc_id: str, zone: str, weight: float) -> dict:
    config = example_launch_config(
        EC2_REGION, spot=True, launch_config_id=lc_id, weight=weight, worker_config={}
    )
    config["launchConfig"]["Placement"] = {"AvailabilityZone": zone}
    return config


@pytest.fixture
def spot_pool(engine, aws_provider):
    """Two spot zones: the hand weights favour the cheap one (as an operator would), and wm
    holds prices that say so too."""
    body = {
        "providerId": aws_provider.id,
        "description": "two zones",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": 10,
            "launchConfigs": [
                launch_config("lc-cheap-1a", "us-east-1a", 1.0),
                launch_config("lc-dear-1b", "us-east-1b", 0.3),
            ],
        },
    }
    definition = parse_pool_definition(POOL, body, {aws_provider.id: "aws"})
    apply_change(engine, ApplyDefinitions((definition,)), workers_register={aws_provider.id: True})
    now = datetime.now(UTC)
    offering_state.write_signals(
        engine,
        [
            OfferingSignal(aws_provider.id, CHEAP, SignalKind.PRICE, 0.05, "test", now),
            OfferingSignal(aws_provider.id, DEAR, SignalKind.PRICE, 0.06, "test", now),
        ],
        fresh_for_s=3600.0,
    )
    return POOL


def provisioner(engine, provider, mode: str) -> Provisioner:
    choice = LaunchChoiceConfig(pools=(PoolChoiceConfig(match="proj-ci/*", mode=mode),))
    return Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}, launch_choice=choice)


def launched_in(engine) -> list[str]:
    return sorted(
        w.launch_config_id
        for w in list_workers(engine, pool_id=POOL)
        if w.state is not WorkerState.STOPPED
    )


def test_a_zone_out_of_capacity_is_benched_and_the_next_pass_launches_in_the_other(
    engine, aws_provider, sim_ec2: SimEc2, spot_pool
):
    # Scenario: one task waits; us-east-1a has no m5.large to spare.
    sim_ec2.faults.behaviour.update(no_capacity=["m5.large@us-east-1a"])
    tasks.submit_tasks(engine, POOL, 1, 1.0)
    passes = provisioner(engine, aws_provider, "cost")

    (first,) = passes.run_pass(aws_provider.id)
    bench = offering_state.read_bench(engine, aws_provider.id)
    (second,) = passes.run_pass(aws_provider.id)

    # The cheap zone was tried and refused; EC2's words bench it, for its first TTL.
    assert (first.launched, first.failed) == (0, 1)
    assert set(bench) == {CHEAP}
    assert bench[CHEAP].state.failures == 1
    assert bench[CHEAP].last_code == "InsufficientInstanceCapacity"
    # The next pass launches in the other zone, not into the dry one again.
    assert (second.launched, second.failed) == (1, 0)
    assert launched_in(engine) == ["lc-dear-1b"]
    assert [vm.tags[TAG_LAUNCH_CONFIG] for vm in sim_ec2.instances()] == ["lc-dear-1b"]
    # Its gauges say what the last pass weighed.
    weight = lambda lc: REGISTRY.get_sample_value(  # noqa: E731
        "wm_launch_choice_weight", {"pool": POOL, "launch_config": lc}
    )
    assert weight("lc-cheap-1a") == 0 and weight("lc-dear-1b") > 0


def test_a_pool_launching_by_weights_reads_and_writes_nothing_of_the_cost_choice(
    engine, aws_provider, sim_ec2: SimEc2, spot_pool
):
    sim_ec2.faults.behaviour.update(no_capacity=["m5.large@us-east-1a"])
    tasks.submit_tasks(engine, POOL, 1, 1.0)
    statements: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))

    provisioner(engine, aws_provider, "weights").run_pass(aws_provider.id)

    assert not [s for s in statements if "offering_" in s]
    assert offering_state.read_bench(engine, aws_provider.id) == {}


def test_a_bench_run_out_gets_one_probe_worker_whose_launch_reopens_the_zone(
    engine, aws_provider, sim_ec2: SimEc2, spot_pool
):
    # Scenario: the cheap zone was benched after a refusal; its window has just run out.
    ran_out = datetime.now(UTC).timestamp() - 1
    offering_state.write_bench(
        engine, aws_provider.id, {CHEAP: BenchEntry(BenchState(1, ran_out), "Insufficient")}
    )
    tasks.submit_tasks(engine, POOL, 4, 1.0)

    (report,) = provisioner(engine, aws_provider, "cost").run_pass(aws_provider.id)

    # One worker probes the cheap zone; the rest of the pass goes where capacity is known.
    assert (report.launched, report.failed) == (4, 0)
    assert launched_in(engine) == ["lc-cheap-1a", "lc-dear-1b", "lc-dear-1b", "lc-dear-1b"]
    # EC2 took the probe: the zone is open again.
    assert offering_state.read_bench(engine, aws_provider.id) == {}


def test_a_pool_in_shadow_logs_its_scores_and_benches_but_launches_by_weights(
    engine, aws_provider, sim_ec2: SimEc2, spot_pool, caplog
):
    sim_ec2.faults.behaviour.update(no_capacity=["m5.large@us-east-1a"])
    tasks.submit_tasks(engine, POOL, 1, 1.0)
    passes = provisioner(engine, aws_provider, "shadow")

    with caplog.at_level(logging.INFO, logger="wm"):
        passes.run_pass(aws_provider.id)
        (second,) = passes.run_pass(aws_provider.id)

    choices = [r.wm_fields for r in caplog.records if getattr(r, "wm_event", "") == "launch-choice"]
    assert [c["mode"] for c in choices] == ["shadow", "shadow"]
    # The second pass's scores see the bench: the cheap zone would get nothing...
    weights = {c["launch_config"]: c["final_weight"] for c in choices[1]["configs"]}
    assert weights["lc-cheap-1a"] == 0 and weights["lc-dear-1b"] > 0
    assert CHEAP in offering_state.read_bench(engine, aws_provider.id)
    # ...but shadow launches by Taskcluster's weights: the cheap zone's 1.0, halved by its
    # error, still beats the other's 0.3.
    assert second.failed == 1
    assert launched_in(engine) == []
