"""wm's rows as worker-manager shows them: workers, pools, errors, providers and counts.

wm's worker states are Taskcluster's four. A pool is shown in worker-pool-full's shape: its
`config` holds Taskcluster's common keys (capacities, scaling ratio, lifecycle in seconds) and
the launch configs as wm keeps them, each with its `workerManager` block; until pool definitions
come through the API (the next issue), `description` is empty and `owner` a placeholder address.
Error ids are integers in wm and slugids in Taskcluster: a slugid is made from the integer, and
read back, so `errorId` filters work.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import slugid

from wm.api.models import (
    LaunchConfigStats,
    PoolStats,
    Worker,
    WorkerPool,
    WorkerPoolError,
)
from wm.db.api_reads import PoolView, StateCounts
from wm.model import LaunchConfigRecord, PoolError, WorkerRecord

NULL_PROVIDER = "null-provider"  # Taskcluster's provider id of a pool being deleted
PROVIDER_TYPES = {"aws": "aws", "gcp": "google", "azure": "azure"}
STATES = ("requested", "running", "stopping", "stopped")
_ERROR_ID_BITS = 48  # the UUID's node field: untouched by its version and variant bits


def worker_view(worker: WorkerRecord) -> Worker:
    return Worker(
        workerPoolId=worker.pool_id,
        workerGroup=worker.worker_group,
        workerId=worker.tc_worker_id or "",
        providerId=worker.provider_id,
        created=worker.created,
        expires=worker.expires or worker.last_modified,
        state=worker.state.value,
        capacity=max(worker.capacity, 1),
        lastChecked=worker.last_checked or worker.created,
        lastModified=worker.last_modified,
        launchConfigId=worker.launch_config_id,
    )


def counts(rows: Iterable[StateCounts]) -> dict[str, int]:
    """The nine figures Taskcluster reports for a set of (state, count, capacity) rows."""
    totals = {f"{s}{what}": 0 for s in STATES for what in ("Count", "Capacity")}
    for row in rows:
        totals[f"{row.state}Count"] += row.count
        totals[f"{row.state}Capacity"] += row.capacity
    current = sum(totals[f"{s}Capacity"] for s in STATES if s != "stopped")
    return {"currentCapacity": current, **totals}


def pool_view(view: PoolView, stats: Sequence[StateCounts], owner: str) -> WorkerPool:
    pool = view.pool
    return WorkerPool(
        workerPoolId=pool.pool_id,
        providerId=pool.provider_id or NULL_PROVIDER,
        description="",
        created=view.created,
        lastModified=view.last_modified,
        config={
            "minCapacity": pool.min_capacity,
            "maxCapacity": pool.max_capacity,
            "scalingRatio": pool.scaling_ratio,
            "lifecycle": {
                "registrationTimeout": int(pool.registration_timeout_s),
                "reregistrationTimeout": int(pool.reregistration_timeout_s),
                "queueInactivityTimeout": int(pool.queue_inactivity_timeout_s),
            },
            "launchConfigs": [_launch_config(lc) for lc in view.launch_configs],
        },
        owner=owner,
        emailOnError=False,
        **counts(s for s in stats if s.pool_id == pool.pool_id),
    )


def _launch_config(lc: LaunchConfigRecord) -> dict[str, Any]:
    manager: dict[str, Any] = {
        "launchConfigId": lc.launch_config_id,
        "capacityPerInstance": lc.capacity_per_worker,
        "initialWeight": lc.weight,
    }
    if lc.max_capacity is not None:
        manager["maxCapacity"] = lc.max_capacity
    return {
        "workerManager": manager,
        "region": lc.region,
        "machineType": lc.machine_type,
        "image": lc.image,
        "spot": lc.spot,
        "publicIp": lc.public_ip,
        "workerConfig": dict(lc.worker_config),
    }


def pool_stats(pool_id: str, stats: Sequence[StateCounts]) -> PoolStats:
    return PoolStats(workerPoolId=pool_id, **counts(s for s in stats if s.pool_id == pool_id))


def launch_config_stats(
    pool_id: str, launch_config_ids: Sequence[str], stats: Sequence[StateCounts]
) -> list[LaunchConfigStats]:
    seen = list(dict.fromkeys([*launch_config_ids, *(s.launch_config_id for s in stats)]))
    return [
        LaunchConfigStats(
            workerPoolId=pool_id,
            launchConfigId=lc,
            **counts(s for s in stats if s.launch_config_id == lc),
        )
        for lc in seen
    ]


def error_view(error: PoolError) -> WorkerPoolError:
    return WorkerPoolError(
        workerPoolId=error.pool_id,
        errorId=error_slug(error.error_id),
        reported=error.reported,
        kind=error.kind,
        title=error.title[:128],
        description=error.description[:10240],
        extra=dict(error.extra),
        launchConfigId=error.launch_config_id,
    )


def error_slug(error_id: int) -> str:
    """A v4-shaped slugid carrying the error's integer id (Taskcluster's errorId pattern)."""
    if not 0 <= error_id < 1 << _ERROR_ID_BITS:
        raise ValueError("error id out of range")
    return slugid.encode(uuid.UUID(int=error_id, version=4))


def error_id_from_slug(slug: str) -> int | None:
    """The integer behind `error_slug`'s answer; None for any other text."""
    try:
        decoded = slugid.decode(slug)
    except (ValueError, TypeError):
        return None
    number = decoded.int & ((1 << _ERROR_ID_BITS) - 1)
    return number if error_slug(number) == slug else None


def provider_list(types: Mapping[str, str]) -> list[dict[str, str]]:
    return [
        {"providerId": pid, "providerType": PROVIDER_TYPES.get(kind, kind)}
        for pid, kind in sorted(types.items())
    ]
