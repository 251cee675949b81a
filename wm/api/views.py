"""wm's rows as worker-manager shows them: workers, pools, errors, providers and counts.

wm's worker states are Taskcluster's four. A pool is shown as its definition was applied, with
`config.launchConfigs` re-assembled from its active launch configs (each with
`workerManager.launchConfigId` filled in), as worker-manager does.
Error ids are integers in wm and slugids in Taskcluster: a slugid is made from the integer, and
read back, so `errorId` filters work.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import slugid

from wm.api.models import (
    ErrorStatsTotals,
    LaunchConfigStats,
    PoolStats,
    Worker,
    WorkerPool,
    WorkerPoolError,
    WorkerPoolErrorStats,
    WorkerPoolLaunchConfig,
)
from wm.db.api_reads import LaunchConfigRow, PoolView, StateCounts
from wm.db.error_stats import ErrorCounts
from wm.kinds import KINDS
from wm.model import PoolError, WorkerRecord, WorkerState
from wm.pools.apply_plan import plain_json
from wm.pools.definition import HAND_MADE_LAUNCH_CONFIG_ID, NULL_PROVIDER
from wm.tc.errors import js_time

UNKNOWN_LAUNCH_CONFIG = "unknown"  # workerPoolStats' name for workers without one
STATES = tuple(WorkerState)  # the stats bodies' key prefixes, in this order
_ERROR_ID_BITS = 48  # the UUID's node field: untouched by its version and variant bits
# workerPoolErrorStats (TC db/versions/0096.yml): every day of the last 7 and every hour of the
# last 24, the current one included, zeros too.
ERROR_STATS_DAYS = 7
ERROR_STATS_HOURS = 24
UNKNOWN_LAUNCH_CONFIG = "unknown"  # WM api.js rowsToDict: `row[column] ?? 'unknown'`


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
        # A static worker has none, as in worker-manager (its row's is wm's own, `hand-made`).
        launchConfigId=None
        if worker.launch_config_id == HAND_MADE_LAUNCH_CONFIG_ID
        else worker.launch_config_id,
    )


def counts(rows: Iterable[StateCounts]) -> dict[str, int]:
    """The nine figures Taskcluster reports for a set of (state, count, capacity) rows."""
    totals = {f"{s}{what}": 0 for s in STATES for what in ("Count", "Capacity")}
    for row in rows:
        totals[f"{row.state}Count"] += row.count
        totals[f"{row.state}Capacity"] += row.capacity
    current = sum(totals[f"{s}Capacity"] for s in STATES if s != WorkerState.STOPPED)
    return {"currentCapacity": current, **totals}


def pool_view(view: PoolView, stats: Sequence[StateCounts]) -> WorkerPool:
    pool = view.pool
    return WorkerPool(
        workerPoolId=pool.pool_id,
        providerId=pool.provider_id or NULL_PROVIDER,
        description=pool.description,
        created=view.created,
        lastModified=view.last_modified,
        config=pool_config(view),
        owner=pool.owner,
        emailOnError=pool.email_on_error,
        **counts(s for s in stats if s.pool_id == pool.pool_id),
    )


def pool_config(view: PoolView) -> dict[str, Any]:
    config = plain_json(view.pool.config)
    # A static pool's one launch config is wm's own (it holds the pool's workerConfig for its
    # workers): its definition has none, and shows none.
    shown = [lc for lc in view.launch_configs if lc.launch_config_id != HAND_MADE_LAUNCH_CONFIG_ID]
    if "launchConfigs" in config or shown:
        config["launchConfigs"] = [plain_json(lc.configuration) for lc in shown]
    return config


def launch_config_view(lc: LaunchConfigRow) -> WorkerPoolLaunchConfig:
    return WorkerPoolLaunchConfig(
        launchConfigId=lc.record.launch_config_id,
        workerPoolId=lc.record.pool_id,
        isArchived=lc.record.archived,
        configuration=plain_json(lc.record.configuration),
        created=lc.created,
        lastModified=lc.last_modified,
    )


def pool_stats(pool_id: str, stats: Sequence[StateCounts]) -> PoolStats:
    return PoolStats(workerPoolId=pool_id, **counts(s for s in stats if s.pool_id == pool_id))


def launch_config_stats(
    pool_id: str, launch_config_ids: Sequence[str], stats: Sequence[StateCounts]
) -> list[LaunchConfigStats]:
    listed = [lc for lc in launch_config_ids if lc != HAND_MADE_LAUNCH_CONFIG_ID]
    seen = list(dict.fromkeys([*listed, *(s.launch_config_id for s in stats)]))
    return [
        LaunchConfigStats(
            workerPoolId=pool_id,
            # Static workers have no launch config: worker-manager counts them as `unknown`.
            launchConfigId=UNKNOWN_LAUNCH_CONFIG if lc == HAND_MADE_LAUNCH_CONFIG_ID else lc,
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


def error_stats_since(now: datetime) -> datetime:
    """The first instant the error stats count by time: the start of the oldest day shown."""
    return _utc_day(now - timedelta(days=ERROR_STATS_DAYS - 1))


def error_stats_view(pool_id: str | None, found: ErrorCounts) -> WorkerPoolErrorStats:
    """workerPoolErrorStats' answer (WM api.js): buckets keyed by their start as Date.toJSON
    writes it, oldest first; `total` is the daily buckets' sum; the launch-config breakdown
    only for one pool's stats."""
    per_day = Counter[datetime]()
    for hour, count in found.by_hour.items():
        per_day[_utc_day(hour)] += count
    today, this_hour = _utc_day(found.now), _utc_hour(found.now)
    days = [today - timedelta(days=n) for n in reversed(range(ERROR_STATS_DAYS))]
    hours = [this_hour - timedelta(hours=n) for n in reversed(range(ERROR_STATS_HOURS))]
    launch_configs = Counter[str]()
    for launch_config_id, count in found.by_launch_config.items():
        launch_configs[launch_config_id or UNKNOWN_LAUNCH_CONFIG] += count
    return WorkerPoolErrorStats(
        workerPoolId=pool_id or "",
        totals=ErrorStatsTotals(
            total=sum(per_day[day] for day in days),
            daily={js_time(day): per_day[day] for day in days},
            hourly={js_time(hour): found.by_hour.get(hour, 0) for hour in hours},
            title=dict(sorted(found.by_title.items())),
            code=dict(sorted(found.by_code.items())),
            workerPool=dict(sorted(found.by_pool.items())),
            launchConfig=dict(sorted(launch_configs.items())) if pool_id else {},
        ),
    )


def _utc_day(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _utc_hour(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def provider_list(types: Mapping[str, str]) -> list[dict[str, str]]:
    return [
        {"providerId": pid, "providerType": KINDS[kind].provider_type}
        for pid, kind in sorted(types.items())
    ]
