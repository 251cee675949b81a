"""Seeding large fleets into the simulated clouds in-process (what the benchmarks do): what is
seeded is what the real SDKs then see, and nothing is counted as an API request."""

from __future__ import annotations

import pytest

from tests.fixtures.sim_ec2 import EC2_DEPLOYMENT, EC2_REGION
from tests.fixtures.sim_gce import GCE_DEPLOYMENT, GCE_PROJECT, GCE_ZONE
from wm.model import LaunchSpec, WorkerState
from wm.providers.aws.provider import AwsProvider
from wm.providers.base import (
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_POOL,
    TAG_WORKER,
    LaunchBatch,
    LaunchIntent,
)
from wm.providers.gcp.provider import GcpProvider
from wmsim.aws.ec2 import SimEc2
from wmsim.aws.run_instances import example_launch_config
from wmsim.gcp.gce import SimGce

POOL = "proj/seeded"


def test_ec2_seeding_into_a_full_region_makes_complete_instances_and_leaves_moto_as_it_was(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    # Scenario: two seedings into one region (the second one meets instances already there,
    # where moto's own RunInstances scans the region), then a launch through the API.
    tags = {TAG_DEPLOYMENT: EC2_DEPLOYMENT, TAG_POOL: POOL}
    first = sim_ec2.seed_instances(300, tags={**tags, TAG_BATCH: "seed-1"})
    second = sim_ec2.seed_instances(200, tags={**tags, TAG_BATCH: "seed-2"})
    spec = LaunchSpec(
        "lc-1",
        EC2_REGION,
        1,
        example_launch_config(EC2_REGION, image_id="ami-0abcdef1234567890"),
    )
    launched = aws_provider.create(
        LaunchBatch(POOL, spec, (LaunchIntent("w-after", "t-after"),), "after-seeding")
    )

    listed = {i.cloud_id: i for i in aws_provider.list_instances(EC2_REGION)}

    assert len(set(first + second)) == 500
    assert set(listed) == {*first, *second, launched[0].cloud_id}
    by_slot = {(i.batch_token, i.launch_index): i.cloud_id for i in listed.values()}
    assert by_slot[("seed-2", 199)] == second[199]
    assert {listed[c].state for c in first + second} == {WorkerState.RUNNING}
    # Seeding made no request; only the launch and the listing did.
    assert set(sim_ec2.faults.counts()) == {"DescribeInstances", "RunInstances"}
    # Every seeded instance has its root volume, attached and tagged like its instance.
    backend = sim_ec2._backend(EC2_REGION)
    volumes = [v for v in backend.volumes.values() if v.attachment is not None]
    seeded_volumes = [v for v in volumes if v.attachment.instance.id in set(first + second)]
    assert len(seeded_volumes) == 500
    assert all(backend.tags[v.id][TAG_POOL] == POOL for v in seeded_volumes)
    # The seeding shortcuts were on the backend for the seeding only.
    assert "get_instance" not in vars(backend) and "describe_volumes" not in vars(backend)


def test_gce_seeded_instances_are_listed_with_their_labels_and_names_stay_unique(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    names = [f"w-seeded-{i:03d}" for i in range(120)]
    labels = {
        n: {TAG_DEPLOYMENT: GCE_DEPLOYMENT, TAG_POOL: "proj_seeded", TAG_WORKER: n} for n in names
    }

    ids = sim_gce.seed_instances(GCE_PROJECT, GCE_ZONE, labels)

    listed = gcp_provider.list_instances(GCE_ZONE)
    assert sorted(i.worker_id for i in listed) == names
    assert {i.cloud_id: i.worker_id for i in listed} == dict(zip(ids, names, strict=True))
    assert {i.state for i in listed} == {WorkerState.RUNNING}
    assert sim_gce.faults.counts() == {"instances.list": 1}
    with pytest.raises(ValueError, match="w-seeded-007"):
        sim_gce.seed_instances(GCE_PROJECT, GCE_ZONE, {"w-seeded-007": {}})
    assert len(sim_gce.instances()) == 120
