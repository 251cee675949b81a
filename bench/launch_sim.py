"""The pools of issue 40's policy simulation (bench.launch_choice): tasks arriving, passes
launching through an arm, the market granting or refusing, workers booting, registering,
running tasks, pre-empted by the market's hazard and billed by its ledger. An arm (the
`Arm` below; bench.launch_arms) decides only what to launch, from what it has seen."""

from __future__ import annotations

import heapq
import math
import random
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from wm.errors import SPOT
from wm.model import Offering
from wmsim.market import Market
from wmsim.market.scenario import LaunchConfigSpec, PoolSpec, SimOffering

STEP_S = 20.0
PASS_S = 60.0
IDLE_TIMEOUT_S = 600.0
REGISTRATION_TIMEOUT_S = 900.0
DRY_WINDOW_S = 1800.0  # tasks arriving this long after a place runs dry are timed


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


class Sim:
    """One arm's run of a scenario: the pools, their workers and tasks, in its own market."""

    def __init__(
        self, scenario: str, seed: int, hours: float | None, arm: Arm, *, undisturbed: bool = False
    ) -> None:
        self.market = Market.from_scenario(scenario, seed)
        # undisturbed: the scenario without its scripted events, tasks still timed from when
        # its dry spells would have started. What no launch choice can beat: one that made a
        # dry spell invisible would meet exactly these waits (the sim, not the arm, decides
        # how many workers a pass launches; an arm only decides where).
        self.timed_dry: list[tuple[float, str]] | None = None
        if undisturbed:
            plan = self.market.scenario
            self.timed_dry = [(e.at_s, e.place) for e in plan.events if e.regime == "dry"]
            self.market = Market(replace(plan, events=()), seed)
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
            hint = ()
            if not quota and cloud.refusal_names_zones:
                hint = tuple(self.market.zones_with_capacity(o, now))
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
                lambda: self.arm.refused(pool, lc, code, quota, now + cloud.refusal_delay_s, hint),
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
        dry = self.market.dry_starts if self.timed_dry is None else self.timed_dry
        starts = [start for start, place in dry if place in places]
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
                now: float, hint: tuple[str, ...]) -> None:  # fmt: skip
        """A create was refused (known at `now`); `hint`: zones the refusal names as having
        the type."""
        pass

    def created(self, pool: PoolSpec, lc: LaunchConfigSpec, n: int, now: float) -> None:
        pass

    def registered(self, pool: PoolSpec, w: Worker, now: float) -> None:
        pass

    def never_registered(self, pool: PoolSpec, w: Worker, now: float) -> None:
        pass

    def preempted(self, pool: PoolSpec, w: Worker, now: float) -> None:
        pass
