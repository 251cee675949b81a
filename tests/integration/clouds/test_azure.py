"""The Azure provider against the simulated ARM: real SDKs, real HTTPS, nothing patched."""

from __future__ import annotations

import base64
import functools
import json
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import requests
from azure.identity import ClientSecretCredential
from azure.mgmt.compute import ComputeManagementClient

from tests.fixtures.sim_arm import (
    AZURE_DEPLOYMENT,
    AZURE_RESOURCE_GROUP,
    AZURE_ROOT_URL,
    AZURE_SUBSCRIPTION,
    compute_client,
    network_client,
)
from wm.errors import ON_DEMAND, SPOT, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec, WorkerRef, WorkerState
from wm.providers.azure.errors import error_scope
from wm.providers.azure.names import vm_name
from wm.providers.azure.provider import AzureProvider
from wm.providers.azure.states import REASON_SPOT_EVICTED
from wm.providers.azure.vm_body import vm_body
from wm.providers.base import (
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_WORKER,
    LaunchBatch,
    LaunchIntent,
)
from wmsim.azure.arm import SimArm, serve
from wmsim.azure.launch_configs import example_launch_config, image_reference
from wmsim.config import SimCloudConfig

IMAGE = "Canonical:ubuntu-24_04-lts:server:latest"
POOL = "proj-ci/linux"
LAUNCH_CONFIG_ID = "lc-azure-1"
RG_PREFIX = f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_RESOURCE_GROUP}/providers"


def launch_config(**changes: Any) -> dict[str, Any]:
    """A Taskcluster launch config on the test provider's default subnet."""
    return example_launch_config(
        "eastus",
        vm_size="Standard_D2s_v5",
        image=IMAGE,
        launch_config_id=LAUNCH_CONFIG_ID,
        worker_config={"queue": "proj-ci/linux"},
        subscription_id=AZURE_SUBSCRIPTION,
        resource_group=AZURE_RESOURCE_GROUP,
        **changes,
    )


def spec(config: Mapping[str, Any] | None = None) -> LaunchSpec:
    config = launch_config() if config is None else config
    return LaunchSpec(
        launch_config_id=LAUNCH_CONFIG_ID,
        region="eastus",
        capacity_per_worker=1,
        launch_config=config,
        worker_config=config.get("workerConfig", {}),
        pool_owner="ci-admins@example.com",
    )


def batch(workers: list[str], config: Mapping[str, Any] | None = None) -> LaunchBatch:
    intents = tuple(LaunchIntent(w, f"token-{w}") for w in workers)
    return LaunchBatch(POOL, spec(config), intents, batch_token=f"batch-{workers[0]}")


def preloaded_body(worker: str, tags: Mapping[str, str]) -> dict[str, Any]:
    """The body the provider would PUT for this worker (admin credentials made up)."""
    return vm_body(
        launch_config=launch_config(),
        location="eastus",
        worker_id=worker,
        tags=tags,
        admin_username="wmadmin",
        admin_password="Wm-9preloaded",
        custom_data="e30=",
    )


def refs(workers: list[str], region: str = "eastus") -> list[WorkerRef]:
    return [WorkerRef(w, region) for w in workers]


def wait_for(check: Callable[[], bool], timeout_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_a_batch_is_listed_back_across_pages(sim_arm: SimArm, azure_provider: AzureProvider):
    workers = [f"w-page-{i}" for i in range(5)]
    results = azure_provider.create(batch(workers))
    assert [r.error for r in results] == [None] * 5
    sim_arm.faults.behaviour.update(page_size_max=2)
    sim_arm.faults.reset_counts()

    listed = azure_provider.list_instances("eastus")

    by_worker = {i.worker_id: i for i in listed}
    assert sorted(by_worker) == workers
    for result in results:
        instance = by_worker[result.worker_id]
        assert instance.cloud_id == result.cloud_id
        assert instance.cloud_id.endswith(f"/virtualMachines/{vm_name(result.worker_id)}")
        assert instance.pool_id == POOL
        assert instance.launch_config_id == LAUNCH_CONFIG_ID
        assert instance.region == "eastus"
        assert instance.state is WorkerState.RUNNING
        assert instance.launched_at is not None
        assert instance.provider_data["vmId"] == result.provider_data["vmId"]
    # Pages of 2: the resource-group list and the status list take 3 calls each.
    counts = sim_arm.faults.counts()
    assert counts["VirtualMachines_List"] == 3
    assert counts["VirtualMachines_ListAll"] == 3
    assert azure_provider.list_instances("westeurope") == []


def test_the_vm_carries_taskclusters_tags_and_custom_data_and_its_name_is_the_worker_id(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    [result] = azure_provider.create(batch(["w0123456789abcd"]))

    vm = compute_client(sim_arm).virtual_machines.get(
        AZURE_RESOURCE_GROUP, vm_name(result.worker_id)
    )

    # worker-runner reads these four from IMDS compute.tagsList; wm's own tags stay beside them.
    assert {
        k: vm.tags[k] for k in ("worker-pool-id", "provider-id", "worker-group", "root-url")
    } == {
        "worker-pool-id": POOL,
        "provider-id": azure_provider.id,
        "worker-group": "eastus",
        "root-url": AZURE_ROOT_URL,
    }
    assert vm.tags["managed-by"] == "taskcluster"
    assert vm.tags["owner"] == "ci-admins@example.com"
    assert vm.tags[TAG_WORKER] == result.worker_id
    # customData as worker-manager writes it (azure/index.js), never echoed by ARM.
    assert json.loads(base64.b64decode(sim_arm.custom_data(vm.name) or "")) == {
        "workerPoolId": POOL,
        "workerGroup": "eastus",
        "providerId": azure_provider.id,
        "rootUrl": AZURE_ROOT_URL,
        "workerConfig": {},
    }
    assert vm.os_profile.custom_data is None
    assert vm.user_data is None  # wm's old boot data is gone
    # Its workerId (IMDS compute.name) is the VM name: within Taskcluster's 38 characters.
    assert result.tc_worker_id == vm.name
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,38}", vm.name)
    [listed] = azure_provider.list_instances("eastus")
    assert listed.tc_worker_id == vm.name


def test_states_move_from_requested_to_running_and_stopping_to_gone(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    sim_arm.faults.behaviour.update(boot_s=0.3, delete_s=0.3)
    azure_provider.create(batch(["w-life"]))

    def state() -> WorkerState | None:
        listed = azure_provider.list_instances("eastus")
        return listed[0].state if listed else None

    assert state() is WorkerState.REQUESTED
    wait_for(lambda: state() is WorkerState.RUNNING)

    first = azure_provider.terminate(refs(["w-life"]))
    assert [(r.gone, r.error) for r in first] == [(False, None)]
    assert state() is WorkerState.STOPPING
    # While ARM is deleting, another pass only checks: no second DELETE.
    assert azure_provider.terminate(refs(["w-life"]))[0].gone is False
    assert sim_arm.faults.counts()["VirtualMachines_Delete"] == 1

    wait_for(lambda: azure_provider.terminate(refs(["w-life"]))[0].gone)
    assert state() is None
    assert sim_arm.resources() == []


def test_lookup_finds_existing_workers_and_leaves_out_missing_ones(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    created = azure_provider.create(batch(["w-here"]))

    found = azure_provider.lookup(refs(["w-here", "w-never-created"]))

    assert list(found) == ["w-here"]
    assert found["w-here"].cloud_id == created[0].cloud_id
    assert found["w-here"].state is WorkerState.RUNNING
    assert found["w-here"].pool_id == POOL


def test_listing_costs_one_call_per_page(sim_arm: SimArm, azure_provider: AzureProvider):
    # 2000 VMs through 2000 PUTs would take ~14 s here, so they are preloaded with the exact
    # body the provider sends; the listing itself goes over the wire.
    count, page = 2000, 500
    for index in range(count):
        worker = f"w-bulk-{index:04d}"
        tags = {
            TAG_DEPLOYMENT: AZURE_DEPLOYMENT,
            TAG_POOL: POOL,
            TAG_WORKER: worker,
            TAG_LAUNCH_CONFIG: LAUNCH_CONFIG_ID,
        }
        body = preloaded_body(worker, tags)
        sim_arm.preload(f"{RG_PREFIX}/Microsoft.Compute/virtualMachines/{vm_name(worker)}", body)
    sim_arm.faults.behaviour.update(page_size_max=page)

    listed = azure_provider.list_instances("eastus")

    assert len(listed) == count
    assert len({i.worker_id for i in listed}) == count
    counts = sim_arm.faults.counts()
    assert counts == {
        "VirtualMachines_List": math.ceil(count / page),
        "VirtualMachines_ListAll": math.ceil(count / page),
    }


def test_a_repeated_create_does_not_make_a_second_vm(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    workers = ["w-again-1", "w-again-2", "w-again-3"]
    first = azure_provider.create(batch(workers))

    second = azure_provider.create(batch(workers))

    assert [r.error for r in second] == [None] * 3
    assert [r.cloud_id for r in second] == [r.cloud_id for r in first]
    assert [r.provider_data for r in second] == [r.provider_data for r in first]
    assert len(sim_arm.instances()) == 3
    # The retried PUTs are refused (admin password is immutable) and answered by a GET.
    counts = sim_arm.faults.counts()
    assert counts["VirtualMachines_CreateOrUpdate"] == 6
    assert counts["VirtualMachines_Get"] == 3


def test_other_deployments_and_untagged_vms_are_never_touched(
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    make_azure_provider: Callable[..., AzureProvider],
):
    other = make_azure_provider(sim_arm, deployment_id="other-deploy")
    other.create(batch(["w-foreign"]))
    untagged = preloaded_body("w-untagged", {})
    compute_client(sim_arm).virtual_machines.begin_create_or_update(
        AZURE_RESOURCE_GROUP, vm_name("w-untagged"), untagged
    ).result()
    strangers = ["w-foreign", "w-untagged"]

    assert azure_provider.list_instances("eastus") == []
    assert azure_provider.lookup(refs(strangers)) == {}
    results = azure_provider.terminate(refs(strangers))

    assert [r.error for r in results] == [None, None]
    assert "VirtualMachines_Delete" not in sim_arm.faults.counts()
    assert {vm.state for vm in sim_arm.instances()} == {"running"}
    assert len(sim_arm.instances()) == 2


def test_a_throttling_burst_is_absorbed_by_the_gate(sim_arm: SimArm, azure_provider: AzureProvider):
    azure_provider.create(batch(["w-throttled"]))
    retry_after_s = 0.1
    sim_arm.faults.reset_counts()
    sim_arm.faults.behaviour.update(retry_after_s=retry_after_s)
    sim_arm.faults.force("throttle", "throttle", operation="VirtualMachines_List")

    started = time.monotonic()
    listed = azure_provider.list_instances("eastus")
    elapsed = time.monotonic() - started

    assert [i.worker_id for i in listed] == ["w-throttled"]
    assert sim_arm.faults.counts()["VirtualMachines_List"] == 3  # two throttled, then answered
    assert elapsed >= 2 * retry_after_s  # the gate honoured Retry-After


def test_a_5xx_storm_pauses_this_provider_only(
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    make_azure_provider: Callable[..., AzureProvider],
    caplog: pytest.LogCaptureFixture,
):
    healthy_sim = SimArm().start()
    try:
        healthy = make_azure_provider(healthy_sim, id="azure-healthy")
        healthy.create(batch(["w-healthy"]))
        sim_arm.faults.behaviour.update(failure_rate=1.0)

        with caplog.at_level(logging.WARNING, logger="wm"), pytest.raises(CloudError) as storm:
            azure_provider.list_instances("eastus")
        assert storm.value.category is ErrorCategory.TRANSIENT
        with pytest.raises(CloudError) as paused:
            azure_provider.list_instances("eastus")

        assert paused.value.category is ErrorCategory.PAUSED
        assert sim_arm.faults.counts()["VirtualMachines_List"] == 4  # no call while paused
        events = [getattr(r, "wm_event", None) for r in caplog.records]
        assert "cloud-api-paused" in events
        assert [i.worker_id for i in healthy.list_instances("eastus")] == ["w-healthy"]
    finally:
        healthy_sim.stop()


@pytest.mark.parametrize(
    ("spot", "market"), [(False, ON_DEMAND), (True, SPOT)], ids=["regular", "spot"]
)
def test_a_quota_error_comes_back_as_data(
    sim_arm: SimArm, azure_provider: AzureProvider, spot: bool, market: str
):
    sim_arm.faults.behaviour.update(quota_instances=2)

    launched = batch(["w-q1", "w-q2", "w-q3"], launch_config(spot=spot))
    results = azure_provider.create(launched)

    errors = [r.error for r in results if r.error is not None]
    assert len(errors) == 1
    assert errors[0].category is ErrorCategory.QUOTA
    assert errors[0].code == "OperationNotAllowed"
    assert [r.cloud_id is not None for r in results].count(True) == 2
    # Regular VMs meet the regional cores quota, Spot VMs the Low Priority one: every spot
    # launch in the location.
    scope = error_scope(errors[0].code, errors[0].message, launched.spec)
    assert scope == ErrorScope(ErrorCategory.QUOTA, "eastus", market=market)


def test_an_evicted_or_stopped_vm_shows_as_stopped_with_a_reason(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    deallocated_when_evicted = {**launch_config(spot=True), "evictionPolicy": "Deallocate"}
    spot = azure_provider.create(batch(["w-spot"], deallocated_when_evicted))[0]
    deleted_when_evicted = {**launch_config(spot=True), "evictionPolicy": "Delete"}
    deleted_spot = azure_provider.create(batch(["w-spot-deleted"], deleted_when_evicted))[0]
    regular = azure_provider.create(batch(["w-regular"]))[0]
    failing = azure_provider.create(batch(["w-failing"]))[0]
    assert spot.cloud_id and deleted_spot.cloud_id and regular.cloud_id and failing.cloud_id

    sim_arm.kill(spot.cloud_id)
    sim_arm.kill(deleted_spot.cloud_id)
    sim_arm.kill(regular.cloud_id)
    sim_arm.fail(failing.cloud_id)
    listed = {i.worker_id: i for i in azure_provider.list_instances("eastus")}

    # A Spot VM evicted by deletion is gone, with its NIC and disk (the scan's look-up finds
    # nothing); one evicted by deallocation stays, stopped.
    assert azure_provider.lookup(refs(["w-spot-deleted"])) == {}
    assert not [r for r in sim_arm.resources() if "w-spot-deleted" in r]
    assert {w: i.state for w, i in listed.items()} == {
        "w-spot": WorkerState.STOPPED,
        "w-regular": WorkerState.STOPPED,
        "w-failing": WorkerState.STOPPED,
    }
    assert listed["w-spot"].reason == REASON_SPOT_EVICTED
    assert listed["w-regular"].reason == "PowerState/stopped"
    assert listed["w-failing"].reason == "ProvisioningState/failed/AllocationFailed"
    # ...and the scan can clean them up with the usual terminate.
    azure_provider.terminate(refs(list(listed)))
    wait_for(lambda: all(r.gone for r in azure_provider.terminate(refs(list(listed)))))


def test_a_one_line_raw_sdk_call_works_against_the_sim(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    azure_provider.create(batch(["w-raw"]))
    endpoint, cert, sub = sim_arm.endpoint, str(sim_arm.cert_path), AZURE_SUBSCRIPTION

    # What a user of `wm sim serve` would type (the certificate is in its state dir).
    names = [
        vm.name
        for vm in ComputeManagementClient(
            ClientSecretCredential(
                "t",
                "c",
                "s",
                authority=endpoint,
                disable_instance_discovery=True,
                connection_verify=cert,
            ),
            sub,
            base_url=endpoint,
            connection_verify=cert,
        ).virtual_machines.list_all()
    ]

    assert names == [vm_name("w-raw")]


def test_one_put_makes_a_running_worker_and_one_delete_removes_everything(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    result = azure_provider.create(batch(["w-whole"], launch_config(public_ip=True)))[0]
    assert result.error is None

    kinds = sorted(r.split("/providers/")[1].rsplit("/", 1)[0] for r in sim_arm.resources())
    assert kinds == [
        "Microsoft.Compute/disks",
        "Microsoft.Compute/virtualMachines",
        "Microsoft.Network/networkInterfaces",
        "Microsoft.Network/publicIPAddresses",
    ]
    assert azure_provider.list_instances("eastus")[0].state is WorkerState.RUNNING
    assert sim_arm.faults.counts()["VirtualMachines_CreateOrUpdate"] == 1

    wait_for(lambda: azure_provider.terminate(refs(["w-whole"]))[0].gone)

    assert sim_arm.resources() == []
    counts = sim_arm.faults.counts()
    assert counts["VirtualMachines_Delete"] == 1
    assert not [op for op in counts if op.endswith("_CreateOrUpdate") and "Virtual" not in op]
    assert not [op for op in counts if op.endswith("_Delete") and "Virtual" not in op]


def test_a_worker_made_the_old_multi_step_way_is_cleaned_up_piece_by_piece(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    # The old way: public IP, then NIC, then a VM referencing the NIC; nothing deletes itself.
    raw = compute_client(sim_arm)
    network = network_client(sim_arm)
    ip = network.public_ip_addresses.begin_create_or_update(
        AZURE_RESOURCE_GROUP, "old-ip", {"location": "eastus", "properties": {}}
    ).result()
    nic = network.network_interfaces.begin_create_or_update(
        AZURE_RESOURCE_GROUP,
        "old-nic",
        {
            "location": "eastus",
            "properties": {
                "ipConfigurations": [
                    {"name": "ipconfig1", "properties": {"publicIPAddress": {"id": ip.id}}}
                ]
            },
        },
    ).result()
    tags = {TAG_DEPLOYMENT: AZURE_DEPLOYMENT, TAG_POOL: POOL, TAG_WORKER: "w-old"}
    body = old_style_vm_body("old-disk", nic.id, tags)
    raw.virtual_machines.begin_create_or_update(AZURE_RESOURCE_GROUP, "vm-w-old", body).result()
    ref = WorkerRef(
        "w-old",
        "eastus",
        provider_data={
            "nic_names": ["old-nic"],
            "public_ip_names": ["old-ip"],
            "disk_names": ["old-disk"],
        },
    )

    assert azure_provider.terminate([ref])[0].gone is False  # the VM delete is issued
    wait_for(lambda: azure_provider.terminate([ref])[0].gone)

    assert sim_arm.resources() == []


def test_an_old_multi_step_workers_disk_still_attached_is_left_for_the_next_try(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    # Scenario: an old-way worker whose VM is gone, but the disk its row names is attached to
    # a VM still there (ARM refuses its delete with 409 OperationNotAllowed).
    raw = compute_client(sim_arm)
    nic = (
        network_client(sim_arm)
        .network_interfaces.begin_create_or_update(
            AZURE_RESOURCE_GROUP, "holder-nic", {"location": "eastus", "properties": {}}
        )
        .result()
    )
    body = old_style_vm_body("held-disk", nic.id)
    raw.virtual_machines.begin_create_or_update(AZURE_RESOURCE_GROUP, "vm-holder", body).result()
    ref = WorkerRef("w-gone", "eastus", provider_data={"disk_names": ["held-disk"]})

    # Action: its teardown.
    [result] = azure_provider.terminate([ref])

    # Outcome: not gone yet, and no error: the disk is in use, tried again next time, as
    # the ARM form's teardown does.
    assert (result.gone, result.error) == (False, None)


def old_style_vm_body(
    os_disk: str, nic_id: str, tags: dict[str, str] | None = None
) -> dict[str, Any]:
    """A VM body as the old multi-step way sent it: its NIC made first, its OS disk named."""
    return {
        "location": "eastus",
        "tags": tags or {},
        "properties": {
            "hardwareProfile": {"vmSize": "Standard_D2s_v5"},
            "storageProfile": {
                "imageReference": image_reference(IMAGE),
                "osDisk": {"name": os_disk, "createOption": "FromImage"},
            },
            "osProfile": {"computerName": "old", "adminUsername": "u", "adminPassword": "Pw-1x"},
            "networkProfile": {"networkInterfaces": [{"id": nic_id}]},
        },
    }


def test_other_processes_drive_the_sim_over_http(sim_arm: SimArm, azure_provider: AzureProvider):
    azure_provider.create(batch(["w-ctl"]))
    # Per request: REQUESTS_CA_BUNDLE in the environment would override a Session's verify.
    http = functools.partial(requests.request, verify=str(sim_arm.cert_path))
    control = f"{sim_arm.endpoint}/_sim"

    assert http("GET", f"{control}/requests").json() == {"VirtualMachines_CreateOrUpdate": 1}
    assert http("POST", f"{control}/behaviour", json={"latency_ms": 1}).ok
    assert sim_arm.faults.behaviour.latency_ms == 1
    [vm] = http("GET", f"{control}/instances").json()
    assert (vm["name"], vm["state"], vm["tags"][TAG_WORKER]) == ("vm-w-ctl", "running", "w-ctl")
    assert http("POST", f"{control}/kill", json={"id": vm["name"], "reason": "preempted"}).ok
    assert http("GET", f"{control}/instances").json()[0]["state"] == "stopped"
    assert http("POST", f"{control}/remove", json={"id": vm["cloud_id"]}).ok
    assert http("GET", f"{control}/instances").json() == []
    assert http("POST", f"{control}/kill", json={"id": "vm-nothing"}).status_code == 404
    assert http("POST", f"{control}/requests/reset").ok
    assert http("GET", f"{control}/requests").json() == {}  # control calls are not counted
    assert http("POST", f"{control}/reset").ok
    assert sim_arm.faults.behaviour.latency_ms == 0


def test_wm_sim_serve_starts_the_sim_with_its_certificate_in_the_state_dir(tmp_path: Path):
    sim = serve(SimCloudConfig(page_size_max=7), tmp_path)
    try:
        assert sim.cert_path == tmp_path / "arm-cert.pem"
        assert sim.faults.behaviour.page_size_max == 7
        answer = requests.get(f"{sim.endpoint}/_sim/requests", verify=str(sim.cert_path))
        assert answer.json() == {}
    finally:
        sim.stop()
