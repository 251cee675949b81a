"""ARM-template launch configs against the simulated ARM: real SDKs, real HTTPS, nothing patched.

The launch configs mirror the public ones (fxci-config's Azure pools): a template spec version
by `templateLink.id`, parameters vmSize, imageId, location, subnetId and priority Spot, and a
resource group of their own.
"""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource.deployments import DeploymentsMgmtClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.resource.templatespecs import TemplateSpecsClient

from tests.fixtures.sim_arm import (
    AZURE_DEPLOYMENT,
    AZURE_RESOURCE_GROUP,
    AZURE_ROOT_URL,
    AZURE_SUBNET,
    AZURE_SUBSCRIPTION,
    azure_config,
    compute_client,
    network_client,
    sdk_credential,
)
from tests.fixtures.sim_arm import sdk_options as sim_sdk_options
from wm.db import pools as pool_store
from wm.db import tasks, worker_writes
from wm.db.pool_errors import list_errors
from wm.db.workers import list_workers
from wm.model import LaunchSpec, WorkerRecord, WorkerRef, WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.providers.azure import arm, arm_workers
from wm.providers.azure import identity as azure_identity
from wm.providers.azure.provider import AzureProvider
from wm.providers.base import (
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    TAG_WORKER,
    LaunchBatch,
    LaunchIntent,
    LaunchResult,
    TerminateResult,
    UnitRecords,
)
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wm.workers.identity import ExpectedIdentity
from wmsim.azure.arm import SimArm
from wmsim.azure.templates import WORKER_TEMPLATE

TEMPLATE = json.loads(WORKER_TEMPLATE.read_text())
POOL = "proj-win/win2022"
LAUNCH_CONFIG_ID = "lc-arm-1"
LOCATION = "eastus"
ARM_GROUP = "rg-tc-azure-proj-win-win2022"
SPEC_GROUP = "rg-template-specs"
IMAGE_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{SPEC_GROUP}/providers"
    "/Microsoft.Compute/galleries/images/images/win2022/versions/1.0.0"
)
OWNER = "relops@example.com"


def sdk_options(sim: SimArm) -> dict[str, Any]:
    # The resource and deployment clients ask for a token of the endpoint's own audience.
    return {**sim_sdk_options(sim), "credential_scopes": [sim.endpoint + "/.default"]}


@pytest.fixture
def scanning(sim_arm: SimArm, make_azure_provider: Callable[..., AzureProvider]) -> AzureProvider:
    """The provider as the scanner's process builds it from the same config: it deployed
    nothing, so where ARM workers are it knows only from the records a scan hands it (the
    pools' launch configs and the rows). Launches go through `azure_provider`, the
    provisioner's."""
    return make_azure_provider(sim_arm)


def records(*configs: Mapping[str, Any], rows: Sequence[WorkerRef] = ()) -> UnitRecords:
    """What a scan reads from the database: these launch configs' pools, and these rows."""
    return UnitRecords(rows=tuple(rows), launch_configs=configs)


@pytest.fixture
def compute(sim_arm: SimArm) -> ComputeManagementClient:
    return compute_client(sim_arm)


@pytest.fixture
def network(sim_arm: SimArm) -> NetworkManagementClient:
    return network_client(sim_arm)


@pytest.fixture
def groups(sim_arm: SimArm) -> ResourceManagementClient:
    return ResourceManagementClient(
        sdk_credential(sim_arm), AZURE_SUBSCRIPTION, **sdk_options(sim_arm)
    )


def publish(sim: SimArm, template: Mapping[str, Any], name: str = "win-worker") -> str:
    """A template spec version holding `template`, made with the real SDK; its resource id."""
    specs = TemplateSpecsClient(sdk_credential(sim), AZURE_SUBSCRIPTION, **sdk_options(sim))
    sim.deployments.create_resource_group(AZURE_SUBSCRIPTION, SPEC_GROUP, LOCATION)
    specs.template_specs.create_or_update(SPEC_GROUP, name, {"location": LOCATION})
    version = specs.template_spec_versions.create_or_update(
        SPEC_GROUP, name, "1.0.0", {"location": LOCATION, "main_template": dict(template)}
    )
    return version.id


@pytest.fixture
def spec_id(sim_arm: SimArm) -> str:
    sim_arm.register_image(IMAGE_ID, LOCATION)
    # The provider's own group exists, as an operator made it.
    sim_arm.deployments.create_resource_group(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, LOCATION)
    return publish(sim_arm, TEMPLATE)


def launch_config(spec: str, *, group: str | None = ARM_GROUP, **parameters: Any) -> dict:
    """A launch config as fxci-config generates them (src/ciadmin/generate/worker_pools.py)."""
    values = {
        "vmSize": "Standard_F16s_v2",
        "imageId": IMAGE_ID,
        "location": LOCATION,
        "subnetId": AZURE_SUBNET,
        "priority": "Spot",
        **parameters,
    }
    config: dict[str, Any] = {
        "location": LOCATION,
        "tags": {"team": "relops"},
        "workerConfig": {"genericWorker": {"config": {"idleTimeoutSecs": 90}}},
        "armDeployment": {
            "mode": "Incremental",
            "templateLink": {"id": spec},
            "parameters": {k: {"value": v} for k, v in values.items()},
        },
        "workerManager": {"launchConfigId": LAUNCH_CONFIG_ID, "capacityPerInstance": 1},
    }
    if group is not None:
        config["armDeploymentResourceGroup"] = group
    return config


def batch(config: Mapping[str, Any], *workers: str) -> LaunchBatch:
    spec = LaunchSpec(
        launch_config_id=LAUNCH_CONFIG_ID,
        region=LOCATION,
        capacity_per_worker=1,
        launch_config=config,
        worker_config=config["workerConfig"],
        pool_owner=OWNER,
    )
    intents = tuple(LaunchIntent(w, f"token-{w}") for w in workers)
    return LaunchBatch(POOL, spec, intents, batch_token=f"batch-{workers[0]}")


def ref(result: LaunchResult) -> WorkerRef:
    """The worker row's reference, as the provisioner records a launch."""
    return WorkerRef(result.worker_id, LOCATION, result.cloud_id, None, None, result.provider_data)


def wait_for(check: Callable[[], Any], timeout_s: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while not (found := check()):
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
    return found


def listed(provider: AzureProvider, worker: str, known: UnitRecords) -> Any:
    found = provider.list_instances(LOCATION, known)
    return next((i for i in found if i.worker_id == worker), None)


def deployments(sim: SimArm) -> dict[str, str]:
    """Deployment name -> provisioning state, of every deployment the sim holds."""
    return {d["id"].rsplit("/", 1)[1]: d["provisioningState"] for d in sim.deployments.summary()}


def terminate_until_gone(provider: AzureProvider, worker: WorkerRef) -> list[TerminateResult]:
    results = []
    deadline = time.monotonic() + 5.0
    while True:
        (result,) = provider.terminate([worker])
        results.append(result)
        assert result.error is None, result.error
        if result.gone:
            return results
        assert time.monotonic() < deadline, results
        time.sleep(0.02)


def test_an_arm_launch_config_deploys_a_vm_with_worker_managers_parameters(
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    scanning: AzureProvider,
    spec_id: str,
    compute: ComputeManagementClient,
    groups: ResourceManagementClient,
):
    config = launch_config(spec_id)

    told = []
    results = azure_provider.create(batch(config, "w-arm-1", "w-arm-2"), told.append)

    assert [r.error for r in results] == [None, None]
    # Each deployment's answer was told as its PUT answered (the provisioner records it then).
    assert sorted(told, key=lambda r: r.worker_id) == results
    for result in results:
        vm = f"vm-{result.worker_id}"
        assert result.tc_worker_id == vm  # the VM name is the Taskcluster workerId
        assert result.cloud_id == arm.vm_resource_id(AZURE_SUBSCRIPTION, ARM_GROUP, vm)
        assert arm.deployment_ref(result.provider_data) == arm.DeploymentRef(
            ARM_GROUP, f"deploy-{result.worker_id}"
        )
    # The launch config's group was made once, in its location; one PUT per worker.
    assert groups.resource_groups.get(ARM_GROUP).location == LOCATION
    counts = sim_arm.faults.counts()
    assert counts["ResourceGroups_CreateOrUpdate"] == 1
    assert counts["Deployments_CreateOrUpdate"] == 2
    (put,) = sim_arm.deployments.puts("deploy-w-arm-1")
    parameters = put.body["properties"]["parameters"]
    assert put.body["properties"]["templateLink"] == {"id": spec_id}
    assert {k: parameters[k]["value"] for k in ("vmSize", "imageId", "subnetId", "priority")} == {
        "vmSize": "Standard_F16s_v2",
        "imageId": IMAGE_ID,
        "subnetId": AZURE_SUBNET,
        "priority": "Spot",
    }
    assert parameters["vmName"] == {"value": "vm-w-arm-1"}
    assert len(parameters["computerName"]["value"]) <= 15

    # The deployment made the VM, with worker-manager's tags (what worker-runner reads) and
    # wm's ownership tags, and worker-manager's boot data.
    model = wait_for(lambda: _vm(compute, "vm-w-arm-1"))
    assert model.priority == "Spot"
    assert dict(model.tags) == {
        "team": "relops",
        "worker-pool-id": POOL,
        "provider-id": azure_provider.id,
        "worker-group": LOCATION,
        "root-url": AZURE_ROOT_URL,
        "created-by": f"taskcluster-wm-{azure_provider.id}",
        "managed-by": "taskcluster",
        "owner": OWNER,
        "launch-config-id": LAUNCH_CONFIG_ID,
        TAG_DEPLOYMENT: AZURE_DEPLOYMENT,
        TAG_PROVIDER: azure_provider.id,
        TAG_POOL: POOL,
        TAG_WORKER: "w-arm-1",
        TAG_LAUNCH_CONFIG: LAUNCH_CONFIG_ID,
    }
    custom = json.loads(base64.b64decode(sim_arm.custom_data("vm-w-arm-1") or ""))
    assert custom == {
        "workerPoolId": POOL,
        "workerGroup": LOCATION,
        "providerId": azure_provider.id,
        "rootUrl": AZURE_ROOT_URL,
        "workerConfig": {},
    }
    # The scan lists the launch config's group beside the provider's: both workers run.
    running = wait_for(
        lambda: (
            {
                i.worker_id: i
                for i in scanning.list_instances(LOCATION, records(config))
                if i.state is WorkerState.RUNNING
            }.keys()
            == {"w-arm-1", "w-arm-2"}
        )
    )
    assert running
    instance = listed(scanning, "w-arm-1", records(config))
    assert instance.tc_worker_id == "vm-w-arm-1"
    assert (instance.pool_id, instance.launch_config_id) == (POOL, LAUNCH_CONFIG_ID)


def _vm(compute: ComputeManagementClient, name: str, group: str = ARM_GROUP) -> Any:
    try:
        return compute.virtual_machines.get(group, name)
    except Exception:  # not there yet
        return None


def test_without_a_group_of_its_own_a_launch_config_deploys_into_the_providers(
    sim_arm: SimArm, azure_provider: AzureProvider, spec_id: str, compute
):
    (result,) = azure_provider.create(batch(launch_config(spec_id, group=None), "w-arm-home"))

    assert result.error is None
    assert arm.deployment_ref(result.provider_data).resource_group == AZURE_RESOURCE_GROUP
    assert "ResourceGroups_CheckExistence" not in sim_arm.faults.counts()
    assert wait_for(lambda: _vm(compute, "vm-w-arm-home", AZURE_RESOURCE_GROUP))


def test_launch_configs_in_two_locations_sharing_a_group_create_it_once_and_both_deploy(
    sim_arm: SimArm, azure_provider: AzureProvider, spec_id: str
):
    # Scenario: as Firefox CI's pools do, two launch configs in different locations name one
    # armDeploymentResourceGroup, and their batches are created at the same moment (ARM slow
    # enough for the two to overlap). ARM refuses a second PUT of a group in another location.
    sim_arm.faults.behaviour.update(latency_ms=200)
    east = launch_config(spec_id)
    west = launch_config(spec_id, location="westeurope")

    with ThreadPoolExecutor(2) as pool:
        results = list(
            pool.map(azure_provider.create, [batch(east, "w-arm-east"), batch(west, "w-arm-west")])
        )

    assert [r.error for (r,) in results] == [None, None]
    counts = sim_arm.faults.counts()
    assert (counts["ResourceGroups_CheckExistence"], counts["ResourceGroups_CreateOrUpdate"]) == (
        1,
        1,
    )
    assert len(sim_arm.deployments.puts()) == 2


def test_a_deployment_in_flight_is_a_requested_worker_and_counts_as_its_row(
    sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    sim_arm.faults.behaviour.update(boot_s=30)  # the VM's operation runs until it boots
    config = launch_config(spec_id)
    (result,) = azure_provider.create(batch(config, "w-arm-slow"))

    instance = wait_for(lambda: listed(scanning, "w-arm-slow", records(config)))

    assert instance.state is WorkerState.REQUESTED
    assert deployments(sim_arm) == {"deploy-w-arm-slow": "Running"}
    # Torn down while it runs: nothing is sent until it ends.
    (early,) = scanning.terminate([ref(result)])
    assert (early.gone, early.nothing_sent) == (False, True)


def test_a_retried_create_sends_the_same_deployment_and_makes_no_second_vm(
    sim_arm: SimArm, azure_provider: AzureProvider, spec_id: str
):
    config = launch_config(spec_id)
    # The first PUT is carried out and its answer lost: the gate sends it again.
    sim_arm.faults.force("lose", operation="Deployments_CreateOrUpdate")

    (first,) = azure_provider.create(batch(config, "w-arm-again"))
    wait_for(lambda: deployments(sim_arm).get("deploy-w-arm-again") == "Succeeded")
    # And the whole create again, as a retried batch would.
    (second,) = azure_provider.create(batch(config, "w-arm-again"))

    assert first.error is None and second.error is None
    assert (second.cloud_id, second.provider_data) == (first.cloud_id, first.provider_data)
    puts = sim_arm.deployments.puts("deploy-w-arm-again")
    assert len(puts) == 3
    assert all(p.body == puts[0].body for p in puts)  # the same deployment every time
    wait_for(lambda: deployments(sim_arm).get("deploy-w-arm-again") == "Succeeded")
    vms = [v for v in sim_arm.instances() if v.name == "vm-w-arm-again"]
    assert len(vms) == 1 and len(sim_arm.instances()) == 1


def test_a_template_that_does_not_declare_an_injected_parameter_is_a_definite_launch_error(
    sim_arm: SimArm, azure_provider: AzureProvider, spec_id: str
):
    template = copy.deepcopy(TEMPLATE)
    del template["parameters"]["customData"]
    template["resources"][-1]["properties"]["osProfile"].pop("customData")
    lacking = publish(sim_arm, template, "no-custom-data")

    results = azure_provider.create(batch(launch_config(lacking), "w-arm-bad", "w-arm-bad2"))

    for result in results:
        assert result.cloud_id is None and result.error is not None
        assert result.error.nothing_applied  # the row stops and becomes a pool error
        assert result.error.code == "InvalidTemplate"
        assert "does not declare the parameter(s) customData" in result.error.message
        assert f"launch config {LAUNCH_CONFIG_ID}" in result.error.message
    assert deployments(sim_arm) == {}
    assert sim_arm.resources() == []


def test_a_deployment_failing_half_way_shows_as_a_stopped_worker_and_leaves_nothing(
    sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    sim_arm.deployments.fail_halfway(1)  # the VM is made, its provisioning then fails
    config = launch_config(spec_id, createPublicIp=True, dataDiskSizeGB=32)
    (result,) = azure_provider.create(batch(config, "w-arm-half"))
    assert result.error is None
    known = records(config)

    failed = wait_for(
        lambda: (
            (i := listed(scanning, "w-arm-half", known)) and i.state is WorkerState.STOPPED and i
        )
    )

    assert failed.reason.startswith("arm-deployment-failed: OSProvisioningTimedOut")
    assert deployments(sim_arm) == {"deploy-w-arm-half": "Failed"}
    # The VM, its NIC, public IP, OS and data disks are left, as ARM leaves them.
    assert len(sim_arm.resources()) == 5
    terminate_until_gone(scanning, ref(result))
    assert sim_arm.resources() == []
    assert deployments(sim_arm) == {}
    assert listed(scanning, "w-arm-half", known) is None


@pytest.mark.parametrize("keep", [False, True])
def test_terminate_deletes_everything_the_deployment_made_then_the_deployment(
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    scanning: AzureProvider,
    spec_id: str,
    keep: bool,
):
    config = launch_config(spec_id, createPublicIp=True, dataDiskSizeGB=32)
    config["workerManager"]["keepDeployment"] = keep
    (result,) = azure_provider.create(batch(config, "w-arm-end"))
    wait_for(lambda: deployments(sim_arm).get("deploy-w-arm-end") == "Succeeded")
    made = set(sim_arm.resources())
    assert {r.rsplit("/", 2)[1] for r in made} == {
        "virtualMachines",
        "networkInterfaces",
        "publicIPAddresses",
        "disks",
    }

    # A row made before rows recorded what their deployments made (its provider data names
    # only the deployment): torn down from the deployment's own record.
    assert arm.made_of(ref(result).provider_data) is None

    results = terminate_until_gone(scanning, ref(result))

    assert sim_arm.resources() == []
    assert deployments(sim_arm) == ({"deploy-w-arm-end": "Succeeded"} if keep else {})
    counts = sim_arm.faults.counts()
    assert "DeploymentOperations_List" in counts  # the deployment's record was read
    assert counts["VirtualMachines_Delete"] == 1
    assert counts.get("Deployments_Delete", 0) == (0 if keep else 1)
    assert not results[0].nothing_sent  # the VM's DELETE
    # Terminating again finds nothing and sends nothing.
    (again,) = scanning.terminate([ref(result)])
    assert (again.gone, again.error) == (True, None)
    assert again.nothing_sent


def detaching(template: Mapping[str, Any]) -> dict[str, Any]:
    """The template with nothing deleted with its VM (ARM's default: Detach)."""
    text = json.dumps(template)
    text = text.replace(", 'deleteOption', 'Delete'", "")
    found = json.loads(text)
    vm = found["resources"][-1]["properties"]
    vm["storageProfile"]["osDisk"].pop("deleteOption")
    vm["networkProfile"]["networkInterfaces"][0].pop("properties")
    found["variables"]["ipConfig"].pop("properties")
    return found


@pytest.mark.parametrize("missing_status", [204, 404])
def test_resources_deleted_out_of_band_are_gone_not_errors(
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    scanning: AzureProvider,
    spec_id: str,
    missing_status: int,
):
    sim_arm.delete_missing_status = missing_status
    spec = publish(sim_arm, detaching(TEMPLATE), "detaching")
    config = launch_config(spec, createPublicIp=True, dataDiskSizeGB=32)
    (result,) = azure_provider.create(batch(config, "w-arm-oob"))
    wait_for(lambda: deployments(sim_arm).get("deploy-w-arm-oob") == "Succeeded")
    sim_arm.remove("vm-w-arm-oob")  # by hand: its NIC, public IP and disks stay
    sim_arm.remove_resource("vm-w-arm-oob-data")
    left = {r.rsplit("/", 1)[1] for r in sim_arm.resources()}
    assert left == {"vm-w-arm-oob-nic", "vm-w-arm-oob-ip", "vm-w-arm-oob-osdisk"}

    # The scan sees the worker's VM gone: it is stopped, and what is left is deleted (the OS
    # disk, which no deployment operation names, from the deployment's outputs).
    gone = wait_for(lambda: scanning.lookup([ref(result)]).get("w-arm-oob"))
    assert (gone.state, gone.reason) == (WorkerState.STOPPED, arm_workers.REASON_VM_GONE)
    terminate_until_gone(scanning, ref(result))
    assert sim_arm.resources() == []
    assert deployments(sim_arm) == {}
    assert scanning.lookup([ref(result)]) == {}


@pytest.mark.parametrize("group", [ARM_GROUP, None], ids=["own-group", "provider-group"])
def test_a_fresh_process_lists_the_groups_its_pools_and_rows_name(
    sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str, group
):
    # Scenario: the provisioner's process deployed two workers; the scanner's never deployed
    # anything. Its config alone names no ARM group, so it sees no ARM worker; the pools'
    # launch configs, or the rows alone (a launch config since removed), name the group.
    config = launch_config(spec_id, group=group)
    results = azure_provider.create(batch(config, "w-arm-a", "w-arm-b"))
    wait_for(lambda: set(deployments(sim_arm).values()) == {"Succeeded"})
    workers = {"w-arm-a", "w-arm-b"}
    sim_arm.faults.reset_counts()

    from_config = {i.worker_id for i in scanning.list_instances(LOCATION)}
    from_pools = scanning.list_instances(LOCATION, records(config))
    from_rows = scanning.list_instances(LOCATION, records(rows=[ref(r) for r in results]))

    if group is not None:
        assert from_config == set()  # the VMs are in the launch config's group
    for listing in (from_pools, from_rows):
        assert {i.worker_id: i.state for i in listing} == dict.fromkeys(
            workers, WorkerState.RUNNING
        )
        # Joined with their deployments, and recording what those made.
        assert all(arm.made_of(i.record) for i in listing)
    counts = sim_arm.faults.counts()
    assert "VirtualMachines_Get" not in counts and "Deployments_Get" not in counts  # by pages


def test_a_group_that_does_not_exist_lists_no_deployments_and_the_scan_goes_on(
    sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    # A row's group that is gone (deleted by hand, or a worker imported from a group that no
    # longer exists): ARM answers ResourceGroupNotFound for its deployments.
    config = launch_config(spec_id)
    results = azure_provider.create(batch(config, "w-arm-kept"))
    wait_for(lambda: set(deployments(sim_arm).values()) == {"Succeeded"})
    lost = WorkerRef(
        "w-arm-lost", LOCATION, provider_data=arm.DeploymentRef("no-such-group", "d").data()
    )

    listed = scanning.list_instances(LOCATION, records(config, rows=[lost]))

    assert {i.worker_id for i in listed} == {r.worker_id for r in results}


def test_a_leftover_of_this_wm_is_an_orphan_once_a_later_sweep_sees_it_again(
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    scanning: AzureProvider,
    spec_id: str,
    network: NetworkManagementClient,
):
    config = launch_config(spec_id)
    azure_provider.create(batch(config, "w-arm-live"))
    wait_for(lambda: deployments(sim_arm).get("deploy-w-arm-live") == "Succeeded")
    tags = {TAG_DEPLOYMENT: AZURE_DEPLOYMENT, TAG_WORKER: "w-arm-lost", TAG_POOL: POOL}
    nic = network.network_interfaces.begin_create_or_update(
        ARM_GROUP,
        "vm-w-arm-lost-nic",
        {
            "location": LOCATION,
            "tags": tags,
            "ip_configurations": [{"name": "ip", "subnet": {"id": AZURE_SUBNET}}],
        },
        polling=False,
    ).result()
    scanning._arm.sweep.interval_s = 0.0

    first = [i for i in scanning.list_instances(LOCATION, records(config)) if i.worker_id is None]
    second = [i for i in scanning.list_instances(LOCATION, records(config)) if i.worker_id is None]

    assert [i.cloud_id for i in first] == [nic.id]  # the live worker's NIC is attached
    assert second[0].launched_at == first[0].launched_at  # dated by the first sweep
    orphan = second[0]
    (result,) = scanning.terminate(
        [WorkerRef(orphan.cloud_id, LOCATION, orphan.cloud_id, None, None, orphan.provider_data)]
    )
    assert (result.gone, result.error) == (True, None)
    assert nic.id not in sim_arm.resources()
    assert any(r.endswith("/vm-w-arm-live-nic") for r in sim_arm.resources())


# -- through the provisioner and the scanner (real Postgres) -------------------------------------


def apply_arm_pool(
    engine, provider: AzureProvider, config: Mapping[str, Any], max_capacity: int = 10
) -> None:
    body = {
        "providerId": provider.id,
        "description": "Windows workers deployed from a template spec",
        "owner": OWNER,
        "emailOnError": False,
        "config": {
            "minCapacity": 0,
            "maxCapacity": max_capacity,
            "launchConfigs": [dict(config)],
        },
    }
    definition = parse_pool_definition(POOL, body, {provider.id: "azure"})
    apply_change(engine, ApplyDefinitions((definition,)), workers_register={provider.id: False})
    pool_store.ensure_scan_units(engine, [(provider.id, LOCATION)])


def provision(engine, provider: AzureProvider) -> None:
    Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)


def test_a_pool_of_arm_workers_runs_and_a_half_way_failure_leaves_nothing(
    engine, sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    apply_arm_pool(engine, azure_provider, launch_config(spec_id))
    scanner = Scanner(engine, {scanning.id: scanning}, missing_grace_s=0)
    sim_arm.faults.behaviour.update(boot_s=0.3)
    tasks.submit_tasks(engine, POOL, 1, 60.0)

    provision(engine, azure_provider)
    provision(engine, azure_provider)  # the deployment in flight is the requested capacity

    (row,) = list_workers(engine, pool_id=POOL)
    assert row.state is WorkerState.REQUESTED
    assert row.tc_worker_id == f"vm-{row.worker_id}"
    assert arm.deployment_ref(row.provider_data) == arm.DeploymentRef(
        ARM_GROUP, f"deploy-{row.worker_id}"
    )
    assert sim_arm.faults.counts()["Deployments_CreateOrUpdate"] == 1
    wait_for(lambda: deployments(sim_arm) == {f"deploy-{row.worker_id}": "Succeeded"})
    scanner.scan(azure_provider.id, LOCATION)
    assert list_workers(engine, pool_id=POOL)[0].state is WorkerState.RUNNING

    # A second worker's deployment makes its VM, then fails.
    sim_arm.deployments.fail_halfway(1)
    tasks.submit_tasks(engine, POOL, 1, 60.0)
    provision(engine, azure_provider)
    failing = next(w for w in list_workers(engine, pool_id=POOL) if w.worker_id != row.worker_id)
    wait_for(lambda: deployments(sim_arm).get(f"deploy-{failing.worker_id}") == "Failed")

    def stopped() -> bool:
        scanner.scan(azure_provider.id, LOCATION)
        states = {w.worker_id: w for w in list_workers(engine, pool_id=POOL)}
        return states[failing.worker_id].state is WorkerState.STOPPED

    wait_for(stopped)
    after = {w.worker_id: w for w in list_workers(engine, pool_id=POOL)}
    assert after[failing.worker_id].stop_reason.startswith(
        "arm-deployment-failed: OSProvisioningTimedOut"
    )
    assert after[row.worker_id].state is WorkerState.RUNNING
    # Nothing of the failed deployment is left; the running worker's resources are untouched,
    # and its deployment went once the scan recorded what it made on the row.
    assert all(row.worker_id in r for r in sim_arm.resources())
    assert deployments(sim_arm) == {}
    made = arm.made_of(after[row.worker_id].provider_data)
    assert made is not None and made.succeeded
    assert {i.lower() for i in made.ids} >= {r.lower() for r in sim_arm.resources()}


def test_a_failed_deployment_is_a_pool_error_against_its_launch_config(
    engine, sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    apply_arm_pool(engine, azure_provider, launch_config(spec_id))
    scanner = Scanner(engine, {scanning.id: scanning}, missing_grace_s=0)
    sim_arm.deployments.fail_halfway(1)
    tasks.submit_tasks(engine, POOL, 1, 60.0)
    provision(engine, azure_provider)
    (row,) = list_workers(engine, pool_id=POOL)
    wait_for(lambda: deployments(sim_arm).get(f"deploy-{row.worker_id}") == "Failed")

    scanner.scan(azure_provider.id, LOCATION)

    errors = list_errors(engine, POOL)
    assert [(e.launch_config_id, e.provider_id) for e in errors] == [
        (LAUNCH_CONFIG_ID, azure_provider.id)
    ]
    assert "OSProvisioningTimedOut" in errors[0].description


def test_a_key_vault_reference_reaches_arm_untouched_and_arm_resolves_it(
    sim_arm: SimArm, azure_provider: AzureProvider, spec_id: str, compute
):
    vault = (
        f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{SPEC_GROUP}"
        "/providers/Microsoft.KeyVault/vaults/relops"
    )
    sim_arm.deployments.put_secret(vault, "image", IMAGE_ID)
    reference = {"reference": {"keyVault": {"id": vault}, "secretName": "image"}}
    config = launch_config(spec_id)
    config["armDeployment"]["parameters"]["imageId"] = reference

    (result,) = azure_provider.create(batch(config, "w-arm-kv"))

    assert result.error is None
    (put,) = sim_arm.deployments.puts("deploy-w-arm-kv")
    assert put.body["properties"]["parameters"]["imageId"] == reference
    model = wait_for(lambda: _vm(compute, "vm-w-arm-kv"))
    assert model.storage_profile.image_reference.id == IMAGE_ID


def test_a_deployment_that_failed_before_its_vm_is_removed_the_same_way(
    sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    unknown_subnet = AZURE_SUBNET.replace("/wm-vnet/", "/no-such-vnet/")
    config = launch_config(spec_id, createPublicIp=True, subnetId=unknown_subnet)
    (result,) = azure_provider.create(batch(config, "w-arm-early"))
    assert result.error is None  # ARM took the deployment; the NIC fails as it runs

    failed = wait_for(lambda: listed(scanning, "w-arm-early", records(config)))

    assert failed.state is WorkerState.STOPPED
    assert failed.reason.startswith("arm-deployment-failed: ")
    assert [r.rsplit("/", 1)[1] for r in sim_arm.resources()] == ["vm-w-arm-early-ip"]
    terminate_until_gone(scanning, ref(result))
    assert sim_arm.resources() == []
    assert deployments(sim_arm) == {}


def test_an_arm_worker_registers_before_any_scan_saw_its_vm(
    engine, sim_arm: SimArm, azure_provider: AzureProvider, spec_id: str
):
    apply_arm_pool(engine, azure_provider, launch_config(spec_id))
    tasks.submit_tasks(engine, POOL, 1, 60.0)
    provision(engine, azure_provider)
    (row,) = list_workers(engine, pool_id=POOL)
    assert "vmId" not in row.provider_data  # the deployment was accepted; no VM exists yet
    wait_for(lambda: deployments(sim_arm) == {f"deploy-{row.worker_id}": "Succeeded"})

    assert arm.deployment_ref(row.provider_data) is not None
    # What worker-runner posts is checked against the vmId ARM gives the row's VM, as
    # worker-manager's registerWorker does when its row has none yet.
    config = azure_config(sim_arm, identity_roots=(str(sim_arm.identity_trust_path),))
    verifier = azure_identity.make_verifier(config, AZURE_DEPLOYMENT, AZURE_ROOT_URL)
    expected = ExpectedIdentity(
        deployment_id=AZURE_DEPLOYMENT,
        provider_id=azure_provider.id,
        pool_id=POOL,
        worker_id=row.worker_id,
        region=LOCATION,
        cloud_id=row.cloud_id,
        audience=AZURE_ROOT_URL,
        provider_data=row.provider_data,
        requested_at=row.created,
        tc_worker_id=row.tc_worker_id,
    )
    verifier.verify(sim_arm.attested_document(row.tc_worker_id), expected)


def test_two_providers_deploying_into_one_group_each_see_only_their_own(
    sim_arm: SimArm, make_azure_provider: Callable[..., AzureProvider], spec_id: str
):
    # Firefox CI's id beside one a naive encoding would merge with it, in one resource group.
    trusted = make_azure_provider(sim_arm, id="azure_trusted")
    sibling = make_azure_provider(sim_arm, id="azure-trusted")
    config = launch_config(spec_id)
    (mine,) = trusted.create(batch(config, "w-trusted"))
    (theirs,) = sibling.create(batch(config, "w-sibling"))
    assert mine.error is None and theirs.error is None
    known = records(config)
    for provider in (sibling, trusted):
        wait_for(
            lambda p=provider: (
                {i.state for i in p.list_instances(LOCATION, known)} == {WorkerState.RUNNING}
            )
        )

    assert {i.worker_id for i in trusted.list_instances(LOCATION, known)} == {"w-trusted"}
    assert {i.worker_id for i in sibling.list_instances(LOCATION, known)} == {"w-sibling"}
    assert trusted.lookup([ref(theirs)]) == {}
    assert set(sibling.lookup([ref(theirs)])) == {"w-sibling"}


# -- deployments deleted once recorded; ARM's history limit ------------------------------------


def pool_rows(engine) -> dict[str, WorkerRecord]:
    return {w.worker_id: w for w in list_workers(engine, pool_id=POOL, limit=None)}


def launch(engine, provider: AzureProvider, count: int) -> list[str]:
    """`count` more tasks, and the provisioner's passes until it has a worker for each: the
    new workers' ids."""
    before = set(pool_rows(engine))
    tasks.submit_tasks(engine, POOL, count, 600.0)
    new: list[str] = []

    def launched() -> bool:
        provision(engine, provider)
        new[:] = sorted(set(pool_rows(engine)) - before)
        return len(new) >= count

    wait_for(launched, 30.0)
    return new


def scan_until(
    scanner: Scanner, provider: AzureProvider, check: Callable[[], Any], timeout_s: float = 30.0
) -> Any:
    def scanned() -> Any:
        scanner.scan(provider.id, LOCATION)
        return check()

    return wait_for(scanned, timeout_s)


def remove(engine, workers: list[str]) -> None:
    """Their tasks are done and each worker removes itself, as worker-runner does when idle."""
    for task in tasks.claim_tasks(engine, POOL, "done", limit=len(workers)):
        tasks.complete_task(engine, task.task_id, "done")
    for worker in workers:
        worker_writes.request_removal(engine, worker, "removed-by-worker")


def scan_until_all(
    engine, scanner: Scanner, provider: AzureProvider, workers: list[str], state: WorkerState
) -> None:
    def all_there() -> bool:
        rows = pool_rows(engine)
        return all(rows[w].state is state for w in workers)

    scan_until(scanner, provider, all_there)


def of_workers(sim: SimArm, workers: list[str]) -> list[str]:
    """The sim's resources made for these workers (all are named after their VMs)."""
    names = tuple(f"/vm-{w}".lower() for w in workers)
    return [r for r in sim.resources() if any(n in r.lower() for n in names)]


@pytest.mark.parametrize("group", [ARM_GROUP, None], ids=["own-group", "provider-group"])
@pytest.mark.parametrize("keep", [False, True])
def test_a_succeeded_deployment_is_recorded_on_its_row_and_deleted_unless_kept(
    engine,
    sim_arm: SimArm,
    azure_provider: AzureProvider,
    scanning: AzureProvider,
    spec_id: str,
    keep: bool,
    group: str | None,
):
    # The scanner's provider is not the provisioner's (as in the Procfile): it finds the
    # deployment from the pool's launch config and the row, wherever the launch config puts
    # it, the provider's own group included (no armDeploymentResourceGroup).
    # Nothing goes with the VM (ARM's default): every resource is wm's to delete.
    spec = publish(sim_arm, detaching(TEMPLATE), "detaching")
    config = launch_config(spec, group=group, createPublicIp=True, dataDiskSizeGB=32)
    config["workerManager"]["keepDeployment"] = keep
    apply_arm_pool(engine, azure_provider, config)
    scanner = Scanner(engine, {scanning.id: scanning}, missing_grace_s=0)
    (worker,) = launch(engine, azure_provider, 1)
    wait_for(lambda: deployments(sim_arm) == {f"deploy-{worker}": "Succeeded"})
    made = set(sim_arm.resources())  # its VM, NIC, public IP, OS and data disks

    scan_until_all(engine, scanner, azure_provider, [worker], WorkerState.RUNNING)

    record = arm.made_of(pool_rows(engine)[worker].provider_data)
    assert record is not None and record.succeeded
    assert {i.lower() for i in record.ids} == {r.lower() for r in made}
    # The deployment goes once the row holds what it made (worker-manager's "to avoid hitting
    # the 800 deployments limit"), unless the launch config keeps it.
    assert deployments(sim_arm) == ({f"deploy-{worker}": "Succeeded"} if keep else {})
    assert sim_arm.faults.counts().get("Deployments_Delete", 0) == (0 if keep else 1)

    # Removed: torn down from the row's record, whether the deployment is there or not.
    remove(engine, [worker])
    scan_until_all(engine, scanner, azure_provider, [worker], WorkerState.STOPPED)

    assert sim_arm.resources() == []
    assert deployments(sim_arm) == ({f"deploy-{worker}": "Succeeded"} if keep else {})
    counts = sim_arm.faults.counts()
    assert "DeploymentOperations_List" not in counts  # the record was enough
    # A kept deployment stays at teardown too (the schema: "instead of deleting them after
    # success or during teardown"); an unkept one's DELETE is sent once more (204: gone).
    assert counts.get("Deployments_Delete", 0) == (0 if keep else 2)


def delete_deployment(sim: SimArm, name: str, group: str = ARM_GROUP) -> None:
    """Out of band, as ARM's pruning of a group's history deletes one."""
    client = DeploymentsMgmtClient(sdk_credential(sim), AZURE_SUBSCRIPTION, **sdk_options(sim))
    client.deployments.begin_delete(group, name).result()


def test_a_failed_deployment_is_recorded_and_kept_until_its_worker_is_torn_down(
    engine, sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    spec = publish(sim_arm, detaching(TEMPLATE), "detaching")
    apply_arm_pool(engine, azure_provider, launch_config(spec, createPublicIp=True))
    sim_arm.deployments.fail_halfway(1)
    (worker,) = launch(engine, azure_provider, 1)
    wait_for(lambda: deployments(sim_arm) == {f"deploy-{worker}": "Failed"})
    made = set(sim_arm.resources())  # its VM, NIC, public IP and OS disk
    sim_arm.faults.behaviour.update(delete_s=0.5)  # the VM's delete takes a while
    scanner = Scanner(engine, {scanning.id: scanning}, missing_grace_s=0)

    # The scan that sees it failed records what its operations made, then starts tearing
    # the worker down; the deployment stays meanwhile, as worker-manager keeps it.
    scanner.scan(azure_provider.id, LOCATION)

    row = pool_rows(engine)[worker]
    assert row.state is WorkerState.STOPPING
    record = arm.made_of(row.provider_data)
    assert record is not None and record.state == "Failed"
    assert {i.lower() for i in record.ids} == {r.lower() for r in made}
    assert deployments(sim_arm) == {f"deploy-{worker}": "Failed"}
    # Lost now (as ARM prunes a group's history), it is not missed: the row has what it takes.
    delete_deployment(sim_arm, f"deploy-{worker}")
    scan_until_all(engine, scanner, azure_provider, [worker], WorkerState.STOPPED)
    assert sim_arm.resources() == []
    assert sim_arm.faults.counts()["DeploymentOperations_List"] == 1


def test_a_group_filled_past_arms_history_limit_leaks_nothing(
    engine, sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    """A pool's workers in one resource group, their deployments kept (keepDeployment),
    launched, torn down and launched again until the group's history passes its limit and
    ARM prunes the oldest deployments: those of the workers still running among them. Each
    worker is torn down from its row's record, and nothing is left.

    ARM's figures scaled down tenfold (the sim's settings: 80 held at most, pruned to 60 once
    past 70): with ARM's own, the same run takes a minute here (about eight calls to tear down
    each worker); the rule is the same at any scale, and
    test_sim_arm_deployments.py checks it at ARM's own."""
    history = sim_arm.deployments
    history.history_limit, history.history_prune_above, history.history_prune_to = 80, 70, 60
    spec = publish(sim_arm, detaching(TEMPLATE), "detaching")  # nothing goes with a VM
    config = launch_config(spec, createPublicIp=True, dataDiskSizeGB=32)
    config["workerManager"]["keepDeployment"] = True
    apply_arm_pool(engine, azure_provider, config, max_capacity=100)
    scanner = Scanner(engine, {scanning.id: scanning}, missing_grace_s=0)
    long_lived = launch(engine, azure_provider, 5)
    scan_until_all(engine, scanner, azure_provider, long_lived, WorkerState.RUNNING)
    cycles = 0

    while len(history.puts()) <= history.history_prune_above:
        workers = launch(engine, azure_provider, 25)
        scan_until_all(engine, scanner, azure_provider, workers, WorkerState.RUNNING)
        remove(engine, workers)
        scan_until_all(engine, scanner, azure_provider, workers, WorkerState.STOPPED)
        assert of_workers(sim_arm, workers) == []
        cycles += 1

    # Past 70 the history was pruned to 60: the oldest went, the running workers' among them.
    # What those made is still there, and only their rows know it.
    assert cycles == 3 and len(history.puts()) == 80
    pruned = {p.rsplit("/", 1)[1] for p in history.pruned}
    assert len(pruned) == 71 - 60
    assert {f"deploy-{w}" for w in long_lived} <= pruned
    assert len(of_workers(sim_arm, long_lived)) == 5 * len(long_lived)  # VM, NIC, IP, 2 disks
    assert list_errors(engine, POOL) == []  # no deployment refused for the history's limit

    remove(engine, long_lived)
    scan_until_all(engine, scanner, azure_provider, long_lived, WorkerState.STOPPED)

    assert sim_arm.resources() == []  # no VM, NIC, public IP or disk left
    assert [w for w in pool_rows(engine).values() if w.state is not WorkerState.STOPPED] == []


def test_deployments_gone_before_the_scan_recorded_them_leave_nothing_after_the_sweep(
    engine, sim_arm: SimArm, azure_provider: AzureProvider, scanning: AzureProvider, spec_id: str
):
    """Deployments pruned (or deleted by hand) before any scan saw them end: the rows know
    only where they were, and the OS disk each VM made (recorded from the VM list: no tag
    names it). Their VMs and OS disks are torn down by name, and what else each left (its NIC
    and public IP) is found by its tags, as the leftovers of a crash are."""
    spec = publish(sim_arm, detaching(TEMPLATE), "detaching")
    apply_arm_pool(engine, azure_provider, launch_config(spec, createPublicIp=True))
    workers = launch(engine, azure_provider, 3)
    wait_for(lambda: set(deployments(sim_arm).values()) == {"Succeeded"})
    for worker in workers:
        delete_deployment(sim_arm, f"deploy-{worker}")
    scanning._arm.sweep.interval_s = 0.0  # every scan sweeps
    scanner = Scanner(engine, {scanning.id: scanning}, missing_grace_s=0, orphan_grace_s=0)
    scan_until_all(engine, scanner, azure_provider, workers, WorkerState.RUNNING)
    rows = pool_rows(engine)
    assert all(arm.made_of(rows[w].provider_data) is None for w in workers)
    assert all(arm.os_disk_of(rows[w].provider_data) for w in workers)

    remove(engine, workers)
    scan_until_all(engine, scanner, azure_provider, workers, WorkerState.STOPPED)
    scan_until(scanner, azure_provider, lambda: sim_arm.resources() == [])

    assert deployments(sim_arm) == {}
