"""The arms of issue 40's policy simulation (bench.launch_choice): what each would
launch from what it would know. worker-manager: Taskcluster's selector as
bench/baselines/worker_manager_selector.py reproduces it; wm-weights: wm's choose() today;
wm-cost: wm's cost choice over its bench, its evidence and the market's signals; oracle:
a reference launching by the market's true state (no policy can know it)."""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bench.baselines import worker_manager_selector as tc
from bench.launch_sim import REGISTRATION_TIMEOUT_S, Arm, Decayed, Sim, Worker, wm_offering
from wm.config.launch_choice import DEFAULT_BETA, DEFAULT_SPREAD
from wm.errors import SPOT, ErrorCategory, ErrorScope
from wm.provisioning import cost_choice, offering_bench
from wm.provisioning.launch_choice import LaunchOption, choose
from wmsim.market import Market
from wmsim.market.scenario import LaunchConfigSpec, PoolSpec, SimOffering

# wm-cost's settings: wm's defaults ([launch_choice] beta and spread); `--beta`/`--spread`
# of bench.launch_choice change them for a side run.
SETTINGS = {"beta": DEFAULT_BETA, "spread": DEFAULT_SPREAD}
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
# wm-cost's evidence half-lives (launch-choice-research §8(b)).
HALF_LIFE_CREATES_S = 1800.0
HALF_LIFE_PREEMPT_S = 86400.0
HALF_LIFE_REGISTER_S = 6 * 3600.0
# Eviction buckets as a daily eviction share, read back as a rate (the bucket's middle).
BUCKET_DAILY = {"0-5": 0.025, "5-10": 0.075, "10-15": 0.125, "15-20": 0.175, "20+": 0.3}


class WorkerManagerArm(Arm):
    name = "worker-manager"

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.rng = random.Random(f"worker-manager:{seed}")
        self.errors: dict[str, list[tc.PoolError]] = defaultdict(list)

    def refused(self, pool, lc, code, quota, now, hint):  # type: ignore[no-untyped-def]
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

    def refused(self, pool, lc, code, quota, now, hint):  # type: ignore[no-untyped-def]
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
    """The cost choice: bench, evidence and signals, then choose(spread=...)."""

    name = "wm-cost"

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.bench: dict[str, offering_bench.BenchState] = {}
        self.evidence: dict[str, LcEvidence] = defaultdict(LcEvidence)
        self.signals: dict[tuple[str, str], tuple[float, float]] = {}  # (kind, key) -> (at, v)
        self.read_at: dict[tuple[str, str], float] = {}  # (kind, call scope) -> last read
        self.last_step: dict[str, float] = defaultdict(float)

    # evidence
    def refused(self, pool, lc, code, quota, now, hint):  # type: ignore[no-untyped-def]
        self.evidence[_lc_key(pool, lc)].failures.add(1, now)
        key = lc.offering.key
        state = self.bench.get(key, offering_bench.BenchState())
        scope = ErrorScope(
            ErrorCategory.QUOTA if quota else ErrorCategory.CAPACITY,
            lc.offering.region,
            lc.offering.zone,
            lc.offering.instance_type,
            market=lc.offering.market,
            zones_with_capacity=hint,
        )
        first = offering_bench.first_ttl_s(scope, code)
        self.bench[key] = offering_bench.after_refusal(state, now, first)
        for other in offering_bench.unbenched_by_hint(scope):
            sim_key = SimOffering(
                lc.offering.cloud, other.region, other.zone, other.instance_type, other.market
            ).key
            if sim_key in self.bench:
                self.bench[sim_key] = offering_bench.after_success(self.bench[sim_key])

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
            interrupted_work_s=cost_choice.interrupted_work_s(done),
        )
        scored = {
            s.launch_config_id: s
            for s in cost_choice.score(views, facts, now, beta=SETTINGS["beta"])
        }
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
        spread = SETTINGS["spread"]
        for alloc in choose(to_spawn, options, spread=None if spread >= 1 else spread):
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


class OracleArm(Arm):
    """A reference, not a policy: what launching by the true state reaches. It knows each
    offering's price, obtainable capacity (spare within quota) and hazard now, the pool's
    task run times and the share of launches that never register, and hands each worker of a
    pass to the offering cheapest per useful capacity-hour at that moment (its own launches
    this pass counted into the hazard), with no spread cap and no hedging. It cannot know
    the future: a scripted dry spell takes it as unawares as any arm."""

    name = "oracle"

    def launch(self, sim: Sim, pool: PoolSpec, to_spawn: int, now: float) -> None:
        market = sim.market
        lost_h = _length_biased_elapsed_s(sim, pool) / 3600
        lives = sim.lifetimes[pool.pool_id]
        life_h = (statistics.fmean(lives) if lives else 3600.0) / 3600
        capacity: dict[str, int] = defaultdict(int)
        for w in sim.live(pool.pool_id):
            capacity[w.lc.launch_config_id] += w.lc.capacity_per_worker
        open_lcs = [lc for lc in pool.launch_configs if lc.weight is None or lc.weight > 0]
        planned: dict[str, int] = defaultdict(int)  # workers, by config
        by_offering: dict[str, int] = defaultdict(int)  # workers, by offering
        obtainable = {lc.offering.key: market.obtainable(lc.offering, now) for lc in open_lcs}

        def effective(lc: LaunchConfigSpec) -> float:
            o = lc.offering
            ready_h = market.cloud(o).boot_s / 3600
            q = max(1e-6, 1.0 - market.spec(o).unregistered)
            wasted_h = ready_h + (1 - q) / q * REGISTRATION_TIMEOUT_S / 3600
            rate = market.hazard(o, now, extra_in_use=by_offering[o.key])
            price = market.price(o, now) / lc.capacity_per_worker
            return price * (1 + rate * (lost_h + ready_h) + wasted_h / life_h)

        left = to_spawn
        while left > 0:
            best, best_e = None, math.inf
            for lc in open_lcs:
                key = lc.offering.key
                if by_offering[key] >= obtainable[key]:
                    continue
                had = capacity[lc.launch_config_id] + planned[lc.launch_config_id]
                if lc.max_capacity is not None and had + lc.capacity_per_worker > lc.max_capacity:
                    continue
                e = effective(lc)
                if e < best_e:
                    best, best_e = lc, e
            if best is None:
                break  # nothing obtainable anywhere: no create would be granted
            planned[best.launch_config_id] += 1
            by_offering[best.offering.key] += 1
            left -= best.capacity_per_worker
        by_id = {lc.launch_config_id: lc for lc in pool.launch_configs}
        for lc_id, workers in planned.items():
            _create(sim, pool, by_id[lc_id], workers, now)


def _length_biased_elapsed_s(sim: Sim, pool: PoolSpec) -> float:
    """The work a pre-emption at a random moment of a busy worker loses: the elapsed part of
    the task it interrupts, E[T²] / 2E[T] over the pool's run times (a long task is more
    likely to be the one running, and is cut on average halfway)."""
    durations = [t.duration for t in sim.arrivals[pool.pool_id][1]]
    if not durations:
        return 0.0
    return sum(d * d for d in durations) / (2 * sum(durations))


ARM_CLASSES: dict[str, type[Arm]] = {
    "worker-manager": WorkerManagerArm,
    "wm-weights": WeightsArm,
    "wm-cost": CostArm,
    "oracle": OracleArm,
}
