"""Virtual networks and subnets in the simulated ARM, and the references to them a VM or NIC
body makes. Every resource group holds the default network (`DEFAULT_VNET` with the subnet
`DEFAULT_SUBNET`); more come from azure-mgmt-network's `virtual_networks` /
`subnets.begin_create_or_update`. A default network, once changed, is held like any other.
"""

from __future__ import annotations

import json
from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure.arm_state import ArmState
from wmsim.azure.errors import ArmError, missing, not_found, required_location, unknown_reference
from wmsim.azure.resources import (
    DEFAULT_SUBNET,
    DEFAULT_SUBNET_PREFIX,
    DEFAULT_VNET,
    DEFAULT_VNET_PREFIX,
    NIC_TYPE,
    SUBNET_TYPE,
    VNET_TYPE,
    _json,
    _key,
    _Vnet,
    as_object,
)


class Networks(ArmState):
    _vnets: dict[str, _Vnet]  # created ones; the default network is implied

    def _vnet(self, vnet_id: str) -> _Vnet | None:
        """A created virtual network, else the default one of its resource group."""
        found = self._vnets.get(_key(vnet_id))
        if found is not None or vnet_id.rsplit("/", 1)[1].lower() != DEFAULT_VNET:
            return found
        canonical = vnet_id.rsplit("/", 1)[0] + "/" + DEFAULT_VNET
        subnet = {"addressPrefix": DEFAULT_SUBNET_PREFIX, "provisioningState": "Succeeded"}
        return _Vnet(
            id=canonical,
            name=DEFAULT_VNET,
            location="eastus",
            tags={},
            address_prefixes=[DEFAULT_VNET_PREFIX],
            subnets={DEFAULT_SUBNET: {"name": DEFAULT_SUBNET, "properties": subnet}},
        )

    def _vnet_or_404(self, vnet_id: str) -> _Vnet:
        vnet = self._vnet(vnet_id)
        if vnet is None:
            raise not_found(vnet_id)
        return vnet

    def _get_vnet(self, vnet_id: str) -> Response:
        return _json(_vnet_view(self._vnet_or_404(vnet_id)))

    def _put_vnet(self, vnet_id: str) -> Response:
        body = self._body()
        location = required_location(body)
        props = as_object(body.get("properties"))
        subnets = {}
        for subnet in props.get("subnets") or []:
            name = str(as_object(subnet).get("name") or "")
            if not name:
                raise missing("subnet.name")
            subnet_props = dict(as_object(as_object(subnet).get("properties")))
            subnet_props["provisioningState"] = "Succeeded"
            subnets[name.lower()] = {"name": name, "properties": subnet_props}
        existed = _key(vnet_id) in self._vnets
        vnet = _Vnet(
            id=vnet_id,
            name=vnet_id.rsplit("/", 1)[1],
            location=location,
            tags=dict(body.get("tags") or {}),
            address_prefixes=list(
                as_object(props.get("addressSpace")).get("addressPrefixes") or []
            ),
            subnets=subnets,
        )
        self._vnets[_key(vnet_id)] = vnet
        return self._accepted(_vnet_view(vnet), 200 if existed else 201, vnet_id, location)

    def _put_subnet(self, vnet_id: str, name: str) -> Response:
        vnet = self._vnet(vnet_id)
        if vnet is None:
            raise ArmError(
                404,
                "ParentResourceNotFound",
                "Can not perform requested operation on nested resource. Parent resource "
                f"'{vnet_id.rsplit('/', 1)[1]}' not found.",
            )
        self._vnets[_key(vnet.id)] = vnet  # a default network, once changed, is held
        props = dict(as_object(self._body().get("properties")))
        props["provisioningState"] = "Succeeded"
        existed = name.lower() in vnet.subnets
        vnet.subnets[name.lower()] = {"name": name, "properties": props}
        view = _subnet_view(vnet, vnet.subnets[name.lower()])
        return self._accepted(view, 200 if existed else 201, view["id"], vnet.location)

    def _get_subnet(self, vnet_id: str, name: str) -> Response:
        vnet = self._vnet_or_404(vnet_id)
        subnet = vnet.subnets.get(name.lower())
        if subnet is None:
            raise ArmError(404, "NotFound", f"Resource {vnet.id}/subnets/{name} not found.")
        return _json(_subnet_view(vnet, subnet))

    def _list_subnets(self, vnet_id: str) -> Response:
        vnet = self._vnet_or_404(vnet_id)
        return _json({"value": [_subnet_view(vnet, s) for s in vnet.subnets.values()]})

    def _list_vnets(self, group: str) -> Response:
        prefix = _key(group) + "/providers/"
        held = [v for k, v in self._vnets.items() if k.startswith(prefix)]
        default = self._vnet(f"{group}/providers/{VNET_TYPE}/{DEFAULT_VNET}")
        if default is not None and all(_key(v.id) != _key(default.id) for v in held):
            held.append(default)
        return _json({"value": [_vnet_view(v) for v in held]})

    def _check_network(self, rid: str, props: dict[str, Any]) -> None:
        network = as_object(props.get("networkProfile"))
        configs = network.get("networkInterfaceConfigurations") or []
        if not network.get("networkInterfaces") and not configs:
            raise missing("networkProfile")
        for ref in network.get("networkInterfaces") or []:
            nic = self._resources.get(_key(str(as_object(ref).get("id", ""))))
            if nic is None or nic.type != NIC_TYPE:
                raise unknown_reference(as_object(ref).get("id"), rid)
        prefix = rid.split("/providers/")[0]
        for config in configs:
            nic_id = f"{prefix}/providers/{NIC_TYPE}/{as_object(config).get('name')}"
            for ip_config in (
                as_object(as_object(config).get("properties")).get("ipConfigurations") or []
            ):
                subnet = as_object(as_object(as_object(ip_config).get("properties")).get("subnet"))
                if not subnet.get("id"):
                    raise missing("ipConfiguration.subnet")
                self._check_subnet(str(subnet["id"]), nic_id)

    def _check_subnet(self, subnet_id: str, referrer: str) -> None:
        if not self._subnet_known(subnet_id):
            raise unknown_reference(
                subnet_id,
                referrer,
                " Please make sure that the referenced resource exists, and that both resources "
                "are in the same region.",
            )

    def _subnet_known(self, subnet_id: str) -> bool:
        parts = subnet_id.lower().strip("/").split("/")
        if len(parts) != 10 or parts[8] != "subnets":
            return False
        expected = ["subscriptions", "resourcegroups", "providers", "microsoft.network"]
        if [parts[0], parts[2], parts[4], parts[5], parts[6]] != [*expected, "virtualnetworks"]:
            return False
        vnet = self._vnet("/" + "/".join(parts[:8]))
        return vnet is not None and parts[9] in vnet.subnets


def _vnet_view(vnet: _Vnet) -> dict[str, Any]:
    return {
        "id": vnet.id,
        "name": vnet.name,
        "type": VNET_TYPE,
        "location": vnet.location,
        "tags": dict(vnet.tags),
        "properties": {
            "provisioningState": "Succeeded",
            "addressSpace": {"addressPrefixes": list(vnet.address_prefixes)},
            "subnets": [_subnet_view(vnet, s) for s in vnet.subnets.values()],
        },
    }


def _subnet_view(vnet: _Vnet, subnet: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"{vnet.id}/subnets/{subnet['name']}",
        "name": subnet["name"],
        "type": SUBNET_TYPE,
        "properties": json.loads(json.dumps(subnet["properties"])),
    }
