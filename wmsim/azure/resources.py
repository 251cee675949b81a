"""What ARM's compute and network side (arm.py) and its Microsoft.Resources side
(deployments.py) both hold: resource types, the default resource group, the record of a PUT,
the records of VMs, NICs, public IPs, disks and networks, and their JSON views.

Both sides import it, and Microsoft.Resources reaches the SimArm it runs in through the
protocol in arm_host.py, so imports point one way: arm -> deployments -> resources.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Response

COMPUTE = "microsoft.compute"
NETWORK = "microsoft.network"
VM_TYPE = "Microsoft.Compute/virtualMachines"
NIC_TYPE = "Microsoft.Network/networkInterfaces"
IP_TYPE = "Microsoft.Network/publicIPAddresses"
DISK_TYPE = "Microsoft.Compute/disks"
VNET_TYPE = "Microsoft.Network/virtualNetworks"
SUBNET_TYPE = "Microsoft.Network/virtualNetworks/subnets"
IMAGE_TYPE = "Microsoft.Compute/images"
DEFAULT_RESOURCE_GROUP = "wm-demo-workers"
# The default network every resource group holds (the subnet launch configs use unless a test
# creates its own), like EC2's default VPC.
DEFAULT_VNET = "wm-vnet"
DEFAULT_SUBNET = "workers"
DEFAULT_VNET_PREFIX = "10.0.0.0/16"
DEFAULT_SUBNET_PREFIX = "10.0.0.0/24"


@dataclass(frozen=True)
class RecordedPut:
    """One PUT the sim handled (a VM's, a deployment's): the body as sent, and what the sim
    answered."""

    resource_id: str
    body: dict[str, Any]  # verbatim, admin password and customData included
    status: int  # 200 / 201, or the error's status
    error_code: str | None = None  # ARM's error code when refused

    @property
    def name(self) -> str:
        return self.resource_id.rsplit("/", 1)[1]

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.resource_id,
            "name": self.name,
            "body": self.body,
            "status": self.status,
            "errorCode": self.error_code,
        }


@dataclass
class _Vnet:
    id: str
    name: str
    location: str
    tags: dict[str, str]
    address_prefixes: list[str]
    subnets: dict[str, dict[str, Any]]  # lower-case name -> {"name", "properties"}


@dataclass
class _Resource:
    """A NIC, public IP or disk."""

    id: str
    type: str
    name: str
    location: str
    tags: dict[str, str]
    properties: dict[str, Any]
    sku: dict[str, Any] | None = None
    owner: str | None = None  # key of the VM (NIC, disk) or NIC (IP) it is attached to
    delete_with_owner: bool = False


@dataclass
class _Vm:
    id: str
    name: str
    location: str
    tags: dict[str, str]
    properties: dict[str, Any]  # the model as stored, without secrets
    os_profile_digest: str
    user_data: str | None
    created_at: float
    boot_s: float
    vm_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    deleted_at: float | None = None
    delete_s: float = 0.0
    power: str | None = None  # set when the VM was stopped/deallocated out of band
    failure: tuple[str, str] | None = None  # (code, message) of a failed provisioning
    reason: str | None = None  # why it was killed (kept for /_sim/instances)
    # osProfile.customData as created: on the VM's disk, never in ARM's answers.
    custom_data: str | None = None
    resource_fields: dict[str, Any] = field(default_factory=dict)  # zones, plan, identity...

    @property
    def spot(self) -> bool:
        return str(self.properties.get("priority", "")).lower() == "spot"


def as_object(value: Any) -> dict[str, Any]:
    """A JSON value that should be an object, or {} when it is not."""
    return value if isinstance(value, dict) else {}


def canonical_location(value: str) -> str:
    """A location as ARM compares them: "East US" is eastus."""
    return value.lower().replace(" ", "")


def _key(resource_id: str) -> str:
    return resource_id.lower()


def _now_iso(stamp: float | None = None) -> str:
    moment = dt.datetime.fromtimestamp(stamp if stamp is not None else time.time(), dt.UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _child_view(resource: _Resource) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": resource.id,
        "name": resource.name,
        "type": resource.type,
        "location": resource.location,
        "tags": dict(resource.tags),
        "properties": json.loads(json.dumps(resource.properties)),
    }
    if resource.sku:
        view["sku"] = resource.sku
    if resource.owner and resource.type == NIC_TYPE:
        view["properties"]["virtualMachine"] = {"id": resource.owner}
    if resource.owner and resource.type == DISK_TYPE:
        view["managedBy"] = resource.owner
    return view


def _json(body: Any, status: int = 200) -> Response:
    response = Response(json.dumps(body), status=status, content_type="application/json")
    response.headers["x-ms-ratelimit-remaining-subscription-reads"] = "11999"
    response.headers["x-ms-ratelimit-remaining-subscription-writes"] = "1199"
    return response
