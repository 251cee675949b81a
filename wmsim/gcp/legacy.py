"""A GCE instance made as Taskcluster's worker-manager makes it (services/worker-manager/src/
providers/google.js, `provision`), through google-cloud-compute: the launch config without
its worker-manager keys as the instances.insert body, named `<poolName>-<slug>`, with
worker-manager's labels (escaped its way) on the instance and its PERSISTENT disks, its
`taskcluster` metadata item, service account and automaticRestart false. Nothing of wm's.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any

from wmsim.cloud import LegacyLaunch, LegacyVm

NOT_IN_BODY = ("region", "zone", "workerConfig", "workerManager", "capacityPerInstance")
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_UNSAFE = re.compile(r"[^a-zA-Z0-9-]")


def capacity(launch_config: Mapping[str, Any]) -> int:
    wm_part = launch_config.get("workerManager") or {}
    return int(wm_part.get("capacityPerInstance") or launch_config.get("capacityPerInstance") or 1)


def labels(launch: LegacyLaunch) -> dict[str, str]:
    """worker-manager's labels: `created-by` escaped but not lowercased, pool and owner
    escaped and lowercased, the launch config id as it is."""
    return {
        "created-by": _UNSAFE.sub("-", f"taskcluster-wm-{launch.provider_id}"),
        "managed-by": "taskcluster",
        "worker-pool-id": _UNSAFE.sub("-", launch.pool_id).lower(),
        "owner": _UNSAFE.sub("-", launch.owner).lower(),
        "launch-config-id": launch.launch_config_id,
    }


def instance_name(pool_id: str) -> str:
    """`<pool id with / and _ as ->[:38]-<slugid.nice(), _ as -, lowercased>`."""
    pool_name = re.sub(r"[/_]", "-", pool_id)[:38]
    slug = _nice_slug().replace("_", "-").lower()
    return f"{pool_name}-{slug}"


def _nice_slug() -> str:
    """A slugid.nice(): 22 url-safe base64 characters of a v4 uuid, the first bit clear."""
    raw = bytearray(uuid.uuid4().bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def insert_body(launch: LegacyLaunch, name: str) -> dict[str, Any]:
    cfg = json.loads(json.dumps(launch.launch_config))
    own = labels(launch)
    disks = list(cfg.get("disks") or [])
    for disk in disks:
        if disk.get("type") != "PERSISTENT":
            disk.pop("labels", None)
            continue
        params = disk.get("initializeParams") or {}
        disk["initializeParams"] = {
            **params,
            "labels": {**(params.get("labels") or {}), **(disk.get("labels") or {}), **own},
        }
        disk.pop("labels", None)
    taskcluster = {
        "workerPoolId": launch.pool_id,
        "providerId": launch.provider_id,
        "workerGroup": cfg["zone"],
        "rootUrl": launch.root_url,
        "workerConfig": cfg.get("workerConfig") or {},
    }
    return {
        **{k: v for k, v in cfg.items() if k not in NOT_IN_BODY},
        "name": name,
        "labels": {**(cfg.get("labels") or {}), **own},
        "description": cfg.get("description") or launch.description,
        "disks": disks,
        "serviceAccounts": [
            {"email": launch.settings.get("worker_service_account_email"), "scopes": [SCOPE]}
        ],
        "scheduling": {**(cfg.get("scheduling") or {}), "automaticRestart": False},
        "metadata": {
            "items": [
                *((cfg.get("metadata") or {}).get("items") or []),
                {"key": "taskcluster", "value": json.dumps(taskcluster)},
            ]
        },
    }


def _client(settings: Mapping[str, Any]) -> Any:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    return compute_v1.InstancesClient(
        credentials=AnonymousCredentials(),
        client_options=ClientOptions(api_endpoint=settings["endpoint"]),
        transport="rest",
    )


def launch(launch: LegacyLaunch) -> LegacyVm:
    from google.cloud import compute_v1

    zone = str(launch.launch_config["zone"])
    project = str(launch.settings["project"])
    body = insert_body(launch, instance_name(launch.pool_id))
    client = _client(launch.settings)
    try:
        op = client.insert_unary(
            request=compute_v1.InsertInstanceRequest(
                project=project,
                zone=zone,
                instance_resource=compute_v1.Instance.from_json(json.dumps(body)),
                request_id=str(uuid.uuid4()),
            ),
            retry=None,
        )
    finally:
        client.transport.close()
    if op.error and op.error.errors:
        raise RuntimeError(f"instances.insert failed: {op.error.errors[0].message}")
    return LegacyVm(
        worker_id=str(op.target_id),
        worker_group=zone,
        capacity=capacity(launch.launch_config),
        provider_data={
            "project": project,
            "zone": zone,
            "operation": {"name": op.name, "zone": op.zone},
            "workerConfig": launch.launch_config.get("workerConfig") or {},
        },
    )


def terminate(settings: Mapping[str, Any], vm: LegacyVm) -> None:
    """worker-manager's removeWorker: instances.delete by the workerId (the numeric id)."""
    client = _client(settings)
    try:
        client.delete_unary(
            project=str(vm.provider_data.get("project") or settings["project"]),
            zone=vm.worker_group,
            instance=vm.worker_id,
            retry=None,
        )
    finally:
        client.transport.close()
