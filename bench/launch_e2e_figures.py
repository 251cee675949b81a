"""The figures of issue 40's end-to-end benchmark (bench/launch_choice_e2e.py), read from the
simulated clouds' ledgers and operation counts and wm's database at an arm's end, in market
time."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, text

from bench.common import PROVIDER_IDS
from bench.launch_e2e_world import REGISTRATION_TIMEOUT_S, Clouds
from bench.output import largest_deviation, percentile, rounded
from wmsim.market import Market
from wmsim.market.scenario import PoolSpec, Scenario

ARMS = ("worker-manager", "wm-weights", "wm-cost")
BASELINE = "worker-manager"
FIGURES = (
    "cost_per_task_hour",
    "time_to_capacity_p50_s",
    "time_to_capacity_p95_s",
    "preemptions_per_1000_worker_hours",
    "capacity_errors_per_100_creates",
    "never_registered",
    "signal_api_calls_per_hour",
)
CONTROL_FIGURES = tuple(f for f in FIGURES if f != "signal_api_calls_per_hour")
DRY_WINDOW_S = 1800.0  # demand this long after a place runs dry is timed (layer 1's)
CREATE_OPERATIONS = {
    "aws": ("RunInstances",),
    "gcp": ("instances.insert",),
    "azure": ("VirtualMachines_CreateOrUpdate", "Deployments_CreateOrUpdate"),
}
SIGNAL_OPERATIONS = {
    "aws": ("DescribeSpotPriceHistory", "GetSpotPlacementScores"),
    "gcp": ("skus.list", "advice.capacity"),
    "azure": ("RetailPrices_List", "Resources_Query", "SpotPlacementScores_Post"),
}


@dataclass(frozen=True)
class MarketClock:
    """The market's time (seconds since its scenario starts) at a wall-clock time."""

    attached: float  # wall clock when the sims were given the market
    origin: float  # the market's time then
    speed: float

    def at(self, wall: float) -> float:
        return self.origin + (wall - self.attached) * self.speed

    def now(self) -> float:
        return self.at(time.time())


def measure(
    engine: Engine,
    clouds: Clouds,
    scenario: Scenario,
    pools: Sequence[PoolSpec],
    clock: MarketClock,
    ended: float,
    start_s: float,
    kinds: Sequence[str],
) -> dict[str, Any]:
    """The arm's figures, read from the sims and wm's database at the run's end."""
    speed = clock.speed

    def market(at: datetime | None) -> float | None:
        return None if at is None else clock.at(at.timestamp())

    end_market = clock.at(ended)
    ledgers = {kind: clouds.clients[kind].ledger() for kind in kinds}
    counts = {kind: clouds.clients[kind].request_counts() for kind in kinds}
    cost = sum(float(ledger["total"]) for ledger in ledgers.values())
    worker_s = sum(
        float(row["billed_s"]) for ledger in ledgers.values() for row in ledger["instances"]
    )
    with engine.connect() as conn:
        tasks = conn.execute(
            text(
                "SELECT pool_id, state, duration_s, created, claimed_at, requeued_at,"
                " completed_at FROM tasks"
            )
        ).all()
        worker_rows = conn.execute(
            text("SELECT provider_id, cloud_id, created, registered_at, preempted_at FROM workers")
        ).all()
        errors = conn.execute(
            text("SELECT provider_id, kind, title, extra FROM worker_pool_errors "
                 "WHERE kind IN ('capacity', 'quota')")
        ).all()  # fmt: skip
    completed_s = sum(t.duration_s * speed for t in tasks if t.state == "completed")
    kind_of = {PROVIDER_IDS[k]: k for k in PROVIDER_IDS}
    refused = 0
    for row in errors:
        if row.title.endswith("PartialLaunch"):
            continue  # a RunInstances that launched some of its instances was not refused
        extra = row.extra or {}
        refused += 1 if kind_of.get(row.provider_id) == "aws" else int(extra.get("workers", 1))
    creates = sum(counts[k].get(op, 0) for k in kinds for op in CREATE_OPERATIONS[k])
    signal_calls = sum(counts[k].get(op, 0) for k in kinds for op in SIGNAL_OPERATIONS[k])
    preemptions = sum(1 for w in worker_rows if w.preempted_at is not None)
    timeout_real = REGISTRATION_TIMEOUT_S / speed
    never = sum(
        1
        for w in worker_rows
        if w.cloud_id and w.registered_at is None and w.preempted_at is None
        and w.created.timestamp() < ended - timeout_real
    )  # fmt: skip
    waits = sorted(dry_waits(scenario, pools, tasks, market, end_market))
    worker_h = worker_s / 3600
    hours = (end_market - start_s) / 3600
    return {
        "cost_per_task_hour": rounded(cost / (completed_s / 3600), 4) if completed_s else None,
        "time_to_capacity_p50_s": rounded(percentile(waits, 0.5), 1),
        "time_to_capacity_p95_s": rounded(percentile(waits, 0.95), 1),
        "preemptions_per_1000_worker_hours": rounded(preemptions / worker_h * 1000, 2)
        if worker_h
        else None,
        "capacity_errors_per_100_creates": rounded(refused / creates * 100, 2) if creates else None,
        "never_registered": never,
        "signal_api_calls_per_hour": rounded(signal_calls / hours, 2) if hours else None,
        # the sums the figures come from
        "cost_usd": rounded(cost, 2),
        "completed_task_hours": rounded(completed_s / 3600, 2),
        "tasks_submitted": len(tasks),
        "tasks_completed": sum(1 for t in tasks if t.state == "completed"),
        "worker_hours": rounded(worker_h, 2),
        "creates": creates,
        "capacity_errors": refused,
        "preemptions": preemptions,
        "signal_api_calls": signal_calls,
        "tasks_timed_after_dry": len(waits),
        "waits_after_dry_s": [round(w, 1) for w in waits],
        "market_hours": rounded(hours, 3),
        "operation_counts": {k: dict(sorted(counts[k].items())) for k in kinds},
    }


def dry_waits(
    scenario: Scenario, pools: Sequence[PoolSpec], tasks: Sequence[Any], market: Any, end: float
) -> list[float]:
    """Per task whose demand falls within DRY_WINDOW_S after a watched place its pool launches
    in runs dry: from the demand to its claim (the run's end if unclaimed), market seconds."""
    model = Market(scenario, 0)  # dry spells are scripted events: the seed does not move them
    model.advance(end)
    places = {
        p.pool_id: {lc.offering.place for lc in p.launch_configs} & set(scenario.dry_watch)
        for p in pools
    }
    out = []
    for task in tasks:
        demand = market(task.requeued_at or task.created)
        claimed = market(task.claimed_at)
        starts = [s for s, place in model.dry_starts if place in places.get(task.pool_id, set())]
        if demand is None or not any(s <= demand < s + DRY_WINDOW_S for s in starts):
            continue
        out.append((claimed if claimed is not None and claimed >= demand else end) - demand)
    return out


def control_deviation(result: Mapping[str, Any]) -> dict[str, float]:
    """Per wm arm, the largest |arm / worker-manager - 1| over the control's figures (layer
    1's rule: two zeros or nulls agree, a zero or null against a number is a full deviation)."""
    out = {}
    for arm in ARMS:
        if arm == BASELINE:
            continue
        out[arm] = largest_deviation(result[arm], result[BASELINE], CONTROL_FIGURES)
    return out
