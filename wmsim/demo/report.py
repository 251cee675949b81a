"""The demo's figures, from what it sampled and what the database and the logs hold (pure).

Every figure exists for the whole run and for each cloud, under the same names:
tasks_submitted, tasks_completed, task_wait_p50_s / _p95_s (submission to claim),
registration_p50_s / _p95_s (launch to registration), peak_capacity_over_demand (peak of
requested + running capacity over the peak of pending + claimed tasks, per pool, summed:
above 1 is over-provisioning), scan_api_calls (mean API calls per scan), scan_duration_p95_s, scans,
cloud_api_calls (every request the simulated cloud counted), preemptions, preempted_tasks
(tasks a lost worker gave back), replacements (workers launched while such a task waited) and
replace_p50_s / _p95_s (from a task's return to the queue until it ran again),
leaked_vms and crashed_processes. Percentiles are nearest-rank; a figure with no data is null.
Beside them: latency by stage per cloud, and each pool's slowest stage (wm/workers/stages.py);
a static pool's machines wait for work from the moment they register (nobody launched them for a
task), so "registered -> first task claimed" is not a candidate there: it is idling, not
latency. The hand-made machines of static pools (no cloud) have the same figures under
`hand_made`, with each machine: its state, whether it registered, and the tasks it completed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wm.model import Task, WorkerRecord
from wm.workers import stages
from wm.workers.stages import percentile
from wmsim.clouds import CLOUDS as SIM_CLOUDS
from wmsim.demo import market_report
from wmsim.demo.market_report import MarketFacts
from wmsim.hand_made import KIND as HAND_MADE

# The simulated clouds, by name: the report's columns.
CLOUDS = tuple(sorted(SIM_CLOUDS))


@dataclass(frozen=True)
class PoolSample:
    pending: int
    claimed: int
    requested: int  # capacity, not workers
    running: int
    stopping: int


@dataclass(frozen=True)
class Sample:
    """The state of the run at one moment."""

    t_s: float  # seconds since the workload started
    pools: Mapping[str, PoolSample]
    api_calls: Mapping[str, int]  # cloud kind -> requests its sim counted so far


@dataclass(frozen=True)
class ScanSample:
    """One `scan` log line of a scanner process."""

    cloud: str
    provider: str
    region: str
    api_calls: int
    duration_s: float


@dataclass(frozen=True)
class RunFacts:
    """Everything the report is computed from."""

    pool_clouds: Mapping[str, str]  # pool id -> its provider's kind (a cloud, or static)
    samples: Sequence[Sample]
    tasks: Sequence[Task]
    workers: Sequence[WorkerRecord]
    scans: Sequence[ScanSample]
    leaked_vms: Mapping[str, int]  # cloud kind -> VMs still in the cloud at the end
    live_rows: Mapping[str, int]  # cloud kind -> worker rows not stopped at the end
    crashed: Mapping[str, str]  # process name -> cloud kind it serves ("" for all)
    submitted: Mapping[str, int] = field(default_factory=dict)  # pool id -> tasks submitted
    drained: bool = True  # every task done and every worker gone before the drain timeout
    # cloud kind -> what else a worker left (Azure: NICs, public IPs, disks of deployments)
    leaked_resources: Mapping[str, int] = field(default_factory=dict)
    market: MarketFacts | None = None  # --market: the ledgers and wm's choices


def peak_ratio(samples: Sequence[Sample], pool_ids: Iterable[str]) -> float | None:
    """Over-provisioning of these pools: the sum of each pool's peak requested + running
    capacity over the sum of each pool's peak pending + claimed tasks.

    Peaks are taken per pool because pools peak at different times: a pool whose work is done
    keeps its idle workers until they time out, which is not launching beyond demand.
    """
    peak_capacity: dict[str, int] = {}
    peak_demand: dict[str, int] = {}
    for sample in samples:
        for pool, s in sample.pools.items():
            peak_capacity[pool] = max(peak_capacity.get(pool, 0), s.requested + s.running)
            peak_demand[pool] = max(peak_demand.get(pool, 0), s.pending + s.claimed)
    chosen = set(pool_ids)
    capacity = sum(v for pool, v in peak_capacity.items() if pool in chosen)
    demand = sum(v for pool, v in peak_demand.items() if pool in chosen)
    return round(capacity / demand, 3) if demand else None


def figures(facts: RunFacts, cloud: str | None = None) -> dict[str, Any]:
    """The figures for one cloud, or for the whole run (cloud None)."""
    pools = {p for p, c in facts.pool_clouds.items() if cloud is None or c == cloud}
    tasks = [t for t in facts.tasks if t.pool_id in pools]
    workers = [w for w in facts.workers if w.pool_id in pools]
    scans = [s for s in facts.scans if cloud is None or s.cloud == cloud]
    waits = [(t.claimed_at - t.created).total_seconds() for t in tasks if t.claimed_at]
    registrations = [
        (w.registered_at - w.created).total_seconds() for w in workers if w.registered_at
    ]
    clouds = CLOUDS if cloud is None else (cloud,)
    last_calls = facts.samples[-1].api_calls if facts.samples else {}
    replace_s, launched = replacements(tasks, workers)
    return {
        "tasks_submitted": sum(n for p, n in facts.submitted.items() if p in pools),
        "tasks_completed": sum(1 for t in tasks if t.state == "completed"),
        "task_wait_p50_s": percentile(waits, 50),
        "task_wait_p95_s": percentile(waits, 95),
        "workers_launched": len(workers),
        "registration_p50_s": percentile(registrations, 50),
        "registration_p95_s": percentile(registrations, 95),
        # Over-provisioning is launching beyond demand: a rack's machines are not launched.
        "peak_capacity_over_demand": peak_ratio(
            facts.samples, {p for p in pools if facts.pool_clouds[p] != HAND_MADE}
        ),
        "scans": len(scans),
        "scan_api_calls": round(sum(s.api_calls for s in scans) / len(scans), 3) if scans else None,
        "scan_duration_p95_s": percentile([s.duration_s for s in scans], 95),
        "cloud_api_calls": sum(last_calls.get(c, 0) for c in clouds),
        "preemptions": sum(1 for w in workers if w.preempted_at),
        "preempted_tasks": sum(1 for t in tasks if t.requeued_at),
        "replacements": launched,
        "replace_p50_s": percentile(replace_s, 50),
        "replace_p95_s": percentile(replace_s, 95),
        "leaked_vms": sum(facts.leaked_vms.get(c, 0) for c in clouds),
        "leaked_resources": sum(facts.leaked_resources.get(c, 0) for c in clouds),
        "crashed_processes": sum(
            1 for kind in facts.crashed.values() if cloud is None or kind in ("", cloud)
        ),
    }


def replacements(tasks: Sequence[Task], workers: Sequence[WorkerRecord]) -> tuple[list[float], int]:
    """What pre-emptions cost: for each task a lost worker gave back, seconds from then until
    it ran again (on a replacement or on an idle worker); and how many workers its pool
    launched while such a task waited (the replacements)."""
    times = []
    waits: dict[str, list[tuple[datetime, datetime]]] = {}
    for task in tasks:
        if task.requeued_at is None:
            continue
        claimed = (
            task.claimed_at if task.claimed_at and task.claimed_at >= task.requeued_at else None
        )
        if claimed is not None:
            times.append((claimed - task.requeued_at).total_seconds())
        end = claimed or datetime.max.replace(tzinfo=task.requeued_at.tzinfo)
        waits.setdefault(task.pool_id, []).append((task.requeued_at, end))
    launched = sum(
        1
        for w in workers
        if any(start <= w.created <= end for start, end in waits.get(w.pool_id, []))
    )
    return times, launched


def stage_figures(workers: Sequence[WorkerRecord]) -> dict[str, dict[str, Any]]:
    """Per stage: workers that passed it, p50 and p95 seconds."""
    return {
        name: {"workers": s.count, "p50_s": s.p50_s, "p95_s": s.p95_s}
        for name, s in stages.summarise(workers).items()
    }


# Stages that, on a static pool, measure how long its machines waited for work.
WAITING_FOR_WORK = frozenset({"registered_to_claim"})


def slowest_stage(
    workers: Sequence[WorkerRecord], leave_out: frozenset[str] = frozenset()
) -> dict[str, Any] | None:
    summary = stages.summarise(workers)
    found = stages.slowest({k: v for k, v in summary.items() if k not in leave_out})
    if found is None:
        return None
    return {"stage": found.stage, "label": stages.label(found.stage), "p95_s": found.p95_s}


def problems(facts: RunFacts, run: Mapping[str, Any]) -> list[str]:
    """What made the run unhealthy, in words; empty when it was healthy."""
    found = []
    if run["tasks_completed"] < run["tasks_submitted"]:
        found.append(
            f"{run['tasks_submitted'] - run['tasks_completed']} of {run['tasks_submitted']} "
            "tasks did not complete"
        )
    if facts.crashed:
        found.append(f"processes crashed: {', '.join(sorted(facts.crashed))}")
    if run["leaked_vms"]:
        found.append(f"{run['leaked_vms']} VMs were left in the clouds at the end")
    if run.get("leaked_resources"):
        found.append(f"{run['leaked_resources']} NICs, public IPs or disks were left in the clouds")
    unregistered = [m["workerId"] for m in hand_made_machines(facts) if not m["registered"]]
    if unregistered:
        found.append(f"hand-made machines never registered: {', '.join(unregistered)}")
    live = sum(facts.live_rows.values())
    if live:
        found.append(f"{live} workers were not stopped at the end")
    if not facts.drained and not found:
        found.append("the run did not drain before its timeout")
    return found


def timeline(facts: RunFacts) -> dict[str, Any]:
    """Per pool, the sampled series (for the plot and for anyone reading report.json)."""
    times = [round(s.t_s, 2) for s in facts.samples]
    series: dict[str, dict[str, list[int]]] = {}
    for pool in facts.pool_clouds:
        empty = PoolSample(0, 0, 0, 0, 0)
        rows = [s.pools.get(pool, empty) for s in facts.samples]
        series[pool] = {
            name: [getattr(r, name) for r in rows]
            for name in ("pending", "claimed", "requested", "running", "stopping")
        }
    return {"t_s": times, "pools": series}


def hand_made_machines(facts: RunFacts) -> list[dict[str, Any]]:
    """Each machine of the static pools: where it stands, its state at the end, whether it
    registered, and how many tasks it completed."""
    pools = {pool for pool, kind in facts.pool_clouds.items() if kind == HAND_MADE}
    done = Counter(
        t.claimed_by for t in facts.tasks if t.pool_id in pools and t.state == "completed"
    )
    return [
        {
            "workerPoolId": w.pool_id,
            "workerGroup": w.worker_group,
            "workerId": w.tc_worker_id or w.worker_id,
            "state": w.state.value,
            "registered": w.registered_at is not None,
            "tasks_completed": done[w.worker_id],
        }
        for w in facts.workers
        if w.pool_id in pools
    ]


def _cloud(facts: RunFacts, worker: WorkerRecord) -> str:
    return facts.pool_clouds.get(worker.pool_id, "")


def build(facts: RunFacts) -> dict[str, Any]:
    """The whole report, as report.json holds it."""
    run = figures(facts)
    found = problems(facts, run)
    return {
        "healthy": not found,
        "problems": found,
        "run": run,
        "clouds": {cloud: figures(facts, cloud) for cloud in CLOUDS},
        "stages": {
            cloud: stage_figures([w for w in facts.workers if _cloud(facts, w) == cloud])
            for cloud in CLOUDS
        },
        "pools": {
            pool: {
                "peak_capacity_over_demand": peak_ratio(facts.samples, [pool]),
                "slowest_stage": slowest_stage(
                    [w for w in facts.workers if w.pool_id == pool],
                    WAITING_FOR_WORK if facts.pool_clouds[pool] == HAND_MADE else frozenset(),
                ),
            }
            for pool in facts.pool_clouds
        },
        "hand_made": {"figures": figures(facts, HAND_MADE), "machines": hand_made_machines(facts)},
        "pool_clouds": dict(facts.pool_clouds),
        "crashed": sorted(facts.crashed),
        "timeline": timeline(facts),
        **(
            {}
            if facts.market is None
            else {
                "market": market_report.build(
                    facts.market, facts.tasks, facts.workers, sorted(facts.pool_clouds)
                )
            }
        ),
    }
