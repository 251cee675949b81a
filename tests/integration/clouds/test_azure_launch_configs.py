"""Taskcluster Azure launch configs (resource form) reach ARM as written, plus exactly
worker-manager's overrides (azure/index.js `#provisionSequentialWorker`) and wm's inline NIC;
what ARM refuses comes back as a launch error that surely made nothing. Real azure-mgmt SDKs
against the simulated ARM, whose record of each VM PUT is compared field by field."""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
import requests
from azure.core.exceptions import ResourceNotFoundError
from azure.mgmt.compute import ComputeManagementClient
from azure.mgmt.network import NetworkManagementClient

from tests.fixtures.sim_arm import (
    AZURE_DEPLOYMENT,
    AZURE_RESOURCE_GROUP,
    AZURE_ROOT_URL,
    AZURE_SUBSCRIPTION,
    compute_client,
    network_client,
)
from wm.errors import ErrorCategory
from wm.model import LaunchSpec, WorkerRef
from wm.providers.azure.provider import AzureProvider
from wm.providers.base import (
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    TAG_WORKER,
    LaunchBatch,
    LaunchIntent,
)
from wm.provisioning.launch_outcomes import judge_results
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import default_subnet_id, example_launch_config

POOL = "proj-releng/linux-big"
OWNER = "releng@example.com"
LAUNCH_CONFIG_ID = "lc-releng-big"
LOCATION = "westeurope"
WORKER = "w-tc-full"  # its resources: vm-w-tc-full, nic-w-tc-full, pip-w-tc-full, disk-w-tc-full-*
GROUP = f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_RESOURCE_GROUP}/providers"
CUSTOM_SUBNET = f"{GROUP}/Microsoft.Network/virtualNetworks/releng-vnet/subnets/builders"
MANAGED_IMAGE = f"{GROUP}/Microsoft.Compute/images/releng-linux-2026"
GALLERY_IMAGE = f"{GROUP}/Microsoft.Compute/galleries/releng/images/linux-builder/versions/1.4.0"
IMAGES = {
    "marketplace": {
        "publisher": "Canonical",
        "offer": "0001-com-ubuntu-server-jammy",
        "sku": "22_04-lts-gen2",
        "version": "latest",
    },
    "managed-image-id": {"id": MANAGED_IMAGE},
    "gallery-image-id": {"id": GALLERY_IMAGE},
}
USER_TAGS = {"team": "releng", "cost-center": "ci-4711", "managed-by": "someone-else"}
# What the definition holds that never reaches the VM body.
WORKER_MANAGER_ONLY = ("workerConfig", "workerManager", "capacityPerInstance")
# Read by worker-manager itself: location and tags are the resource's own, the subnet goes to
# the NIC, and the deprecated top-level ignoreFailedProvisioningStates is not a VM property.
NOT_VM_PROPERTIES = ("location", "tags", "subnetId", "ignoreFailedProvisioningStates", "zones")
PASSED_VERBATIM = (
    "hardwareProfile",
    "priority",
    "evictionPolicy",
    "billingProfile",
    "diagnosticsProfile",
    "securityProfile",
    "additionalCapabilities",
)


def full_launch_config(image: dict[str, str], public_ip: bool) -> dict[str, Any]:
    """A launch config as an operator writes one, using most of what the resource form offers."""
    return {
        "location": LOCATION,
        "subnetId": CUSTOM_SUBNET,
        "zones": ["2"],
        "hardwareProfile": {"vmSize": "Standard_F8s_v2"},
        "storageProfile": {
            "imageReference": image,
            "osDisk": {
                "name": "operators-may-not-name-disks",
                "createOption": "FromImage",
                "caching": "ReadOnly",
                "diskSizeGB": 128,
                "managedDisk": {"storageAccountType": "Premium_LRS"},
            },
            "dataDisks": [
                {
                    "lun": 0,
                    "createOption": "Empty",
                    "diskSizeGB": 512,
                    "caching": "None",
                    "managedDisk": {"storageAccountType": "Premium_LRS"},
                },
                # Detach would leak the disk: wm deletes nothing of a worker but its VM.
                {"lun": 1, "createOption": "Empty", "diskSizeGB": 64, "deleteOption": "Detach"},
            ],
        },
        "osProfile": {
            "computerName": "overridden",
            "adminUsername": "overridden-too",
            "allowExtensionOperations": False,
            "linuxConfiguration": {
                "disablePasswordAuthentication": False,
                "provisionVMAgent": True,
                "patchSettings": {"patchMode": "ImageDefault"},
            },
        },
        # Replaced by the NIC worker-manager makes (wm: inline).
        "networkProfile": {
            "networkInterfaces": [{"id": f"{GROUP}/nic-of-nobody", "primary": True}]
        },
        "priority": "Spot",
        "evictionPolicy": "Delete",
        "billingProfile": {"maxPrice": 0.25},
        "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
        "securityProfile": {
            "securityType": "TrustedLaunch",
            "uefiSettings": {"secureBootEnabled": True, "vTpmEnabled": True},
        },
        "additionalCapabilities": {"ultraSSDEnabled": False},
        "tags": USER_TAGS,
        "ignoreFailedProvisioningStates": ["OSProvisioningTimedOut"],
        "capacityPerInstance": 3,  # deprecated; workerManager's wins
        "workerConfig": {"genericWorker": {"config": {"idleTimeoutSecs": 300}}},
        "workerManager": {
            "launchConfigId": LAUNCH_CONFIG_ID,
            "capacityPerInstance": 2,
            "initialWeight": 0.5,
            "maxCapacity": 20,
            "publicIp": public_ip,
        },
    }


def batch(config: dict[str, Any], workers: tuple[str, ...] = (WORKER,)) -> LaunchBatch:
    spec = LaunchSpec(
        launch_config_id=LAUNCH_CONFIG_ID,
        region=str(config.get("location", LOCATION)),
        capacity_per_worker=2,
        launch_config=config,
        worker_config=config.get("workerConfig", {}),
        pool_owner=OWNER,
        pool_description="release builds",
    )
    intents = tuple(LaunchIntent(w, f"token-{w}") for w in workers)
    return LaunchBatch(POOL, spec, intents, batch_token=f"batch-{workers[0]}")


@pytest.fixture
def network(sim_arm: SimArm) -> NetworkManagementClient:
    return network_client(sim_arm)


@pytest.fixture
def compute(sim_arm: SimArm) -> ComputeManagementClient:
    return compute_client(sim_arm)


@pytest.fixture
def releng_cloud(
    sim_arm: SimArm, network: NetworkManagementClient, compute: ComputeManagementClient
) -> SimArm:
    """The operator's own network and images, made with the SDKs (or registered, for the
    gallery image the sim has no API for)."""
    network.virtual_networks.begin_create_or_update(
        AZURE_RESOURCE_GROUP,
        "releng-vnet",
        {
            "location": LOCATION,
            "properties": {"addressSpace": {"addressPrefixes": ["10.8.0.0/16"]}},
        },
    ).result()
    network.subnets.begin_create_or_update(
        AZURE_RESOURCE_GROUP,
        "releng-vnet",
        "builders",
        {"properties": {"addressPrefix": "10.8.1.0/24"}},
    ).result()
    compute.images.begin_create_or_update(
        AZURE_RESOURCE_GROUP,
        "releng-linux-2026",
        {"location": LOCATION, "properties": {"hyperVGeneration": "V2"}},
    ).result()
    sim_arm.register_image(GALLERY_IMAGE, LOCATION)
    return sim_arm


def expected_tags(provider: AzureProvider) -> dict[str, str]:
    return {
        **USER_TAGS,
        # worker-manager's (#deploymentTags): over the launch config's own.
        "created-by": f"taskcluster-wm-{provider.id}",
        "managed-by": "taskcluster",
        "provider-id": provider.id,
        "worker-group": LOCATION,
        "worker-pool-id": POOL,
        "root-url": AZURE_ROOT_URL,
        "owner": OWNER,
        "launch-config-id": LAUNCH_CONFIG_ID,
        # wm's ownership tags.
        TAG_DEPLOYMENT: AZURE_DEPLOYMENT,
        TAG_PROVIDER: provider.id,
        TAG_POOL: POOL,
        TAG_WORKER: WORKER,
        TAG_LAUNCH_CONFIG: LAUNCH_CONFIG_ID,
    }


def take_generated_os_profile(os_profile: dict[str, Any], provider: AzureProvider) -> None:
    """Check and remove what worker-manager generates for each VM."""
    computer = os_profile.pop("computerName")
    assert re.fullmatch(r"[a-z0-9]{1,15}", computer) and not computer.isdigit()
    username = os_profile.pop("adminUsername")
    assert re.fullmatch(r"[a-z][a-z0-9]{19}", username)
    password = os_profile.pop("adminPassword")
    classes = [r"[a-z]", r"[A-Z]", r"[0-9]", r"[^a-zA-Z0-9]"]
    assert 8 <= len(password) <= 72 and sum(bool(re.search(c, password)) for c in classes) >= 3
    assert json.loads(base64.b64decode(os_profile.pop("customData"))) == {
        "workerPoolId": POOL,
        "workerGroup": LOCATION,
        "providerId": provider.id,
        "rootUrl": AZURE_ROOT_URL,
        "workerConfig": {},
    }


def expected_network_profile(tags: dict[str, str], public_ip: bool) -> dict[str, Any]:
    ip_config: dict[str, Any] = {"primary": True, "subnet": {"id": CUSTOM_SUBNET}}
    if public_ip:
        ip_config["publicIPAddressConfiguration"] = {
            "name": f"pip-{WORKER}",
            "sku": {"name": "Standard"},
            "tags": tags,
            "properties": {"deleteOption": "Delete", "publicIPAllocationMethod": "Static"},
        }
    return {
        "networkApiVersion": "2020-11-01",
        "networkInterfaceConfigurations": [
            {
                "name": f"nic-{WORKER}",
                "tags": tags,
                "properties": {
                    "primary": True,
                    "deleteOption": "Delete",
                    "ipConfigurations": [{"name": "ipconfig1", "properties": ip_config}],
                },
            }
        ],
    }


@pytest.mark.parametrize("public_ip", [False, True], ids=["no-public-ip", "public-ip"])
@pytest.mark.parametrize("image", sorted(IMAGES))
def test_a_full_launch_config_reaches_arm_as_written_plus_worker_managers_overrides(
    releng_cloud: SimArm, azure_provider: AzureProvider, image: str, public_ip: bool
):
    config = full_launch_config(IMAGES[image], public_ip)
    written = copy.deepcopy(config)

    [result] = azure_provider.create(batch(config))

    assert result.error is None and result.tc_worker_id == f"vm-{WORKER}"
    assert config == written  # the definition is never changed
    [put] = releng_cloud.vm_puts()
    assert (put.name, put.status) == (f"vm-{WORKER}", 201)
    body = copy.deepcopy(put.body)
    tags = expected_tags(azure_provider)
    # The resource: location, tags, and the resource-level fields of the launch config.
    properties = body.pop("properties")
    assert body == {"location": LOCATION, "tags": tags, "zones": ["2"]}
    # Everything else of the launch config is a VM property, as written...
    skipped = {*WORKER_MANAGER_ONLY, *NOT_VM_PROPERTIES}
    assert set(properties) == {k for k in config if k not in skipped}
    for key in PASSED_VERBATIM:
        assert properties[key] == config[key], key
    # ...but for worker-manager's overrides: the OS profile's generated fields,
    os_profile = properties["osProfile"]
    take_generated_os_profile(os_profile, azure_provider)
    assert os_profile == {
        k: v for k, v in config["osProfile"].items() if k not in ("computerName", "adminUsername")
    }
    # the disks' names (and, wm's, deletion with the VM),
    storage = properties["storageProfile"]
    assert storage == {
        "imageReference": IMAGES[image],
        "osDisk": {
            **config["storageProfile"]["osDisk"],
            "name": f"disk-{WORKER}-os",
            "deleteOption": "Delete",
        },
        "dataDisks": [
            {**disk, "name": f"disk-{WORKER}-{number}", "deleteOption": "Delete"}
            for number, disk in enumerate(config["storageProfile"]["dataDisks"], start=1)
        ],
    }
    # and the network: one NIC on the launch config's subnet, a public IP only if asked for.
    assert properties["networkProfile"] == expected_network_profile(tags, public_ip)


@pytest.mark.parametrize("public_ip", [False, True], ids=["no-public-ip", "public-ip"])
def test_every_resource_of_the_worker_carries_the_tags_and_goes_with_its_vm(
    releng_cloud: SimArm,
    azure_provider: AzureProvider,
    network: NetworkManagementClient,
    compute: ComputeManagementClient,
    public_ip: bool,
):
    [result] = azure_provider.create(batch(full_launch_config(IMAGES["marketplace"], public_ip)))
    assert result.cloud_id

    made = sorted(r.rsplit("/providers/", 1)[1] for r in releng_cloud.resources())
    assert made == sorted(
        [
            f"Microsoft.Compute/disks/disk-{WORKER}-1",
            f"Microsoft.Compute/disks/disk-{WORKER}-2",
            f"Microsoft.Compute/disks/disk-{WORKER}-os",
            f"Microsoft.Compute/virtualMachines/vm-{WORKER}",
            f"Microsoft.Network/networkInterfaces/nic-{WORKER}",
            *([f"Microsoft.Network/publicIPAddresses/pip-{WORKER}"] if public_ip else []),
        ]
    )
    tags = expected_tags(azure_provider)
    assert compute.virtual_machines.get(AZURE_RESOURCE_GROUP, f"vm-{WORKER}").tags == tags
    assert network.network_interfaces.get(AZURE_RESOURCE_GROUP, f"nic-{WORKER}").tags == tags
    if public_ip:
        ip = network.public_ip_addresses.get(AZURE_RESOURCE_GROUP, f"pip-{WORKER}")
        assert ip.tags == tags
    [listed] = azure_provider.list_instances(LOCATION)
    assert (listed.worker_id, listed.launch_config_id) == (WORKER, LAUNCH_CONFIG_ID)

    ref = WorkerRef(WORKER, LOCATION, result.cloud_id)
    azure_provider.terminate([ref])
    releng_cloud.faults.behaviour.update(delete_s=0)
    assert azure_provider.terminate([ref])[0].gone

    assert releng_cloud.resources() == []


def test_other_processes_read_the_record_of_vm_puts_over_http(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    config = example_launch_config(
        "eastus", subscription_id=AZURE_SUBSCRIPTION, resource_group=AZURE_RESOURCE_GROUP
    )
    azure_provider.create(batch(config, ("w-one", "w-two")))

    answer = requests.get(
        f"{sim_arm.endpoint}/_sim/vm-puts",
        params={"name": "vm-w-two"},
        verify=str(sim_arm.cert_path),
    )

    [put] = answer.json()
    [recorded] = sim_arm.vm_puts("vm-w-two")
    assert put == {
        "id": recorded.resource_id,
        "name": "vm-w-two",
        "body": recorded.body,
        "status": 201,
        "errorCode": None,
    }
    assert put["body"]["tags"][TAG_WORKER] == "w-two"


def test_the_example_launch_config_launches_as_it_is_where_the_demo_provider_points(
    sim_arm: SimArm, make_azure_provider: Callable[..., AzureProvider]
):
    # The demo's provider: subscription 0000..., resource group wm-demo-workers (config.toml).
    demo = make_azure_provider(
        sim_arm,
        subscription_id="00000000-0000-0000-0000-000000000000",
        resource_group="wm-demo-workers",
    )
    config = example_launch_config("eastus", spot=True, public_ip=True)

    [result] = demo.create(batch(config, ("w-demo",)))

    assert result.error is None
    assert config["subnetId"] == default_subnet_id()
    [vm] = sim_arm.instances()
    assert vm.spot and vm.cloud_id == result.cloud_id


def unknown_subnet(config: dict[str, Any]) -> None:
    config["subnetId"] = default_subnet_id(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP).replace(
        "/subnets/workers", "/subnets/nobody-made-this"
    )


def subnet_of_unknown_vnet(config: dict[str, Any]) -> None:
    config["subnetId"] = f"{GROUP}/Microsoft.Network/virtualNetworks/no-vnet/subnets/workers"


def image(reference: dict[str, str]) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        config["storageProfile"]["imageReference"] = reference

    return change


def vm_size(size: str) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        config["hardwareProfile"]["vmSize"] = size

    return change


def without_os_disk(config: dict[str, Any]) -> None:
    del config["storageProfile"]["osDisk"]


def spot(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(config: dict[str, Any]) -> None:
        for key, value in fields.items():
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value

    return change


def data_disk_without_lun(config: dict[str, Any]) -> None:
    config["storageProfile"]["dataDisks"] = [{"createOption": "Empty", "diskSizeGB": 8}]


REFUSALS = {
    "unknown subnet": (unknown_subnet, 400, "InvalidResourceReference"),
    "subnet of an unknown vnet": (subnet_of_unknown_vnet, 400, "InvalidResourceReference"),
    "unknown image id": (image({"id": f"{GROUP}/Microsoft.Compute/images/gone"}), 404, "NotFound"),
    "unknown gallery image": (
        image({"id": f"{GROUP}/Microsoft.Compute/galleries/g/images/i/versions/9.9.9"}),
        404,
        "GalleryImageNotFound",
    ),
    "unknown marketplace image": (
        image({"publisher": "Canonical", "offer": "ubuntu-99_04", "sku": "x", "version": "1"}),
        404,
        "PlatformImageNotFound",
    ),
    "marketplace image without sku": (
        image({"publisher": "Canonical", "offer": "ubuntu-24_04-lts"}),
        400,
        "InvalidParameter",
    ),
    "unknown vm size": (vm_size("Standard_Imaginary_v9"), 400, "InvalidParameter"),
    "missing os disk": (without_os_disk, 400, "InvalidParameter"),
    "unknown priority": (spot(priority="Cheap"), 400, "InvalidParameter"),
    "eviction policy without spot": (
        spot(priority=None, evictionPolicy="Delete", billingProfile=None),
        400,
        "InvalidParameter",
    ),
    "eviction policy spot knows not": (spot(evictionPolicy="Hibernate"), 400, "InvalidParameter"),
    "billing profile of a regular vm": (
        spot(priority="Regular", evictionPolicy=None, billingProfile={"maxPrice": -1}),
        400,
        "InvalidParameter",
    ),
    "max price of zero": (spot(billingProfile={"maxPrice": 0}), 400, "InvalidParameter"),
    "data disk without lun": (data_disk_without_lun, 400, "InvalidParameter"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_what_arm_refuses_is_a_launch_error_that_surely_made_nothing(
    sim_arm: SimArm, azure_provider: AzureProvider, case: str
):
    change, status, code = REFUSALS[case]
    config = example_launch_config(
        "eastus",
        spot=True,
        subscription_id=AZURE_SUBSCRIPTION,
        resource_group=AZURE_RESOURCE_GROUP,
        launch_config_id=LAUNCH_CONFIG_ID,
    )
    change(config)
    refused = batch(config, ("w-refused",))

    [result] = azure_provider.create(refused)

    assert result.cloud_id is None and result.error is not None
    assert (result.error.category, result.error.code) == (ErrorCategory.BAD_CONFIG, code)
    assert result.error.nothing_applied
    # ARM said so, with its status and code, and holds nothing.
    [put] = sim_arm.vm_puts()
    assert (put.status, put.error_code) == (status, code)
    assert sim_arm.resources() == []
    # The provisioner stops the worker's row and writes a pool error.
    outcomes, errors = judge_results(azure_provider.id, [refused], {"w-refused": result})
    assert [o.stop_reason for o in outcomes] == [f"launch failed: bad-config {code}"]
    assert [(e.title, e.launch_config_id) for e in errors] == [
        (f"launch failed: {code}", LAUNCH_CONFIG_ID)
    ]


def test_every_resource_group_has_the_default_network_and_tests_add_their_own(
    sim_arm: SimArm, network: NetworkManagementClient
):
    default = network.virtual_networks.get("any-group", "wm-vnet")
    assert [s.name for s in default.subnets] == ["workers"]
    assert network.subnets.get("any-group", "wm-vnet", "workers").id == default_subnet_id(
        AZURE_SUBSCRIPTION, "any-group"
    )

    network.virtual_networks.begin_create_or_update(
        "any-group",
        "mine",
        {
            "location": "eastus",
            "properties": {
                "addressSpace": {"addressPrefixes": ["10.9.0.0/16"]},
                "subnets": [{"name": "a", "properties": {"addressPrefix": "10.9.1.0/24"}}],
            },
        },
    ).result()
    network.subnets.begin_create_or_update(
        "any-group", "mine", "b", {"properties": {"addressPrefix": "10.9.2.0/24"}}
    ).result()

    assert sorted(s.name for s in network.subnets.list("any-group", "mine")) == ["a", "b"]
    assert sorted(v.name for v in network.virtual_networks.list("any-group")) == ["mine", "wm-vnet"]
    with pytest.raises(ResourceNotFoundError):
        network.virtual_networks.get("any-group", "nobodys")
    with pytest.raises(ResourceNotFoundError):
        network.subnets.get("any-group", "mine", "c")


def test_images_registered_over_http_can_be_launched(
    sim_arm: SimArm, azure_provider: AzureProvider
):
    gallery_image = f"{GROUP}/Microsoft.Compute/galleries/ci/images/windows"
    config = example_launch_config(
        "eastus",
        image=f"{gallery_image}/versions/2.0.1",
        subscription_id=AZURE_SUBSCRIPTION,
        resource_group=AZURE_RESOURCE_GROUP,
    )
    [before] = azure_provider.create(batch(config, ("w-before",)))
    answer = requests.post(
        f"{sim_arm.endpoint}/_sim/images",
        json={"id": f"{gallery_image}/versions/2.0.1"},
        verify=str(sim_arm.cert_path),
    )
    # The image definition (its latest version) is known once a version is.
    latest = {**config, "storageProfile": {**config["storageProfile"]}}
    latest["storageProfile"]["imageReference"] = {"id": gallery_image}

    [after] = azure_provider.create(batch(config, ("w-after",)))
    [by_definition] = azure_provider.create(batch(latest, ("w-latest",)))

    assert before.error is not None and before.error.code == "GalleryImageNotFound"
    assert answer.ok
    assert after.error is None and by_definition.error is None
