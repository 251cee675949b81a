"""Resource groups (Microsoft.Resources/resourceGroups) in the simulated ARM: list, PUT, GET,
HEAD. A group exists once created, and so do the sim's default group (`default_names`) and
any group already holding a resource (the VM, NIC, IP and disk routes take any group).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure.arm_host import ArmHost
from wmsim.azure.errors import ArmError
from wmsim.azure.resources import DEFAULT_RESOURCE_GROUP, _json, _key, canonical_location

RESOURCE_GROUP_TYPE = "Microsoft.Resources/resourceGroups"
DEFAULT_GROUP_LOCATION = "eastus"

Handler = Callable[[], Response]


@dataclass
class Group:
    id: str
    name: str
    location: str
    tags: dict[str, str]


class ResourceGroups:
    """The resource groups of one SimArm (its lock held by the caller)."""

    def __init__(self, arm: ArmHost) -> None:
        self._arm = arm
        self._groups: dict[str, Group] = {}  # lower-case id -> group
        self.default_names: tuple[str, ...] = (DEFAULT_RESOURCE_GROUP,)

    def reset(self) -> None:
        self._groups.clear()
        self.default_names = (DEFAULT_RESOURCE_GROUP,)

    def create(
        self,
        subscription_id: str,
        name: str,
        location: str = DEFAULT_GROUP_LOCATION,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        gid = f"/subscriptions/{subscription_id}/resourceGroups/{name}"
        self._groups[_key(gid)] = Group(gid, name, canonical_location(location), dict(tags or {}))

    def list_route(self, method: str, sub: str) -> tuple[str, Handler] | None:
        return ("ResourceGroups_List", lambda: self._list(sub)) if method == "GET" else None

    def route(self, method: str, sub: str, group: str) -> tuple[str, Handler] | None:
        handlers = {
            "PUT": ("ResourceGroups_CreateOrUpdate", lambda: self._put(sub, group)),
            "GET": ("ResourceGroups_Get", lambda: _json(_view(self.get(sub, group)))),
            "HEAD": ("ResourceGroups_CheckExistence", lambda: self._exists(sub, group)),
        }
        return handlers.get(method)

    def get(self, sub: str, name: str) -> Group:
        """The group; 404 ResourceGroupNotFound when there is none."""
        found = self.find(sub, name)
        if found is None:
            raise ArmError(
                404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found."
            )
        return found

    def find(self, sub: str, name: str) -> Group | None:
        gid = f"/subscriptions/{sub}/resourceGroups/{name}"
        found = self._groups.get(_key(gid))
        if found is not None:
            return found
        implied = name.lower() in {g.lower() for g in self.default_names}
        if implied or self._holds_resources(gid):
            return Group(gid, name, DEFAULT_GROUP_LOCATION, {})
        return None

    def _holds_resources(self, gid: str) -> bool:
        prefix = _key(gid) + "/"
        return any(key.startswith(prefix) for key in self._held_keys())

    def _held_keys(self) -> Iterator[str]:
        """The keys of every VM, NIC, IP, disk, network and image the SimArm holds."""
        arm = self._arm
        return itertools.chain(arm._vms, arm._resources, arm._vnets, arm._images)

    def _put(self, sub: str, name: str) -> Response:
        body = self._arm._body()
        location = canonical_location(str(body.get("location") or ""))
        if not location:
            raise ArmError(
                400, "LocationRequired", "The location property is required for this definition."
            )
        gid = f"/subscriptions/{sub}/resourceGroups/{name}"
        existed = self.find(sub, name) is not None  # created, default or implied
        existing = self._groups.get(_key(gid))  # only a created group has a location of its own
        if existing is not None and existing.location != location:
            raise ArmError(
                409,
                "InvalidResourceGroupLocation",
                f"Invalid resource group location '{location}'. The Resource group already "
                f"exists in location '{existing.location}'.",
            )
        group = Group(
            existing.id if existing else gid,
            existing.name if existing else name,
            location,
            dict(body.get("tags") or {}),
        )
        self._groups[_key(gid)] = group
        return _json(_view(group), 200 if existed else 201)

    def _exists(self, sub: str, name: str) -> Response:
        return Response(status=204 if self.find(sub, name) else 404)

    def _list(self, sub: str) -> Response:
        prefix = f"/subscriptions/{sub}/resourcegroups/".lower()
        names = {g.name.lower(): g.name for k, g in self._groups.items() if k.startswith(prefix)}
        for name in self.default_names:
            names.setdefault(name.lower(), name)
        for key in self._held_keys():
            if key.startswith(prefix):
                names.setdefault(key.split("/")[4], key.split("/")[4])
        groups = [self.find(sub, name) for name in sorted(names.values())]
        return _json({"value": [_view(g) for g in groups if g is not None]})


def _view(group: Group) -> dict[str, Any]:
    return {
        "id": group.id,
        "name": group.name,
        "type": RESOURCE_GROUP_TYPE,
        "location": group.location,
        "tags": dict(group.tags),
        "properties": {"provisioningState": "Succeeded"},
    }
