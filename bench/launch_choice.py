"""Issue 40's benchmark, layer 1: the launch choice's policy simulation. Three arms launch for
the same pools in the same seeded market (wmsim.market), one after the other, each in a market
of its own made from the same scenario and seed (so prices, regimes and events are the same):

- worker-manager: Taskcluster's selector reproduced (bench/baselines/worker_manager_selector.py):
  on a cloud whose clouds.toml entry says `even_split_abort` (EC2) the configs with weight > 0
  shuffled, an even share each, one all-or-nothing create per config, the first refusal ending
  the pass and filed without a config id; elsewhere one weighted draw per instance, each
  refusal filed with its config id when the cloud reports it. Its evidence: each config's
  non-stopped capacity and the pool's errors of the last hour.
- wm-weights: today's wm (wm.provisioning.launch_choice.choose, no spread): weights lowered by
  each config's refusals and pre-emptions of the last hour; creates take what the cloud gives
  (EC2 MinCount 1) and a refusal does not end the pass.
- wm-cost: wm.provisioning.cost_choice.score over what wm would know (its bench of refused
  offerings, its own decayed evidence, and the signals its collectors read from the market at
  their cadence, with the market's noise), then choose(spread=0.5) by the final weights.

The pools (per scenario file): tasks arrive (Poisson, plus a burst every few hours), seeded per
pool and the same for every arm; every PASS_S the demand not covered by idle or booting
workers is launched for; a granted instance boots (the cloud's boot_s), registers (unless the
offering's `unregistered` share says it never will: then it is stopped after
REGISTRATION_TIMEOUT_S), claims tasks, and stops after IDLE_TIMEOUT_S idle. The market's
hazard pre-empts running spot: each worker runs an exponential clock in integrated hazard, the
pool's n-th launch getting the same clock in every arm (common random numbers), so two arms
running the same workers meet the same pre-emptions; a pre-empted task's work is lost and
it is queued again. The market's ledger bills every instance (per second, 60 s minimum).

Figures per arm (issue 40 §4), over every pool of the scenario:
cost_per_task_hour ($ billed / hours of completed tasks' run time), time_to_capacity_p50_s and
_p95_s (from a task's demand to its claim, for demand arising within 30 min after a place the
pool launches in runs dry: tasks arriving, and tasks re-queued by a pre-emption),
preemptions_per_1000_worker_hours, capacity_errors_per_100_creates (capacity and quota
refusals; a create is one call: EC2's RunInstances, one instance on GCE and Azure),
never_registered (launches), signal_api_calls_per_hour. `ratio` is worker-manager's figure
over the arm's (bench/README.md's baseline / wm).

    .venv/bin/python -m bench.launch_choice                  # S0..S5, seeds 1 to 3
    .venv/bin/python -m bench.launch_choice --scenarios S1 S3 --seeds 7 --hours 6
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.baselines import worker_manager_selector as tc
from bench.common import REPO_DIR
from bench.output import cell, emit, percentile, ratios, rounded
from wm.errors import SPOT, ErrorCategory, ErrorScope
from wm.model import Offering
from wm.provisioning import cost_choice, offering_bench
from wm.provisioning.launch_choice import LaunchOption, choose
from wmsim.market import Market
from wmsim.market.scenario import LaunchConfigSpec, PoolSpec, SimOffering

SCENARIOS = ("S0", "S1", "S2", "S3", "S4", "S5")
SEEDS = (1, 2, 3)  # the figures are means over these: one seed's run swings (README)
ARMS = ("worker-manager", "wm-weights", "wm-cost")
BASELINE = "worker-manager"
STEP_S = 20.0
PASS_S = 60.0
IDLE_TIMEOUT_S = 600.0
REGISTRATION_TIMEOUT_S = 900.0
DRY_WINDOW_S = 1800.0  # tasks arriving this long after a place runs dry are timed
SPREAD = 0.5
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
# wm-cost's evidence half-lives (launch-choice-research §8(b)).
HALF_LIFE_CREATES_S = 1800.0
HALF_LIFE_PREEMPT_S = 86400.0
HALF_LIFE_REGISTER_S = 6 * 3600.0
# Eviction buckets as a daily eviction share, read back as a rate (the bucket's middle).
BUCKET_DAILY = {"0-5": 0.025, "5-10": 0.075, "10-15": 0.125, "15-20": 0.175, "20+": 0.3}
FIGURES = (
    "cost_per_task_hour",
    "time_to_capacity_p50_s",
    "time_to_capacity_p95_s",
    "preemptions_per_1000_worker_hours",
    "preemption_exposure_per_1000_worker_hours",
    "capacity_errors_per_100_creates",
    "never_registered",
    "signal_api_calls_per_hour",
)
# Worker-manager reads no signals: the control's deviation leaves that figure out.
CONTROL_FIGURES = tuple(f for f in FIGURES if f != "signal_api_calls_per_hour")
RESULTS = REPO_DIR / "bench" / "results" / "launch_choice.json"


@dataclass
class Task:
    task_id: int
    pool: str
    arrive: float
    duration: float
    first_claim: float | None = None
    started: float | None = None
    done: bool = False
    # (demand at, claimed at or None): its arrival, and each re-queue after a pre-emption
    demands: list[list[float | None]] = field(default_factory=list)


@dataclass
class Worker:
    worker_id: str
    pool_id: str
    lc: LaunchConfigSpec
    accepted: float
    ready_at: float | None  # None: never registers
    registered: bool = False
    task: Task | None = None
    idle_since: float | None = None
    stopped: float | None = None
    # A create the cloud will refuse but has not yet (a GCE operation, an ARM deployment):
    # the pass counts it as capacity on its way until the refusal arrives, as both services do.
    phantom: bool = False
    # Its pre-emption clock: pre-empted once the hazard it has run under adds up to this.
    budget: float = math.inf
    spent: float = 0.0


@dataclass
class Decayed:
    """A count that halves every half-life (decayed lazily)."""

    half_life_s: float
    value: float = 0.0
    at: float = 0.0

    def add(self, amount: float, now: float) -> None:
        self.value = self.read(now) + amount
        self.at = now

    def read(self, now: float) -> float:
        return self.value * 0.5 ** ((now - self.at) / self.half_life_s)


@dataclass
class Counts:
    creates: int = 0
    capacity_errors: int = 0
    preemptions: int = 0
    exposure: float = 0.0  # expected pre-emptions: the hazard integrated over running workers
    never_registered: int = 0
    signal_calls: int = 0
    worker_s: float = 0.0
    completed_task_s: float = 0.0
    waits_after_dry: list[float] = field(default_factory=list)


def wm_offering(o: SimOffering) -> Offering:
    return Offering(o.region, o.zone, o.instance_type, o.market)


# -- the arms ------------------------------------------------------------------------------


class Sim:
    """One arm's run of a scenario: the pools, their workers and tasks, in its own market."""

    def __init__(self, scenario: str, seed: int, hours: float | None, arm: Arm) -> None:
        self.market = Market.from_scenario(scenario, seed)
        self.seed = seed
        self.end = (hours if hours is not None else self.market.scenario.hours) * 3600
        self.arm = arm
        self.pools = {p.pool_id: p for p in self.market.scenario.pools}
        self.workers: dict[str, list[Worker]] = {p: [] for p in self.pools}
        self.pending: dict[str, list[Task]] = {p: [] for p in self.pools}
        self.arrivals = {p.pool_id: _arrivals(p, seed, self.end) for p in self.pools.values()}
        self.counts = Counts()
        self.learn: list[tuple[float, int, Callable[[], None]]] = []  # (when, n, what)
        self._n = 0
        self.boot_rng = random.Random(f"boot:{seed}")
        self.launched: dict[str, int] = defaultdict(int)
        # the last run times of completed tasks and lifetimes of stopped workers, per pool
        self.finished: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=200))
        self.lifetimes: dict[str, deque[float]] = defaultdict(lambda: deque(maxlen=200))

    # what an arm calls to launch
    def create(self, pool: PoolSpec, lc: LaunchConfigSpec, count: int, now: float, *,
               all_or_nothing: bool) -> int:  # fmt: skip
        o = lc.offering
        cloud = self.market.cloud(o)
        self.counts.creates += 1
        code = self.market.refusal(o, count, now)
        granted = self.market.try_launch(o, count, now, all_or_nothing=all_or_nothing)
        for _ in range(granted):
            self._n += 1
            wid = f"{self.arm.name}-{self._n}"
            self.market.start(wid, o, now)
            spec = self.market.spec(o)
            boot = cloud.boot_s * (0.8 + 0.4 * self.boot_rng.random())
            never = self.boot_rng.random() < spec.unregistered
            worker = Worker(wid, pool.pool_id, lc, now, None if never else now + boot)
            worker.budget = self._budget(pool)
            self.workers[pool.pool_id].append(worker)
        if granted == 0 and code is not None:
            self.counts.capacity_errors += 1
            quota = code == cloud.quota_code
            if cloud.refusal_delay_s > 0:
                self._n += 1
                ghost = Worker(
                    f"{self.arm.name}-{self._n}", pool.pool_id, lc, now, None, phantom=True
                )
                self.workers[pool.pool_id].append(ghost)
                self._later(
                    now + cloud.refusal_delay_s,
                    lambda: self.stop(ghost, ghost.accepted + cloud.refusal_delay_s),
                )
            self._later(
                now + cloud.refusal_delay_s,
                lambda: self.arm.refused(pool, lc, code, quota, now + cloud.refusal_delay_s),
            )
        elif granted > 0:
            self.arm.created(pool, lc, granted, now)
        return granted

    def _budget(self, pool: PoolSpec) -> float:
        """The n-th worker a pool launches gets the same exponential clock in every arm
        (common random numbers): arms that run the same workers under the same hazard meet the
        same pre-emptions, so what differs between arms is their choice, not the draws."""
        self.launched[pool.pool_id] += 1
        u = random.Random(f"preempt:{self.seed}:{pool.pool_id}:{self.launched[pool.pool_id]}")
        return -math.log(1.0 - u.random())

    def _later(self, when: float, what: Callable[[], None]) -> None:
        self._n += 1
        heapq.heappush(self.learn, (when, self._n, what))

    def live(self, pool_id: str) -> list[Worker]:
        return [w for w in self.workers[pool_id] if w.stopped is None]

    def stop(self, w: Worker, now: float) -> None:
        w.stopped = now
        if w.phantom:
            return
        self.lifetimes[w.pool_id].append(now - w.accepted)
        self.counts.worker_s += now - w.accepted
        self.market.stop(w.worker_id, now)

    def run(self) -> Counts:
        steps = int(self.end // STEP_S)
        per_pass = int(PASS_S // STEP_S)
        dry_watch = self.market.scenario.dry_watch
        for i in range(1, steps + 1):
            now = i * STEP_S
            self.market.advance(now)
            while self.learn and self.learn[0][0] <= now:
                heapq.heappop(self.learn)[2]()
            for pool in self.pools.values():
                self._step_pool(pool, now)
            if i % per_pass == 0:
                for pool in self.pools.values():
                    self._pass(pool, now)
        for pool_id in self.pools:
            for w in self.live(pool_id):
                self.stop(w, self.end)
            for t in self._all_tasks(pool_id):
                self._time_after_dry(t, dry_watch, pool_id)
        self.counts.signal_calls = self.arm.signal_calls
        return self.counts

    def _all_tasks(self, pool_id: str) -> list[Task]:
        return self.arrivals[pool_id][1]

    def _time_after_dry(self, t: Task, dry_watch: Sequence[str], pool_id: str) -> None:
        places = {lc.offering.place for lc in self.pools[pool_id].launch_configs}
        if dry_watch:
            places &= set(dry_watch)
        starts = [start for start, place in self.market.dry_starts if place in places]
        demands = t.demands if t.first_claim is not None else [[t.arrive, None]]
        for demand_at, claimed in demands:
            if any(s <= demand_at < s + DRY_WINDOW_S for s in starts):
                end = claimed if claimed is not None else self.end
                self.counts.waits_after_dry.append(end - demand_at)

    def _step_pool(self, pool: PoolSpec, now: float) -> None:
        pool_id = pool.pool_id
        queue, arrivals = self.pending[pool_id], self.arrivals[pool_id]
        idx, tasks = arrivals
        while idx < len(tasks) and tasks[idx].arrive <= now:
            queue.append(tasks[idx])
            idx += 1
        self.arrivals[pool_id] = (idx, tasks)
        self.workers[pool_id] = live = self.live(pool_id)  # the stopped ones are done with
        # registration, or giving up on a worker that never registers
        for w in live:
            if not w.registered and not w.phantom:
                if w.ready_at is not None and w.ready_at <= now:
                    w.registered, w.idle_since = True, now
                    self.arm.registered(pool, w, now)
                elif w.ready_at is None and now - w.accepted >= REGISTRATION_TIMEOUT_S:
                    self.counts.never_registered += 1
                    self.arm.never_registered(pool, w, now)
                    self.stop(w, now)
        # pre-emption by the market's hazard (each worker's clock: the same as the market's
        # reclaims draws in law, an exponential time in integrated hazard)
        rates: dict[str, float] = {}
        for w in live:
            if w.stopped is not None or w.phantom or w.lc.offering.market != SPOT:
                continue
            o = w.lc.offering
            if o.key not in rates:
                rates[o.key] = self.market.hazard(o, now) * STEP_S / 3600
            w.spent += rates[o.key]
            self.counts.exposure += rates[o.key]
            if w.spent < w.budget:
                continue
            self.counts.preemptions += 1
            if w.task is not None:
                w.task.started = None
                w.task.demands.append([now, None])
                queue.insert(0, w.task)
                w.task = None
            self.arm.preempted(pool, w, now)
            self.stop(w, now)
        # completions, claims, idle timeouts
        for w in self.live(pool_id):
            if not w.registered:
                continue
            task = w.task
            if (
                task is not None
                and task.started is not None
                and now - task.started >= task.duration
            ):
                self.counts.completed_task_s += task.duration
                self.finished[pool_id].append(task.duration)
                w.task.done = True
                w.task, w.idle_since = None, now
            if w.task is None and queue:
                task = queue.pop(0)
                task.started = now
                if task.first_claim is None:
                    task.first_claim = now
                    task.demands.insert(0, [task.arrive, now])
                elif task.demands and task.demands[-1][1] is None:
                    task.demands[-1][1] = now
                w.task, w.idle_since = task, None
            if w.task is None and w.idle_since is not None and now - w.idle_since >= IDLE_TIMEOUT_S:
                self.stop(w, now)

    def _pass(self, pool: PoolSpec, now: float) -> None:
        live = self.live(pool.pool_id)
        waiting = len(self.pending[pool.pool_id])
        spare = sum(1 for w in live if w.task is None)  # idle or booting: each takes a task
        live_capacity = sum(w.lc.capacity_per_worker for w in live)
        to_spawn = min(waiting - spare, pool.max_capacity - live_capacity)
        self.arm.before_pass(self, pool, now, to_spawn > 0)
        if to_spawn > 0:
            self.arm.launch(self, pool, to_spawn, now)


def _arrivals(pool: PoolSpec, seed: int, end: float) -> tuple[int, list[Task]]:
    """The pool's tasks: Poisson arrivals and bursts, durations gamma(2) around task_min."""
    rng = random.Random(f"tasks:{seed}:{pool.pool_id}")
    times: list[float] = []
    t = 0.0
    while pool.tasks_per_hour > 0:
        t += rng.expovariate(pool.tasks_per_hour / 3600)
        if t >= end:
            break
        times.append(t)
    if pool.burst_every_h > 0:
        b = pool.burst_every_h * 3600 / 2
        while b < end:
            times += [b] * pool.burst_tasks
            b += pool.burst_every_h * 3600
    times.sort()
    tasks = [
        Task(i, pool.pool_id, at, rng.gammavariate(2.0, pool.task_min * 60 / 2))
        for i, at in enumerate(times)
    ]
    return 0, tasks


class Arm:
    name = ""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.signal_calls = 0

    def before_pass(self, sim: Sim, pool: PoolSpec, now: float, demand: bool) -> None:
        pass

    def launch(self, sim: Sim, pool: PoolSpec, to_spawn: int, now: float) -> None:
        raise NotImplementedError

    def refused(self, pool: PoolSpec, lc: LaunchConfigSpec, code: str, quota: bool,
                now: float) -> None:  # fmt: skip
        pass

    def created(self, pool: PoolSpec, lc: LaunchConfigSpec, n: int, now: float) -> None:
        pass

    def registered(self, pool: PoolSpec, w: Worker, now: float) -> None:
        pass

    def never_registered(self, pool: PoolSpec, w: Worker, now: float) -> None:
        pass

    def preempted(self, pool: PoolSpec, w: Worker, now: float) -> None:
        pass


class WorkerManagerArm(Arm):
    name = "worker-manager"

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.rng = random.Random(f"worker-manager:{seed}")
        self.errors: dict[str, list[tc.PoolError]] = defaultdict(list)

    def refused(self, pool, lc, code, quota, now):  # type: ignore[no-untyped-def]
        # GCE and Azure file the refusal with its config when the operation or deployment
        # fails; AWS's is filed at once, without one (below, in launch).
        if not _even_split(pool, self._market):
            self.errors[pool.pool_id].append(tc.PoolError(_dt(now), lc.launch_config_id))

    def launch(self, sim: Sim, pool: PoolSpec, to_spawn: int, now: float) -> None:
        self._market = sim.market
        configs = tuple(
            tc.LaunchConfig(
                lc.launch_config_id,
                initial_weight=lc.weight,
                max_capacity=lc.max_capacity,
                wm_capacity_per_instance=lc.capacity_per_worker,
            )
            for lc in pool.launch_configs
        )
        by_id = {lc.launch_config_id: lc for lc in pool.launch_configs}
        tc_pool = tc.Pool(pool.max_capacity, configs)
        capacity: dict[str, int] = defaultdict(int)
        for w in sim.live(pool.pool_id):
            capacity[w.lc.launch_config_id] += w.lc.capacity_per_worker
        errors = self.errors[pool.pool_id]
        since = _dt(now) - tc.ERROR_WINDOW
        errors[:] = [e for e in errors if e.reported > since]
        stats = tc.PoolStats(dict(capacity), tc.recent_error_counts(errors, _dt(now)))
        if _even_split(pool, sim.market):

            def run_instances(lc: tc.LaunchConfig, n: int) -> bool:
                spec = by_id[lc.launch_config_id]
                return sim.create(pool, spec, n, now, all_or_nothing=True) == n

            outcome = tc.aws_provision(tc_pool, stats, to_spawn, self.rng, run_instances)
            if outcome.error is not None:
                errors.append(tc.PoolError(_dt(now), None))
        else:
            for lc in tc.weighted_draw(tc_pool, stats, to_spawn, self.rng):
                sim.create(pool, by_id[lc.launch_config_id], 1, now, all_or_nothing=True)


def _even_split(pool: PoolSpec, market: Market) -> bool:
    return market.cloud(pool.launch_configs[0].offering).even_split_abort


def _dt(now: float) -> datetime:
    return EPOCH + timedelta(seconds=now)


class WeightsArm(Arm):
    """wm today: choose() with each config's refusals and pre-emptions of the last hour."""

    name = "wm-weights"

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.recent: dict[str, list[float]] = defaultdict(list)

    def refused(self, pool, lc, code, quota, now):  # type: ignore[no-untyped-def]
        self.recent[_lc_key(pool, lc)].append(now)

    def preempted(self, pool, w, now):  # type: ignore[no-untyped-def]
        self.recent[_lc_key(pool, w.lc)].append(now)

    def _recent(self, pool: PoolSpec, lc: LaunchConfigSpec, now: float) -> int:
        times = self.recent[_lc_key(pool, lc)]
        times[:] = [t for t in times if t > now - 3600]
        return len(times)

    def options(self, sim: Sim, pool: PoolSpec, now: float) -> list[LaunchOption]:
        capacity: dict[str, int] = defaultdict(int)
        for w in sim.live(pool.pool_id):
            capacity[w.lc.launch_config_id] += w.lc.capacity_per_worker
        return [
            LaunchOption(
                launch_config_id=lc.launch_config_id,
                weight=1.0 if lc.weight is None else lc.weight,
                capacity_per_worker=lc.capacity_per_worker,
                # as wm's provisioner passes it: the config's own, None when it has none
                max_capacity=lc.max_capacity,
                current_capacity=capacity[lc.launch_config_id],
                recent_errors=self._recent(pool, lc, now),
            )
            for lc in pool.launch_configs
        ]

    def launch(self, sim: Sim, pool: PoolSpec, to_spawn: int, now: float) -> None:
        by_id = {lc.launch_config_id: lc for lc in pool.launch_configs}
        for alloc in choose(to_spawn, self.options(sim, pool, now)):
            _create(sim, pool, by_id[alloc.launch_config_id], alloc.workers, now)


def _create(sim: Sim, pool: PoolSpec, lc: LaunchConfigSpec, workers: int, now: float) -> int:
    """wm's creates: one call taking what the cloud gives (EC2 MinCount 1) where the cloud
    launches many at once, else one call per instance."""
    if sim.market.cloud(lc.offering).all_or_nothing:
        return sim.create(pool, lc, workers, now, all_or_nothing=False)
    return sum(sim.create(pool, lc, 1, now, all_or_nothing=True) for _ in range(workers))


def _lc_key(pool: PoolSpec, lc: LaunchConfigSpec) -> str:
    return f"{pool.pool_id}/{lc.launch_config_id}"


@dataclass
class LcEvidence:
    creates_ok: Decayed = field(default_factory=lambda: Decayed(HALF_LIFE_CREATES_S))
    failures: Decayed = field(default_factory=lambda: Decayed(HALF_LIFE_CREATES_S))
    preempted: Decayed = field(default_factory=lambda: Decayed(HALF_LIFE_PREEMPT_S))
    running_h: Decayed = field(default_factory=lambda: Decayed(HALF_LIFE_PREEMPT_S))
    launched: Decayed = field(default_factory=lambda: Decayed(HALF_LIFE_REGISTER_S))
    registered: Decayed = field(default_factory=lambda: Decayed(HALF_LIFE_REGISTER_S))
    ready_s: list[float] = field(default_factory=list)

    def read(self, now: float) -> cost_choice.Evidence:
        return cost_choice.Evidence(
            creates_ok=self.creates_ok.read(now),
            capacity_failures=self.failures.read(now),
            preempted=self.preempted.read(now),
            running_hours=self.running_h.read(now),
            launched=self.launched.read(now),
            registered=self.registered.read(now),
            median_ready_s=statistics.median(self.ready_s[-50:]) if self.ready_s else None,
        )


class CostArm(WeightsArm):
    """The cost choice: bench, evidence and signals, then choose(spread=0.5)."""

    name = "wm-cost"

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.bench: dict[str, offering_bench.BenchState] = {}
        self.evidence: dict[str, LcEvidence] = defaultdict(LcEvidence)
        self.signals: dict[tuple[str, str], tuple[float, float]] = {}  # (kind, key) -> (at, v)
        self.read_at: dict[tuple[str, str], float] = {}  # (kind, call scope) -> last read
        self.last_step: dict[str, float] = defaultdict(float)

    # evidence
    def refused(self, pool, lc, code, quota, now):  # type: ignore[no-untyped-def]
        self.evidence[_lc_key(pool, lc)].failures.add(1, now)
        key = lc.offering.key
        state = self.bench.get(key, offering_bench.BenchState())
        scope = ErrorScope(
            ErrorCategory.QUOTA if quota else ErrorCategory.CAPACITY,
            lc.offering.region,
            lc.offering.zone,
            lc.offering.instance_type,
            market=lc.offering.market,
        )
        first = offering_bench.first_ttl_s(scope, code)
        self.bench[key] = offering_bench.after_refusal(state, now, first)

    def created(self, pool, lc, n, now):  # type: ignore[no-untyped-def]
        ev = self.evidence[_lc_key(pool, lc)]
        ev.creates_ok.add(1, now)
        ev.launched.add(n, now)
        self.bench[lc.offering.key] = offering_bench.after_success(
            self.bench.get(lc.offering.key, offering_bench.BenchState())
        )

    def registered(self, pool, w, now):  # type: ignore[no-untyped-def]
        ev = self.evidence[_lc_key(pool, w.lc)]
        ev.registered.add(1, now)
        ev.ready_s.append(now - w.accepted)

    def preempted(self, pool, w, now):  # type: ignore[no-untyped-def]
        self.evidence[_lc_key(pool, w.lc)].preempted.add(1, now)

    def before_pass(self, sim: Sim, pool: PoolSpec, now: float, demand: bool) -> None:
        # running hours since the last pass, by config
        dt_h = (now - self.last_step[pool.pool_id]) / 3600
        self.last_step[pool.pool_id] = now
        for w in sim.live(pool.pool_id):
            self.evidence[_lc_key(pool, w.lc)].running_h.add(dt_h, now)
        self._read_signals(sim.market, pool, now, demand)

    def launch(self, sim: Sim, pool: PoolSpec, to_spawn: int, now: float) -> None:
        by_id = {lc.launch_config_id: lc for lc in pool.launch_configs}
        live = sim.live(pool.pool_id)
        views = [self._view(pool, lc, live, now) for lc in pool.launch_configs]
        done, lives = sim.finished[pool.pool_id], sim.lifetimes[pool.pool_id]
        facts = cost_choice.PoolFacts(
            median_task_s=statistics.median(done) if done else None,
            mean_lifetime_s=statistics.fmean(lives) if lives else None,
        )
        scored = {s.launch_config_id: s for s in cost_choice.score(views, facts, now)}
        options = []
        for option in self.options(sim, pool, now):
            s = scored[option.launch_config_id]
            lc = by_id[option.launch_config_id]
            live_spot = sum(
                w.lc.capacity_per_worker
                for w in live
                if w.lc.launch_config_id == lc.launch_config_id and lc.offering.market == SPOT
            )
            options.append(
                LaunchOption(
                    launch_config_id=option.launch_config_id,
                    weight=s.final_weight,
                    capacity_per_worker=option.capacity_per_worker,
                    max_capacity=option.max_capacity,
                    current_capacity=option.current_capacity,
                    offering_key=wm_offering(lc.offering).key,
                    live_spot_capacity=live_spot,
                    probe_only=s.admission is offering_bench.Admission.PROBE,
                )
            )
        for alloc in choose(to_spawn, options, spread=SPREAD):
            lc = by_id[alloc.launch_config_id]
            if scored[lc.launch_config_id].admission is offering_bench.Admission.PROBE:
                self.bench[lc.offering.key] = offering_bench.after_probe(
                    self.bench[lc.offering.key], now
                )
            _create(sim, pool, lc, alloc.workers, now)

    def _view(self, pool: PoolSpec, lc: LaunchConfigSpec, live: list[Worker],
              now: float) -> cost_choice.ConfigView:  # fmt: skip
        key = lc.offering.key
        price = self.signals.get(("price", key))
        avail = self.signals.get(("availability", key))
        prior = self.signals.get(("preemption", key))
        return cost_choice.ConfigView(
            launch_config_id=lc.launch_config_id,
            weight=1.0 if lc.weight is None else lc.weight,
            offering=wm_offering(lc.offering),
            capacity_per_worker=lc.capacity_per_worker,
            price_per_hour=price[1] if price else None,
            availability=avail[1] if avail else None,
            preemption_prior=prior[1] if prior else None,
            evidence=self.evidence[_lc_key(pool, lc)].read(now),
            bench=self.bench.get(key, offering_bench.BenchState()),
        )

    def _read_signals(self, market: Market, pool: PoolSpec, now: float, demand: bool) -> None:
        """What the collectors would have read by now, counting their calls (a call scope
        read once serves every pool)."""
        for lc in pool.launch_configs:
            o = lc.offering
            sig = market.cloud(o).signals
            kinds = [("price", "price"), ("preemption", "preemption")]
            if demand:  # placement scores only for pools with demand
                kinds.append(("availability", "availability"))
            for kind, prefix in kinds:
                refresh = float(sig[f"{prefix}_refresh_s"])
                scope = _call_scope(o, sig[f"{prefix}_calls"])
                last = self.read_at.get((kind, scope))
                if last is None or now - last >= refresh:
                    self.read_at[(kind, scope)] = now
                    self.signal_calls += 1
                held = self.signals.get((kind, o.key))
                if held is None or held[0] < self.read_at[(kind, scope)]:
                    self.signals[(kind, o.key)] = (now, _signal(market, o, kind, now))


def _call_scope(o: SimOffering, calls: str) -> str:
    if calls == "one":
        return o.cloud
    if calls == "region_type":
        return f"{o.cloud}/{o.region}/{o.instance_type}"
    if calls == "batch_8x5":
        # up to 8 locations x 5 sizes a call: a pool's few locations and sizes fit one
        return f"{o.cloud}/batch"
    return f"{o.cloud}/{o.region}"


def _signal(market: Market, o: SimOffering, kind: str, now: float) -> float:
    sig = market.cloud(o).signals
    if kind == "price":
        return market.price(o, now)
    if kind == "availability":
        if sig["availability_signal"] == "obtainability":
            return market.obtainability(o, now)
        return market.placement_score(o, now) / 10
    if sig["preemption_signal"] == "estimated_uptime":
        uptime = market.estimated_uptime_s(o, now)
        return 0.0 if math.isinf(uptime) else 3600 / uptime
    daily = BUCKET_DAILY[market.eviction_bucket(o, now)]
    return -math.log(1 - daily) / 24


ARM_CLASSES: dict[str, type[Arm]] = {
    "worker-manager": WorkerManagerArm,
    "wm-weights": WeightsArm,
    "wm-cost": CostArm,
}


# -- figures -------------------------------------------------------------------------------


def run_arm(scenario: str, arm: str, seed: int, hours: float | None) -> dict[str, Any]:
    sim = Sim(scenario, seed, hours, ARM_CLASSES[arm](seed))
    counts = sim.run()
    cost = sim.market.cost(sim.end)
    waits = sorted(counts.waits_after_dry)
    worker_h = counts.worker_s / 3600
    return {
        "cost_per_task_hour": rounded(cost / (counts.completed_task_s / 3600), 4)
        if counts.completed_task_s
        else None,
        "time_to_capacity_p50_s": rounded(percentile(waits, 0.5), 1),
        "time_to_capacity_p95_s": rounded(percentile(waits, 0.95), 1),
        "preemptions_per_1000_worker_hours": rounded(counts.preemptions / worker_h * 1000, 2)
        if worker_h
        else None,
        # the same without the draws' noise: what the arm exposed its workers to
        "preemption_exposure_per_1000_worker_hours": rounded(counts.exposure / worker_h * 1000, 2)
        if worker_h
        else None,
        "capacity_errors_per_100_creates": rounded(counts.capacity_errors / counts.creates * 100, 2)
        if counts.creates
        else None,
        "never_registered": counts.never_registered,
        "signal_api_calls_per_hour": rounded(counts.signal_calls / (sim.end / 3600), 2),
        # the sums the figures come from
        "cost_usd": rounded(cost, 2),
        "completed_task_hours": rounded(counts.completed_task_s / 3600, 1),
        "worker_hours": rounded(worker_h, 1),
        "creates": counts.creates,
        "capacity_errors": counts.capacity_errors,
        "preemptions": counts.preemptions,
        "tasks_timed_after_dry": len(waits),
    }


def control_deviation(result: dict[str, Any]) -> dict[str, float]:
    """Per arm, the largest |arm / worker-manager - 1| over the control's figures (two zeros
    or two nulls agree; a zero or null against a number is a full deviation)."""
    out = {}
    base = result[BASELINE]
    for arm in ARMS:
        if arm == BASELINE:
            continue
        worst = 0.0
        for name in CONTROL_FIGURES:
            ours, theirs = result[arm][name], base[name]
            if ours == theirs:
                continue
            if not ours or not theirs:
                worst = 1.0
                continue
            worst = max(worst, abs(ours / theirs - 1))
        out[arm] = round(worst, 4)
    return out


def mean_figures(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's mean over the seeds that have one (None where none has)."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        values = [r[name] for r in runs if r[name] is not None]
        out[name] = round(statistics.fmean(values), 4) if values else None
    return out


def run_scenario(scenario: str, seeds: Sequence[int], hours: float | None) -> dict[str, Any]:
    """Every arm on every seed; the figures are the means over the seeds, the ratios those of
    the means, and `ratio_range` each ratio's lowest and highest over the seeds."""
    per_seed: dict[str, dict[str, Any]] = {}
    for seed in seeds:
        runs: dict[str, Any] = {}
        for arm in ARMS:
            started = time.perf_counter()
            runs[arm] = run_arm(scenario, arm, seed, hours)
            took = time.perf_counter() - started
            print(f"  {scenario} seed {seed} {arm}: {took:.1f} s", file=sys.stderr, flush=True)
        runs["ratio"] = {a: ratios(runs[a], runs[BASELINE]) for a in ARMS if a != BASELINE}
        per_seed[str(seed)] = runs
    result: dict[str, Any] = {
        arm: mean_figures([per_seed[str(seed)][arm] for seed in seeds]) for arm in ARMS
    }
    result["ratio"] = {
        arm: ratios(result[arm], result[BASELINE]) for arm in ARMS if arm != BASELINE
    }
    result["ratio_range"] = {
        arm: {
            fig: _range([per_seed[str(seed)]["ratio"][arm][fig] for seed in seeds])
            for fig in FIGURES
        }
        for arm in ARMS
        if arm != BASELINE
    }
    result["control_deviation"] = control_deviation(result)
    result["per_seed"] = per_seed
    return result


def _range(values: Sequence[float | None]) -> list[float] | None:
    known = [v for v in values if v is not None]
    return [min(known), max(known)] if known else None


def table(name: str, title: str, result: dict[str, Any]) -> str:
    rows = [("figure", *ARMS, "wm-weights ratio", "wm-cost ratio", "wm-cost ratio, seeds")]
    for fig in FIGURES:
        spread = result["ratio_range"]["wm-cost"][fig]
        rows.append(
            (
                fig,
                *(cell(result[arm][fig]) for arm in ARMS),
                cell(result["ratio"]["wm-weights"][fig]),
                cell(result["ratio"]["wm-cost"][fig]),
                "-" if spread is None else f"{spread[0]:g} to {spread[1]:g}",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    deviation = ", ".join(f"{a} {v:g}" for a, v in result["control_deviation"].items())
    lines = [f"{name}: {title} (largest deviation from worker-manager: {deviation})"]
    lines += [
        r[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(r[1:], widths[1:], strict=True))
        for r in rows
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--hours", type=float, help="simulated hours (default: the scenario's)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    scenarios: dict[str, Any] = {}
    tables = []
    for name in args.scenarios:
        market = Market.from_scenario(name, args.seeds[0])
        scenarios[name] = run_scenario(name, args.seeds, args.hours)
        scenarios[name]["title"] = market.scenario.title
        tables.append(table(name, market.scenario.title, scenarios[name]))
    result = {
        "seeds": args.seeds,
        "hours": args.hours,
        "wall_s": round(time.perf_counter() - started, 1),
        "scenarios": scenarios,
    }
    emit(result, "\n\n".join(tables), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
