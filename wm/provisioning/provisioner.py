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
import secrets
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from prometheus_client import Gauge
from sqlalchemy import Engine

from wm.config.launch_choice import ChoiceMode, LaunchChoiceConfig
from wm.db import claims, offering_state, pool_errors, scans, worker_writes, workers
from wm.db import pools as pool_store
from wm.db.workers import LaunchOutcome, NewWorker, PoolCapacity
from wm.errors import SHUTTING_DOWN, CloudError, ErrorCategory
from wm.model import LaunchConfigRecord, Offering, PoolRecord, WorkerRecord, WorkerRef
from wm.ops.telemetry import PROVISION_GAUGES, PROVISION_SECONDS, log, observe_stages
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult, Provider
from wm.provisioning import cost_planning, estimator, launch_choice
from wm.provisioning.cost_planning import PoolScore
from wm.provisioning.creates_in_flight import creates_in_flight
from wm.provisioning.intent_sightings import IntentSightings
from wm.provisioning.launch_outcomes import judge_results
from wm.provisioning.pass_news import PassNews
from wm.queues import QueueCounts, QueueSource
from wm.workers import lifecycle, stages

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

    def __post_init__(self) -> None:
        self._news = {provider_id: PassNews() for provider_id in self.providers}

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
        """Read and plan, send; while the creates are out, plan again on news and send that
        too; then record what every create came to."""
        if not pools:
            return []
        news = self._news[provider.id]
        news.take()  # what came before this pass's first read is in it
        rounds = [self._plan_round(claim, provider, pools, configs)]
        results: dict[str, LaunchResult] = {}
        if rounds[0].batches():
            with creates_in_flight(functools.partial(self._send, provider), news) as out:
                out.send(rounds[0].batches())
                while out.news_while_out(self.stop):
                    late = self._plan_late(claim, provider, pools, configs, rounds)
                    if late is not None:
                        rounds.append(late)
                        out.send(late.batches())
            results = out.results()
        batches = [b for r in rounds for b in r.batches()]
        outcomes, new_errors = judge_results(provider.id, batches, results)
        accepted = worker_writes.record_launches(self.engine, outcomes)
        _observe_stages(provider.id, accepted, "requested_to_accepted")
        pool_errors.record_errors(self.engine, new_errors)
        self._bench_after(provider, rounds, results)
        self._advise_scale_down(pools, rounds[-1].demand)
        self._export_costs(provider, pools, configs, rounds)
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
        earlier: Sequence[_Round] = (),
    ) -> _Round:
        """Read demand and capacity, plan every pool and commit the intents (one planning).
        `earlier`: the pass's plannings before this one (their probes are out)."""
        pool_ids = [p.pool_id for p in pools]
        demand = self.queue.counts(pool_ids)
        capacity = workers.capacity_by_pool(self.engine, pool_ids)
        # Each pool's shortfall, estimated once (None: the estimate failed, and planning the
        # pool says why).
        short = {
            p.pool_id: _shortfall_or_none(p, demand[p.pool_id], capacity[p.pool_id]) for p in pools
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
        scores, reading = self._score(provider, pools, configs, short, earlier)
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
        return _Round(demand, capacity, plans, scores, reading)

    def _plan_late(
        self,
        claim: claims.PoolClaims,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        earlier: Sequence[_Round],
    ) -> _Round | None:
        """Plan again, under the same claim, for news that came while the creates are out:
        what is out counts as requested capacity. A late planning that fails is reported and
        sends nothing (None); the creates out are still waited for and recorded, and the next
        pass plans again."""
        try:
            return self._plan_round(claim, provider, pools, configs, earlier)
        except Exception:
            log("late-planning-failed", logging.ERROR, exc_info=True, provider=provider.id)
            return None

    def _score(
        self,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        short: Mapping[str, int | None],
        earlier: Sequence[_Round] = (),
    ) -> tuple[dict[str, PoolScore], cost_planning.Reading | None]:
        """Score the launch configs of the pools in "shadow" or "cost" mode that launch, from
        one reading of the signals, bench and evidence; log each in a `launch-choice` line. A
        pool whose scoring fails launches by weights (and says so)."""
        if self.launch_choice.all_weights:
            return {}, None
        choices = {p.pool_id: self.launch_choice.for_pool(p.pool_id) for p in pools}
        opted = [
            p.pool_id
            for p in pools
            if choices[p.pool_id].mode != ChoiceMode.WEIGHTS
            and configs[p.pool_id]
            and (short[p.pool_id] is None or (short[p.pool_id] or 0) > 0)
        ]
        if not opted:
            return {}, None
        try:
            reading = cost_planning.read(self.engine, provider.id, opted)
        except Exception:  # the choice falls back to weights; the pass goes on
            log("launch-choice-failed", logging.ERROR, exc_info=True, provider=provider.id)
            return {}, None
        now = time.time()
        # The bench is written once the pass's creates are in: a probe an earlier planning of
        # this pass sent is the window's one already.
        reading = cost_planning.with_probes_out(reading, _probes_sent(earlier), now)
        scores = {}
        for pool_id in opted:
            try:
                scores[pool_id] = cost_planning.score_pool(
                    pool_id,
                    choices[pool_id],
                    configs[pool_id],
                    lambda lc: provider.offering(lc.configuration, lc.region),
                    reading,
                    now,
                )
                cost_planning.report(pool_id, provider.id, scores[pool_id])
            except Exception:
                cost_planning.log_failed(provider.id, pool_id)
        return scores, reading

    def _bench_after(
        self, provider: Provider, rounds: Sequence[_Round], results: Mapping[str, LaunchResult]
    ) -> None:
        """Write what the pass's creates of opted-in pools say of their offerings: refused
        capacity or quota benches the offerings the refusal's scope covers, a success clears
        its offering, a probe sent is the window's one."""
        scored = [(r, pool_id, s) for r in rounds for pool_id, s in r.scores.items()]
        if not scored:
            return
        try:
            offering_of: dict[tuple[str, str], Offering | None] = {}
            for _, pool_id, score in scored:
                for lc_id, offering in score.offerings.items():
                    offering_of[(pool_id, lc_id)] = offering
            # The first reading of the pass: the bench as it was before its creates (a later
            # planning's holds its earlier probes too, which bench_after adds itself).
            first = next(r.reading for r in rounds if r.reading is not None)
            probed = _probes_sent(rounds)
            outcomes = []
            for planned in rounds:
                for batch in planned.batches():
                    key = (batch.pool_id, batch.spec.launch_config_id)
                    if key not in offering_of:
                        continue
                    for intent in batch.intents:
                        result = results.get(intent.worker_id)
                        if result is None:
                            continue
                        outcomes.append(
                            cost_planning.CreateOutcome(
                                offering_of[key],
                                batch.spec,
                                result.cloud_id is not None,
                                result.error,
                            )
                        )
            changes = cost_planning.bench_after(
                first.bench,
                {o for o in offering_of.values() if o is not None},
                probed,
                outcomes,
                provider.error_scope,
                time.time(),
            )
            offering_state.write_bench(self.engine, provider.id, changes)
            for offering, entry in changes.items():
                log(
                    "offering-bench",
                    provider=provider.id,
                    offering=offering.key,
                    failures=entry.state.failures,
                    benched_until=entry.state.benched_until,
                    code=entry.last_code,
                )
        except Exception:
            log("offering-bench-failed", logging.ERROR, exc_info=True, provider=provider.id)

    def _export_costs(
        self,
        provider: Provider,
        pools: list[PoolRecord],
        configs: dict[str, list[LaunchConfigRecord]],
        rounds: Sequence[_Round],
    ) -> None:
        """Each opted-in pool's cost per hour at the prices wm holds (a gauge)."""
        if self.launch_choice.all_weights:
            return
        opted = [
            p.pool_id
            for p in pools
            if self.launch_choice.for_pool(p.pool_id).mode != ChoiceMode.WEIGHTS
        ]
        if not opted:
            return
        try:
            reading = next((r.reading for r in rounds if r.reading is not None), None)
            signals = (
                reading.signals
                if reading is not None
                else offering_state.read_signals(self.engine, provider.id)
            )
            running = offering_state.running_workers(self.engine, opted)
            for pool_id in opted:
                cost_planning.export_cost(
                    pool_id,
                    configs[pool_id],
                    lambda lc: provider.offering(lc.configuration, lc.region),
                    signals,
                    {lc: n for (p, lc), n in running.items() if p == pool_id},
                )
        except Exception:
            log("pool-cost-failed", logging.ERROR, exc_info=True, provider=provider.id)

    def _recent_errors(self, pool_ids: list[str]) -> dict[tuple[str, str], int]:
        """Recent errors and pre-emptions per (pool, launch config): both make a launch config
        weigh less for a while."""
        if not pool_ids:
            return {}
        errors = pool_errors.recent_error_counts(self.engine, pool_ids)
        for key, lost in workers.recent_preemption_counts(self.engine, pool_ids).items():
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

    def _send(self, provider: Provider, batch: LaunchBatch) -> list[LaunchResult]:
        if self.stop.is_set():  # shutting down: a batch not yet sent is not sent
            error = CloudError(provider.id, ErrorCategory.PAUSED, SHUTTING_DOWN, "not sent")
            return [LaunchResult(i.worker_id, None, error) for i in batch.intents]
        return _create_batch(provider, batch)


def _probes_sent(rounds: Sequence[_Round]) -> list[Offering]:
    """The offerings the plannings' cost-mode pools sent their window's probe to."""
    sent: list[Offering] = []
    for planned in rounds:
        for plan in planned.plans:
            score = planned.scores.get(plan.report.pool_id)
            if score is not None and score.launches_by_cost:
                launched: dict[str, int] = {}
                for intent in plan.intents:
                    launched[intent.launch_config_id] = launched.get(intent.launch_config_id, 0) + 1
                sent += cost_planning.probes(score, launched)
    return sent


@dataclass(frozen=True)
class _Round:
    """One planning of a pass: what it read, and its plans (their intents committed)."""

    demand: Mapping[str, QueueCounts]
    capacity: Mapping[str, PoolCapacity]
    plans: list[PoolPlan]
    # The cost choice's scores of the opted-in pools that launch, and what they were read from.
    scores: Mapping[str, PoolScore] = field(default_factory=dict)
    reading: cost_planning.Reading | None = None

    def batches(self) -> list[LaunchBatch]:
        return [b for plan in self.plans for b in plan.batches]


def _reports(
    rounds: Sequence[_Round], outcomes: Sequence[LaunchOutcome], recovered: Mapping[str, int]
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
            batch_intents, batch = _batch(pool, lc, count, demand.oldest_pending_at)
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


def _shortfall_or_none(pool: PoolRecord, demand: QueueCounts, capacity: PoolCapacity) -> int | None:
    """The pool's shortfall; None where estimating fails (planning the pool estimates again
    and reports why)."""
    try:
        return shortfall(pool, demand, capacity)
    except Exception:
        return None


def new_worker_id() -> str:
    # Starts with a letter and is lowercase hex: valid as a GCE name and an Azure VM name.
    return "w" + secrets.token_hex(WORKER_ID_HEX // 2)


def _batch(
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


def _create_batch(provider: Provider, batch: LaunchBatch) -> list[LaunchResult]:
    try:
        return provider.create(batch)
    except CloudError as error:
        # The contract says create returns errors as data; a provider that raises anyway
        # still must not crash the pass.
        return [LaunchResult(i.worker_id, None, error) for i in batch.intents]
    except Exception as exc:  # a bug in a provider: visible, contained
        log("provider-create-crashed", logging.ERROR, exc_info=True, provider=provider.id)
        error = CloudError(provider.id, ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))
        return [LaunchResult(i.worker_id, None, error) for i in batch.intents]


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
