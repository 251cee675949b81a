"""Score a pool's launch configs by availability and expected cost per useful capacity-hour:
a pure function (issue 40 §3; ../shared/notes/launch-choice-research.md §8(b) steps 1-4).

Each launch config c with Taskcluster weight w_c gets a factor; the pass hands out workers by
w_c · factor with launch_choice.choose, so hand weights still count, `initialWeight: 0` still
disables and `maxCapacity` still caps (choose applies it).

    a_c = A_cloud · (1 + S) / (1 + S + F)          availability
    e_c = (p_c / u_c) · (1 + λ_c·(L + R_c) + R_c/H) / q_c   $ per useful capacity-hour
    factor_c = a_c · (e_min / e_c)^β               0 while benched (its probe aside)

A_cloud: the cloud's availability signal (placement score / 10, obtainability, ...), never
below AVAILABILITY_FLOOR (scores are advisory and lag); S, F: wm's own decayed create
successes and capacity refusals. p_c: hourly price, u_c: capacity per worker; λ_c: pre-emptions
per instance-hour, wm's own count shrunk towards the cloud's prior, (n + k·λ0)/(h + k); L: the
work a pre-emption loses, the elapsed part of the task it interrupts (E[T²]/2E[T] of the
pool's run times; half the median task when only that is known); R_c: median accepted ->
registered (the replacement's boot, billed, and once per worker's life);
H: a worker's mean lifetime (boot time is paid once per life); q_c: the share of launches that
registered, Beta(4, 0) prior. e_min: the cheapest open or probing config of weight > 0.

Anything unknown is neutral, the pool's median of the known values: a price (per unit of
capacity), a cloud availability (1 when none is known), a time to ready, a pre-emption prior
(of spot offerings; 0 for on demand). A config whose signal alone is missing (a failed call,
a region the source does not cover) is then neither favoured nor shunned for it. With nothing
known every factor is exactly 1.0, so the cost choice launches as the weights do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from statistics import median

from wm.errors import ON_DEMAND
from wm.model import Offering
from wm.provisioning.offering_bench import Admission, BenchState, admission

DEFAULT_BETA = 3.0  # 10 % dearer -> x0.75, 2x dearer -> x0.125
AVAILABILITY_FLOOR = 0.05  # the least a cloud's (advisory) availability signal counts for
PRIOR_HOURS = 20.0  # k: instance-hours the cloud's pre-emption prior weighs as
REGISTERED_PRIOR = 4.0  # Beta(4, 0): four launches that registered, none that did not


@dataclass(frozen=True)
class Evidence:
    """wm's own, per launch config, decayed counts (wm.db computes them)."""

    creates_ok: float = 0.0
    capacity_failures: float = 0.0
    preempted: float = 0.0
    running_hours: float = 0.0
    launched: float = 0.0  # creates accepted in the window (for q)
    registered: float = 0.0  # of those, registered
    median_ready_s: float | None = None  # accepted -> registered


@dataclass(frozen=True)
class ConfigView:
    """One launch config as the choice sees it."""

    launch_config_id: str
    weight: float  # Taskcluster weight as today (initialWeight, error factor NOT applied)
    offering: Offering | None
    capacity_per_worker: int
    price_per_hour: float | None  # None: unknown -> neutral (pool median)
    # 0..1, None: unknown -> the pool's median of the known ones (1.0 when none is)
    availability: float | None
    preemption_prior: float | None  # per instance-hour, None: unknown
    evidence: Evidence
    bench: BenchState


@dataclass(frozen=True)
class PoolFacts:
    median_task_s: float | None = None  # read only when interrupted_work_s is unknown
    mean_lifetime_s: float | None = None
    # The work one pre-emption of a busy worker loses (interrupted_work_s() of the pool's
    # task run times); None: unknown, half the median task is counted instead.
    interrupted_work_s: float | None = None


def interrupted_work_s(run_times_s: Sequence[float]) -> float | None:
    """The run time a pre-emption throws away: Taskcluster resolves the interrupted run
    exception/worker-shutdown and retries the task from its start, so the elapsed part of
    that run is lost. A pre-emption comes at a moment unrelated to the task, so it lands in a
    task with a chance proportional to its length, halfway through on average: E[T²] / 2E[T]
    (length-biased), not half the median (for gamma(2) run times 1.8x more; for equal run
    times, the same). None when there is no run time to go by."""
    times = [t for t in run_times_s if math.isfinite(t) and t > 0]
    if not times:
        return None
    return sum(t * t for t in times) / (2 * sum(times))


@dataclass(frozen=True)
class Scored:
    launch_config_id: str
    admission: Admission
    factor: float  # multiplies the Taskcluster weight (0 when benched and no probe)
    final_weight: float  # weight * factor
    availability: float
    effective_price: float | None  # e_c, $ per useful capacity-hour; None: no price known
    price_per_hour: float | None
    preemption_rate: float  # λ_c used
    ready_s: float | None
    registered_ratio: float
    why: tuple[str, ...]  # human words, one reason each


@dataclass(frozen=True)
class _Costed:
    """A config's figures before e_min is known."""

    config: ConfigView
    admission: Admission
    availability: float
    per_capacity_price: float  # $/capacity-hour, or the neutral 1.0 when no price is known
    preemption_rate: float
    ready_s: float | None
    registered_ratio: float
    effective: float  # e_c in the units of per_capacity_price
    why: tuple[str, ...]


def score(
    configs: Sequence[ConfigView],
    pool: PoolFacts,
    now: float,
    beta: float = DEFAULT_BETA,
    speed: float = 1.0,
) -> list[Scored]:
    """One Scored per config, in the order given. Deterministic in its arguments (`speed`: the
    bench's, offering_bench.py)."""
    configs = [_sane(c) for c in configs]
    prices = [_per_capacity(c) for c in configs]
    neutral = _Neutral.of(configs, prices)
    costed = [
        _cost(c, price, neutral, pool, now, speed) for c, price in zip(configs, prices, strict=True)
    ]
    eligible = [
        k.effective for k in costed if k.config.weight > 0 and k.admission is not Admission.BENCHED
    ]
    e_min = min(eligible or [k.effective for k in costed if k.config.weight > 0] or [1.0])
    return [_scored(k, e_min, beta, neutral.price is not None) for k in costed]


@dataclass(frozen=True)
class _Neutral:
    """What an unknown counts as: the pool's median of the known values."""

    price: float | None  # per capacity-hour; None: no config's price is known
    cloud_availability: float
    prior: float  # of spot offerings
    ready_s: float | None

    @classmethod
    def of(cls, configs: Sequence[ConfigView], prices: Sequence[float | None]) -> _Neutral:
        known_prices = [p for p in prices if p is not None]
        known_availability = [
            _clamped(c.availability) for c in configs if c.availability is not None
        ]
        spot_priors = [
            c.preemption_prior
            for c in configs
            if c.preemption_prior is not None and not _on_demand(c.offering)
        ]
        known_ready = [r for c in configs if (r := c.evidence.median_ready_s) is not None]
        return cls(
            price=median(known_prices) if known_prices else None,
            cloud_availability=median(known_availability) if known_availability else 1.0,
            prior=median(spot_priors) if spot_priors else 0.0,
            ready_s=median(known_ready) if known_ready else None,
        )


def _clamped(availability: float) -> float:
    return min(1.0, max(AVAILABILITY_FLOOR, availability))


def _sane(config: ConfigView) -> ConfigView:
    """Garbage is unknown: a price that is not above 0, a signal, count or time that is not
    a finite number (a source's garbage must not starve or flood a config)."""

    def finite(value: float | None, least: float) -> float | None:
        return value if value is not None and math.isfinite(value) and value >= least else None

    price = config.price_per_hour
    evidence = config.evidence
    counts = {
        name: finite(getattr(evidence, name), 0.0) or 0.0
        for name in (
            "creates_ok",
            "capacity_failures",
            "preempted",
            "running_hours",
            "launched",
            "registered",
        )
    }
    return replace(
        config,
        price_per_hour=price if finite(price, 0.0) and price > 0 else None,
        availability=finite(config.availability, -math.inf),
        preemption_prior=finite(config.preemption_prior, 0.0),
        evidence=replace(evidence, median_ready_s=finite(evidence.median_ready_s, 0.0), **counts),
    )


def _per_capacity(config: ConfigView) -> float | None:
    price = config.price_per_hour
    if price is None or config.capacity_per_worker <= 0:
        return None
    return price / config.capacity_per_worker


def _on_demand(offering: Offering | None) -> bool:
    return offering is not None and offering.market == ON_DEMAND


def _cost(
    config: ConfigView,
    price: float | None,
    neutral: _Neutral,
    pool: PoolFacts,
    now: float,
    speed: float,
) -> _Costed:
    why: list[str] = []
    evidence = config.evidence
    state = admission(config.bench, now, speed)
    why += _bench_words(config.bench, state)

    cloud = neutral.cloud_availability
    if config.availability is not None:
        cloud = _clamped(config.availability)
        why.append(f"the cloud rates its availability {cloud:.2f}")
    elif cloud < 1.0:
        why.append(f"availability unknown: counted at the pool's median, {cloud:.2f}")
    ok, refused = max(0.0, evidence.creates_ok), max(0.0, evidence.capacity_failures)
    availability = cloud * (1 + ok) / (1 + ok + refused)
    if refused > 0:
        why.append(f"{refused:.1f} capacity refusals to {ok:.1f} creates lately")

    if price is None:
        if neutral.price is not None:
            why.append("price unknown: counted at the pool's median")
        price = neutral.price if neutral.price is not None else 1.0

    prior = config.preemption_prior
    if prior is None:
        prior = 0.0 if _on_demand(config.offering) else neutral.prior
    hours, preempted = max(0.0, evidence.running_hours), max(0.0, evidence.preempted)
    rate = (preempted + PRIOR_HOURS * max(0.0, prior)) / (hours + PRIOR_HOURS)
    if rate > 0 and (config.preemption_prior is not None or preempted > 0):
        why.append(f"{rate:.3f} pre-emptions per instance-hour")

    ready_s = evidence.median_ready_s
    if ready_s is None:
        ready_s = neutral.ready_s
    ready_h = (ready_s or 0.0) / 3600
    lost_s = pool.interrupted_work_s
    if lost_s is None or not math.isfinite(lost_s) or lost_s < 0:
        lost_s = (pool.median_task_s or 0.0) / 2
    lost_h = lost_s / 3600
    life_h = (pool.mean_lifetime_s or 0.0) / 3600
    boot_share = ready_h / life_h if life_h > 0 else 0.0

    launched = max(0.0, evidence.launched)
    registered = min(max(0.0, evidence.registered), launched)
    registered_ratio = (REGISTERED_PRIOR + registered) / (REGISTERED_PRIOR + launched)
    if launched - registered >= 1:
        never = launched - registered
        why.append(f"{never:.0f} of {launched:.0f} recent launches never registered")

    effective = price * (1 + rate * (lost_h + ready_h) + boot_share) / registered_ratio
    return _Costed(
        config,
        state,
        availability,
        price,
        rate,
        ready_s,
        registered_ratio,
        effective,
        tuple(why),
    )


def _scored(costed: _Costed, e_min: float, beta: float, priced: bool) -> Scored:
    config = costed.config
    why = list(costed.why)
    if config.weight <= 0:
        why.insert(0, "initialWeight 0: never launched")
    if costed.admission is Admission.BENCHED:
        factor = 0.0
    else:
        ratio = e_min / costed.effective if costed.effective > 0 else 1.0
        factor = costed.availability * ratio**beta
        if ratio < 1:
            why.append(f"{1 / ratio:.2f}x dearer than the cheapest")
        elif priced:
            why.append("the cheapest")
    if config.offering is None:
        why.append("wm cannot tell its offering from its launch config")
    return Scored(
        launch_config_id=config.launch_config_id,
        admission=costed.admission,
        factor=factor,
        final_weight=config.weight * factor if config.weight > 0 else 0.0,
        availability=costed.availability,
        effective_price=costed.effective if priced else None,
        price_per_hour=config.price_per_hour,
        preemption_rate=costed.preemption_rate,
        ready_s=costed.ready_s,
        registered_ratio=costed.registered_ratio,
        why=tuple(why),
    )


def _bench_words(state: BenchState, admitted: Admission) -> list[str]:
    refusals = f"{state.failures} capacity refusal{'s' if state.failures != 1 else ''}"
    if admitted is Admission.PROBE:
        return [f"probe: one worker to try it again after {refusals}"]
    if admitted is Admission.BENCHED:
        probe, until = state.probe_sent_at, state.benched_until
        if probe is not None and until is not None and probe >= until:
            return [f"benched: its probe of {_clock(state.probe_sent_at)} not answered yet"]
        return [f"benched until {_clock(state.benched_until)} after {refusals}"]
    return []


def _clock(epoch_s: float | None) -> str:
    if epoch_s is None:
        return "?"
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%H:%M:%S UTC")
