"""The simulated ARM's routes: a request's method and path (from /subscriptions/ on) to the
operation name it is counted and faulted under (ARM's, e.g. VirtualMachines_CreateOrUpdate)
and its handler. Microsoft.Resources paths are deployments.py's own.
"""

from __future__ import annotations

from collections.abc import Callable

from werkzeug.wrappers import Response

from wmsim.azure.arm_state import ArmState
from wmsim.azure.resources import (
    COMPUTE,
    DISK_TYPE,
    IMAGE_TYPE,
    IP_TYPE,
    NETWORK,
    NIC_TYPE,
    VM_TYPE,
    VNET_TYPE,
)
from wmsim.azure.signals import SPOT_PLACEMENT_SCORES

# (provider namespace, resource type segment) -> canonical type and the operation-id prefix.
CHILD_KINDS = {
    (NETWORK, "networkinterfaces"): (NIC_TYPE, "NetworkInterfaces"),
    (NETWORK, "publicipaddresses"): (IP_TYPE, "PublicIPAddresses"),
    (COMPUTE, "disks"): (DISK_TYPE, "Disks"),
}

Route = tuple[str, Callable[[], Response]]  # (operation, handler)


class ArmRoutes(ArmState):
    def _route(self, method: str, parts: list[str], lower: list[str]) -> Route | None:
        """The operation and handler of a request under /subscriptions/; None: no route."""
        if (found := self.deployments.route(method, parts, lower)) is not None:
            return found
        sub = parts[1]
        rest, rest_lower = parts[2:], lower[2:]
        # /subscriptions/{sub}/providers/{ns}/...
        if rest_lower[:1] == ["providers"] and len(rest) >= 3:
            ns, kind = rest_lower[1], rest_lower[2]
            if (ns, kind) == (COMPUTE, "virtualmachines") and len(rest) == 3 and method == "GET":
                return "VirtualMachines_ListAll", lambda: self._list_vms(sub, None, None)
            if (
                ns == COMPUTE
                and kind == "locations"
                and rest_lower[4:] == ["placementscores", "spot", "generate"]
                and method == "POST"
            ):  # Compute Recommender's Spot Placement Score (wmsim/azure/signals.py)
                return SPOT_PLACEMENT_SCORES, lambda: self._spot_placement_scores(rest[3].lower())
            if kind == "locations" and len(rest) == 6 and rest_lower[4] == "operations":
                return "Operations_Get", lambda: self._operation(rest[5])
            if (
                ns == COMPUTE
                and kind == "locations"
                and len(rest) == 5
                and rest_lower[4] == "virtualmachines"
            ):
                return "VirtualMachines_ListByLocation", lambda: self._list_vms(
                    sub, None, rest[3].lower()
                )
            return None
        # /subscriptions/{sub}/resourceGroups/{rg}/providers/{ns}/{type}[/{name}[/instanceView]]
        if rest_lower[:1] != ["resourcegroups"] or len(rest) < 5 or rest_lower[2] != "providers":
            return None
        rg, ns, kind, tail = rest[1], rest_lower[3], rest_lower[4], rest[5:]
        if (ns, kind) == (COMPUTE, "virtualmachines"):
            return self._vm_route(method, sub, rg, tail)
        if (ns, kind) == (NETWORK, "virtualnetworks"):
            return self._vnet_route(method, sub, rg, tail)
        if (ns, kind) == (COMPUTE, "images") and len(tail) == 1:
            rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{IMAGE_TYPE}/{tail[0]}"
            if method == "PUT":
                return "Images_CreateOrUpdate", lambda: self._put_image(rid)
            if method == "GET":
                return "Images_Get", lambda: self._get_image(rid)
        if (ns, kind) in CHILD_KINDS:
            rtype, prefix = CHILD_KINDS[(ns, kind)]
            if not tail and method == "GET":
                name = "ListByResourceGroup" if rtype == DISK_TYPE else "List"
                return f"{prefix}_{name}", lambda: self._list_children(sub, rg, rtype)
            if len(tail) != 1:
                return None
            rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{rtype}/{tail[0]}"
            if method == "GET":
                return f"{prefix}_Get", lambda: self._get_child(rid)
            if method == "DELETE":
                return f"{prefix}_Delete", lambda: self._delete_child(rid)
            if method == "PUT" and rtype != DISK_TYPE:
                return f"{prefix}_CreateOrUpdate", lambda: self._put_child(rid, rtype)
        return None

    def _vm_route(self, method: str, sub: str, rg: str, tail: list[str]) -> Route | None:
        if not tail:
            return (
                ("VirtualMachines_List", lambda: self._list_vms(sub, rg, None))
                if (method == "GET")
                else None
            )
        rid = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{VM_TYPE}/{tail[0]}"
        if len(tail) == 2 and tail[1].lower() == "instanceview" and method == "GET":
            return "VirtualMachines_InstanceView", lambda: self._instance_view(rid)
        if len(tail) != 1:
            return None
        handlers = {
            "GET": ("VirtualMachines_Get", lambda: self._get_vm(rid)),
            "PUT": ("VirtualMachines_CreateOrUpdate", lambda: self._put_vm(rid)),
            "DELETE": ("VirtualMachines_Delete", lambda: self._delete_vm(rid)),
        }
        return handlers.get(method)

    def _vnet_route(self, method: str, sub: str, rg: str, tail: list[str]) -> Route | None:
        group = f"/subscriptions/{sub}/resourceGroups/{rg}"
        if not tail:
            if method == "GET":
                return "VirtualNetworks_List", lambda: self._list_vnets(group)
            return None
        vnet_id = f"{group}/providers/{VNET_TYPE}/{tail[0]}"
        if len(tail) == 1:
            if method == "GET":
                return "VirtualNetworks_Get", lambda: self._get_vnet(vnet_id)
            if method == "PUT":
                return "VirtualNetworks_CreateOrUpdate", lambda: self._put_vnet(vnet_id)
            return None
        if tail[1].lower() != "subnets" or len(tail) > 3:
            return None
        if len(tail) == 2:
            if method == "GET":
                return "Subnets_List", lambda: self._list_subnets(vnet_id)
            return None
        if method == "GET":
            return "Subnets_Get", lambda: self._get_subnet(vnet_id, tail[2])
        if method == "PUT":
            return "Subnets_CreateOrUpdate", lambda: self._put_subnet(vnet_id, tail[2])
        return None
