"""The provider contract, once, for all three clouds: real SDKs against the simulated clouds."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBSCRIPTION
from wm.model import LaunchSpec, WorkerRef, WorkerState
from wm.providers.base import LaunchBatch, LaunchIntent
from wm.provisioning.pool_plan import new_worker_id
from wmsim.aws import run_instances as ec2_launch
from wmsim.azure import launch_configs
from wmsim.gcp import launch_config as gce_launch

GONE_WITHIN_S = 10


@dataclass(frozen=True)
class Cloud:
    provider_fixture: str
    sim_fixture: str
    machine_type: str
    image: str
    create_operation: str  # what the sim journals a create as
    call_per_vm: bool  # a batch is a create call per VM (not one call for all)


CLOUDS = {
    "aws": Cloud(
        "aws_provider", "sim_ec2", "m5.large", "ami-0abcdef1234567890", "RunInstances", False
    ),
    "gcp": Cloud(
        "gcp_provider",
        "sim_gce",
        "e2-small",
        "projects/debian-cloud/global/images/family/debian-12",
        "instances.insert",
        True,
    ),
    "azure": Cloud(
        "azure_provider",
        "sim_arm",
        "Standard_D2s_v5",
        "Canonical:ubuntu-24_04-lts:server:latest",
        "VirtualMachines_CreateOrUpdate",
        True,
    ),
}


@pytest.fixture(params=sorted(CLOUDS))
def cloud(request):
    spec = CLOUDS[request.param]
    sim = request.getfixturevalue(spec.sim_fixture)
    provider = request.getfixturevalue(spec.provider_fixture)
    return spec, sim, provider


def launch_config(kind: str, spec: Cloud, where: str, spot: bool) -> dict[str, Any]:
    """The cloud's own Taskcluster launch config for the machine, as the sims accept it."""
    if kind == "aws":
        return ec2_launch.example_launch_config(
            where, instance_type=spec.machine_type, image_id=spec.image, spot=spot
        )
    if kind == "gcp":
        return gce_launch.example_launch_config(
            where, machine_type=spec.machine_type, image=spec.image, spot=spot
        )
    return launch_configs.example_launch_config(
        where,
        vm_size=spec.machine_type,
        image=spec.image,
        spot=spot,
        subscription_id=AZURE_SUBSCRIPTION,
        resource_group=AZURE_RESOURCE_GROUP,
    )


def make_batch(provider, spec: Cloud, count: int, *, spot: bool = False) -> LaunchBatch:
    kind = next(k for k, c in CLOUDS.items() if c == spec)
    region = provider.regions[0]
    launch = LaunchSpec(
        launch_config_id="lc-contract",
        region=region,
        capacity_per_worker=1,
        launch_config=launch_config(kind, spec, region, spot),
        pool_owner="contract@example.com",
    )
    intents = tuple(LaunchIntent(new_worker_id(), str(uuid.uuid4())) for _ in range(count))
    return LaunchBatch("proj/contract", launch, intents, batch_token=uuid.uuid4().hex)


def refs_of(batch: LaunchBatch, results) -> list[WorkerRef]:
    return [
        WorkerRef(r.worker_id, batch.spec.region, r.cloud_id, batch.batch_token, index)
        for index, r in enumerate(results)
    ]


def owner_of(instance, batch: LaunchBatch) -> str | None:
    if instance.worker_id:
        return instance.worker_id
    if instance.batch_token == batch.batch_token and instance.launch_index is not None:
        return batch.intents[instance.launch_index].worker_id
    return None


def test_each_create_answer_is_told_once_before_create_returns(cloud):
    # The provisioner records a VM as soon as its call answers: it may boot and register
    # before the batch's last call answers.
    spec, _, provider = cloud
    batch = make_batch(provider, spec, 3)
    told = []
    results = provider.create(batch, told.append)
    assert all(r.cloud_id and r.error is None for r in results), results
    assert len({r.worker_id for r in told}) == len(told)
    assert all(r in results for r in told)
    if spec.call_per_vm:
        assert sorted(r.worker_id for r in told) == sorted(r.worker_id for r in results)


def test_create_list_lookup_terminate_round_trip(cloud):
    spec, sim, provider = cloud
    batch = make_batch(provider, spec, 3)

    results = provider.create(batch)
    assert [r.worker_id for r in results] == [i.worker_id for i in batch.intents]
    assert all(r.cloud_id and r.error is None for r in results), results

    listed = provider.list_instances(batch.spec.region)
    assert sorted(owner_of(i, batch) for i in listed) == sorted(i.worker_id for i in batch.intents)
    assert {(i.pool_id, i.launch_config_id) for i in listed} == {("proj/contract", "lc-contract")}
    assert all(i.state in (WorkerState.REQUESTED, WorkerState.RUNNING) for i in listed)

    missing = WorkerRef(new_worker_id(), batch.spec.region)
    found = provider.lookup([*refs_of(batch, results), missing])
    assert set(found) == {r.worker_id for r in results}

    again = provider.create(batch)
    assert [r.cloud_id for r in again] == [r.cloud_id for r in results]
    assert len([vm for vm in sim.instances() if vm.state not in ("gone", "stopped")]) == 3

    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        done = provider.terminate(refs_of(batch, results))
        if all(t.gone for t in done) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert all(t.gone and t.error is None for t in done), done
    # EC2 keeps terminated instances visible for a while; they must read as stopped.
    leftovers = provider.lookup(refs_of(batch, results)).values()
    assert [i for i in leftovers if i.state != WorkerState.STOPPED] == []
    assert [
        i for i in provider.list_instances(batch.spec.region) if i.state != WorkerState.STOPPED
    ] == []


def test_a_create_whose_answer_is_lost_is_retried_into_the_same_vm(cloud):
    spec, sim, provider = cloud
    # The cloud makes the VM, then the client hears a 5xx instead of the answer.
    sim.faults.force("lose", operation=spec.create_operation)
    batch = make_batch(provider, spec, 1)

    (result,) = provider.create(batch)

    creates = sim.faults.journal(spec.create_operation)
    assert [(c.outcome, c.lost) for c in creates] == [("ok", True), ("ok", False)]
    assert len({c.key for c in creates}) == 1  # the retry names the same create
    assert result.cloud_id and result.error is None
    live = [vm for vm in sim.instances() if vm.state not in ("gone", "stopped")]
    assert [vm.cloud_id for vm in live] == [result.cloud_id]


def test_the_cloud_pre_empts_a_share_of_spot_vms_and_the_list_says_so(cloud):
    spec, sim, provider = cloud
    # Every spot VM is taken back at once; on-demand VMs are never touched.
    sim.faults.behaviour.update(preempt_share=1.0, preempt_within_s=0.0)
    spot = make_batch(provider, spec, 2, spot=True)
    on_demand = make_batch(provider, spec, 1)
    provider.create(spot)
    provider.create(on_demand)

    listed = {
        owner_of(i, spot) or owner_of(i, on_demand): i
        for i in provider.list_instances(spot.spec.region)
    }

    for intent in spot.intents:
        instance = listed[intent.worker_id]
        assert instance.preempted and instance.reason, instance
        assert instance.state in (WorkerState.STOPPING, WorkerState.STOPPED)
    (kept,) = [listed[i.worker_id] for i in on_demand.intents]
    assert not kept.preempted and kept.state in (WorkerState.REQUESTED, WorkerState.RUNNING)
    # Nothing was pre-empted twice or left scheduled.
    assert sim.preemptions.due() == []
