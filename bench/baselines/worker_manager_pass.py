"""wm's provisioning pass making worker-manager's launch config choices: the "worker-manager" arm
of issue 40's end-to-end benchmark (bench/launch_choice_e2e.py).

Everything but the choice is wm's pass (`wm.provisioning.provisioner.Provisioner`): the claim,
intent recovery, the estimator, intent rows, the adapters and their gate, the record of what
the cloud said, the scale-down advice. The choice is Taskcluster's, as
bench/baselines/worker_manager_selector.py reproduces it (used unchanged):

- Its evidence: each config's non-stopped capacity (wm's `by_launch_config`) and the pool's
  errors of the last hour, every kind counted, those without a config id in the total
  (`errors_by_launch_config`, read here from wm's `worker_pool_errors`). wm's own weights also
  count pre-emptions; worker-manager's do not, so neither does this.
- On EC2 (`aws.js` `provision`): the configs with weight > 0 shuffled, an even
  `ceil(toSpawn / n)` each, one all-or-nothing RunInstances per config (MinCount = MaxCount,
  set on the boto3 client through botocore's `provide-client-params` event), sent one after
  the other; the first failure ends the pool's provision (the pass goes on to the next pool),
  the configs after it are not sent (their intents withdrawn, as a stopping pass's are), and
  it is filed as one error without a config id.
- On GCE and Azure: one weighted draw per instance (`selectCapacity`), each refusal filed
  with its config id by wm (at once, or by the scan when the operation or deployment fails).

What differs from worker-manager and is not the choice, left as wm's: wm's late planning while
creates are out (worker-manager has none: here a pass plans once), the batches (one create per
config on EC2, as worker-manager; one call per instance on GCE and Azure, as both do).

`error_window` is worker-manager's hour on the market's clock: the benchmark compresses time
(`market_speed` market seconds a real second), and the baseline process is told the speed
(bench/baselines/worker_manager_process.py). wm's own windows stay real seconds: wm's clock
does not know the market's (bench/README.md says what that changes).
"""

from __future__ import annotations

import functools
import logging
import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from sqlalchemy import Interval, any_, bindparam, func, select

from bench.baselines import worker_manager_selector as tc
from wm.db import claims, pool_errors, worker_writes, workers
from wm.db.arrays import ids_param
from wm.db.engine import one_statement
from wm.db.tables import worker_pool_errors
from wm.db.workers import PoolCapacity
from wm.errors import SHUTTING_DOWN, CloudError, ErrorCategory
from wm.model import LaunchConfigRecord, PoolRecord
from wm.ops.telemetry import log
from wm.providers.base import LaunchBatch, LaunchResult, Provider
from wm.provisioning.creates_in_flight import CREATE_CONCURRENCY
from wm.provisioning.launch_outcomes import accepted_outcomes, judge_results
from wm.provisioning.pool_plan import (
    PlanRound,
    PoolPassReport,
    PoolPlan,
    batch_of,
    shortfall_or_none,
)
from wm.provisioning.provisioner import Provisioner, _create_batch, _reports

ONE_HOUR = timedelta(hours=1)

_ERRORS = (
    select(worker_pool_errors.c.pool_id, worker_pool_errors.c.launch_config_id, func.count())
    .where(
        worker_pool_errors.c.pool_id == any_(ids_param("pool_ids")),
        worker_pool_errors.c.reported > func.now() - bindparam("window", type_=Interval),
    )
    .group_by(worker_pool_errors.c.pool_id, worker_pool_errors.c.launch_config_id)
)


def recent_errors(
    engine: Any, pool_ids: Sequence[str], window: timedelta
) -> dict[str, dict[str | None, int]]:
    """Per pool, its errors reported within `window` by launch config id (None: filed without
    one), every kind: provisioner.js's `get_worker_pool_error_launch_configs`."""
    out: dict[str, dict[str | None, int]] = defaultdict(dict)
    if not pool_ids:
        return out
    with one_statement(engine) as conn:
        rows = conn.execute(_ERRORS, {"pool_ids": list(pool_ids), "window": window})
        for pool_id, lc_id, count in rows:
            out[pool_id][lc_id] = count
    return out


def all_or_nothing(params: dict[str, Any], **_: Any) -> None:
    """aws.js asks RunInstances for MinCount = MaxCount: EC2 launches all or none."""
    if "MaxCount" in params:
        params["MinCount"] = params["MaxCount"]


def make_all_or_nothing(provider: Provider) -> None:
    """Every RunInstances this EC2 provider sends asks for all of its instances or none
    (botocore's documented parameter hook, on each region's client)."""
    get_client = provider._client  # type: ignore[attr-defined]

    @functools.wraps(get_client)
    def client(region: str) -> Any:
        made = get_client(region)
        if not getattr(made, "_wm_bench_all_or_nothing", False):
            made.meta.events.register("provide-client-params.ec2.RunInstances", all_or_nothing)
            made._wm_bench_all_or_nothing = True
        return made

    provider._client = client  # type: ignore[attr-defined]


@dataclass
class WorkerManagerProvisioner(Provisioner):
    """wm's pass with worker-manager's choice (see the module docstring)."""

    # Provider ids whose pass is aws.js's: even split, all or nothing, abort on first error.
    even_split: frozenset[str] = frozenset()
    error_window: timedelta = ONE_HOUR
    seed: int = 1
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._rng = random.Random(f"worker-manager:{self.seed}")

    def _provision(
        self,
        claim: claims.PoolClaims,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        recovered: dict[str, int],
    ) -> list:
        if not pools:
            return []
        self._news[provider.id].take()
        planned, order = self._plan(claim, provider, pools, configs)
        if provider.id in self.even_split:
            results, failed = self._send_in_turn(provider, order)
        else:
            results, failed = self._send_all(provider, planned.batches()), []
        outcomes, new_errors = judge_results(provider.id, planned.batches(), results)
        if provider.id in self.even_split:
            # aws.js files a pool's one failure as a creation-error, without its config.
            _, new_errors = judge_results(provider.id, failed, results)
            new_errors = [replace(e, launch_config_id=None) for e in new_errors]
        # The VMs the cloud took were recorded as their creates answered.
        worker_writes.record_launches(self.engine, [o for o in outcomes if o.cloud_id is None])
        pool_errors.record_errors(self.engine, new_errors)
        self._advise_scale_down(pools, planned.demand)
        return _reports([planned], outcomes, recovered)

    def _plan(
        self,
        claim: claims.PoolClaims,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
    ) -> tuple[PlanRound, list[list[LaunchBatch]]]:
        """Read demand and capacity, choose as worker-manager, commit the intents. Returns the
        planning and, per pool, its batches in the order worker-manager sends them."""
        pool_ids = [p.pool_id for p in pools]
        demand = self.queue.counts(pool_ids)
        capacity = workers.capacity_by_pool(self.engine, pool_ids)
        short = {
            p.pool_id: shortfall_or_none(p, demand[p.pool_id], capacity[p.pool_id]) for p in pools
        }
        launching = [p for p, n in short.items() if configs[p] and n is not None and n > 0]
        errors = recent_errors(self.engine, launching, self.error_window)
        plans: list[PoolPlan] = []
        order: list[list[LaunchBatch]] = []
        for pool in pools:
            to_add = short[pool.pool_id]
            plan = self._plan_pool(
                provider,
                pool,
                configs[pool.pool_id],
                capacity[pool.pool_id],
                errors.get(pool.pool_id, {}),
                to_add or 0,
                demand[pool.pool_id],
            )
            plans.append(plan)
            order.append(list(plan.batches))
        intents = [i for plan in plans for i in plan.intents]
        claim.commit_intents(intents)
        return PlanRound(demand, capacity, plans), order

    def _plan_pool(
        self,
        provider: Provider,
        pool: PoolRecord,
        configs: list[LaunchConfigRecord],
        capacity: PoolCapacity,
        errors: Mapping[str | None, int],
        to_add: int,
        demand: Any,
    ) -> PoolPlan:
        report = PoolPassReport(
            pool_id=pool.pool_id,
            pending=demand.pending,
            claimed=demand.claimed,
            existing=capacity.existing,
            requested=capacity.requested,
            stopping=capacity.stopping,
            to_add=max(0, to_add),
        )
        if to_add <= 0 or not configs:
            return PoolPlan(report)
        by_id = {lc.launch_config_id: lc for lc in configs}
        tc_pool = tc.Pool(
            pool.max_capacity,
            tuple(
                tc.LaunchConfig(
                    lc.launch_config_id,
                    initial_weight=lc.weight,
                    max_capacity=lc.max_capacity,
                    wm_capacity_per_instance=lc.capacity_per_worker,
                )
                for lc in configs
            ),
        )
        stats = tc.PoolStats(dict(capacity.by_launch_config), dict(errors))
        counts: list[tuple[LaunchConfigRecord, int]] = []
        if provider.id in self.even_split:
            # aws.js: the kept configs shuffled, ceil(toSpawn / n) capacity each, in order.
            kept = tc.lodash_shuffle(tc.for_worker_pool(tc_pool, stats).get_all(), self._rng)
            if kept:
                per_config = math.ceil(to_add / len(kept))
                left = to_add
                for lc in kept:
                    if left <= 0:
                        break
                    instances = math.ceil(min(left, per_config) / lc.per_instance)
                    counts.append((by_id[lc.launch_config_id], instances))
                    left -= instances * lc.per_instance
        else:
            drawn: dict[str, int] = {}
            for lc in tc.weighted_draw(tc_pool, stats, to_add, self._rng):
                drawn[lc.launch_config_id] = drawn.get(lc.launch_config_id, 0) + 1
            counts = [(by_id[lc_id], n) for lc_id, n in drawn.items()]
        intents = []
        batches = []
        for lc, instances in counts:
            # EC2: one RunInstances per config (aws.js); elsewhere one call per instance.
            size = instances if provider.id in self.even_split else provider.create_batch_max
            for start in range(0, instances, size):
                rows, batch = batch_of(
                    pool, lc, min(size, instances - start), demand.oldest_pending_at
                )
                intents += rows
                batches.append(batch)
        return PoolPlan(report, tuple(intents), tuple(batches))

    def _send_in_turn(
        self, provider: Provider, order: list[list[LaunchBatch]]
    ) -> tuple[dict[str, LaunchResult], list[LaunchBatch]]:
        """aws.js, a pool at a time: its creates one after the other, the first failure ending
        the pool's provision (the provisioner goes on to the next pool). Returns the results
        and each pool's failed create."""
        results: dict[str, LaunchResult] = {}
        failed: list[LaunchBatch] = []
        for batches in order:
            ended = False
            for batch in batches:
                if ended or self.stop.is_set():
                    error = CloudError(provider.id, ErrorCategory.PAUSED, SHUTTING_DOWN, "not sent")
                    results.update(
                        {i.worker_id: LaunchResult(i.worker_id, None, error) for i in batch.intents}
                    )
                    continue
                answers = _create_batch(provider, batch)
                self._record_taken(answers)
                results.update({r.worker_id: r for r in answers})
                if any(r.cloud_id is None for r in answers):
                    ended = True
                    failed.append(batch)
                    log(
                        "worker-manager-provision-ended",
                        logging.INFO,
                        provider=provider.id,
                        pool=batch.pool_id,
                        launch_config=batch.spec.launch_config_id,
                    )
        return results, failed

    def _send_all(self, provider: Provider, batches: list[LaunchBatch]) -> dict[str, LaunchResult]:
        if not batches:
            return {}
        results: dict[str, LaunchResult] = {}
        with ThreadPoolExecutor(min(CREATE_CONCURRENCY, len(batches))) as pool:
            # Every result is told once (`_create_batch`): each VM recorded as it answers.
            sent = pool.map(lambda b: self._send(provider, b, self._record_one), batches)
            for answers in sent:
                results.update({r.worker_id: r for r in answers})
        return results

    def _record_taken(self, answers: Sequence[LaunchResult]) -> None:
        """worker-manager writes a worker's row as its create answers: after each RunInstances
        (aws.js), after each insert or VM request (google.js, azure)."""
        worker_writes.record_launches(self.engine, accepted_outcomes(answers))

    def _record_one(self, answer: LaunchResult) -> None:
        self._record_taken([answer])
