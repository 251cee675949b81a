"""NICs, public IPs and managed disks in the simulated ARM: made with a VM from its body
(networkInterfaceConfigurations, publicIPAddressConfiguration, the OS and data disks) or on
their own by PUT, attached to their VM (or NIC), and released or deleted with it by their
`deleteOption` (Detach unless Delete, as on ARM). An attached NIC or public IP cannot be
deleted (NicInUse, PublicIPAddressCannotBeDeleted).
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure.arm_state import ArmState
from wmsim.azure.errors import ArmError, in_use, required_location, unknown_reference
from wmsim.azure.resources import (
    DISK_TYPE,
    IP_TYPE,
    NIC_TYPE,
    _child_view,
    _json,
    _key,
    _Resource,
    _Vm,
    as_object,
)


class AttachedResources(ArmState):
    _market_stopped: Callable[[str], None]  # MarketBound's
    # -- made with a VM ----------------------------------------------------------------------

    def _attach_network(self, vm: _Vm, rid: str) -> None:
        network = vm.properties.setdefault("networkProfile", {})
        prefix = rid.split("/providers/")[0]
        refs = []
        for ref in network.get("networkInterfaces") or []:
            nic = self._resources.get(_key(str(ref.get("id", ""))))
            if nic is None or nic.type != NIC_TYPE:
                raise unknown_reference(ref.get("id"), rid)
            nic.owner = _key(rid)
            nic.delete_with_owner = _deletes(ref.get("properties"))
            refs.append(ref)
        for config in network.get("networkInterfaceConfigurations") or []:
            nic_id = f"{prefix}/providers/{NIC_TYPE}/{config['name']}"
            nic_props = config.get("properties") or {}
            tags = dict(config.get("tags") or {})
            nic = self._make_nic(nic_id, vm.location, tags, nic_props, prefix)
            nic.owner = _key(rid)
            nic.delete_with_owner = _deletes(nic_props)
            refs.append(
                {
                    "id": nic_id,
                    "properties": {
                        "primary": bool(nic_props.get("primary", True)),
                        "deleteOption": nic_props.get("deleteOption", "Detach"),
                    },
                }
            )
        network["networkInterfaces"] = refs

    def _make_nic(
        self,
        nic_id: str,
        location: str,
        tags: dict[str, str],
        props: dict[str, Any],
        prefix: str,
    ) -> _Resource:
        ip_configs = []
        for index, config in enumerate(props.get("ipConfigurations") or []):
            cprops = dict(config.get("properties") or {})
            out: dict[str, Any] = {
                "privateIPAddress": f"10.0.{len(self._resources) % 250}.{index + 4}",
                "privateIPAllocationMethod": cprops.get("privateIPAllocationMethod", "Dynamic"),
                "primary": cprops.get("primary", index == 0),
                "provisioningState": "Succeeded",
            }
            if cprops.get("subnet"):
                out["subnet"] = cprops["subnet"]
            ip_id = self._public_ip_for(cprops, location, prefix, nic_id)
            if ip_id:
                out["publicIPAddress"] = {"id": ip_id}
            ip_configs.append(
                {
                    "id": f"{nic_id}/ipConfigurations/{config.get('name', 'ipconfig1')}",
                    "name": config.get("name", "ipconfig1"),
                    "properties": out,
                }
            )
        nic = _Resource(
            id=nic_id,
            type=NIC_TYPE,
            name=nic_id.rsplit("/", 1)[1],
            location=location,
            tags=tags,
            properties={
                "provisioningState": "Succeeded",
                "ipConfigurations": ip_configs,
                "macAddress": "00-0D-3A-" + secrets.token_hex(3).upper(),
            },
        )
        self._resources[_key(nic_id)] = nic
        return nic

    def _public_ip_for(
        self, cprops: dict[str, Any], location: str, prefix: str, nic_id: str
    ) -> str | None:
        config = cprops.get("publicIPAddressConfiguration")
        if config:  # created with the VM
            ip_props = config.get("properties") or {}
            ip_id = f"{prefix}/providers/{IP_TYPE}/{config['name']}"
            tags = dict(config.get("tags") or {})
            ip = self._make_ip(ip_id, location, tags, ip_props, config.get("sku"))
            ip.owner, ip.delete_with_owner = _key(nic_id), _deletes(ip_props)
            return ip_id
        ref = cprops.get("publicIPAddress")
        if ref and ref.get("id"):  # an existing public IP (the multi-step way, templates)
            ip = self._resources.get(_key(str(ref.get("id", ""))))
            if ip is None:
                raise unknown_reference(ref.get("id"), nic_id)
            ip.owner = _key(nic_id)
            ip.delete_with_owner = _deletes(ref.get("properties"))
            return ip.id
        return None

    def _make_ip(
        self,
        ip_id: str,
        location: str,
        tags: dict[str, str],
        props: dict[str, Any],
        sku: dict[str, Any] | None,
    ) -> _Resource:
        ip = _Resource(
            id=ip_id,
            type=IP_TYPE,
            name=ip_id.rsplit("/", 1)[1],
            location=location,
            tags=tags,
            sku=sku or {"name": "Standard"},
            properties={
                "provisioningState": "Succeeded",
                "publicIPAllocationMethod": props.get("publicIPAllocationMethod", "Static"),
                "publicIPAddressVersion": props.get("publicIPAddressVersion", "IPv4"),
                "ipAddress": f"203.0.113.{len(self._resources) % 250 + 1}",
            },
        )
        self._resources[_key(ip_id)] = ip
        return ip

    def _attach_os_disk(self, vm: _Vm, rid: str) -> None:
        storage = vm.properties.setdefault("storageProfile", {})
        os_disk = storage.setdefault("osDisk", {"createOption": "FromImage"})
        self._make_disk(vm, rid, os_disk, f"{vm.name}_OsDisk_1", default_size_gb=30)

    def _attach_data_disks(self, vm: _Vm, rid: str) -> None:
        storage = vm.properties.setdefault("storageProfile", {})
        for disk in storage.get("dataDisks") or []:
            if str(disk.get("createOption", "")).lower() == "attach":
                # An existing disk: not the sim's to make, but its VM's from now on.
                held = self._resources.get(_key(str(as_object(disk.get("managedDisk")).get("id"))))
                if held is not None and held.type == DISK_TYPE:
                    held.owner, held.delete_with_owner = _key(rid), _deletes(disk)
                    held.properties["diskState"] = "Attached"
                continue
            self._make_disk(vm, rid, disk, f"{vm.name}_disk{disk.get('lun')}", default_size_gb=0)

    def _make_disk(
        self, vm: _Vm, rid: str, disk: dict[str, Any], prefix: str, *, default_size_gb: int
    ) -> None:
        """A managed disk the VM's body asks ARM to make: named (ARM's default name when the
        body gives none), held as a resource of the VM, deleted with it per its deleteOption."""
        name = disk.get("name") or f"{prefix}_{uuid.uuid4().hex}"
        disk_id = f"{rid.split('/providers/')[0]}/providers/{DISK_TYPE}/{name}"
        disk["name"] = name
        disk.setdefault("deleteOption", "Detach")
        disk.setdefault("managedDisk", {})["id"] = disk_id
        self._resources[_key(disk_id)] = _Resource(
            id=disk_id,
            type=DISK_TYPE,
            name=name,
            location=vm.location,
            tags={},
            properties={
                "provisioningState": "Succeeded",
                "diskState": "Attached",
                "diskSizeGB": int(disk.get("diskSizeGB") or default_size_gb),
            },
            owner=_key(rid),
            delete_with_owner=_deletes(disk),
        )

    # -- on their own -----------------------------------------------------------------------

    def _put_child(self, rid: str, rtype: str) -> Response:
        resource, status = self._store_child(rid, rtype, self._body())
        return self._accepted(_child_view(resource), status, rid, resource.location)

    def _store_child(self, rid: str, rtype: str, body: dict[str, Any]) -> tuple[_Resource, int]:
        """Create (201) or update (200: tags) a NIC, public IP or disk from a PUT body."""
        location = required_location(body)
        tags = dict(body.get("tags") or {})
        props = body.get("properties") or {}
        existing = self._resources.get(_key(rid))
        if rtype == NIC_TYPE:
            for config in props.get("ipConfigurations") or []:
                subnet = as_object(as_object(as_object(config).get("properties")).get("subnet"))
                if subnet.get("id"):
                    self._check_subnet(str(subnet["id"]), rid)
        if existing is not None:
            existing.tags = tags
            return existing, 200
        if rtype == NIC_TYPE:
            return self._make_nic(rid, location, tags, props, rid.split("/providers/")[0]), 201
        if rtype == IP_TYPE:
            return self._make_ip(rid, location, tags, props, body.get("sku")), 201
        disk = _Resource(
            id=rid,
            type=DISK_TYPE,
            name=rid.rsplit("/", 1)[1],
            location=location,
            tags=tags,
            sku=body.get("sku"),
            properties={
                "provisioningState": "Succeeded",
                "diskState": "Unattached",
                "diskSizeGB": int(props.get("diskSizeGB") or 0),
                "creationData": dict(
                    as_object(props.get("creationData")) or {"createOption": "Empty"}
                ),
            },
        )
        self._resources[_key(rid)] = disk
        return disk, 201

    def _get_child(self, rid: str) -> Response:
        resource = self._resources.get(_key(rid))
        if resource is None:
            raise _not_found(rid)
        return _json(_child_view(resource))

    def _delete_child(self, rid: str) -> Response:
        resource = self._resources.get(_key(rid))
        if resource is None:
            return self._delete_missing(rid)
        if resource.owner and (resource.owner in self._vms or resource.owner in self._resources):
            raise in_use(resource)
        self._drop_resource(_key(rid))
        return Response(status=200)

    def _delete_missing(self, rid: str) -> Response:
        if self.delete_missing_status == 404:
            raise _not_found(rid)
        return Response(status=self.delete_missing_status)

    def _list_children(self, sub: str, rg: str, rtype: str) -> Response:
        prefix = f"/subscriptions/{sub}/resourcegroups/{rg}/providers/{rtype}/".lower()
        items = [r for k, r in self._resources.items() if k.startswith(prefix)]
        return self._page(items, _child_view, {})

    # -- deletion and cascades ---------------------------------------------------------------

    def _drop_vm(self, key: str) -> None:
        self._vms.pop(key, None)
        self._market_stopped(key)
        self._release_owned_by(key)

    def _drop_resource(self, key: str) -> None:
        self._resources.pop(key, None)
        self._release_owned_by(key)

    def _release_owned_by(self, key: str) -> None:
        for child_key, child in list(self._resources.items()):
            if child.owner == key:
                self._release(child_key, child)

    def _release(self, key: str, resource: _Resource) -> None:
        if resource.delete_with_owner:
            self._drop_resource(key)
        else:
            resource.owner = None
            if resource.type == DISK_TYPE:
                resource.properties["diskState"] = "Unattached"


def _not_found(rid: str) -> ArmError:
    """What ARM answers for a NIC, public IP or disk (or a delete of anything) not there."""
    rtype, name = rid.split("/providers/")[1].rsplit("/", 1)
    return ArmError(404, "ResourceNotFound", f"The Resource '{rtype}/{name}' was not found.")


def _deletes(props: dict[str, Any] | None) -> bool:
    return str((props or {}).get("deleteOption", "Detach")).lower() == "delete"
