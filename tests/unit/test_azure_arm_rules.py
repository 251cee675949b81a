"""ARM-template launch configs: the pure decisions of wm/providers/azure/arm.py and
arm_workers.py, by table."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wm.errors import CloudError, ErrorCategory, UnknownCloudState
from wm.kinds import azure as boot
from wm.kinds.azure import ARM_INJECTED_PARAMETERS
from wm.model import CloudInstance, WorkerState
from wm.pools.definition import DefinitionInvalid, parse_pool_definition
from wm.providers.azure import arm, arm_workers
from wm.providers.azure.names import vm_name
from wm.providers.base import (
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    TAG_WORKER,
)

SUB = "00000000-0000-0000-0000-000000000000"
GROUP = "rg-tc-azure-pool"
DEPLOYMENT = "wm-prod"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KEY_VAULT = {"reference": {"keyVault": {"id": "/subscriptions/s/vaults/kv"}, "secretName": "pw"}}


def rid(kind: str, name: str, group: str = GROUP) -> str:
    types = {
        "vm": "Microsoft.Compute/virtualMachines",
        "nic": "Microsoft.Network/networkInterfaces",
        "ip": "Microsoft.Network/publicIPAddresses",
        "disk": "Microsoft.Compute/disks",
        "vnet": "Microsoft.Network/virtualNetworks",
    }
    return f"/subscriptions/{SUB}/resourceGroups/{group}/providers/{types[kind]}/{name}"


def arm_config(**extra: Any) -> dict[str, Any]:
    return {
        "armDeployment": {
            "mode": "Incremental",
            "templateLink": {"id": "/subscriptions/s/resourceGroups/t/providers/spec/v/1"},
            "parameters": {
                "location": {"value": "westus3"},
                "vmSize": {"value": "Standard_F8s_v2"},
                "adminPassword": KEY_VAULT,
                "vmName": {"value": "given-by-the-user"},
            },
        },
        "workerConfig": {},
        **extra,
    }


# -- names and bodies ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("worker_id", "expected"),
    [
        ("w0123456789abcd", "deploy-w0123456789abcd"),
        ("w-bulk-0001", "deploy-w-bulk-0001"),
    ],
)
def test_the_deployment_is_named_as_worker_manager_names_it_from_the_vm(worker_id, expected):
    name = arm.deployment_name(vm_name(worker_id))
    assert name == expected
    assert arm.DeploymentRef(GROUP, name).vm_name == vm_name(worker_id)


@pytest.mark.parametrize(
    ("launch_config", "group", "keep", "where"),
    [
        (arm_config(), "wm-provider-rg", False, "westus3"),
        (arm_config(armDeploymentResourceGroup=GROUP), GROUP, False, "westus3"),
        (arm_config(armDeploymentResourceGroup=""), "wm-provider-rg", False, "westus3"),
        (arm_config(workerManager={"keepDeployment": True}), "wm-provider-rg", True, "westus3"),
        (arm_config(workerManager={"keepDeployment": "yes"}), "wm-provider-rg", False, "westus3"),
        ({"armDeployment": {"parameters": {}}}, "wm-provider-rg", False, None),
    ],
)
def test_a_launch_config_names_its_group_keep_flag_and_worker_group(
    launch_config, group, keep, where
):
    assert arm.resource_group(launch_config, "wm-provider-rg") == group
    assert arm.keep_deployment(launch_config) is keep
    assert arm.location(launch_config) == where


VM_BODY = {"location": "westus3", "hardwareProfile": {"vmSize": "Standard_D2s_v5"}}


@pytest.mark.parametrize(
    ("launch_configs", "rows", "expected"),
    [
        # No ARM-template launch config and no row with a deployment: no group (plain VMs).
        ([], [], []),
        ([VM_BODY], [{"vmId": "x"}], []),
        # worker-manager's fallback: no armDeploymentResourceGroup is the provider's group.
        ([arm_config()], [], ["wm-provider-rg"]),
        ([arm_config(armDeploymentResourceGroup=GROUP)], [], [GROUP]),
        # The worker group is the deployment's location parameter (worker-manager's).
        ([arm_config(armDeploymentResourceGroup=GROUP, location="eastus")], [], [GROUP]),
        ([arm_config(armDeploymentResourceGroup="rg-b")], [], ["rg-b"]),
        # A row names a group no launch config names any more (a definition changed since).
        ([], [arm.DeploymentRef("rg-old", "deploy-1").data()], ["rg-old"]),
        (
            [arm_config(armDeploymentResourceGroup=GROUP), arm_config()],
            [arm.DeploymentRef(GROUP.upper(), "deploy-1").data()],
            [GROUP, "wm-provider-rg"],
        ),
    ],
)
def test_the_groups_a_scan_lists_come_from_the_launch_configs_and_the_rows(
    launch_configs, rows, expected
):
    assert arm.deployment_groups("wm-provider-rg", "westus3", launch_configs, rows) == expected


def test_a_launch_config_of_another_region_adds_no_group():
    # Its workers are another scan unit's: that unit lists its group.
    elsewhere = arm_config(armDeploymentResourceGroup=GROUP)
    elsewhere["armDeployment"]["parameters"]["location"] = {"value": "eastus"}
    assert arm.deployment_groups("wm-provider-rg", "westus3", [elsewhere], []) == []


def injected() -> dict[str, dict[str, Any]]:
    return boot.azure_arm_parameters(
        tags={"worker-pool-id": "proj/pool", TAG_WORKER: "w1"},
        vm_name="vm-w1",
        computer_name="wm0123456789abc",
        admin_username="u0123456789abcdef012",
        admin_password="Wm-9secret",
        custom_data=base64.b64encode(b"{}").decode(),
    )


def test_worker_managers_parameters_override_the_definitions_and_the_rest_pass_through():
    config = arm_config()
    before = copy.deepcopy(config)

    body = arm.deployment_body(config["armDeployment"], injected(), {"owner": "o"})

    parameters = body["properties"]["parameters"]
    assert set(ARM_INJECTED_PARAMETERS) <= set(parameters)
    assert parameters["vmName"] == {"value": "vm-w1"}  # the definition's own value is overridden
    assert parameters["adminPassword"] == {"value": "Wm-9secret"}
    assert parameters["tags"] == {"value": {"worker-pool-id": "proj/pool", TAG_WORKER: "w1"}}
    # The definition's other parameters, a Key Vault reference among them, are untouched.
    assert parameters["vmSize"] == {"value": "Standard_F8s_v2"}
    assert parameters["location"] == {"value": "westus3"}
    # Everything else of armDeployment is the body's properties, verbatim.
    assert body["properties"]["mode"] == "Incremental"
    assert body["properties"]["templateLink"] == config["armDeployment"]["templateLink"]
    assert body["tags"] == {"owner": "o"}
    assert config == before  # the launch config is never changed


def test_a_key_vault_reference_for_a_parameter_wm_does_not_own_is_sent_as_it_is():
    config = arm_config()
    config["armDeployment"]["parameters"]["sshKey"] = KEY_VAULT

    body = arm.deployment_body(config["armDeployment"], injected(), {})

    assert body["properties"]["parameters"]["sshKey"] == KEY_VAULT


SIM_MESSAGE = (
    "The template parameters 'customData, vmName' in the parameters file are not valid; they "
    "are not present in the original template and can therefore not be provided at deployment "
    "time. The only supported parameters for this template are 'location, vmSize, tags'."
)
ARM_MESSAGE = (
    "Deployment template validation failed: 'The template parameters 'computerName' in the "
    "parameters file are not valid; they are not present in the original template and can "
    "therefore not be provided at deployment time. The only supported parameters for this "
    "template are 'location, vmName, tags, customData'. Please see "
    "https://aka.ms/arm-pass-parameter-values for usage details.'."
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (SIM_MESSAGE, ("customData", "vmName")),
        (ARM_MESSAGE, ("computerName",)),
        ("The template parameters 'vmSize' in the parameters file are not valid.", ()),
        ("The template resource 'vm' is not valid: 'vmName' is too long.", ()),
        ("Template validation failed: unexpected token.", ()),
    ],
)
def test_arms_refusal_is_read_for_the_injected_parameters_the_template_lacks(message, expected):
    assert arm.undeclared_parameters(message) == expected


def test_a_template_without_an_injected_parameter_is_a_definite_error_naming_it():
    refusal = CloudError("azure", ErrorCategory.BAD_CONFIG, "InvalidTemplate", SIM_MESSAGE)

    error = arm.template_error(refusal, "lc-arm")

    assert error.nothing_applied and error.code == "InvalidTemplate"
    assert "launch config lc-arm" in error.message
    assert "does not declare the parameter(s) customData, vmName" in error.message
    other = CloudError("azure", ErrorCategory.BAD_CONFIG, "InvalidTemplate", "bad expression")
    assert arm.template_error(other, "lc-arm") is other


def test_admin_credentials_repeat_for_a_worker_within_a_process_and_nowhere_else():
    first, second = b"a" * 32, b"b" * 32
    username, password = arm.admin_credentials(first, "w1")

    assert arm.admin_credentials(first, "w1") == (username, password)
    assert arm.admin_credentials(first, "w2") != (username, password)
    assert arm.admin_credentials(second, "w1") != (username, password)
    assert len(username) == 20 and username[0].isalpha() and username.isalnum()
    assert password.startswith("Wm-9") and len(password) == 32


# -- what ARM shows --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("Accepted", arm.Phase.IN_FLIGHT),
        ("Running", arm.Phase.IN_FLIGHT),
        ("Succeeded", arm.Phase.SUCCEEDED),
        ("Failed", arm.Phase.FAILED),
        ("Canceled", arm.Phase.FAILED),
        ("Deleting", arm.Phase.GONE),
    ],
)
def test_deployment_states_map_through_the_table(state, phase):
    assert arm_workers.deployment_phase("azure", state) is phase


def test_an_unknown_deployment_state_is_an_error_not_a_guess():
    with pytest.raises(UnknownCloudState):
        arm_workers.deployment_phase("azure", "Exploding")


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (None, None),
        ({"code": "InvalidTemplate", "message": "bad"}, "InvalidTemplate: bad"),
        (
            {
                "code": "DeploymentFailed",
                "message": "At least one resource deployment operation failed.",
                "details": [
                    {
                        "code": "ResourceDeploymentFailure",
                        "message": "terminal provisioning state 'Failed'",
                        "details": [{"code": "OSProvisioningTimedOut", "message": "too slow"}],
                    },
                    {"code": "SkuNotAvailable", "message": "no F8s_v2 in westus3"},
                ],
            },
            "OSProvisioningTimedOut: too slow; SkuNotAvailable: no F8s_v2 in westus3",
        ),
    ],
)
def test_a_failure_is_told_by_its_innermost_errors(error, text):
    assert arm_workers.failure_text(error) == text


def deployment_json(
    name: str = "deploy-w1",
    state: str = "Succeeded",
    *,
    keep: bool = False,
    owner: str = DEPLOYMENT,
    timestamp: str = "2026-01-01T11:59:30.1234567Z",
    **props: Any,
) -> dict[str, Any]:
    tags = {
        TAG_DEPLOYMENT: owner,
        TAG_WORKER: name.removeprefix("deploy-"),
        TAG_POOL: "proj/pool",
        TAG_LAUNCH_CONFIG: "lc-arm",
        "worker-group": "westus3",
    }
    if keep:
        tags[arm.TAG_KEEP] = "true"
    return {
        "id": f"/subscriptions/{SUB}/resourceGroups/{GROUP}/providers/"
        f"Microsoft.Resources/deployments/{name}",
        "name": name,
        "tags": tags,
        "properties": {"provisioningState": state, "timestamp": timestamp, **props},
    }


def test_a_deployment_is_read_with_its_worker_failure_and_the_resources_its_outputs_name():
    raw = deployment_json(
        state="Failed",
        keep=True,
        error={"code": "DeploymentFailed", "details": [{"code": "Quota", "message": "full"}]},
        outputs={
            "resourceIds": {
                "type": "Object",
                "value": {"vm": rid("vm", "vm-w1"), "vnet": rid("vnet", "shared"), "ip": ""},
            }
        },
        outputResources=[{"id": rid("nic", "vm-w1-nic")}],
    )

    seen = arm_workers.view("azure", GROUP, raw)

    assert seen.ref == arm.DeploymentRef(GROUP, "deploy-w1", keep=True)
    assert (seen.phase, seen.worker_id) == (arm.Phase.FAILED, "w1")
    assert seen.reason == "arm-deployment-failed: Quota: full"
    assert seen.ended_at == datetime(2026, 1, 1, 11, 59, 30, 123456, tzinfo=UTC)
    # A shared network is not the deployment's to delete, even when an output names it.
    assert seen.resource_ids == (rid("vm", "vm-w1"), rid("nic", "vm-w1-nic"))


def operation(target: str | None, kind: str = "Create") -> dict[str, Any]:
    props: dict[str, Any] = {"provisioningOperation": kind, "provisioningState": "Succeeded"}
    if target is not None:
        props["targetResource"] = {"id": target}
    return {"properties": props}


@pytest.mark.parametrize(
    ("operations", "extra", "expected"),
    [
        ([], [], arm.Teardown()),
        (
            [
                operation(rid("ip", "vm-w1-ip")),
                operation(rid("nic", "vm-w1-nic")),
                operation(rid("disk", "vm-w1-data")),
                operation(rid("vm", "vm-w1")),
                operation(None, "EvaluateDeploymentOutput"),
            ],
            [],
            arm.Teardown(
                vms=(rid("vm", "vm-w1"),),
                nics_and_disks=(rid("nic", "vm-w1-nic"), rid("disk", "vm-w1-data")),
                public_ips=(rid("ip", "vm-w1-ip"),),
            ),
        ),
        (
            # A read of an existing resource is not the deployment's; another type is not wm's.
            [operation(rid("ip", "shared-ip"), "Read"), operation(rid("vnet", "shared"))],
            [],
            arm.Teardown(),
        ),
        (
            # The outputs add what no operation names (the OS disk the VM made); once each.
            [operation(rid("vm", "vm-w1"))],
            [
                rid("vm", "vm-w1").upper().replace("/SUBSCRIPTIONS", "/subscriptions"),
                rid("disk", "vm-w1-osdisk"),
            ],
            arm.Teardown(vms=(rid("vm", "vm-w1"),), nics_and_disks=(rid("disk", "vm-w1-osdisk"),)),
        ),
    ],
)
def test_the_teardown_is_what_the_deployment_made_in_the_order_arm_allows(
    operations, extra, expected
):
    assert arm.teardown_plan(operations, extra) == expected


def deployment(state: str, *, keep: bool = False, ended_ago_s: float = 0) -> arm.DeploymentView:
    stamp = (NOW - timedelta(seconds=ended_ago_s)).isoformat()
    failure = {"code": "SkuNotAvailable", "message": "gone"}
    return arm_workers.view(
        "azure",
        GROUP,
        deployment_json(
            state=state,
            keep=keep,
            timestamp=stamp,
            **({"error": failure} if state == "Failed" else {}),
        ),
    )


R, X = WorkerState.REQUESTED, WorkerState.STOPPED
FAILED_REASON = "arm-deployment-failed: SkuNotAvailable: gone"


@pytest.mark.parametrize(
    ("state", "keep", "ended_ago_s", "listing", "expected"),
    [
        ("Running", False, 0, True, (R, None)),
        ("Accepted", True, 3600, False, (R, None)),
        ("Failed", False, 0, True, (X, FAILED_REASON)),
        ("Failed", False, 86400, True, (X, FAILED_REASON)),  # not torn down yet: still a worker
        ("Failed", True, 60, True, (X, FAILED_REASON)),
        ("Failed", True, 86400, True, None),  # kept long past: history, not a worker
        ("Failed", True, 86400, False, (X, FAILED_REASON)),  # a row asks: tear it down
        ("Succeeded", False, 5, True, None),  # the VM may just be missing from the list
        ("Succeeded", False, 600, True, (X, arm_workers.REASON_VM_GONE)),
        ("Succeeded", True, 600, True, None),
        ("Succeeded", True, 5, False, (X, arm_workers.REASON_VM_GONE)),
        ("Deleting", False, 600, False, None),
    ],
)
def test_a_deployment_without_a_seen_vm_stands_for_a_worker_by_the_table(
    state, keep, ended_ago_s, listing, expected
):
    found = arm_workers.deployment_instance(
        deployment(state, keep=keep, ended_ago_s=ended_ago_s),
        subscription=SUB,
        region="westus3",
        now=NOW,
        listing=listing,
    )

    if expected is None:
        assert found is None
        return
    assert found is not None
    assert (found.state, found.reason) == expected
    assert found.worker_id == "w1" and found.tc_worker_id == "vm-w1"
    assert found.cloud_id == rid("vm", "vm-w1")
    assert (found.pool_id, found.launch_config_id) == ("proj/pool", "lc-arm")
    assert arm.deployment_ref(found.provider_data) == arm.DeploymentRef(GROUP, "deploy-w1", keep)


def vm(worker: str = "w1", state: WorkerState = WorkerState.RUNNING) -> CloudInstance:
    return CloudInstance(
        worker_id=worker,
        cloud_id=rid("vm", f"vm-{worker}"),
        region="westus3",
        state=state,
        reason=None,
        provider_data={"vmId": "1234"},
        tc_worker_id=f"vm-{worker}",
    )


@pytest.mark.parametrize(
    ("vms", "states", "expected"),
    [
        ([vm()], [], [(WorkerState.RUNNING, None, False)]),
        ([vm()], ["Succeeded"], [(WorkerState.RUNNING, None, True)]),
        ([vm(state=R)], ["Running"], [(R, None, True)]),
        # Failed half-way: the VM runs, the deployment failed. The worker is stopped.
        ([vm()], ["Failed"], [(X, FAILED_REASON, True)]),
        ([], ["Running"], [(R, None, True)]),
        ([], ["Failed"], [(X, FAILED_REASON, True)]),
        ([], ["Succeeded"], []),
    ],
)
def test_a_scan_joins_vms_with_their_deployments(vms, states, expected):
    views = [deployment(state, ended_ago_s=10) for state in states]

    found = arm_workers.join(vms, views, subscription=SUB, region="westus3", now=NOW)

    assert [
        (i.state, i.reason, arm.deployment_ref(i.provider_data) is not None) for i in found
    ] == expected
    for instance in found:
        assert instance.worker_id == "w1"
        if vms:
            assert instance.provider_data["vmId"] == "1234"


def leftover(
    kind: str, *, attached: bool = False, worker: str = "w9", **tags: str
) -> arm_workers.Leftover:
    return arm_workers.Leftover(
        resource_id=rid(kind, f"vm-{worker}-{kind}"),
        location="westus3",
        tags={TAG_DEPLOYMENT: DEPLOYMENT, TAG_WORKER: worker, TAG_POOL: "proj/pool", **tags},
        attached=attached,
    )


@pytest.mark.parametrize(
    ("resource", "orphan"),
    [
        (leftover("nic"), True),
        (leftover("ip"), True),
        (leftover("disk"), True),
        (leftover("nic", attached=True), False),
        (leftover("disk", worker="w-busy"), False),  # its deployment still runs
        (leftover("nic", **{TAG_DEPLOYMENT: "another-wm"}), False),
        (leftover("nic", **{TAG_PROVIDER: "azure_trusted"}), True),
        # Another provider's of the same deployment, in the same group: ids differ in case only.
        (leftover("nic", **{TAG_PROVIDER: "Azure_Trusted"}), False),
        (leftover("nic", **{TAG_PROVIDER: "azure-trusted"}), False),
        (
            arm_workers.Leftover(rid("nic", "x"), "eastus", {TAG_DEPLOYMENT: DEPLOYMENT}, False),
            False,
        ),
        (arm_workers.Leftover(rid("nic", "untagged"), "westus3", {}, False), False),
    ],
)
def test_leftovers_are_this_wms_unattached_resources_of_workers_not_being_deployed(
    resource, orphan
):
    first = NOW - timedelta(minutes=10)

    found = arm_workers.leftovers(
        [resource],
        deployment_id=DEPLOYMENT,
        provider_id="azure_trusted",
        region="westus3",
        busy_workers={"w-busy"},
        first_seen={resource.resource_id.lower(): first},
    )

    assert bool(found) is orphan
    if orphan:
        (instance,) = found
        assert instance.worker_id is None and instance.cloud_id == resource.resource_id
        assert (instance.state, instance.reason) == (X, arm_workers.REASON_LEFTOVER)
        assert instance.launched_at == first and instance.pool_id == "proj/pool"


@pytest.mark.parametrize(
    ("state", "props", "operations", "expected"),
    [
        (
            # Succeeded: its VM, and every resource its outputResources and outputs name (any
            # type in outputResources; outputs only of the types wm deletes); each once.
            "Succeeded",
            {
                "outputResources": [
                    {"id": rid("nic", "vm-w1-nic")},
                    {"id": rid("vm", "vm-w1").lower()},
                    {"id": rid("vnet", "vm-w1-vnet")},
                ],
                "outputs": {
                    "ids": {"value": {"os": rid("disk", "vm-w1-os"), "net": rid("vnet", "x")}}
                },
            },
            [],
            (
                rid("vm", "vm-w1"),
                rid("disk", "vm-w1-os"),
                rid("nic", "vm-w1-nic"),
                rid("vnet", "vm-w1-vnet"),
            ),
        ),
        (
            # Failed: no outputs; what its operations created (not what they read).
            "Failed",
            {},
            [
                operation(rid("ip", "vm-w1-ip")),
                operation(rid("nic", "vm-w1-nic")),
                operation(rid("ip", "shared-ip"), "Read"),
            ],
            (rid("vm", "vm-w1"), rid("ip", "vm-w1-ip"), rid("nic", "vm-w1-nic")),
        ),
    ],
)
def test_what_an_ended_deployment_made_is_its_vm_its_created_targets_and_what_it_names(
    state, props, operations, expected
):
    seen = arm_workers.view("azure", GROUP, deployment_json(state=state, **props))

    made = arm.made_by(seen, SUB, operations)

    assert made == arm.Made(state, expected)
    # As the row keeps it, and read back.
    assert arm.made_of(made.data()) == made
    assert made.adding(rid("disk", "vm-w1-os").upper()).ids[len(expected) :] == (
        () if state == "Succeeded" else (rid("disk", "vm-w1-os").upper(),)
    )


@pytest.mark.parametrize(
    ("provider_data", "expected"),
    [
        ({}, None),
        ({arm.RESOURCES_KEY: {"state": "Succeeded"}}, None),
        ({arm.RESOURCES_KEY: {"state": "Succeeded", "ids": []}}, arm.Made("Succeeded", ())),
        (
            {arm.RESOURCES_KEY: {"state": "Failed", "ids": [rid("vm", "v"), 3, ""]}},
            arm.Made("Failed", (rid("vm", "v"),)),
        ),
    ],
)
def test_a_rows_record_of_what_its_deployment_made_is_read_back(provider_data, expected):
    assert arm.made_of(provider_data) == expected


@pytest.mark.parametrize(
    ("provider_data", "expected"),
    [
        ({}, None),
        ({"vmId": "1"}, None),
        ({"armDeployment": {"resourceGroup": GROUP}}, None),
        (arm.DeploymentRef(GROUP, "deploy-w1").data(), arm.DeploymentRef(GROUP, "deploy-w1")),
        (
            {"armDeployment": {"resourceGroup": GROUP, "name": "d", "keepDeployment": True}},
            arm.DeploymentRef(GROUP, "d", keep=True),
        ),
    ],
)
def test_a_rows_provider_data_names_its_deployment(provider_data, expected):
    assert arm.deployment_ref(provider_data) == expected


@pytest.mark.parametrize(
    ("resource_id", "expected"),
    [
        (rid("vm", "vm-w1"), arm.ResourceId(SUB, GROUP, arm.VM_TYPE, "vm-w1")),
        (
            rid("disk", "d").replace("resourceGroups", "resourcegroups"),
            arm.ResourceId(SUB, GROUP, arm.DISK_TYPE, "d"),
        ),
        ("/subscriptions/s/resourceGroups/g", None),
        ("vm-w1", None),
    ],
)
def test_resource_ids_are_read_without_regard_to_case(resource_id, expected):
    assert arm.parse_resource_id(resource_id) == expected


# -- pool definitions: an inline template must declare what worker-manager sets ------------------


def definition(template: dict[str, Any]) -> dict[str, Any]:
    launch_config = arm_config()
    del launch_config["armDeployment"]["templateLink"]
    launch_config["armDeployment"]["template"] = template
    return {
        "providerId": "azure",
        "description": "",
        "owner": "o@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 1, "launchConfigs": [launch_config]},
    }


def declaring(*names: str) -> dict[str, Any]:
    return {"parameters": {name: {"type": "string"} for name in names}, "resources": []}


ALL = ("location", "vmSize", *ARM_INJECTED_PARAMETERS)


@pytest.mark.parametrize(
    ("template", "undeclared"),
    [
        (declaring(*ALL), []),
        (declaring(*(n.lower() for n in ALL)), []),  # ARM compares names without case
        (declaring(*(n for n in ALL if n != "customData")), ["customData"]),
        ({"resources": []}, list(ARM_INJECTED_PARAMETERS)),
    ],
)
def test_an_inline_template_must_declare_the_parameters_worker_manager_sets(template, undeclared):
    body = definition(template)
    if not undeclared:
        parse_pool_definition("proj/pool", body, {"azure": "azure"})
        return
    with pytest.raises(DefinitionInvalid) as refused:
        parse_pool_definition("proj/pool", body, {"azure": "azure"})
    assert [p.split(":")[0] for p in refused.value.problems] == [
        f"config.launchConfigs[0].armDeployment.template.parameters.{name}" for name in undeclared
    ]
