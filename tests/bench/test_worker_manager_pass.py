"""The worker-manager arm of issue 40's end-to-end benchmark makes worker-manager's choices in
wm's pass (bench/baselines/worker_manager_pass.py): on EC2 the configs shuffled, an even share
each, one all-or-nothing RunInstances per config in that order, the first refusal ending the
pool's provision and filed without a config id; on GCE the weights worker-manager computes
from the pool's errors. The real providers against the simulated clouds, real Postgres."""

from __future__ import annotations

import random

import pytest
from sqlalchemy import text

from bench.baselines import worker_manager_selector as tc
from bench.baselines.worker_manager_pass import WorkerManagerProvisioner, make_all_or_nothing
from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_OTHER_ZONE, GCE_ZONE
from wm.db import pool_errors, tasks
from wm.db.pool_errors import NewPoolError
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.queues.builtin import BuiltinQueue
from wmsim.aws.ec2 import SimEc2
from wmsim.aws.run_instances import example_launch_config
from wmsim.gcp.launch_config import example_launch_config as gce_launch_config

POOL = "proj-ci/wm-arm"
GCE_POOL = "proj-ci/wm-arm-gce"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d")
SEED = 3


def lc_id(zone: str) -> str:
    return f"lc-{zone}"


@pytest.fixture
def four_zones(engine, aws_provider):
    configs = []
    for zone in ZONES:
        config = example_launch_config(EC2_REGION, spot=True, launch_config_id=lc_id(zone))
        config["launchConfig"]["Placement"] = {"AvailabilityZone": zone}
        configs.append(config)
    body = {
        "providerId": aws_provider.id,
        "description": "four zones",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 40, "launchConfigs": configs},
    }
    definition = parse_pool_definition(POOL, body, {aws_provider.id: "aws"})
    apply_change(engine, ApplyDefinitions((definition,)), workers_register={aws_provider.id: True})


def shuffled_ids(seed: int) -> list[str]:
    """The order worker-manager's AWS pass tries the configs in, for this seed."""
    configs = [tc.LaunchConfig(lc_id(zone)) for zone in ZONES]
    order = tc.lodash_shuffle(configs, random.Random(f"worker-manager:{seed}"))
    return [lc.launch_config_id for lc in order]


def test_an_ec2_pass_splits_evenly_in_shuffled_order_and_ends_at_the_first_refusal(
    engine, aws_provider, sim_ec2: SimEc2, four_zones
):
    # Scenario: eight tasks wait; the zone third in the shuffled order has no capacity.
    order = shuffled_ids(SEED)
    dry = order[2].removeprefix("lc-")
    sim_ec2.faults.behaviour.update(no_capacity=[f"m5.large@{dry}"])
    tasks.submit_tasks(engine, POOL, 8, 60.0)
    make_all_or_nothing(aws_provider)
    passes = WorkerManagerProvisioner(
        engine,
        BuiltinQueue(engine),
        {aws_provider.id: aws_provider},
        even_split=frozenset({aws_provider.id}),
        seed=SEED,
    )

    (report,) = passes.run_pass(aws_provider.id)

    # Two instances a config, all or nothing, in the shuffled order, up to the refusal.
    sent = sim_ec2.launch_requests()
    placed = [r.parameters["Placement"]["AvailabilityZone"] for r in sent]
    assert placed == [z.removeprefix("lc-") for z in order[:3]]
    assert [(r.parameters["MinCount"], r.parameters["MaxCount"]) for r in sent] == [(2, 2)] * 3
    assert [r.error for r in sent] == [None, None, "InsufficientInstanceCapacity"]
    # The fourth config was never sent; its intents are gone, the refused ones stopped.
    live = sorted(w.launch_config_id for w in list_workers(engine, pool_id=POOL)
                  if w.state is not WorkerState.STOPPED)  # fmt: skip
    assert live == sorted([order[0]] * 2 + [order[1]] * 2)
    assert (report.launched, report.failed, report.withdrawn) == (4, 2, 2)
    # One error for the pass, filed without its launch config: it never demotes the dry zone.
    with engine.connect() as conn:
        errors = conn.execute(
            text("SELECT launch_config_id, kind FROM worker_pool_errors WHERE pool_id = :p"),
            {"p": POOL},
        ).all()
    assert [(e.launch_config_id, e.kind) for e in errors] == [(None, "capacity")]


@pytest.fixture
def two_gce_zones(engine, gcp_provider):
    body = {
        "providerId": gcp_provider.id,
        "description": "two zones",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": 40,
            "launchConfigs": [
                gce_launch_config(GCE_ZONE, spot=True, launch_config_id="lc-a"),
                gce_launch_config(GCE_OTHER_ZONE, spot=True, launch_config_id="lc-b"),
            ],
        },
    }
    definition = parse_pool_definition(GCE_POOL, body, {gcp_provider.id: "gcp"})
    apply_change(engine, ApplyDefinitions((definition,)), workers_register={gcp_provider.id: True})


def test_a_gce_config_with_all_of_the_pools_recent_errors_gets_no_launch_one_insert_each(
    engine, gcp_provider, sim_gce, two_gce_zones
):
    # Scenario: the pool's one error of the last hour is lc-a's; four tasks wait.
    pool_errors.record_errors(
        engine,
        [NewPoolError(GCE_POOL, "capacity", "launch failed", "no room", gcp_provider.id, "lc-a")],
    )
    tasks.submit_tasks(engine, GCE_POOL, 4, 60.0)
    passes = WorkerManagerProvisioner(
        engine, BuiltinQueue(engine), {gcp_provider.id: gcp_provider}, seed=SEED
    )

    (report,) = passes.run_pass(gcp_provider.id)

    # worker-manager's weight: 1 - errors_lc / errors_pool = 0, and lc-b is viable, so lc-a
    # gets nothing (wm's own weights would halve it, not zero it); one insert per instance.
    live = [w.launch_config_id for w in list_workers(engine, pool_id=GCE_POOL)]
    assert (report.launched, sorted(live)) == (4, ["lc-b"] * 4)
    assert sim_gce.faults.counts().get("instances.insert") == 4
