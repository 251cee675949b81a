"""An instances.insert for a launch: its body, made of a Taskcluster Google launch config as
worker-manager makes it (services/worker-manager/src/providers/google.js), and its requestId,
derived from the intent's idempotency token. Pure."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from wm.providers.base import plain

# uuid5 namespace turning wm's idempotency tokens into the UUIDs GCE requires as requestId.
REQUEST_ID_NAMESPACE = uuid.UUID("5b0f7c36-3f0e-4c55-9d7e-3b9a4f2f6c1e")
# What worker-manager leaves out of a launch config to make the insert body (google.js).
NOT_IN_INSERT_BODY = frozenset(
    {"region", "zone", "workerConfig", "workerManager", "capacityPerInstance"}
)


def request_id(token: str) -> str:
    """The requestId for an idempotency token: the token if it is a UUID, else a uuid5 of it."""
    try:
        parsed = uuid.UUID(token)
    except ValueError:
        parsed = None
    if parsed is not None and parsed.int != 0:
        return str(parsed)
    return str(uuid.uuid5(REQUEST_ID_NAMESPACE, token))


def insert_body(
    launch_config: Mapping[str, Any],
    *,
    name: str,
    labels: Mapping[str, str],
    own_labels: Mapping[str, str],
    description: str,
    service_accounts: Sequence[Mapping[str, Any]],
    metadata_items: Sequence[Mapping[str, str]],
) -> dict[str, Any]:
    """The instances.insert body of a Taskcluster Google launch config, as worker-manager
    makes it (google.js `provision`): the launch config without its worker-manager keys,
    verbatim, with worker-manager's overrides and wm's own labels.

    `labels` (worker-manager's) go on the instance and into every PERSISTENT disk's
    initializeParams.labels (after the disk's own `labels`, which GCE's AttachedDisk does not
    have and so are moved there; other disks lose theirs); `own_labels` (wm's ownership)
    on the instance only. The description is the launch config's, else the pool's; the
    service accounts are wm's, never the launch config's; scheduling.automaticRestart is
    false; `metadata_items` follow the launch config's metadata items.
    """
    body = {k: v for k, v in plain(launch_config).items() if k not in NOT_IN_INSERT_BODY}
    # A value of the wrong shape (labels not an object, disks not a list...) is left as it is:
    # turning it into the SDK's Instance then fails with its key named.
    body["name"] = name
    body["labels"] = _merged(body.get("labels") or {}, {**labels, **own_labels})
    body["description"] = body.get("description") or description
    disks = body.get("disks") or []
    body["disks"] = [_labelled_disk(d, labels) for d in disks] if isinstance(disks, list) else disks
    body["serviceAccounts"] = [dict(account) for account in service_accounts]
    body["scheduling"] = _merged(body.get("scheduling") or {}, {"automaticRestart": False})
    metadata = body.get("metadata") or {}
    given = (metadata.get("items") or []) if isinstance(metadata, dict) else []
    items = [*given, *(dict(item) for item in metadata_items)] if isinstance(given, list) else given
    body["metadata"] = {"items": items}
    return body


def _merged(value: Any, overrides: Mapping[str, Any]) -> Any:
    return {**value, **overrides} if isinstance(value, dict) else value


def _labelled_disk(disk: Any, labels: Mapping[str, str]) -> Any:
    if not isinstance(disk, dict):
        return disk
    disk = dict(disk)
    own = disk.pop("labels", None) or {}
    params = disk.get("initializeParams") or {}
    if disk.get("type") != "PERSISTENT" or not isinstance(params, dict):
        return disk
    merged = _merged(params.get("labels") or {}, own if isinstance(own, dict) else {})
    disk["initializeParams"] = {**params, "labels": _merged(merged, labels)}
    return disk
