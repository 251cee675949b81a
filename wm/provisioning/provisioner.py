"""One provisioning pass for one provider: from queue demand to launched workers.

The steps of DESIGN.md, each a function: claim the provider's pools; resolve intents whose
create never returned; read demand and capacity by state (after the claim, so the numbers
include every intent another replica committed); estimate; choose launch configs; commit
intent rows; create in batches; record what the cloud said. Failures become worker-pool errors
and never stop the pass.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta

from prometheus_client import Gauge
from sqlalchemy import Engine

from wm.config.launch_choice import LaunchChoiceConfig
from wm.db import claims, pool_errors, scans, worker_writes, workers
from wm.db import pools as pool_store
from wm.db.workers import LaunchOutcome, PoolCapacity
from wm.errors import SHUTTING_DOWN, CloudError, ErrorCategory
from wm.model import LaunchConfigRecord, PoolRecord, WorkerRecord, WorkerRef
from wm.ops.telemetry import PROVISION_GAUGES, PROVISION_SECONDS, log, observe_stages
from wm.providers.base import Answered, LaunchBatch, LaunchResult, Provider, not_listening
from wm.provisioning import estimator
from wm.provisioning.cost_pass import CostPass
from wm.provisioning.creates_in_flight import creates_in_flight
from wm.provisioning.intent_sightings import IntentSightings
from wm.provisioning.launch_outcomes import accepted_outcomes, judge_results
from wm.provisioning.pass_news import PassNews
from wm.provisioning.pool_plan import (
    PlanRound,
    PoolPassReport,
    PoolPlan,
    plan_pool,
    shortfall_or_none,
)
from wm.queues import QueueCounts, QueueSource
from wm.workers import lifecycle, stages


@dataclass
class Provisioner:
    engine: Engine
    queue: QueueSource
    providers: Mapping[str, Provider]
    stop: threading.Event = field(default_factory=threading.Event)
    # pool id -> open intent -> first seen under this process's claim (intent recovery)
    intent_sightings: IntentSightings = field(default_factory=IntentSightings)
    # How each pool chooses among its launch configs ([launch_choice]); all "weights" by
    # default, and then a pass makes exactly the reads and calls it always made.
    launch_choice: LaunchChoiceConfig = field(default_factory=LaunchChoiceConfig)
    _news: dict[str, PassNews] = field(init=False, repr=False)
    _cost: CostPass = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._news = {provider_id: PassNews() for provider_id in self.providers}
        self._cost = CostPass(self.engine, self.launch_choice)

    def news(self, provider_id: str) -> None:
        """Tasks arrived for one of this provider's pools: a pass of it waiting for its creates
        plans its pools again (the wake that starts a pass is the caller's)."""
        news = self._news.get(provider_id)
        if news is not None:
            news.tell()

    def run_pass(self, provider_id: str) -> list[PoolPassReport]:
        """Provision every pool of this provider that no other replica is provisioning."""
        started = time.monotonic()
        provider = self.providers[provider_id]
        with claims.claim_provider_pools(self.engine, provider_id) as claim:
            if not claim.pool_ids or self.stop.is_set():
                return []
            claimed, claimed_at = time.monotonic(), time.time()
            pools, configs = self._load(claim.pool_ids)
            recovered = self._recover_intents(provider, [p.pool_id for p in pools])
            current = [p for p in pools if p.provider_id == provider_id and not p.removed]
            current_ids = {p.pool_id for p in current}
            draining = [p.pool_id for p in pools if p.pool_id not in current_ids]
            claim.drop_previous_provider(self._drained(draining, provider_id))
            reports = self._provision(claim, provider, current, configs, recovered)
            # Read before the claim is given up, so the window logged lies inside the one held:
            # a peer's pass may start the moment it is released.
            held_s = time.monotonic() - claimed
        duration_s = time.monotonic() - started
        for report in reports:
            log(
                "provision-pass",
                provider=provider_id,
                duration_s=round(duration_s, 3),
                # When the claim was taken and for how long: no peer passed these pools then.
                claimed_at=round(claimed_at, 3),
                held_s=round(held_s, 3),
                **vars(report),  # its fields are flat: asdict's deep copy was a pass's cost
            )
        PROVISION_SECONDS.labels(provider_id).observe(duration_s)
        return reports

    def _load(
        self, pool_ids: Sequence[str]
    ) -> tuple[list[PoolRecord], dict[str, list[LaunchConfigRecord]]]:
        pools = pool_store.load_pools(self.engine, pool_ids)
        configs: dict[str, list[LaunchConfigRecord]] = {p.pool_id: [] for p in pools}
        launch_configs = pool_store.load_launch_configs(
            self.engine, include_archived=False, pool_ids=pool_ids
        )
        for lc in launch_configs:
            # A row from before pools held definitions has nothing to launch from until its
            # pool's definition is applied (migration 0009).
            if lc.pool_id in configs and lc.configuration:
                configs[lc.pool_id].append(lc)
        return pools, configs

    def _drained(self, pool_ids: list[str], provider_id: str) -> list[str]:
        if not pool_ids:
            return []
        live = workers.live_pools_on_provider(self.engine, pool_ids, provider_id)
        return [p for p in pool_ids if p not in live]

    def _recover_intents(self, provider: Provider, pool_ids: list[str]) -> dict[str, int]:
        """Adopt the VM of an intent whose create never returned, or stop a VM-less intent.

        Only once the gate's longest retry sequence has passed since this process first saw
        the intent under a claim of its own: the pass that sent its create had given the claim
        up by then, so every attempt was sent (wm/provisioning/intent_sightings.py). Until then
        its answer, or the cloud's carrying it out, may still come.
        """
        open_intents = workers.unresolved_intents(self.engine, pool_ids, provider.id)
        if not open_intents:
            return {}
        now = scans.db_now(self.engine)  # read under this pass's claim
        grace = timedelta(seconds=provider.gate.longest_call_s())
        by_pool: dict[str, list[WorkerRecord]] = {}
        for intent in open_intents:
            by_pool.setdefault(intent.pool_id, []).append(intent)
        stale = []
        for pool_id in pool_ids:
            mine = by_pool.get(pool_id, [])
            seen = self.intent_sightings.note(
                pool_id, free=[w.worker_id for w in mine], held=(), now=now
            )
            stale += [
                w
                for w in mine
                if now - max(w.unanswered_at or w.created, seen[w.worker_id]) >= grace
            ]
        if not stale:
            return {}
        refs = [
            WorkerRef(w.worker_id, w.worker_group, None, w.batch_token, w.launch_index)
            for w in stale
        ]
        try:
            found = provider.lookup(refs)
        except CloudError as error:
            log("intent-recovery-failed", logging.WARNING, provider=provider.id, error=str(error))
            return {}
        outcomes = []
        for worker in stale:
            instance = found.get(worker.worker_id)
            if instance is not None:
                outcomes.append(
                    LaunchOutcome(
                        worker.worker_id,
                        instance.cloud_id,
                        instance.provider_data,
                        tc_worker_id=instance.tc_worker_id,
                    )
                )
            else:
                outcomes.append(LaunchOutcome(worker.worker_id, None, {}, "never created"))
        worker_writes.record_launches(self.engine, outcomes)
        counts: dict[str, int] = {}
        for worker in stale:
            counts[worker.pool_id] = counts.get(worker.pool_id, 0) + 1
        log(
            "intents-recovered",
            provider=provider.id,
            adopted=len(found),
            stopped=len(stale) - len(found),
        )
        return counts

    def _provision(
        self,
        claim: claims.PoolClaims,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        recovered: dict[str, int],
    ) -> list[PoolPassReport]:
        """Read and plan, send; while the creates are out, record each VM the cloud took as
        its create answers, plan again on news and send that too; then record what every
        other create came to."""
        if not pools:
            return []
        news = self._news[provider.id]
        news.take()  # what came before this pass's first read is in it
        rounds = [self._plan_round(claim, provider, pools, configs)]
        results: dict[str, LaunchResult] = {}
        accepted: list[WorkerRecord] = []
        if rounds[0].batches():
            with creates_in_flight(functools.partial(self._send, provider), news) as out:
                out.send(rounds[0].batches())
                while (wake := out.next_wake(self.stop)) is not None:
                    # Its VM boots now, and its worker may register before the pass's last
                    # create answers: the row must hold its cloud id and launch data by then.
                    taken = accepted_outcomes(wake.answered)
                    accepted += worker_writes.record_launches(self.engine, taken)
                    if wake.news:
                        late = self._plan_late(claim, provider, pools, configs, rounds)
                        if late is not None:
                            rounds.append(late)
                            out.send(late.batches())
            results = out.results()
        batches = [b for r in rounds for b in r.batches()]
        outcomes, new_errors = judge_results(provider.id, batches, results)
        # Every VM the cloud took was recorded as its answer came (all are handed out before
        # the wait ends): what is left are the creates that took nothing.
        rest = [o for o in outcomes if o.cloud_id is None]
        accepted += worker_writes.record_launches(self.engine, rest)
        _observe_stages(provider.id, accepted, "requested_to_accepted")
        pool_errors.record_errors(self.engine, new_errors)
        self._cost.bench_after(provider, rounds, results)
        self._advise_scale_down(pools, rounds[-1].demand)
        self._cost.export_costs(provider, pools, configs, rounds)
        withdrawn = [o.worker_id for o in outcomes if o.withdrawn]
        if withdrawn:
            log("intents-withdrawn", provider=provider.id, workers=withdrawn)
        return _reports(rounds, outcomes, recovered)

    def _plan_round(
        self,
        claim: claims.PoolClaims,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        earlier: Sequence[PlanRound] = (),
    ) -> PlanRound:
        """Read demand and capacity, plan every pool and commit the intents (one planning).
        `earlier`: the pass's plannings before this one (their probes are out)."""
        pool_ids = [p.pool_id for p in pools]
        demand = self.queue.counts(pool_ids)
        capacity = workers.capacity_by_pool(self.engine, pool_ids)
        # Each pool's shortfall, estimated once (None: the estimate failed, and planning the
        # pool says why).
        short = {
            p.pool_id: shortfall_or_none(p, demand[p.pool_id], capacity[p.pool_id]) for p in pools
        }
        # Only a pool that launches chooses among its launch configs: a pass with nothing to
        # launch (most passes) reads no errors.
        errors = self._recent_errors(
            [
                pool_id
                for pool_id, to_add in short.items()
                if configs[pool_id] and (to_add is None or to_add > 0)
            ]
        )
        scores, reading = self._cost.score(provider, pools, configs, short, earlier)
        plans = []
        for pool in pools:
            try:
                plans.append(
                    plan_pool(
                        pool,
                        configs[pool.pool_id],
                        demand[pool.pool_id],
                        capacity[pool.pool_id],
                        errors,
                        batch_max=provider.create_batch_max,
                        to_add=short[pool.pool_id],
                        cost=scores.get(pool.pool_id),
                    )
                )
                _warn_far_above_max(pool, capacity[pool.pool_id])
            except Exception:  # a bug planning one pool must not starve the others
                log(
                    "pool-plan-failed",
                    logging.ERROR,
                    exc_info=True,
                    provider=provider.id,
                    pool=pool.pool_id,
                )
        if provider.gate.paused and any(plan.intents for plan in plans):
            # Every create would be refused unsent: no rows to write and stop at each pass.
            log("provision-paused", logging.WARNING, provider=provider.id)
            plans = [PoolPlan(plan.report) for plan in plans]
        intents = [i for plan in plans for i in plan.intents]
        # Committed before any cloud call, or the pass stops.
        committed = claim.commit_intents(intents)
        _observe_stages(provider.id, committed, "pending_to_requested")
        return PlanRound(demand, capacity, plans, scores, reading)

    def _plan_late(
        self,
        claim: claims.PoolClaims,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        earlier: Sequence[PlanRound],
    ) -> PlanRound | None:
        """Plan again, under the same claim, for news that came while the creates are out:
        what is out counts as requested capacity. A late planning that fails is reported and
        sends nothing (None); the creates out are still waited for and recorded, and the next
        pass plans again."""
        try:
            return self._plan_round(claim, provider, pools, configs, earlier)
        except Exception:
            log("late-planning-failed", logging.ERROR, exc_info=True, provider=provider.id)
            return None

    def _recent_errors(self, pool_ids: list[str]) -> dict[tuple[str, str], int]:
        """Recent errors and pre-emptions per (pool, launch config): both make a launch config
        weigh less for a while (an hour of the clouds' time each)."""
        if not pool_ids:
            return {}
        speed = self.launch_choice.clock_speed
        errors = pool_errors.recent_error_counts(
            self.engine, pool_ids, pool_errors.RECENT_WINDOW / speed
        )
        preempted = workers.recent_preemption_counts(
            self.engine, pool_ids, workers.PREEMPTION_WINDOW / speed
        )
        for key, lost in preempted.items():
            errors[key] = errors.get(key, 0) + lost
        return errors

    def _advise_scale_down(
        self, pools: list[PoolRecord], demand: Mapping[str, QueueCounts]
    ) -> None:
        """Flag running workers above each pool's target capacity, for the worker API to serve.

        Read in aggregate: each pool's running capacity and advised workers, then the newest
        running workers of only the pools with capacity to spare, only as many as the advice
        can flag (none in a pool whose demand its workers meet)."""
        targets = {
            pool.pool_id: estimator.target_capacity(
                pending=demand[pool.pool_id].pending,
                claimed=demand[pool.pool_id].claimed,
                min_capacity=pool.min_capacity,
                max_capacity=pool.max_capacity,
                scaling_ratio=pool.scaling_ratio,
            )
            for pool in pools
        }
        with workers.running_snapshot(self.engine) as snapshot:
            totals = snapshot.totals(list(targets))
            reach = {
                pool_id: lifecycle.advice_reach(
                    running.capacity, running.zero_capacity, targets[pool_id]
                )
                for pool_id, running in totals.items()
            }
            newest = snapshot.newest({p: n for p, n in reach.items() if n > 0})
        flag: list[str] = []
        unflag: list[str] = []
        for pool_id, running in totals.items():
            advised = set(
                lifecycle.scale_down_newest(
                    newest.get(pool_id, []), running.capacity, targets[pool_id]
                )
            )
            flag += sorted(advised - running.advised)
            unflag += sorted(running.advised - advised)
        # Only the changes are written: no write, no row lock, while the advice stands.
        worker_writes.advise_scale_down(self.engine, flag, unflag)

    def _send(
        self, provider: Provider, batch: LaunchBatch, answered: Answered = not_listening
    ) -> list[LaunchResult]:
        if self.stop.is_set():  # shutting down: a batch not yet sent is not sent
            error = CloudError(provider.id, ErrorCategory.PAUSED, SHUTTING_DOWN, "not sent")
            unsent = [LaunchResult(i.worker_id, None, error) for i in batch.intents]
            for result in unsent:
                answered(result)
            return unsent
        return _create_batch(provider, batch, answered)


def _reports(
    rounds: Sequence[PlanRound], outcomes: Sequence[LaunchOutcome], recovered: Mapping[str, int]
) -> list[PoolPassReport]:
    """A report per pool planned: its last planning's reading, what all of them added, and
    what came of their creates. Exports each pool's gauges from its last planning alone, whose
    capacity holds what the earlier ones added."""
    by_pool: dict[str, list[PoolPlan]] = {}
    for planned in rounds:
        for plan in planned.plans:
            by_pool.setdefault(plan.report.pool_id, []).append(plan)
    outcome_of = {o.worker_id: o for o in outcomes}
    reports = []
    for pool_id, plans in by_pool.items():
        intents = [i.worker_id for plan in plans for i in plan.intents]
        mine = [outcome_of[w] for w in intents if w in outcome_of]
        failed = sum(1 for o in mine if o.cloud_id is None and not o.withdrawn)
        unsent = sum(1 for o in mine if o.withdrawn)
        report = replace(
            plans[-1].report,
            to_add=sum(plan.report.to_add for plan in plans),
            launched=len(intents) - failed - unsent,
            failed=failed,
            withdrawn=unsent,
            recovered=recovered.get(pool_id, 0),
        )
        reports.append(report)
        _export_gauges(plans[-1].report, rounds[-1].capacity[pool_id])  # read at every round
    return reports


def _create_batch(
    provider: Provider, batch: LaunchBatch, answered: Answered = not_listening
) -> list[LaunchResult]:
    """The batch's results, each told to `answered` exactly once: as the provider tells it
    (its call answered), else when the batch returns (a batch that is one call tells none)."""
    told: set[str] = set()

    def tell(result: LaunchResult) -> None:
        told.add(result.worker_id)
        answered(result)

    try:
        results = provider.create(batch, tell)
    except CloudError as error:
        # The contract says create returns errors as data; a provider that raises anyway
        # still must not crash the pass.
        results = [LaunchResult(i.worker_id, None, error) for i in batch.intents]
    except Exception as exc:  # a bug in a provider: visible, contained
        log("provider-create-crashed", logging.ERROR, exc_info=True, provider=provider.id)
        error = CloudError(provider.id, ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))
        results = [LaunchResult(i.worker_id, None, error) for i in batch.intents]
    for result in results:
        if result.worker_id not in told:
            answered(result)
    return results


def _observe_stages(provider_id: str, rows: Sequence[WorkerRecord], stage: str) -> None:
    """Task pending -> capacity requested, when the intents are committed; capacity requested
    -> cloud accepted, for the workers the cloud took (computed by wm/workers/stages.py)."""
    for row in rows:
        observe_stages(row.pool_id, provider_id, stages.durations(row, [stage]))


def _warn_far_above_max(pool: PoolRecord, capacity: PoolCapacity) -> None:
    if estimator.far_above_max(existing=capacity.existing, max_capacity=pool.max_capacity):
        log(
            "capacity-far-above-max",
            logging.ERROR,
            pool=pool.pool_id,
            existing=capacity.existing,
            max_capacity=pool.max_capacity,
        )


def _export_gauges(report: PoolPassReport, capacity: PoolCapacity) -> None:
    for name, value in (
        ("pending", report.pending),
        ("to_add", report.to_add),
        ("desired", report.existing + report.stopping + report.to_add),
        ("requested", capacity.requested),
        ("running", capacity.running),
        ("stopping", capacity.stopping),
    ):
        _pool_gauge(report.pool_id, name).set(value)


@functools.cache
def _pool_gauge(pool_id: str, measure: str) -> Gauge:
    # labels() hashes and checks its labels on every call, six times a pool a pass: a third of
    # a steady pass's CPU at 1,000 pools. The child it returns is the same every time (the
    # metric keeps every child it made, so this holds nothing the metric does not).
    return PROVISION_GAUGES.labels(pool_id, measure)
