"""What a cloud's create call must hold for a Taskcluster launch config: the launch config
(less the keys worker-manager keeps to itself) plus exactly worker-manager's overrides and wm's
own additions, per cloud, written out from Taskcluster's providers
(services/worker-manager/src/providers/aws.js, google.js, azure/index.js) rather than from
wm's code, so that a drift on either side fails a test. Each builder takes the launch config
as it was defined and `Launched`, what the launch was for (the pool, the deployment, the
worker's row), and returns the create as the simulated cloud records it.

wm's own additions, the same on every cloud: the ownership tags/labels `wm-deployment`,
`wm-provider` (on GCE escaped as wm/config/provider_ids.py says), `wm-pool`, `wm-launch-config`,
`wm-worker` and (EC2, GCE) `wm-batch`, by which its scanner finds its VMs and recovers an
unanswered create.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wm.config.provider_ids import gce_label
from wm.providers.base import (
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    TAG_WORKER,
)

MANAGED_BY = "taskcluster"


@dataclass(frozen=True)
class Launched:
    """What one create was for: read from the pool's definition, the deployment's config and
    the worker's row."""

    pool_id: str
    owner: str  # the definition's owner
    description: str  # the definition's description
    provider_id: str
    deployment_id: str
    root_url: str  # the deployment's root URL, written into the boot data
    launch_config_id: str  # the one the database holds (given, or derived `lc-…`)
    worker_id: str  # wm's id of the worker (its row, and the name its VM is given)
    batch_token: str  # the worker's launch batch (EC2's ClientToken)
    worker_group: str  # the EC2 region / GCE zone / Azure location


def assert_field_by_field(sent: Mapping[str, Any], expected: Mapping[str, Any], where: str) -> None:
    """Each top-level field on its own (so a failure names it), then the whole."""
    for key in sorted(set(sent) | set(expected)):
        assert key in sent, f"{where}: {key} expected, not sent"
        assert key in expected, f"{where}: {key} sent, not expected"
        assert sent[key] == expected[key], f"{where}: {key}"
    assert dict(sent) == dict(expected), where


# -- EC2: RunInstances -----------------------------------------------------------------------------

# aws.js: worker-manager sets UserData and the counts and merges TagSpecifications; wm adds
# ClientToken (its batch's idempotency token, which moto ignores and the sim honours).
EC2_OVERRIDDEN = ("UserData", "MinCount", "MaxCount", "ClientToken", "TagSpecifications")


def ec2_worker_manager_tags(launched: Launched) -> list[dict[str, str]]:
    """aws.js: appended, in this order, to the instance and the volume tags."""
    return [
        {"Key": "CreatedBy", "Value": f"taskcluster-wm-{launched.provider_id}"},
        {"Key": "Owner", "Value": launched.owner},
        {"Key": "ManagedBy", "Value": MANAGED_BY},
        {"Key": "Name", "Value": launched.pool_id},
        {"Key": "WorkerPoolId", "Value": launched.pool_id},
    ]


def ec2_wm_tags(launched: Launched) -> list[dict[str, str]]:
    """wm's, after worker-manager's; the worker's own tag because the call launches one."""
    return [
        {"Key": TAG_DEPLOYMENT, "Value": launched.deployment_id},
        {"Key": TAG_PROVIDER, "Value": launched.provider_id},
        {"Key": TAG_POOL, "Value": launched.pool_id},
        {"Key": TAG_LAUNCH_CONFIG, "Value": launched.launch_config_id},
        {"Key": TAG_BATCH, "Value": launched.batch_token},
        {"Key": TAG_WORKER, "Value": launched.worker_id},
    ]


def expected_run_instances(launch_config: Mapping[str, Any], launched: Launched) -> dict[str, Any]:
    """The RunInstances parameters of a one-instance launch, UserData as its parsed JSON:
    `launchConfig` verbatim, then the overrides."""
    given = copy.deepcopy(dict(launch_config["launchConfig"]))
    ours = ec2_worker_manager_tags(launched) + ec2_wm_tags(launched)
    user: dict[str, list[dict[str, str]]] = {"instance": [], "volume": []}
    others = []
    for spec in given.get("TagSpecifications") or []:
        if spec.get("ResourceType") in user:
            user[spec["ResourceType"]] += spec.get("Tags") or []
        else:
            others.append(spec)
    return {
        **given,
        # aws.js: additionalUserData first, worker-manager's keys over it.
        "UserData": {
            **dict(launch_config.get("additionalUserData") or {}),
            "rootUrl": launched.root_url,
            "workerPoolId": launched.pool_id,
            "providerId": launched.provider_id,
            "workerGroup": launched.worker_group,
            "launchConfigId": launched.launch_config_id,
            "workerConfig": dict(launch_config.get("workerConfig") or {}),
        },
        # worker-manager asks for exactly the count; wm lets EC2 launch fewer (MinCount 1).
        "MinCount": 1,
        "MaxCount": 1,
        "ClientToken": launched.batch_token,
        "TagSpecifications": [
            *others,
            *({"ResourceType": kind, "Tags": [*tags, *ours]} for kind, tags in user.items()),
        ],
    }


def sent_run_instances(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded parameters, UserData parsed (worker-runner reads it as JSON)."""
    return {**parameters, "UserData": json.loads(parameters["UserData"])}


def worker_of(kind: str, create: Any) -> str:
    """The worker a create the simulated cloud recorded was for."""
    if kind == "aws":
        return ec2_worker_of(create.parameters)
    if kind == "gcp":
        return str(create.body["name"])
    return str(create.body["tags"][TAG_WORKER])


def create_error(kind: str, create: Any) -> str | None:
    """The error the simulated cloud answered that create with (None: it made the VM)."""
    return create.error_code if kind == "azure" else create.error


def ec2_worker_of(parameters: Mapping[str, Any]) -> str:
    return _ec2_tag(parameters, TAG_WORKER)


def _ec2_tag(parameters: Mapping[str, Any], key: str) -> str:
    for spec in parameters.get("TagSpecifications") or []:
        if spec.get("ResourceType") == "instance":
            for tag in spec.get("Tags") or []:
                if tag["Key"] == key:
                    return str(tag["Value"])
    raise AssertionError(f"no instance tag {key} in {parameters}")


# -- GCE: instances.insert -------------------------------------------------------------------------

# google.js `_.omit`: what the launch config holds for worker-manager alone.
GCE_NOT_SENT = ("region", "zone", "workerConfig", "workerManager", "capacityPerInstance")
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
GCE_METADATA_KEY = "taskcluster"


def gce_worker_manager_labels(launched: Launched) -> dict[str, str]:
    """google.js: on the instance and every PERSISTENT disk; pool id and owner with each
    character outside [a-zA-Z0-9-] made `-`, lowercased."""

    def label(value: str) -> str:
        return re.sub(r"[^a-zA-Z0-9-]", "-", value).lower()

    return {
        "created-by": label(f"taskcluster-wm-{launched.provider_id}"),
        "managed-by": MANAGED_BY,
        "worker-pool-id": label(launched.pool_id),
        "owner": label(launched.owner),
        "launch-config-id": launched.launch_config_id,
    }


def gce_wm_labels(launched: Launched) -> dict[str, str]:
    """wm's, on the instance only; a value GCE would refuse has its characters outside
    [a-z0-9_-] made `_` (and the original kept in a metadata item, `gce_wm_metadata`)."""
    return {
        TAG_DEPLOYMENT: launched.deployment_id,
        TAG_PROVIDER: gce_label(launched.provider_id),
        TAG_POOL: _gce_wm_value(launched.pool_id),
        TAG_WORKER: launched.worker_id,
        TAG_LAUNCH_CONFIG: _gce_wm_value(launched.launch_config_id),
        TAG_BATCH: _gce_wm_value(launched.batch_token),
    }


def gce_wm_metadata(launched: Launched) -> list[dict[str, str]]:
    originals = {
        TAG_POOL: launched.pool_id,
        TAG_LAUNCH_CONFIG: launched.launch_config_id,
        TAG_BATCH: launched.batch_token,
    }
    return [
        {"key": key, "value": value}
        for key, value in originals.items()
        if _gce_wm_value(value) != value
    ]


def _gce_wm_value(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "_", value.lower())[:63]


def expected_insert_body(
    launch_config: Mapping[str, Any], launched: Launched, service_account: str
) -> dict[str, Any]:
    """The instances.insert body as it reaches GCE, the `taskcluster` metadata value parsed."""
    config = copy.deepcopy(dict(launch_config))
    body = {k: v for k, v in config.items() if k not in GCE_NOT_SENT}
    tc_labels = gce_worker_manager_labels(launched)
    # worker-manager names the instance `<pool>-<slug>`; wm names it after the worker.
    body["name"] = launched.worker_id
    body["labels"] = {**(config.get("labels") or {}), **tc_labels, **gce_wm_labels(launched)}
    body["description"] = config.get("description") or launched.description
    body["disks"] = [_gce_disk(disk, tc_labels) for disk in config.get("disks") or []]
    body["serviceAccounts"] = [{"email": service_account, "scopes": [CLOUD_PLATFORM]}]
    body["scheduling"] = {**(config.get("scheduling") or {}), "automaticRestart": False}
    taskcluster = {
        "workerPoolId": launched.pool_id,
        "providerId": launched.provider_id,
        "workerGroup": launched.worker_group,
        "rootUrl": launched.root_url,
        "workerConfig": dict(config.get("workerConfig") or {}),
    }
    body["metadata"] = {
        "items": [
            *((config.get("metadata") or {}).get("items") or []),
            {"key": GCE_METADATA_KEY, "value": taskcluster},
            *gce_wm_metadata(launched),
        ]
    }
    # The SDK sends the body as the API's JSON, where an empty list is no field at all.
    return {k: v for k, v in body.items() if v != []}


# The disk's int64 fields, which the API's JSON (the SDK's wire form) writes as strings.
GCE_DISK_INT64 = ("diskSizeGb", "provisionedIops", "provisionedThroughput")


def _gce_disk(disk: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    disk = dict(disk)
    own = disk.pop("labels", None) or {}
    params = dict(disk.get("initializeParams") or {})
    for key in GCE_DISK_INT64:
        if isinstance(params.get(key), int):
            params[key] = str(params[key])
    if "initializeParams" in disk:
        disk["initializeParams"] = params
    if disk.get("type") != "PERSISTENT":
        return disk
    params["labels"] = {**(params.get("labels") or {}), **own, **labels}
    return {**disk, "initializeParams": params}


def sent_insert_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded body, the `taskcluster` metadata value parsed (worker-runner reads it as
    JSON)."""
    sent = copy.deepcopy(dict(body))
    for item in (sent.get("metadata") or {}).get("items") or []:
        if item.get("key") == GCE_METADATA_KEY:
            item["value"] = json.loads(item["value"])
    return sent


# -- Azure: the VM PUT (resource form) -------------------------------------------------------------

# azure/index.js keeps these for itself; location and tags are the resource's, the subnet goes to
# the NIC, the deprecated ignoreFailedProvisioningStates is no VM property.
AZURE_NOT_VM_PROPERTIES = (
    *("capacityPerInstance", "workerConfig", "workerManager"),
    *("location", "tags", "subnetId", "ignoreFailedProvisioningStates"),
)
AZURE_RESOURCE_KEYS = ("plan", "identity", "zones", "extendedLocation", "placement")
AZURE_NETWORK_API_VERSION = "2020-11-01"  # the oldest that takes an inline NIC


def azure_vm_name(launched: Launched) -> str:
    return f"vm-{launched.worker_id}"


def azure_tags(launch_config: Mapping[str, Any], launched: Launched) -> dict[str, str]:
    """The launch config's tags, under worker-manager's (`#deploymentTags`), under wm's."""
    return {
        **dict(launch_config.get("tags") or {}),
        "created-by": f"taskcluster-wm-{launched.provider_id}",
        "managed-by": MANAGED_BY,
        "provider-id": launched.provider_id,
        "worker-group": launched.worker_group,
        "worker-pool-id": launched.pool_id,
        "root-url": launched.root_url,
        "owner": launched.owner,
        "launch-config-id": launched.launch_config_id,
        TAG_DEPLOYMENT: launched.deployment_id,
        TAG_PROVIDER: launched.provider_id,
        TAG_POOL: launched.pool_id,
        TAG_WORKER: launched.worker_id,
        TAG_LAUNCH_CONFIG: launched.launch_config_id,
    }


def expected_vm_put(launch_config: Mapping[str, Any], launched: Launched) -> dict[str, Any]:
    """The VM PUT body, without the OS profile's generated fields (`take_generated_os_profile`
    checks those): the launch config's VM fields verbatim, disks named as worker-manager names
    them, and wm's inline NIC on the launch config's subnet where worker-manager makes one
    before the VM. wm marks every disk, the NIC and any public IP `deleteOption: Delete`:
    they go with the VM."""
    config = copy.deepcopy(dict(launch_config))
    tags = azure_tags(config, launched)
    worker = launched.worker_id
    properties = {k: v for k, v in config.items() if k not in AZURE_NOT_VM_PROPERTIES}
    for key in AZURE_RESOURCE_KEYS:
        properties.pop(key, None)
    generated = ("computerName", "adminUsername", "adminPassword", "customData")
    properties["osProfile"] = {
        k: v for k, v in (config.get("osProfile") or {}).items() if k not in generated
    }
    storage = dict(config.get("storageProfile") or {})
    properties["storageProfile"] = {
        **storage,
        "osDisk": {
            **storage.get("osDisk", {}),
            "name": f"disk-{worker}-os",
            "deleteOption": "Delete",
        },
        # azure/index.js always sends the list, empty when the launch config has none.
        "dataDisks": [
            {**disk, "name": f"disk-{worker}-{number}", "deleteOption": "Delete"}
            for number, disk in enumerate(storage.get("dataDisks") or [], start=1)
        ],
    }
    ip_config: dict[str, Any] = {"primary": True, "subnet": {"id": config["subnetId"]}}
    if (config.get("workerManager") or {}).get("publicIp"):
        ip_config["publicIPAddressConfiguration"] = {
            "name": f"pip-{worker}",
            "sku": {"name": "Standard"},
            "tags": tags,
            "properties": {"deleteOption": "Delete", "publicIPAllocationMethod": "Static"},
        }
    network = {
        k: v
        for k, v in (config.get("networkProfile") or {}).items()
        if k not in ("networkInterfaces", "networkInterfaceConfigurations", "networkApiVersion")
    }
    properties["networkProfile"] = {
        **network,
        "networkApiVersion": AZURE_NETWORK_API_VERSION,
        "networkInterfaceConfigurations": [
            {
                "name": f"nic-{worker}",
                "tags": tags,
                "properties": {
                    "primary": True,
                    "deleteOption": "Delete",
                    "ipConfigurations": [{"name": "ipconfig1", "properties": ip_config}],
                },
            }
        ],
    }
    resource = {k: config[k] for k in AZURE_RESOURCE_KEYS if k in config}
    return {**resource, "location": config["location"], "tags": tags, "properties": properties}


def take_generated_os_profile(body: dict[str, Any], launched: Launched) -> None:
    """Check and remove what is made anew for each VM: the computer name, the admin user and
    password (never used: workers are not logged into) and worker-manager's customData."""
    os_profile = body["properties"]["osProfile"]
    computer = os_profile.pop("computerName")
    assert re.fullmatch(r"[a-z0-9]{1,15}", computer) and not computer.isdigit(), computer
    username = os_profile.pop("adminUsername")
    assert re.fullmatch(r"[a-z][a-z0-9]{19}", username), username
    password = os_profile.pop("adminPassword")
    classes = [r"[a-z]", r"[A-Z]", r"[0-9]", r"[^a-zA-Z0-9]"]
    assert 8 <= len(password) <= 72 and sum(bool(re.search(c, password)) for c in classes) >= 3
    assert json.loads(base64.b64decode(os_profile.pop("customData"))) == {
        "workerPoolId": launched.pool_id,
        "workerGroup": launched.worker_group,
        "providerId": launched.provider_id,
        "rootUrl": launched.root_url,
        "workerConfig": {},  # deprecated: worker-manager writes it empty
    }


# -- Azure: the deployment PUT (ARM-template form) -------------------------------------------------

# azure/index.js `#provisionARMTemplateWorker`: set over the launch config's own parameters.
AZURE_ARM_GENERATED = ("computerName", "adminUsername", "adminPassword", "customData")


def expected_deployment_put(launch_config: Mapping[str, Any], launched: Launched) -> dict[str, Any]:
    """The deployment PUT body, without the generated parameters (`take_generated_parameters`
    checks those): `armDeployment` verbatim as the properties, its parameters with worker-
    manager's `tags` and `vmName` over them, and the same tags on the deployment itself."""
    arm = copy.deepcopy(dict(launch_config["armDeployment"]))
    tags = azure_tags(launch_config, launched)
    parameters = {
        **(arm.get("parameters") or {}),
        "tags": {"value": tags},
        "vmName": {"value": azure_vm_name(launched)},
    }
    return {"properties": {**arm, "parameters": parameters}, "tags": tags}


def take_generated_parameters(body: dict[str, Any], launched: Launched) -> None:
    """Check and remove the deployment parameters made anew for each VM, as
    `take_generated_os_profile` does for the VM body's OS profile."""
    parameters = body["properties"]["parameters"]
    generated = {name: parameters.pop(name)["value"] for name in AZURE_ARM_GENERATED}
    take_generated_os_profile({"properties": {"osProfile": generated}}, launched)
