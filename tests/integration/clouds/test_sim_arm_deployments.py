"""The simulated ARM's Deployments, Template Specs and resource groups, driven by the real
azure-mgmt-resource, -resource-deployments and -resource-templatespecs SDKs over HTTPS."""

from __future__ import annotations

import base64
import copy
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from azure.core.exceptions import HttpResponseError
from azure.identity import ClientSecretCredential
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient
from azure.mgmt.resource.deployments import DeploymentsMgmtClient
from azure.mgmt.resource.resources import ResourceManagementClient
from azure.mgmt.resource.templatespecs import TemplateSpecsClient
from azure.mgmt.resource.templatespecs.models import TemplateSpec, TemplateSpecVersion

from tests.fixtures.sim_arm import AZURE_SUBSCRIPTION
from wmsim.azure.arm import SimArm
from wmsim.azure.templates import WORKER_TEMPLATE
from wmsim.control import metadata_base_url
from wmsim.wsgi import ServerThread

GROUP = "wm-arm-workers"
LOCATION = "eastus"
GROUP_ID = f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{GROUP}"
PREFIX = f"{GROUP_ID}/providers"
SUBSCRIPTION_ID = f"/subscriptions/{AZURE_SUBSCRIPTION}"
IMAGE = f"{SUBSCRIPTION_ID}/resourceGroups/images/providers/Microsoft.Compute/images/win2022"
SUBNET = f"{PREFIX}/Microsoft.Network/virtualNetworks/wm-vnet/subnets/workers"
VAULT = f"{SUBSCRIPTION_ID}/resourceGroups/vaults/providers/Microsoft.KeyVault/vaults/wm"
TEMPLATE = json.loads(WORKER_TEMPLATE.read_text())
TAGS = {
    "worker-pool-id": "proj-ci/win",
    "provider-id": "azure-arm",
    "worker-group": LOCATION,
    "root-url": "https://tc.example.test",
}
CUSTOM_DATA = base64.b64encode(json.dumps({"workerPoolId": "proj-ci/win"}).encode()).decode()
VM = "Microsoft.Compute/virtualMachines"
NIC = "Microsoft.Network/networkInterfaces"
IP = "Microsoft.Network/publicIPAddresses"
DISK = "Microsoft.Compute/disks"


@dataclass
class Clients:
    groups: ResourceManagementClient
    deployments: DeploymentsMgmtClient
    specs: TemplateSpecsClient
    compute: ComputeManagementClient
    network: NetworkManagementClient


@pytest.fixture
def arm(sim_arm: SimArm) -> Iterator[Clients]:
    credential = ClientSecretCredential(
        "tenant",
        "client",
        "secret",
        authority=sim_arm.endpoint,
        disable_instance_discovery=True,
        connection_verify=str(sim_arm.cert_path),
    )
    options: dict[str, Any] = {
        "base_url": sim_arm.endpoint,
        "connection_verify": str(sim_arm.cert_path),
        "retry_total": 0,
        "polling_interval": 0,
    }
    clients = Clients(
        ResourceManagementClient(credential, AZURE_SUBSCRIPTION, **options),
        DeploymentsMgmtClient(credential, AZURE_SUBSCRIPTION, **options),
        TemplateSpecsClient(credential, AZURE_SUBSCRIPTION, **options),
        ComputeManagementClient(credential, AZURE_SUBSCRIPTION, **options),
        NetworkManagementClient(credential, AZURE_SUBSCRIPTION, **options),
    )
    clients.groups.resource_groups.create_or_update(GROUP, {"location": LOCATION})
    sim_arm.register_image(IMAGE)
    yield clients
    for client in (clients.groups, clients.deployments, clients.specs):
        client.close()


def parameters(vm_name: str = "vm-w1", **changes: Any) -> dict[str, Any]:
    values = {
        "location": LOCATION,
        "vmName": vm_name,
        "computerName": vm_name[-15:],
        "adminUsername": "wmadmin",
        "adminPassword": "Wm-Secret-12345",
        "customData": CUSTOM_DATA,
        "tags": TAGS,
        "imageId": IMAGE,
        "subnetId": SUBNET,
        "vmSize": "Standard_D2s_v5",
    }
    values.update(changes)
    return {name: {"value": value} for name, value in values.items()}


def inline(template: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    return {
        "properties": {
            "mode": "Incremental",
            "template": copy.deepcopy(template or TEMPLATE),
            "parameters": parameters(**params),
        }
    }


def spec_version(arm: Clients, name: str = "worker", version: str = "2.0") -> str:
    arm.specs.template_specs.create_or_update(GROUP, name, TemplateSpec(location=LOCATION))
    created = arm.specs.template_spec_versions.create_or_update(
        GROUP, name, version, TemplateSpecVersion(location=LOCATION, main_template=TEMPLATE)
    )
    return str(created.id)


def deploy(arm: Clients, name: str, body: dict[str, Any]) -> Any:
    return arm.deployments.deployments.begin_create_or_update(GROUP, name, body).result()


def operations(arm: Clients, name: str) -> list[Any]:
    return list(arm.deployments.deployment_operations.list(GROUP, name))


def targets(ops: list[Any]) -> dict[str, tuple[str, str]]:
    """resourceType -> (resourceName, provisioningState) of the operations naming one."""
    return {
        op.properties.target_resource.resource_type: (
            op.properties.target_resource.resource_name,
            op.properties.provisioning_state,
        )
        for op in ops
        if op.properties.target_resource
    }


def wait_for(check: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def refused(call: Callable[[], Any]) -> HttpResponseError:
    with pytest.raises(HttpResponseError) as caught:
        call()
    return caught.value


# -- deploying -----------------------------------------------------------------------------------


def test_a_template_spec_deployed_by_id_succeeds_and_its_operations_name_every_resource(
    sim_arm: SimArm, arm: Clients
):
    version_id = spec_version(arm)
    body = {
        "properties": {
            "mode": "Incremental",
            "templateLink": {"id": version_id},
            "parameters": parameters(createPublicIp=True, dataDiskSizeGB=64),
        },
        "tags": {"wm": "deploy"},
    }

    deployment = deploy(arm, "deploy-w1", body)

    assert deployment.properties.provisioning_state == "Succeeded"
    assert deployment.properties.template_link.id == version_id
    assert deployment.tags == {"wm": "deploy"}
    ids = {
        VM: f"{PREFIX}/{VM}/vm-w1",
        NIC: f"{PREFIX}/{NIC}/vm-w1-nic",
        IP: f"{PREFIX}/{IP}/vm-w1-ip",
        DISK: f"{PREFIX}/{DISK}/vm-w1-data",
    }
    assert targets(operations(arm, "deploy-w1")) == {
        VM: ("vm-w1", "Succeeded"),
        NIC: ("vm-w1-nic", "Succeeded"),
        IP: ("vm-w1-ip", "Succeeded"),
        DISK: ("vm-w1-data", "Succeeded"),
    }
    assert sorted(r.id for r in deployment.properties.output_resources) == sorted(ids.values())
    outputs = deployment.properties.outputs["resourceIds"]["value"]
    assert outputs["vm"] == ids[VM] and outputs["publicIp"] == ids[IP]
    assert outputs["privateIp"].startswith("10.0.")
    # Real resources of the sim: the VM's OS disk (made by the VM) too.
    assert set(sim_arm.resources()) == {*ids.values(), f"{PREFIX}/{DISK}/vm-w1-osdisk"}
    # Secure parameters are never echoed; the others are, with ARM's type names.
    shown = deployment.properties.parameters
    assert shown["adminPassword"] == {"type": "SecureString"}
    assert shown["vmName"] == {"type": "String", "value": "vm-w1"}
    assert shown["dataDiskSizeGB"] == {"type": "Int", "value": 64}


def test_the_deployed_vm_is_a_vm_of_the_sim_with_the_templates_tags_in_its_metadata(
    sim_arm: SimArm, arm: Clients
):
    deploy(arm, "deploy-w2", inline(vm_name="vm-w2"))

    [vm] = arm.compute.virtual_machines.list(GROUP)
    assert vm.name == "vm-w2" and vm.tags == TAGS
    assert vm.priority == "Spot" and vm.eviction_policy == "Delete"
    assert vm.os_profile.computer_name == "vm-w2" and vm.os_profile.admin_password is None
    assert sim_arm.custom_data("vm-w2") == CUSTOM_DATA  # on its disk, never in ARM's answers
    base = metadata_base_url("azure", sim_arm.endpoint, vm.id)
    reply = requests.get(
        f"{base}/metadata/instance?api-version=2025-04-07",
        headers={"Metadata": "true"},
        verify=str(sim_arm.cert_path),
        timeout=5,
    )
    compute = reply.json()["compute"]
    assert {t["name"]: t["value"] for t in compute["tagsList"]} == TAGS
    assert compute["osProfile"]["adminUsername"] == "wmadmin"
    assert compute["name"] == "vm-w2" and compute["location"] == LOCATION
    [listed] = [v for v in sim_arm.instances() if v.name == "vm-w2"]
    assert listed.state == "running" and listed.spot


def test_a_template_served_over_http_deploys_by_uri(sim_arm: SimArm, arm: Clients):
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(TEMPLATE).encode()]

    server = ServerThread(app).start()
    try:
        uri = f"{server.base_url}/templates/worker-vm.json"
        body = {
            "properties": {
                "mode": "Complete",  # accepted, run as Incremental
                "templateLink": {"uri": uri, "queryString": "sv=sig"},
                "parameters": parameters(vm_name="vm-w3"),
            }
        }

        deployment = deploy(arm, "deploy-w3", body)
    finally:
        server.stop()

    assert deployment.properties.provisioning_state == "Succeeded"
    assert deployment.properties.mode == "Complete"
    assert deployment.properties.template_link.uri == uri
    assert deployment.properties.template_link.content_version == "2.0.0.0"
    assert [vm.name for vm in sim_arm.instances()] == ["vm-w3"]


def test_a_template_uri_off_this_machine_is_never_fetched(arm: Clients):
    body = {
        "properties": {
            "mode": "Incremental",
            "templateLink": {"uri": "https://templates.example.com/worker.json"},
            "parameters": parameters(),
        }
    }

    error = refused(lambda: deploy(arm, "deploy-far", body))

    assert (error.status_code, error.error.code) == (400, "InvalidContentLink")


def test_a_deployment_is_accepted_then_running_until_its_vm_has_booted(
    sim_arm: SimArm, arm: Clients
):
    sim_arm.faults.behaviour.update(boot_s=0.5)
    poller = arm.deployments.deployments.begin_create_or_update(
        GROUP, "deploy-slow", inline(vm_name="vm-slow"), polling=False
    )
    assert poller.result().properties.provisioning_state == "Accepted"

    running = arm.deployments.deployments.get(GROUP, "deploy-slow")

    assert running.properties.provisioning_state == "Running"
    assert targets(operations(arm, "deploy-slow")) == {
        NIC: ("vm-slow-nic", "Succeeded"),
        VM: ("vm-slow", "Running"),
    }
    wait_for(
        lambda: (
            arm.deployments.deployments.get(GROUP, "deploy-slow").properties.provisioning_state
            == "Succeeded"
        )
    )
    assert targets(operations(arm, "deploy-slow"))[VM] == ("vm-slow", "Succeeded")


def test_deployments_are_listed_per_resource_group(arm: Clients):
    deploy(arm, "deploy-a", inline(vm_name="vm-a"))
    deploy(arm, "deploy-b", inline(vm_name="vm-b"))

    listed = arm.deployments.deployments.list_by_resource_group(GROUP)

    assert sorted(d.name for d in listed) == ["deploy-a", "deploy-b"]
    failed = arm.deployments.deployments.list_by_resource_group(
        GROUP, filter="provisioningState eq 'Failed'"
    )
    assert list(failed) == []


# -- errors --------------------------------------------------------------------------------------


def broken(path: str, value: Any) -> dict[str, Any]:
    """The worker template with one value replaced (path: keys and indexes, '/'-separated)."""
    template = copy.deepcopy(TEMPLATE)
    *parents, last = path.split("/")
    node: Any = template
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[int(last) if isinstance(node, list) else last] = value
    return template


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        (
            inline(undeclared="x"),
            "InvalidTemplate",
            "The template parameters 'undeclared' in the parameters file are not valid",
        ),
        (
            inline(broken("resources/3/properties/priority", "[frobnicate('x')]")),
            "InvalidTemplate",
            "The template function 'frobnicate' is not valid.",
        ),
        (
            inline(broken("variables/nicName", "[concat(parameters('vmName'), ]")),
            "InvalidTemplate",
            "is not valid",
        ),
        (inline(priority="Low"), "InvalidTemplate", "not part of the allowed value(s)"),
        (
            inline(computerName="a-computer-name-too-long"),
            "InvalidTemplateDeployment",
            "is not valid according to the validation procedure",
        ),
        (
            {"properties": {"mode": "Incremental", "parameters": parameters()}},
            "InvalidDeployment",
            "exactly one of 'template' and 'templateLink'",
        ),
        (
            {"properties": {"mode": "Sometimes", "template": TEMPLATE}},
            "InvalidRequestContent",
            "DeploymentMode",
        ),
        (
            {
                "properties": {
                    "mode": "Incremental",
                    "templateLink": {
                        "id": f"{PREFIX}/Microsoft.Resources/templateSpecs/no/versions/1"
                    },
                }
            },
            "InvalidTemplateSpec",
            "Unable to retrieve the template content",
        ),
    ],
)
def test_a_deployment_arm_refuses_is_a_400_at_put_and_leaves_nothing(
    sim_arm: SimArm, arm: Clients, body: dict[str, Any], code: str, message: str
):
    error = refused(lambda: deploy(arm, "deploy-bad", body))

    assert (error.status_code, error.error.code) == (400, code)
    assert message in error.error.message
    assert not arm.deployments.deployments.check_existence(GROUP, "deploy-bad")
    assert sim_arm.resources() == []
    [put] = sim_arm.deployments.puts("deploy-bad")
    assert (put.status, put.error_code, put.body) == (400, code, body)


def test_preflight_names_the_resource_it_refuses(arm: Clients):
    error = refused(lambda: deploy(arm, "deploy-long", inline(computerName="x" * 16)))

    [detail] = error.error.details
    assert (detail.code, detail.target) == ("InvalidParameter", "computerName")


def test_a_deployment_into_a_missing_resource_group_is_not_found(arm: Clients):
    error = refused(
        lambda: arm.deployments.deployments.begin_create_or_update("nowhere", "d", inline())
    )

    assert (error.status_code, error.error.code) == (404, "ResourceGroupNotFound")


@pytest.mark.parametrize(
    ("changes", "failing", "code", "left"),
    [
        ({"imageId": f"{IMAGE}-missing"}, VM, "NotFound", [NIC]),
        ({"vmSize": "Standard_Imaginary"}, VM, "InvalidParameter", [NIC]),
        (
            {"subnetId": f"{PREFIX}/Microsoft.Network/virtualNetworks/none/subnets/x"},
            NIC,
            "InvalidResourceReference",
            [],
        ),
    ],
)
def test_a_resource_failing_fails_the_deployment_and_what_was_made_before_stays(
    sim_arm: SimArm, arm: Clients, changes: dict[str, Any], failing: str, code: str, left: list[str]
):
    error = refused(lambda: deploy(arm, "deploy-fail", inline(**changes)))

    assert error.error.code == "DeploymentFailed"
    deployment = arm.deployments.deployments.get(GROUP, "deploy-fail")
    assert deployment.properties.provisioning_state == "Failed"
    [detail] = deployment.properties.error.details
    assert detail.code == code
    ops = operations(arm, "deploy-fail")
    [bad] = [op for op in ops if op.properties.target_resource.resource_type == failing]
    assert bad.properties.provisioning_state == "Failed"
    assert bad.properties.status_message["error"]["code"] == code
    # A VM whose NIC failed is never started: no operation names it.
    assert sorted(targets(ops)) == sorted([failing, *left])
    assert [r.split("/providers/")[1].rsplit("/", 1)[0] for r in sim_arm.resources()] == left


def test_a_deployment_beyond_the_quota_fails_with_arms_quota_error(sim_arm: SimArm, arm: Clients):
    sim_arm.faults.behaviour.update(quota_instances=1)
    deploy(arm, "deploy-q1", inline(vm_name="vm-q1"))

    error = refused(lambda: deploy(arm, "deploy-q2", inline(vm_name="vm-q2")))

    assert error.error.code == "DeploymentFailed"
    ops = operations(arm, "deploy-q2")
    assert targets(ops)[VM] == ("vm-q2", "Failed")
    [vm_op] = [op for op in ops if op.properties.target_resource.resource_type == VM]
    assert vm_op.properties.status_code == "Conflict"
    assert vm_op.properties.status_message["error"]["code"] == "OperationNotAllowed"
    assert [vm.name for vm in sim_arm.instances()] == ["vm-q1"]


def test_a_half_way_failure_leaves_the_vm_and_reports_failed(sim_arm: SimArm, arm: Clients):
    requests.post(
        f"{sim_arm.endpoint}/_sim/deployments/fail-halfway",
        json={"count": 1},
        verify=str(sim_arm.cert_path),
        timeout=5,
    ).raise_for_status()

    error = refused(
        lambda: deploy(arm, "deploy-half", inline(vm_name="vm-half", createPublicIp=True))
    )

    assert error.error.code == "DeploymentFailed"
    ops = operations(arm, "deploy-half")
    assert targets(ops) == {
        IP: ("vm-half-ip", "Succeeded"),
        NIC: ("vm-half-nic", "Succeeded"),
        VM: ("vm-half", "Failed"),
    }
    [vm_op] = [op for op in ops if op.properties.target_resource.resource_type == VM]
    failure = vm_op.properties.status_message["error"]
    assert failure["code"] == "ResourceDeploymentFailure"
    assert failure["details"][0]["code"] == "OSProvisioningTimedOut"
    # Everything it made is left behind, the VM included: the provider must remove it.
    vm = arm.compute.virtual_machines.get(GROUP, "vm-half")
    assert vm.provisioning_state == "Failed"
    assert len(sim_arm.resources()) == 4  # VM, OS disk, NIC, IP
    # Only that deployment: the next one succeeds.
    assert deploy(arm, "deploy-next", inline(vm_name="vm-next")).properties.provisioning_state == (
        "Succeeded"
    )


def test_a_half_way_failure_rate_fails_that_share_of_deployments(sim_arm: SimArm, arm: Clients):
    sim_arm.deployments.halfway_failure_rate = 1.0

    refused(lambda: deploy(arm, "deploy-r1", inline(vm_name="vm-r1")))

    assert [vm.state for vm in sim_arm.instances()] == ["stopped"]  # failed provisioning


# -- idempotency and deletion --------------------------------------------------------------------


def test_a_second_put_of_the_same_deployment_makes_no_second_vm(sim_arm: SimArm, arm: Clients):
    body = inline(vm_name="vm-once", createPublicIp=True)
    deploy(arm, "deploy-once", body)
    before = sorted(sim_arm.resources())

    again = deploy(arm, "deploy-once", copy.deepcopy(body))

    assert again.properties.provisioning_state == "Succeeded"
    assert sorted(sim_arm.resources()) == before
    assert [vm.name for vm in sim_arm.instances()] == ["vm-once"]
    assert [p.status for p in sim_arm.deployments.puts("deploy-once")] == [201, 200]


def test_a_put_while_the_deployment_runs_is_deployment_active(sim_arm: SimArm, arm: Clients):
    sim_arm.faults.behaviour.update(boot_s=0.5)
    body = inline(vm_name="vm-busy")
    arm.deployments.deployments.begin_create_or_update(GROUP, "deploy-busy", body, polling=False)
    arm.deployments.deployments.get(GROUP, "deploy-busy")  # ARM has started it

    error = refused(lambda: deploy(arm, "deploy-busy", copy.deepcopy(body)))
    active = refused(lambda: arm.deployments.deployments.begin_delete(GROUP, "deploy-busy"))

    assert (error.status_code, error.error.code) == (409, "DeploymentActive")
    assert (active.status_code, active.error.code) == (409, "DeploymentActive")
    assert [vm.name for vm in sim_arm.instances()] == ["vm-busy"]


def test_an_answer_lost_after_the_put_leaves_one_deployment_that_a_retry_finds(
    sim_arm: SimArm, arm: Clients
):
    sim_arm.faults.behaviour.update(hang_s=0.05)
    sim_arm.faults.force("lose", operation="Deployments_CreateOrUpdate")
    body = inline(vm_name="vm-lost")

    lost = refused(lambda: deploy(arm, "deploy-lost", body))
    retried = deploy(arm, "deploy-lost", copy.deepcopy(body))

    assert lost.status_code == 500
    assert retried.properties.provisioning_state == "Succeeded"
    assert [vm.name for vm in sim_arm.instances()] == ["vm-lost"]
    journal = sim_arm.faults.journal("Deployments_CreateOrUpdate")
    assert [entry.key for entry in journal] == ["deploy-lost", "deploy-lost"]
    assert journal[0].digest == journal[1].digest and journal[0].lost


def test_deleting_a_deployment_removes_its_record_and_leaves_its_resources(
    sim_arm: SimArm, arm: Clients
):
    deploy(arm, "deploy-gone", inline(vm_name="vm-kept"))
    held = sorted(sim_arm.resources())

    arm.deployments.deployments.begin_delete(GROUP, "deploy-gone").result()

    assert not arm.deployments.deployments.check_existence(GROUP, "deploy-gone")
    missing = refused(lambda: arm.deployments.deployments.get(GROUP, "deploy-gone"))
    assert (missing.status_code, missing.error.code) == (404, "DeploymentNotFound")
    assert sorted(sim_arm.resources()) == held
    # The VM goes with its NIC and OS disk (deleteOption Delete in the template).
    arm.compute.virtual_machines.begin_delete(GROUP, "vm-kept").result()
    wait_for(lambda: sim_arm.resources() == [])


# -- the history's limit ------------------------------------------------------------------------

EMPTY = {
    "$schema": "https://schema.management.azure.com/schemas/2019-04-01/deploymentTemplate.json#",
    "contentVersion": "1.0.0.0",
    "resources": [],
}


def put_empty(arm: Clients, name: str) -> None:
    """A deployment of nothing, not waited for: it has succeeded by the next request."""
    body = {"properties": {"mode": "Incremental", "template": EMPTY}}
    arm.deployments.deployments.begin_create_or_update(GROUP, name, body, polling=False).result()


def test_a_history_past_700_is_pruned_to_600_oldest_first_and_never_a_running_deployment(
    sim_arm: SimArm, arm: Clients
):
    sim_arm.faults.behaviour.update(boot_s=600)  # runs until its VM boots: all along
    arm.deployments.deployments.begin_create_or_update(
        GROUP, "deploy-running", inline(vm_name="vm-running"), polling=False
    ).result()
    fill = [f"deploy-{n:03}" for n in range(700)]
    for name in fill[:-1]:
        put_empty(arm, name)
    assert sim_arm.deployments.history(AZURE_SUBSCRIPTION, GROUP) == ["deploy-running", *fill[:-1]]
    assert sim_arm.deployments.pruned == []  # 700 held: not past 700 yet

    put_empty(arm, fill[-1])

    # 701: the oldest that do not run go until 600 are left (101 of them).
    history = sim_arm.deployments.history(AZURE_SUBSCRIPTION, GROUP)
    assert history == ["deploy-running", *fill[101:]]
    assert [p.rsplit("/", 1)[1] for p in sim_arm.deployments.pruned] == fill[:101]
    assert not arm.deployments.deployments.check_existence(GROUP, fill[0])
    # Only the records: what the running deployment makes is untouched.
    assert any(r.endswith("/vm-running") for r in sim_arm.resources())
    # A deployment PUT again under its name moves to the newest place.
    put_empty(arm, fill[101])
    assert sim_arm.deployments.history(AZURE_SUBSCRIPTION, GROUP)[-1] == fill[101]


def test_a_new_deployment_into_a_full_history_that_cannot_be_pruned_is_refused(
    sim_arm: SimArm, arm: Clients
):
    # Scaled down (the sim's setting): three deployments running fill a history of three, as
    # 800 would fill ARM's, and running ones are never pruned.
    sim_arm.deployments.history_limit = 3
    sim_arm.deployments.history_prune_above = sim_arm.deployments.history_prune_to = 3
    sim_arm.faults.behaviour.update(boot_s=600)
    for n in range(3):
        arm.deployments.deployments.begin_create_or_update(
            GROUP, f"deploy-{n}", inline(vm_name=f"vm-{n}"), polling=False
        ).result()

    error = refused(lambda: put_empty(arm, "deploy-one-more"))

    assert (error.status_code, error.error.code) == (400, "DeploymentQuotaExceeded")
    assert "would exceed the quota of '3'" in error.message
    assert sim_arm.deployments.history(AZURE_SUBSCRIPTION, GROUP) == [
        "deploy-0",
        "deploy-1",
        "deploy-2",
    ]


# -- faults, parameters, records -----------------------------------------------------------------


def test_deployment_calls_are_counted_and_throttled_like_other_operations(
    sim_arm: SimArm, arm: Clients
):
    sim_arm.faults.force("throttle", operation="Deployments_CreateOrUpdate")

    throttled = refused(lambda: deploy(arm, "deploy-t", inline()))
    deploy(arm, "deploy-t", inline())
    operations(arm, "deploy-t")

    assert throttled.status_code == 429 and throttled.error.code == "TooManyRequests"
    counts = sim_arm.faults.counts()
    assert counts["Deployments_CreateOrUpdate"] == 2
    assert counts["DeploymentOperations_List"] == 1
    assert counts["ResourceGroups_CreateOrUpdate"] == 1


def test_a_spot_vm_deployed_is_pre_empted_like_any_other(sim_arm: SimArm, arm: Clients):
    sim_arm.faults.behaviour.update(preempt_share=1.0, preempt_within_s=0.0)

    deploy(arm, "deploy-spot", inline(vm_name="vm-spot"))

    # Evicted by deletion (evictionPolicy Delete): its NIC and OS disk go with it.
    wait_for(lambda: sim_arm.instances() == [])
    assert sim_arm.resources() == []


def test_key_vault_references_resolve_to_the_secrets_the_sim_holds(sim_arm: SimArm, arm: Clients):
    sim_arm.deployments.put_secret(VAULT, "worker-custom-data", CUSTOM_DATA)
    body = inline(vm_name="vm-kv")
    body["properties"]["parameters"]["customData"] = {
        "reference": {"keyVault": {"id": VAULT}, "secretName": "worker-custom-data"}
    }

    deploy(arm, "deploy-kv", body)

    assert sim_arm.custom_data("vm-kv") == CUSTOM_DATA


@pytest.mark.parametrize(
    ("vault", "secret", "status", "code"),
    [
        (VAULT, "no-such-secret", 404, "KeyVaultParameterReferenceSecretRetrieveFailed"),
        (f"{VAULT}-other", "worker-custom-data", 400, "KeyVaultParameterReferenceNotFound"),
    ],
)
def test_a_key_vault_reference_to_an_unknown_secret_is_refused(
    sim_arm: SimArm, arm: Clients, vault: str, secret: str, status: int, code: str
):
    sim_arm.deployments.put_secret(VAULT, "worker-custom-data", CUSTOM_DATA)
    body = inline()
    body["properties"]["parameters"]["adminPassword"] = {
        "reference": {"keyVault": {"id": vault}, "secretName": secret}
    }

    error = refused(lambda: deploy(arm, "deploy-kv-bad", body))

    assert (error.status_code, error.error.code) == (status, code)
    assert sim_arm.resources() == []


def test_every_deployment_put_is_recorded_with_its_body_as_sent(sim_arm: SimArm, arm: Clients):
    body = inline(vm_name="vm-rec")
    deploy(arm, "deploy-rec", body)

    reply = requests.get(
        f"{sim_arm.endpoint}/_sim/deployment-puts",
        params={"name": "deploy-rec"},
        verify=str(sim_arm.cert_path),
        timeout=5,
    ).json()

    assert [(p["name"], p["status"], p["errorCode"]) for p in reply] == [("deploy-rec", 201, None)]
    assert reply[0]["body"] == body  # the admin password included: a test double
    summary = requests.get(
        f"{sim_arm.endpoint}/_sim/deployments", verify=str(sim_arm.cert_path), timeout=5
    ).json()
    assert [(d["provisioningState"], len(d["resources"])) for d in summary] == [("Succeeded", 2)]


# -- resource groups and template specs ----------------------------------------------------------


def test_resource_groups_are_created_checked_read_and_listed(sim_arm: SimArm, arm: Clients):
    groups = arm.groups.resource_groups
    assert not groups.check_existence("wm-new")

    created = groups.create_or_update("wm-new", {"location": "westeurope", "tags": {"a": "b"}})

    assert (created.name, created.location, created.tags) == ("wm-new", "westeurope", {"a": "b"})
    assert groups.check_existence("wm-new")
    assert groups.get("wm-new").properties.provisioning_state == "Succeeded"
    # The sim's default group exists from the start, and so does the images' group.
    assert sorted(g.name for g in groups.list()) == sorted(
        [GROUP, "images", "wm-demo-workers", "wm-new"]
    )
    moved = refused(lambda: groups.create_or_update("wm-new", {"location": "eastus"}))
    assert (moved.status_code, moved.error.code) == (409, "InvalidResourceGroupLocation")
    missing = refused(lambda: groups.get("wm-none"))
    assert (missing.status_code, missing.error.code) == (404, "ResourceGroupNotFound")


def test_a_group_holding_resources_made_the_old_way_exists(sim_arm: SimArm, arm: Clients):
    arm.network.public_ip_addresses.begin_create_or_update(
        "wm-legacy", "ip-1", {"location": LOCATION}
    ).result()

    assert arm.groups.resource_groups.check_existence("wm-legacy")


def test_a_template_spec_version_holds_its_main_template(arm: Clients):
    version_id = spec_version(arm, "worker", "1.0")

    version = arm.specs.template_spec_versions.get(GROUP, "worker", "1.0")
    spec = arm.specs.template_specs.get(GROUP, "worker")

    assert version.id == version_id
    assert version.main_template == TEMPLATE
    assert list(spec.versions) == ["1.0"]
    orphan = refused(
        lambda: arm.specs.template_spec_versions.create_or_update(
            GROUP, "none", "1.0", TemplateSpecVersion(location=LOCATION, main_template=TEMPLATE)
        )
    )
    assert (orphan.status_code, orphan.error.code) == (404, "ParentResourceNotFound")


def test_a_template_spec_seeded_through_the_control_endpoint_deploys_by_id(
    sim_arm: SimArm, arm: Clients
):
    version_id = (
        f"{SUBSCRIPTION_ID}/resourceGroups/template-spec/providers/Microsoft.Resources/"
        "templateSpecs/taskcluster-arm-template/versions/1.0"
    )
    requests.post(
        f"{sim_arm.endpoint}/_sim/template-specs",
        json={"id": version_id, "mainTemplate": TEMPLATE},
        verify=str(sim_arm.cert_path),
        timeout=5,
    ).raise_for_status()
    body = {
        "properties": {
            "mode": "Incremental",
            "templateLink": {"id": version_id},
            "parameters": parameters(vm_name="vm-seeded"),
        }
    }

    deployment = deploy(arm, "deploy-seeded", body)

    assert deployment.properties.provisioning_state == "Succeeded"
    assert arm.groups.resource_groups.check_existence("template-spec")
    spec = arm.specs.template_spec_versions.get("template-spec", "taskcluster-arm-template", "1.0")
    assert spec.main_template == TEMPLATE
