"""Deployments and their operations as ARM shows them (GET, list, the operations list):
pure views of a run's records (deployment_runs.py). ARM never echoes a secure parameter.
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from wmsim.azure.arm_templates import SECURE_TYPES, Plan
from wmsim.azure.deployment_runs import DEPLOYMENT_TYPE, Deployment, DeploymentOp
from wmsim.azure.resources import _key, _now_iso


def deployment_view(d: Deployment) -> dict[str, Any]:
    """A deployment as GET answers it."""
    end = d.finished_at if d.finished_at is not None else time.time()
    props: dict[str, Any] = {
        "templateHash": _template_hash(d.template),
        "parameters": _parameters_view(d.plan),
        "mode": d.mode,
        "provisioningState": d.state,
        "timestamp": _now_iso(end),
        "duration": f"PT{max(0.0, end - d.created_at):.3f}S",
        "correlationId": d.correlation_id,
        "providers": _providers(d.plan),
        "dependencies": _dependencies(d.plan),
    }
    if d.template_link is not None:
        props["templateLink"] = dict(d.template_link)
    for echoed in ("debugSetting", "onErrorDeployment"):
        if echoed in d.body["properties"]:
            props[echoed] = d.body["properties"][echoed]
    if d.state == "Succeeded":
        props["outputs"] = copy.deepcopy(d.outputs or {})
        props["outputResources"] = [{"id": op.resource.id} for op in d.ops]
    if d.error is not None:
        props["error"] = copy.deepcopy(d.error)
    return {
        "id": d.id,
        "name": d.name,
        "type": DEPLOYMENT_TYPE,
        "tags": dict(d.body.get("tags") or {}),
        "properties": props,
    }


@dataclass(frozen=True)
class OperationView:
    """A deployment operation as ARM lists it (`op` None: the outputs' evaluation)."""

    id: str
    op: DeploymentOp | None
    deployment: Deployment | None = None

    def render(self) -> dict[str, Any]:
        op, operation_id = self.op, self.id.rsplit("/", 1)[1]
        if op is None:
            at = self.deployment.finished_at if self.deployment else time.time()
            return {
                "id": self.id,
                "operationId": operation_id,
                "properties": {
                    "provisioningOperation": "EvaluateDeploymentOutput",
                    "provisioningState": "Succeeded",
                    "timestamp": _now_iso(at),
                    "duration": "PT0S",
                    "trackingId": str(uuid.uuid5(uuid.NAMESPACE_URL, self.id)),
                    "statusCode": "OK",
                },
            }
        resource = op.resource
        end = op.finished_at if op.finished_at is not None else time.time()
        props: dict[str, Any] = {
            "provisioningOperation": "Create",
            "provisioningState": op.state,
            "timestamp": _now_iso(end),
            "duration": f"PT{max(0.0, end - op.started_at):.3f}S",
            "trackingId": str(uuid.uuid5(uuid.NAMESPACE_URL, self.id)),
            "targetResource": {
                "id": resource.id,
                "resourceType": resource.type,
                "resourceName": resource.name,
                "apiVersion": resource.api_version,
            },
        }
        if op.status_code is not None:
            props["statusCode"] = op.status_code
        if op.error is not None:
            props["statusMessage"] = {"status": "Failed", "error": copy.deepcopy(op.error)}
        return {"id": self.id, "operationId": operation_id, "properties": props}


def _template_hash(template: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return str(int.from_bytes(digest[:8], "big"))


def _parameters_view(planned: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in planned.parameter_types.items():
        if kind.lower() in SECURE_TYPES:
            out[name] = {"type": kind}  # ARM never echoes a secure parameter's value
        else:
            out[name] = {"type": kind, "value": copy.deepcopy(planned.parameters[name])}
    return out


def _providers(planned: Plan) -> list[dict[str, Any]]:
    found: dict[str, dict[str, set[str]]] = {}
    for resource in planned.resources:
        namespace, _, rtype = resource.type.partition("/")
        location = str(resource.body.get("location") or "")
        found.setdefault(namespace, {}).setdefault(rtype, set()).add(location)
    return [
        {
            "namespace": namespace,
            "resourceTypes": [
                {"resourceType": rtype, "locations": sorted(locations)}
                for rtype, locations in types.items()
            ],
        }
        for namespace, types in found.items()
    ]


def _dependencies(planned: Plan) -> list[dict[str, Any]]:
    by_id = {_key(r.id): r for r in planned.resources}

    def ref(rid: str) -> dict[str, str]:
        resource = by_id[_key(rid)]
        return {"id": resource.id, "resourceType": resource.type, "resourceName": resource.name}

    return [
        {**ref(r.id), "dependsOn": [ref(d) for d in r.depends_on]}
        for r in planned.resources
        if r.depends_on
    ]
