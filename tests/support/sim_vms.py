"""VMs made in the simulated GCE and Azure as wm's create calls make them, for tests of what
the VMs then see (their metadata, the simulated worker on them)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1 as gce

from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBNET, AZURE_SUBSCRIPTION
from tests.fixtures.sim_gce import GCE_PROJECT, GCE_ZONE
from wmsim.azure.arm import SimArm
from wmsim.gcp.gce import SimGce

SERVICE_ACCOUNT = "workers@wm-test.iam.gserviceaccount.com"


def gce_insert(
    sim: SimGce, name: str, boot_data: Mapping[str, Any], *, service_account: bool = True
) -> str:
    """An instance made through the real client, as wm makes one; returns its numeric id."""
    sim.faults.behaviour.update(boot_s=0)
    client = gce.InstancesClient(
        credentials=AnonymousCredentials(),
        transport="rest",
        client_options=ClientOptions(api_endpoint=sim.endpoint),
    )
    items = [
        gce.Items(key="taskcluster", value=json.dumps(boot_data)),
        gce.Items(key="wm-pool", value="proj/ci"),
    ]
    instance = gce.Instance(
        name=name,
        machine_type=f"zones/{GCE_ZONE}/machineTypes/e2-small",
        metadata=gce.Metadata(items=items),
        disks=[
            gce.AttachedDisk(
                boot=True,
                auto_delete=True,
                initialize_params=gce.AttachedDiskInitializeParams(
                    source_image="projects/debian-cloud/global/images/family/debian-12"
                ),
            )
        ],
        network_interfaces=[
            gce.NetworkInterface(
                network="global/networks/default",
                access_configs=[gce.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")],
            )
        ],
        service_accounts=(
            [gce.ServiceAccount(email=SERVICE_ACCOUNT, scopes=["openid"])]
            if service_account
            else []
        ),
    )
    client.insert(project=GCE_PROJECT, zone=GCE_ZONE, instance_resource=instance).result()
    return next(vm.cloud_id for vm in sim.instances() if vm.name == name)


def azure_vm(sim: SimArm, name: str, tags: Mapping[str, str]) -> str:
    """A VM held as if ARM had created it with this body; returns its resource id."""
    sim.faults.behaviour.update(boot_s=0)
    rid = (
        f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_RESOURCE_GROUP}"
        f"/providers/Microsoft.Compute/virtualMachines/{name}"
    )
    sim.preload(
        rid,
        {
            "location": "eastus",
            "tags": dict(tags),
            "properties": {
                "hardwareProfile": {"vmSize": "Standard_D2s_v5"},
                "storageProfile": {
                    "imageReference": {"publisher": "p", "offer": "o", "sku": "s"},
                },
                "osProfile": {
                    "computerName": name,
                    "adminUsername": "worker",
                    "adminPassword": "s3cret!",
                    "customData": base64.b64encode(b"{}").decode(),
                },
                "userData": base64.b64encode(b"hello").decode(),
                "networkProfile": {
                    "networkInterfaceConfigurations": [
                        {
                            "name": f"{name}-nic",
                            "properties": {
                                "primary": True,
                                "ipConfigurations": [
                                    {
                                        "name": "ipconfig1",
                                        "properties": {"subnet": {"id": AZURE_SUBNET}},
                                    }
                                ],
                            },
                        }
                    ]
                },
            },
        },
    )
    return rid
