"""One simulated GCE instance: what the simulation keeps of it, and its JSON as instances.get
shows it (attached disks, network interfaces with their addresses, metadata, fingerprints)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from werkzeug.wrappers import Request

from wmsim.gcp.catalog import CheckedInsert
from wmsim.gcp.rest import base_url, fingerprint, rfc3339


@dataclass
class Vm:
    """One instance as the simulation holds it."""

    id: int
    project: str
    zone: str
    name: str
    machine_type: str
    labels: dict[str, str]
    metadata: list[dict[str, str]]
    scheduling: dict[str, Any]
    disks: list[dict[str, Any]]
    network_interfaces: list[dict[str, Any]]
    created_at: float  # monotonic
    created_wall: datetime
    # [{email, scopes}]: the account its metadata server mints identity tokens for (none: none)
    service_accounts: list[dict[str, Any]] = field(default_factory=list)
    deleted_at: float | None = None  # monotonic; when a delete was accepted
    killed_at: datetime | None = None  # wall clock; when it died out of band
    image: str = ""  # the boot disk's source image
    # The body's other fields (description, guestAccelerators, tags...): GCE echoes them.
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def spot(self) -> bool:
        return self.scheduling.get("provisioningModel") == "SPOT" or bool(
            self.scheduling.get("preemptible")
        )

    @property
    def path(self) -> str:
        return f"projects/{self.project}/zones/{self.zone}/instances/{self.name}"


# Fields of an insert body the simulation builds its instance from; the rest is echoed.
BUILT_FIELDS = frozenset(
    {"name", "machineType", "labels", "disks", "networkInterfaces", "metadata", "scheduling"}
    | {"serviceAccounts", "id", "kind", "status", "zone", "selfLink", "creationTimestamp"}
)


def attached_disk(index: int, disk: Mapping[str, Any]) -> dict[str, Any]:
    """An attached disk as instances.get shows it."""
    params = disk.get("initializeParams") or {}
    return {
        "kind": "compute#attachedDisk",
        "type": disk["type"],
        "mode": disk.get("mode", "READ_WRITE"),
        "deviceName": disk.get("deviceName", f"persistent-disk-{index}"),
        "index": index,
        "boot": bool(disk.get("boot")),
        "autoDelete": bool(disk.get("autoDelete", False)),
        "interface": disk.get("interface", "SCSI"),
        "diskSizeGb": str(params.get("diskSizeGb", "375" if disk["type"] == "SCRATCH" else "10")),
    }


def interfaces_of(checked: CheckedInsert, vm_id: int) -> list[dict[str, Any]]:
    """The network interfaces as instances.get shows them (paths; URLs added when served)."""
    out = []
    for index, nic in enumerate(checked.nics):
        interface: dict[str, Any] = {
            "kind": "compute#networkInterface",
            "name": f"nic{index}",
            "network": nic.network,
            "subnetwork": nic.subnetwork,
            "networkIP": f"10.128.{(vm_id >> 8) & 255}.{vm_id & 255}",
            "stackType": "IPV4_ONLY",
        }
        if nic.access_configs:
            interface["accessConfigs"] = [
                {
                    "kind": "compute#accessConfig",
                    "name": config.get("name", "External NAT"),
                    "type": config.get("type", "ONE_TO_ONE_NAT"),
                    "natIP": f"34.{(vm_id >> 16) & 255}.{(vm_id >> 8) & 255}.{vm_id & 255}",
                    "networkTier": config.get("networkTier", "PREMIUM"),
                }
                for config in nic.access_configs
            ]
        out.append(interface)
    return out


def instance_json(vm: Vm, status: str, request: Request) -> dict[str, Any]:
    """The instance as instances.get shows it, in the status it has now."""
    base = base_url(request)
    zone_url = f"{base}/projects/{vm.project}/zones/{vm.zone}"
    out: dict[str, Any] = {
        **vm.extra,
        "kind": "compute#instance",
        "id": str(vm.id),
        "creationTimestamp": rfc3339(vm.created_wall),
        "name": vm.name,
        "tags": {"fingerprint": "42WmSpB8rSM="},
        "machineType": f"{zone_url}/machineTypes/{vm.machine_type}",
        "status": status,
        "zone": zone_url,
        "canIpForward": False,
        "networkInterfaces": [
            {
                **nic,
                "network": f"{base}/{nic['network']}",
                "subnetwork": f"{base}/{nic['subnetwork']}",
            }
            for nic in vm.network_interfaces
        ],
        "disks": vm.disks,
        "metadata": {
            "kind": "compute#metadata",
            "fingerprint": fingerprint(vm.metadata),
            "items": vm.metadata,
        },
        "selfLink": f"{zone_url}/instances/{vm.name}",
        "scheduling": vm.scheduling,
        "serviceAccounts": vm.service_accounts,
        "labels": vm.labels,
        "labelFingerprint": fingerprint(vm.labels),
        "startRestricted": False,
        "deletionProtection": False,
    }
    if status in ("RUNNING", "STOPPING", "TERMINATED"):
        out["cpuPlatform"] = "Intel Broadwell"
        out["lastStartTimestamp"] = rfc3339(vm.created_wall)
    if vm.killed_at is not None:
        out["lastStopTimestamp"] = rfc3339(vm.killed_at)
    if not vm.metadata:
        del out["metadata"]["items"]
    if not vm.service_accounts:
        del out["serviceAccounts"]
    return out
