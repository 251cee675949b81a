"""ARM's VM list pages read as JSON for the fields wm reads, not into the SDK's models.

azure-mgmt-compute deserialises every VM of a list page into its whole model, eagerly, field by
field and sub-model by sub-model in Python (`model_base._deserialize`): about 1.5 ms of CPU a VM
profiled, the largest share of a scan's SDK parsing after EC2's (bench/README.md, "scan"), and
ARM has no `$select` for VMs to ask for less. A scan reads a dozen fields of a VM (`VmFields`).
So a scan's two VM lists (a resource group's VMs; the subscription's `statusOnly` list) send the
SDK's own request (its request builder, so its URL and api-version) through the SDK client's
own pipeline (`send_request`: its authentication, its retry settings, off, and its transport),
map a failed answer to the exceptions the SDK's operation raises, and read the answer's JSON
for those fields alone. A VM's PUT is sent the same way (vm_put.py); every other call (a VM's
GET, deletes) is the SDK's own.
`tests/integration/clouds/test_azure_lean_listing.py` holds each field equal to what the SDK's
models hold for the same answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

# The SDK operations' own error map for a VM list (VirtualMachinesOperations.list/list_all),
# and a VM's PUT without conditions.
_ERROR_MAP: dict[int, Any] | None = None


@dataclass(frozen=True, slots=True)
class VmFields:
    """What wm reads of a listed VM (states.py: `model_of`; provider.py: `owns`; the take-over's
    wm/take_over/adoption/azure.py: `legacy_listed`), the same whether read from the SDK's model
    (`model_fields`) or from the answer's JSON (`json_fields`)."""

    id: str
    name: str
    location: str | None
    tags: Mapping[str, str]
    vm_id: str | None
    time_created: datetime | None
    priority: str  # "" when not given
    provisioning_state: str  # "" when not given
    os_disk_id: str | None
    os_disk_create_option: str  # "" when not given
    nic_ids: tuple[str, ...]  # network interfaces with an id
    data_disk_ids: tuple[str, ...]  # managed data disks with an id


def model_fields(vm: Any) -> VmFields:
    """A VM's fields from the SDK's model (a GET's answer)."""
    props = vm.properties
    storage = getattr(props, "storage_profile", None)
    network = getattr(props, "network_profile", None)
    os_disk = getattr(storage, "os_disk", None)
    return VmFields(
        id=vm.id,
        name=vm.name,
        location=vm.location,
        tags=vm.tags or {},
        vm_id=getattr(props, "vm_id", None) or None,
        time_created=getattr(props, "time_created", None),
        priority=_text(getattr(props, "priority", None)),
        provisioning_state=_text(getattr(props, "provisioning_state", None)),
        os_disk_id=getattr(getattr(os_disk, "managed_disk", None), "id", None),
        os_disk_create_option=_text(getattr(os_disk, "create_option", None)),
        nic_ids=tuple(
            str(n.id) for n in getattr(network, "network_interfaces", None) or () if n.id
        ),
        data_disk_ids=tuple(
            str(d.managed_disk.id)
            for d in getattr(storage, "data_disks", None) or ()
            if d is not None and getattr(d, "managed_disk", None) and d.managed_disk.id
        ),
    )


def json_fields(vm: Mapping[str, Any]) -> VmFields:
    """A VM's fields from a list answer's JSON, as the SDK's model has them."""
    props = vm.get("properties") or {}
    storage = props.get("storageProfile") or {}
    network = props.get("networkProfile") or {}
    os_disk = storage.get("osDisk") or {}
    created = props.get("timeCreated")
    return VmFields(
        id=vm["id"],
        name=vm["name"],
        location=vm.get("location"),
        tags=vm.get("tags") or {},
        vm_id=props.get("vmId") or None,
        time_created=None if created is None else _timestamp(created),
        priority=props.get("priority") or "",
        provisioning_state=props.get("provisioningState") or "",
        os_disk_id=(os_disk.get("managedDisk") or {}).get("id"),
        os_disk_create_option=os_disk.get("createOption") or "",
        nic_ids=tuple(str(n["id"]) for n in network.get("networkInterfaces") or () if n.get("id")),
        data_disk_ids=tuple(
            str(d["managedDisk"]["id"])
            for d in storage.get("dataDisks") or ()
            if d and d.get("managedDisk") and d["managedDisk"].get("id")
        ),
    )


def json_statuses(vm: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
    """The instance view's statuses of a `statusOnly` list's VM (None: no instance view)."""
    view = (vm.get("properties") or {}).get("instanceView")
    return None if view is None else view.get("statuses") or []


def vm_list_request(subscription_id: str, group: str | None, **params: Any) -> Any:
    """The SDK's own first request of a VM list: of a resource group's VMs, or with no group
    of the subscription's (`status_only="true"`: their instance views' statuses alone)."""
    from azure.mgmt.compute.operations._operations import (
        build_virtual_machines_list_all_request,
        build_virtual_machines_list_request,
    )

    if group is None:
        return build_virtual_machines_list_all_request(subscription_id=subscription_id, **params)
    return build_virtual_machines_list_request(
        resource_group_name=group, subscription_id=subscription_id, **params
    )


def fetch_json_page(
    send: Callable[..., Any], first_request: Callable[[], Any], token: str | None
) -> tuple[list[Mapping[str, Any]], str | None]:
    """One page (one HTTP call) of an ARM list as JSON, and its next link.

    `send` is the SDK client's `send_request`: the request goes through its pipeline. The next
    link is requested as the SDK's pager requests it (a GET of the link as given). A status other
    than 200 raises what the SDK's list operation raises for it.
    """
    from azure.core.rest import HttpRequest

    request = first_request() if not token else HttpRequest("GET", token)
    response = send(request)
    raise_for_arm_status(response, (200,))
    body = response.json()
    return body.get("value") or [], body.get("nextLink") or None


def raise_for_arm_status(response: Any, ok: tuple[int, ...]) -> None:
    """Raise for an answer whose status is not one of `ok` what the SDK's operations raise
    for it: the exception of their error map, else HttpResponseError with ARM's error read."""
    if response.status_code in ok:
        return
    from azure.core.exceptions import HttpResponseError, map_error
    from azure.mgmt.core.exceptions import ARMErrorFormat

    map_error(status_code=response.status_code, response=response, error_map=_error_map())
    raise HttpResponseError(response=response, error_format=ARMErrorFormat)


def _error_map() -> dict[int, Any]:
    global _ERROR_MAP
    if _ERROR_MAP is None:
        from azure.core.exceptions import (
            ClientAuthenticationError,
            ResourceExistsError,
            ResourceNotFoundError,
            ResourceNotModifiedError,
        )

        _ERROR_MAP = {
            401: ClientAuthenticationError,
            404: ResourceNotFoundError,
            409: ResourceExistsError,
            304: ResourceNotModifiedError,
        }
    return _ERROR_MAP


def _timestamp(value: str) -> datetime:
    # ARM's RFC 3339 times carry up to 7 fractional digits; Python reads at most 6 (as the
    # SDK, which cuts the rest), and reads "Z" since 3.11. Anything else: the SDK's own parse.
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        from azure.mgmt.compute._utils.model_base import _deserialize_datetime

        return _deserialize_datetime(value)


def _text(value: Any) -> str:
    # The SDK's enums are str subclasses whose str() is the member name, not the value.
    return value.value if isinstance(value, Enum) else str(value or "")
