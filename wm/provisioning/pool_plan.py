"""A pass's planning of its pools (no I/O): what a pool is short of, the workers it adds and
the launch configs they go to, named and batched for the creates; the report of what a pass
did for a pool; one planning of a pass (a round) as the provisioner keeps it while its creates
are out."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from wm.db.workers import NewWorker, PoolCapacity
from wm.model import LaunchConfigRecord, PoolRecord
from wm.providers.base import LaunchBatch, LaunchIntent
from wm.provisioning import cost_planning, estimator, launch_choice
from wm.provisioning.cost_planning import PoolScore
from wm.queues import QueueCounts

WORKER_ID_HEX = 14  # "w" + 14 hex: 15 characters, within Windows' computer name limit


@dataclass(frozen=True)
class PoolPassReport:
    """What one pass did for one pool (logged as one line, returned for tests)."""

    pool_id: str
    pending: int
    claimed: int
    existing: int
    requested: int
    stopping: int
    to_add: int
    launched: int = 0
    failed: int = 0
    withdrawn: int = 0  # intents deleted unsent: the process stopped before their create
    recovered: int = 0


@dataclass(frozen=True)
class PlanRound:
    """One planning of a pass: what it read, and its plans (their intents committed)."""

    demand: Mapping[str, QueueCounts]
    capacity: Mapping[str, PoolCapacity]
    plans: list[PoolPlan]
    # The cost choice's scores of the opted-in pools that launch, and what they were read from.
    scores: Mapping[str, PoolScore] = field(default_factory=dict)
    reading: cost_planning.Reading | None = None

    def batches(self) -> list[LaunchBatch]:
        return [b for plan in self.plans for b in plan.batches]


@dataclass(frozen=True)
class PoolPlan:
    report: PoolPassReport
    intents: tuple[NewWorker, ...] = ()
    batches: tuple[LaunchBatch, ...] = ()


def plan_pool(
    pool: PoolRecord,
    configs: list[LaunchConfigRecord],
    demand: QueueCounts,
    capacity: PoolCapacity,
    errors: Mapping[tuple[str, str], int],
    *,
    batch_max: int,
    to_add: int | None = None,
    cost: PoolScore | None = None,
) -> PoolPlan:
    """Estimate (unless `to_add` is the estimate already), choose launch configs and name the
    new workers: no I/O. `batch_max`: workers per create call (the provider's). `cost`: the
    pool's cost scoring, launched by in "cost" mode (in "shadow" it was only logged)."""
    if to_add is None:
        to_add = shortfall(pool, demand, capacity)
    report = PoolPassReport(
        pool_id=pool.pool_id,
        pending=demand.pending,
        claimed=demand.claimed,
        existing=capacity.existing,
        requested=capacity.requested,
        stopping=capacity.stopping,
        to_add=to_add,
    )
    if to_add <= 0 or not configs:
        return PoolPlan(report)
    options = [
        launch_choice.LaunchOption(
            launch_config_id=lc.launch_config_id,
            weight=lc.weight,
            capacity_per_worker=lc.capacity_per_worker,
            max_capacity=lc.max_capacity,
            current_capacity=capacity.by_launch_config.get(lc.launch_config_id, 0),
            recent_errors=errors.get((pool.pool_id, lc.launch_config_id), 0),
        )
        for lc in configs
    ]
    by_id = {lc.launch_config_id: lc for lc in configs}
    intents: list[NewWorker] = []
    batches: list[LaunchBatch] = []
    if cost is not None and cost.launches_by_cost:
        options = cost.options(options, capacity.by_launch_config)
        allocations = launch_choice.choose(to_add, options, spread=cost.choice.spread)
    else:
        allocations = launch_choice.choose(to_add, options)
    for allocation in allocations:
        lc = by_id[allocation.launch_config_id]
        for start in range(0, allocation.workers, batch_max):
            count = min(batch_max, allocation.workers - start)
            batch_intents, batch = batch_of(pool, lc, count, demand.oldest_pending_at)
            intents += batch_intents
            batches.append(batch)
    return PoolPlan(report, tuple(intents), tuple(batches))


def shortfall(pool: PoolRecord, demand: QueueCounts, capacity: PoolCapacity) -> int:
    """The capacity the pool is short of (the estimator's answer on its demand and capacity)."""
    return estimator.estimate(
        pending=demand.pending,
        claimed=demand.claimed,
        min_capacity=pool.min_capacity,
        max_capacity=pool.max_capacity,
        scaling_ratio=pool.scaling_ratio,
        existing=capacity.existing,
        requested=capacity.requested,
        stopping=capacity.stopping,
    )


def shortfall_or_none(pool: PoolRecord, demand: QueueCounts, capacity: PoolCapacity) -> int | None:
    """The pool's shortfall; None where estimating fails (planning the pool estimates again
    and reports why)."""
    try:
        return shortfall(pool, demand, capacity)
    except Exception:
        return None


def new_worker_id() -> str:
    # Starts with a letter and is lowercase hex: valid as a GCE name and an Azure VM name.
    return "w" + secrets.token_hex(WORKER_ID_HEX // 2)


def batch_of(
    pool: PoolRecord, lc: LaunchConfigRecord, count: int, demand_at: datetime | None = None
) -> tuple[list[NewWorker], LaunchBatch]:
    batch_token = uuid.uuid4().hex
    rows = [
        NewWorker(
            worker_id=new_worker_id(),
            pool_id=pool.pool_id,
            worker_group=lc.region,
            provider_id=pool.provider_id or "",
            capacity=lc.capacity_per_worker,
            launch_config_id=lc.launch_config_id,
            idempotency_token=str(uuid.uuid4()),
            batch_token=batch_token,
            launch_index=index,
            expires_in_s=pool.registration_timeout_s,
            demand_at=demand_at,
        )
        for index in range(count)
    ]
    batch = LaunchBatch(
        pool_id=pool.pool_id,
        spec=lc.spec(pool),
        intents=tuple(LaunchIntent(r.worker_id, r.idempotency_token) for r in rows),
        batch_token=batch_token,
    )
    return rows, batch
