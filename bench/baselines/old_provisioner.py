"""The old provisioner, reduced to the flaw wm was built to remove: it counts only what the
scanner last recorded.

What it reproduces (DESIGN.md: "Provisioning and scanning ran out of sync, so the provisioner
launched workers for demand that was already covered"):

- Two loops. The provisioner runs every interval, one pass per provider; it reads pending tasks
  from the same queue and plans with wm's own code (`wm.provisioning.provisioner.plan_pool`:
  the same estimator, launch config choice and batches), and it launches through the same provider
  adapters, so both sides meet the same clouds, gates and rate limits. As the old provisioner,
  it is not woken by new tasks: its passes run on the interval alone.
- The capacity it hands the estimator is the scanner's record, never its own launches. The
  scanner lists every region of every provider and, when a scan ends, replaces the record per
  pool (VMs the cloud calls pending count as requested, running ones as running). Until then a
  VM just launched counts nowhere, so each pass launches again for the same pending tasks.

This is how Taskcluster's worker-manager counted capacity at first: a provider's `provision`
estimated from `workerPool.providerData[providerId].running`, a number that only the end of a
worker-scanner iteration wrote (`scanCleanup`, in early versions of
`services/worker-manager/src/providers/google.js`). It did write a REQUESTED row after each
create call, but its estimate never read those rows; this baseline writes no rows at all, which
changes no decision. Later versions counted worker rows, and what stayed out of sync were the
states only the scanner changed. The estimator is wm's (Taskcluster's later one), not the first
one, so that the planning is identical on both sides.

What it leaves out, each in the old design's favour, so that the difference measured is the
counting alone:
- the old single loop over every pool of every cloud (here one loop per provider, as in wm,
  so a slow cloud holds no other back);
- the old scan's API calls per worker (here one paginated list per region, through wm's
  adapters) and Azure's one resource per scan loop (here wm's single VM PUT);
- the old scanner's loop time, 10-30 minutes in production: the caller's scan interval stands
  for it.
And, as irrelevant to a burst: intent rows and their recovery, pool errors, lifecycle deadlines,
scale-down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from sqlalchemy import Engine

from wm.db import pools as pool_store
from wm.db.workers import PoolCapacity
from wm.errors import CloudError
from wm.model import LaunchConfigRecord, PoolRecord, WorkerState
from wm.ops.telemetry import log
from wm.providers.base import LaunchBatch, LaunchResult, Provider
from wm.provisioning.creates_in_flight import CREATE_CONCURRENCY
from wm.provisioning.pool_plan import PoolPassReport, plan_pool
from wm.queues import QueueSource

NO_RECENT_ERRORS: Mapping[tuple[str, str], int] = {}  # the old design had no error weighting


@dataclass
class OldProvisioner:
    engine: Engine
    queue: QueueSource
    providers: Mapping[str, Provider]
    scans: int = 0  # scans finished
    _recorded: dict[str, dict[str, PoolCapacity]] = field(default_factory=dict)  # provider->pool
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- the provisioner loop ------------------------------------------------------------------

    def run_pass(self, provider_id: str) -> list[PoolPassReport]:
        """Launch for this provider's pools what the estimator asks for, given the record."""
        provider = self.providers[provider_id]
        pools, configs = self._load(provider_id)
        if not pools:
            return []
        demand = self.queue.counts([p.pool_id for p in pools])
        recorded = self.recorded()
        plans = [
            plan_pool(
                pool,
                configs[pool.pool_id],
                demand[pool.pool_id],
                recorded.get(pool.pool_id, PoolCapacity()),
                NO_RECENT_ERRORS,
                batch_max=provider.create_batch_max,
            )
            for pool in pools
        ]
        batches = [b for plan in plans for b in plan.batches]
        results = self._create(provider, batches)
        reports = []
        for plan in plans:
            ids = [i.worker_id for i in plan.intents]
            launched = sum(1 for i in ids if results.get(i) and results[i].cloud_id)
            reports.append(replace(plan.report, launched=launched, failed=len(ids) - launched))
        return reports

    def _load(
        self, provider_id: str
    ) -> tuple[list[PoolRecord], dict[str, list[LaunchConfigRecord]]]:
        pools = [
            p
            for p in pool_store.load_pools(self.engine)
            if p.provider_id == provider_id and not p.removed
        ]
        configs: dict[str, list[LaunchConfigRecord]] = {p.pool_id: [] for p in pools}
        for lc in pool_store.load_launch_configs(self.engine, include_archived=False):
            if lc.pool_id in configs:
                configs[lc.pool_id].append(lc)
        return pools, configs

    def _create(self, provider: Provider, batches: list[LaunchBatch]) -> dict[str, LaunchResult]:
        if not batches:
            return {}
        results: dict[str, LaunchResult] = {}
        with ThreadPoolExecutor(min(CREATE_CONCURRENCY, len(batches))) as pool:
            for batch_results in pool.map(lambda b: _create_batch(provider, b), batches):
                results.update({r.worker_id: r for r in batch_results})
        return results

    # -- the scanner loop ----------------------------------------------------------------------

    def scan(self) -> None:
        """List every region of every provider; replace each provider's record when it ends."""
        capacity_of = {
            (lc.pool_id, lc.launch_config_id): lc.capacity_per_worker
            for lc in pool_store.load_launch_configs(self.engine)
        }
        for provider in self.providers.values():
            totals: dict[str, dict[WorkerState, int]] = {}
            try:
                for region in provider.regions:
                    for instance in provider.list_instances(region):
                        if instance.pool_id is None:
                            continue
                        key = (instance.pool_id, instance.launch_config_id or "")
                        by_state = totals.setdefault(instance.pool_id, {})
                        by_state[instance.state] = by_state.get(instance.state, 0) + (
                            capacity_of.get(key, 1)
                        )
            except CloudError as error:  # keep this provider's previous record
                log("old-scan-failed", logging.WARNING, provider=provider.id, error=str(error))
                continue
            self.record(
                provider.id,
                {
                    pool_id: PoolCapacity(
                        requested=by_state.get(WorkerState.REQUESTED, 0),
                        running=by_state.get(WorkerState.RUNNING, 0),
                        stopping=by_state.get(WorkerState.STOPPING, 0),
                    )
                    for pool_id, by_state in totals.items()
                },
            )
        with self._lock:
            self.scans += 1

    def record(self, provider_id: str, capacity: Mapping[str, PoolCapacity]) -> None:
        """Replace one provider's record, as the end of a scan of it does."""
        with self._lock:
            self._recorded[provider_id] = dict(capacity)

    def recorded(self) -> dict[str, PoolCapacity]:
        """The scanner's last record, per pool."""
        with self._lock:
            return {
                pool_id: capacity
                for record in self._recorded.values()
                for pool_id, capacity in record.items()
            }

    def recorded_capacity(self) -> int:
        """Requested plus running capacity, as the provisioner believes it to be."""
        return sum(c.requested + c.running for c in self.recorded().values())


def scan_every(
    old: OldProvisioner, stop: threading.Event, first_at: float, interval_s: float
) -> None:
    """The scanner loop: scan at `first_at` (monotonic), then every interval; overruns skip."""
    next_at = first_at
    while not stop.wait(max(0.0, next_at - time.monotonic())):
        try:
            old.scan()
        except Exception:  # a failing scan leaves the old record, as the old scanner did
            log("old-scan-crashed", logging.ERROR, exc_info=True)
        while next_at <= time.monotonic():
            next_at += interval_s


def _create_batch(provider: Provider, batch: LaunchBatch) -> list[LaunchResult]:
    try:
        return provider.create(batch)
    except CloudError as error:
        return [LaunchResult(i.worker_id, None, error) for i in batch.intents]
