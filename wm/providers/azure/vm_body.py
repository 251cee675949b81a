"""What a VM's PUT body is, for a launch config in Taskcluster's resource form: pure, no I/O.

The body is the launch config verbatim, plus exactly what worker-manager overrides
(services/worker-manager/src/providers/azure/index.js `#provisionSequentialWorker`): computer
name, admin credentials, boot data, disk names, the network interface on the launch config's
`subnetId`, and its tags on every resource. Where worker-manager creates a public IP, a NIC and
then the VM, each on a later pass, wm puts the NIC inline (`networkInterfaceConfigurations`), a
public IP only where `workerManager.publicIp`, and `deleteOption: Delete` on NIC, IP and every
disk, so ARM deletes them with the VM. Names are derived from the worker id, which makes the PUT
idempotent: a second PUT of the same name updates the VM instead of making another one.

The admin credentials are drawn apart (`admin_username`, `admin_password`: fresh random ones per
PUT) and passed in, so the body itself is a function of its arguments. vm_put.py sends it.
"""

from __future__ import annotations

import copy
import secrets
import string
from collections.abc import Mapping
from typing import Any

from wm.providers.azure.names import VM_NAME_PREFIX, computer_name, vm_name

NETWORK_API_VERSION = "2020-11-01"  # the oldest that accepts networkInterfaceConfigurations
ADMIN_USERNAME_CHARS = 20  # Windows' limit; worker-manager draws 20 random characters too

# How a launch config's keys reach the VM PUT (worker-manager passes the launch config to the
# SDK's VirtualMachine model, which puts each key where ARM wants it):
WM_ONLY_KEYS = ("capacityPerInstance", "workerConfig", "workerManager")  # never sent
# The VM resource's own fields, beside `properties` (`location` and `tags` are set apart).
RESOURCE_KEYS = ("plan", "identity", "zones", "extendedLocation", "placement")
# Read by worker-manager, unknown to the VM model (so the SDK drops them): `subnetId` goes to
# the NIC; the deprecated top-level `ignoreFailedProvisioningStates` is worker-manager's.
NOT_VM_KEYS = ("location", "tags", "subnetId", "ignoreFailedProvisioningStates")
# Replaced by the NIC wm defines inline.
NETWORK_OVERRIDDEN = ("networkInterfaces", "networkInterfaceConfigurations", "networkApiVersion")


def vm_body(
    *,
    launch_config: Mapping[str, Any],
    location: str,
    worker_id: str,
    tags: Mapping[str, Any],
    admin_username: str,
    admin_password: str,
    custom_data: str | None = None,
) -> dict[str, Any]:
    """The VM PUT body of a launch config in Taskcluster's resource form: its VM fields
    verbatim, plus worker-manager's overrides and wm's inline NIC (see the module docstring).

    `custom_data` is worker-manager's boot data; None leaves it out (VMs made by hand).
    """
    config = copy.deepcopy(dict(launch_config))
    skipped = {*WM_ONLY_KEYS, *RESOURCE_KEYS, *NOT_VM_KEYS}
    properties = {key: value for key, value in config.items() if key not in skipped}
    properties["osProfile"] = {
        **_mapping(config.get("osProfile")),
        "computerName": computer_name(worker_id),
        **({"customData": custom_data} if custom_data is not None else {}),
        "adminUsername": admin_username,
        "adminPassword": admin_password,
    }
    properties["storageProfile"] = storage_profile(config.get("storageProfile"), worker_id)
    properties["networkProfile"] = network_profile(config, worker_id, tags)
    resource = {key: config[key] for key in RESOURCE_KEYS if key in config}
    return {**resource, "location": location, "tags": dict(tags), "properties": properties}


def storage_profile(storage: Any, worker_id: str) -> dict[str, Any]:
    """The launch config's storageProfile with its disks named as worker-manager names them
    (`disk-<vm name suffix>-os`, then `-1`, `-2`... for data disks, as users may not name
    disks) and each deleted with the VM, since wm never deletes disks one by one."""
    profile = dict(_mapping(storage))
    suffix = vm_name(worker_id).removeprefix(VM_NAME_PREFIX)
    profile["osDisk"] = {
        **_mapping(profile.get("osDisk")),
        "name": f"disk-{suffix}-os",
        "deleteOption": "Delete",
    }
    profile["dataDisks"] = [
        {**_mapping(disk), "name": f"disk-{suffix}-{number}", "deleteOption": "Delete"}
        for number, disk in enumerate(profile.get("dataDisks") or [], start=1)
    ]
    return profile


def network_profile(
    launch_config: Mapping[str, Any], worker_id: str, tags: Mapping[str, Any]
) -> dict[str, Any]:
    """The VM's one NIC, inline, on the launch config's subnet, with a public IP only where
    `workerManager.publicIp` (Static, Standard, as worker-manager makes it)."""
    ip_config: dict[str, Any] = {"primary": True}
    subnet_id = launch_config.get("subnetId")
    if subnet_id:
        ip_config["subnet"] = {"id": subnet_id}
    if _mapping(launch_config.get("workerManager")).get("publicIp"):
        ip_config["publicIPAddressConfiguration"] = {
            "name": vm_name(worker_id, "pip-"),
            "sku": {"name": "Standard"},
            "tags": dict(tags),
            "properties": {"deleteOption": "Delete", "publicIPAllocationMethod": "Static"},
        }
    nic_config = {
        "name": vm_name(worker_id, "nic-"),
        "tags": dict(tags),
        "properties": {
            "primary": True,
            "deleteOption": "Delete",
            "ipConfigurations": [{"name": "ipconfig1", "properties": ip_config}],
        },
    }
    network = _mapping(launch_config.get("networkProfile"))
    kept = {key: value for key, value in network.items() if key not in NETWORK_OVERRIDDEN}
    return {
        **kept,
        "networkApiVersion": NETWORK_API_VERSION,
        "networkInterfaceConfigurations": [nic_config],
    }


def admin_username() -> str:
    # Like worker-manager: a fresh random name per create, never used (a user who needs to log
    # in resets it). A letter first, since Linux user names may not start with a digit.
    alphabet = string.ascii_lowercase + string.digits
    rest = "".join(secrets.choice(alphabet) for _ in range(ADMIN_USERNAME_CHARS - 1))
    return secrets.choice(string.ascii_lowercase) + rest


def admin_password() -> str:
    # Workers are never logged into; ARM still wants a credential. A fresh random one per PUT,
    # never stored or logged; the fixed prefix meets ARM's complexity rules.
    return "Wm-9" + secrets.token_urlsafe(24)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
