"""A VM's PUT sent as the SDK's own request, its answer read as JSON for the three fields wm
keeps (the VM's resource id, its name, and Azure's vmId).

The SDK's `begin_create_or_update(polling=False).result()` sends the same request and then
builds a poller and deserialises the whole VM answer into its model, field by field in Python:
0.75 ms of CPU a VM more than this, measured against the simulated ARM. A launch is many PUTs
at once, and their answers arrive while another cloud's pass is on its way to its own create,
in the same interpreter. So the request is the SDK's (its request builder: its URL, its
api-version), sent through the SDK client's own pipeline (`send_request`: its authentication,
its retry settings, its transport), a failed answer is raised as the SDK's operation raises it
(listing.py: `raise_for_arm_status`), and the body is the launch config's own JSON, as the SDK
sends a dict body (`json.dumps`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from wm.providers.azure.listing import raise_for_arm_status

PUT_OK = (200, 201)  # updated, created: the SDK operation's successes


@dataclass(frozen=True)
class PutVm:
    """What wm keeps of a VM's PUT answer."""

    id: str
    name: str
    vm_id: str | None


def put_vm(
    send: Callable[..., Any],
    subscription_id: str,
    group: str,
    name: str,
    body: Mapping[str, Any],
) -> PutVm:
    """PUT one VM (`send` is the SDK client's `send_request`) and read its answer."""
    from azure.mgmt.compute.operations._operations import (
        build_virtual_machines_create_or_update_request,
    )

    request = build_virtual_machines_create_or_update_request(
        resource_group_name=group,
        vm_name=name,
        subscription_id=subscription_id,
        content_type="application/json",
        content=json.dumps(body),
    )
    response = send(request)
    raise_for_arm_status(response, PUT_OK)
    answer = response.json()
    properties = answer.get("properties") or {}
    return PutVm(
        id=str(answer["id"]),
        name=str(answer.get("name") or name),
        vm_id=properties.get("vmId") or None,
    )
