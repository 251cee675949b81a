"""Azure's Instance Metadata Service (IMDS), as one simulated VM sees it.

The rules IMDS has and worker-runner relies on (tools/worker-runner/provider/azure/*.go):
- every request carries `Metadata: true` and an `api-version` query argument (else 400);
- `/metadata/instance`: `compute` (name, location, vmId, vmSize, resourceId, subscriptionId,
  resourceGroupName, priority, tags and tagsList — the VM's tags as created, where
  worker-manager writes worker-pool-id, provider-id, worker-group and root-url — osProfile,
  userData) and `network` (interface[].ipv4.ipAddress[].privateIpAddress/publicIpAddress);
  a sub-path such as `/metadata/instance/compute/vmId` answers that part, and
  `format=text` a leaf as plain text;
- `/metadata/attested/document`: `{"encoding": "pkcs7", "signature": <PKCS#7>}`; the nonce is
  optional (without one IMDS puts the current time in its place);
- `/metadata/scheduledevents`: `{"DocumentIncarnation", "Events"}`, with a `Preempt` event from
  the Spot eviction notice (at least 30 seconds ahead) on.
customData is not served (IMDS never serves it; worker-runner does not read it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wmsim.metadata import MetaAnswer, json_answer, text

EVICTION_NOTICE_S = 30.0  # Azure's minimum notice of a Spot eviction
SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"


@dataclass(frozen=True)
class AzureVmView:
    """What the VM's IMDS knows about it."""

    name: str
    resource_id: str
    subscription_id: str
    resource_group: str
    location: str
    vm_id: str
    vm_size: str
    priority: str  # Regular | Spot
    tags: Mapping[str, str]
    user_data: str  # base64, as created ("" when none)
    os_profile: Mapping[str, Any]  # adminUsername, computerName (never secrets)
    addresses: tuple[tuple[str, str], ...]  # (private, public or "") per NIC
    eviction_at: datetime | None  # an announced Spot eviction (UTC), else None
    # nonce (or None) -> the "signature" field of the attested document
    attested: Callable[[str | None], str] = field(repr=False, default=lambda nonce: "")


def answer(
    view: AzureVmView, method: str, path: str, args: Mapping[str, str], headers: Mapping[str, str]
) -> MetaAnswer:
    """IMDS's answer to one request of this VM (path below its prefix)."""
    if headers.get("metadata", "").lower() != "true":
        return json_answer({"error": "Bad request. Required metadata header not specified"}, 400)
    if not args.get("api-version"):
        return json_answer(
            {
                "error": "Bad request. api-version was not specified in the request. For more "
                "information refer to aka.ms/azureimds",
                "newest-versions": ["2025-04-07"],
            },
            400,
        )
    if method != "GET":
        return json_answer({"error": "Method not allowed"}, 405)
    route = path.rstrip("/")
    if route == "/metadata/attested/document":
        return json_answer({"encoding": "pkcs7", "signature": view.attested(args.get("nonce"))})
    if route == SCHEDULED_EVENTS_PATH:
        return json_answer(scheduled_events(view))
    if route == "/metadata/instance" or route.startswith("/metadata/instance/"):
        node: Any = instance_document(view)
        for part in route.split("/")[3:]:
            if not isinstance(node, dict) or part not in node:
                return json_answer({"error": "Not found"}, 404)
            node = node[part]
        if args.get("format") == "text" and not isinstance(node, dict | list):
            return text(str(node))
        return json_answer(node)
    return json_answer({"error": "Not found"}, 404)


def instance_document(view: AzureVmView) -> dict[str, Any]:
    return {
        "compute": {
            "azEnvironment": "AzurePublicCloud",
            "location": view.location,
            "name": view.name,
            "osProfile": dict(view.os_profile),
            "priority": view.priority,
            "provider": "Microsoft.Compute",
            "resourceGroupName": view.resource_group,
            "resourceId": view.resource_id,
            "subscriptionId": view.subscription_id,
            "tags": ";".join(f"{k}:{v}" for k, v in view.tags.items()),
            "tagsList": [{"name": k, "value": v} for k, v in view.tags.items()],
            "userData": view.user_data,
            "vmId": view.vm_id,
            "vmSize": view.vm_size,
            "zone": "",
        },
        "network": {
            "interface": [
                {
                    "ipv4": {
                        "ipAddress": [{"privateIpAddress": private, "publicIpAddress": public}],
                        "subnet": [],
                    },
                    "ipv6": {"ipAddress": []},
                }
                for private, public in view.addresses
            ]
        },
    }


def scheduled_events(view: AzureVmView) -> dict[str, Any]:
    if view.eviction_at is None:
        return {"DocumentIncarnation": 0, "Events": []}
    return {
        "DocumentIncarnation": 1,
        "Events": [
            {
                "EventId": f"preempt-{view.vm_id}",
                "EventType": "Preempt",
                "ResourceType": "VirtualMachine",
                "Resources": [view.name],
                "EventStatus": "Scheduled",
                "NotBefore": view.eviction_at.strftime("%a, %d %b %Y %H:%M:%S GMT"),
                "Description": "",
                "EventSource": "Platform",
                "DurationInSeconds": -1,
            }
        ],
    }
