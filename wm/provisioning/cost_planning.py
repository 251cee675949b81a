"""The launch choice by cost in a pass (issue 40): what a pass reads for its pools in "shadow"
or "cost" mode, the scoring of their launch configs, and the bench the pass's creates move.

The scoring is wm/provisioning/cost_choice.py's and the bench's rules offering_bench.py's (pure);
this module reads their inputs (offering_state, once per planning, only for opted-in pools that
launch), turns the scores into launch options, and works out the bench rows a pass's outcomes
leave. A pool in "weights" mode never reaches it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from sqlalchemy import Engine

from wm.config.launch_choice import ChoiceMode, PoolChoice
from wm.db import offering_state
from wm.db.offering_state import BenchEntry, EvidenceReading
from wm.errors import SPOT, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchConfigRecord, LaunchSpec, Offering, OfferingSignal, SignalKind
from wm.ops.telemetry import LAUNCH_CHOICE_WEIGHT, POOL_COST_PER_HOUR, log
from wm.provisioning import offering_bench
from wm.provisioning.cost_choice import ConfigView, Evidence, PoolFacts, Scored, score
from wm.provisioning.launch_choice import LaunchOption
from wm.provisioning.offering_bench import Admission, BenchState

# A launch config's offering: the provider's kind reads it from the config (None: cannot tell).
OfferingOf = Callable[[LaunchConfigRecord], "Offering | None"]


@dataclass(frozen=True)
class Reading:
    """What a planning read for the provider's opted-in pools that launch."""

    signals: Mapping[tuple[Offering, SignalKind], OfferingSignal] = field(default_factory=dict)
    bench: Mapping[Offering, BenchEntry] = field(default_factory=dict)
    evidence: EvidenceReading = field(default_factory=lambda: EvidenceReading(configs={}, pools={}))


def read(engine: Engine, provider_id: str, pool_ids: Sequence[str], speed: float = 1.0) -> Reading:
    """The provider's signals and bench, and the pools' evidence: three statements."""
    if not pool_ids:
        return Reading()
    return Reading(
        signals=offering_state.read_signals(engine, provider_id),
        bench=offering_state.read_bench(engine, provider_id),
        evidence=offering_state.read_evidence(engine, pool_ids, speed),
    )


def with_probes_out(reading: Reading, probed: Sequence[Offering], now: float) -> Reading:
    """The reading with these offerings' probes out (sent by an earlier planning of the pass,
    their bench not written yet): not probed twice in one window."""
    if not probed:
        return reading
    bench = dict(reading.bench)
    for offering in probed:
        entry = bench.get(offering, BenchEntry(BenchState()))
        bench[offering] = BenchEntry(offering_bench.after_probe(entry.state, now), entry.last_code)
    return replace(reading, bench=bench)


def signal(
    signals: Mapping[tuple[Offering, SignalKind], OfferingSignal],
    offering: Offering,
    kind: SignalKind,
) -> float | None:
    """The offering's value of a signal: its zone's, else its region's (GCE and Azure price a
    region); None when wm holds neither."""
    found = signals.get((offering, kind))
    if found is None and offering.zone is not None:
        found = signals.get((replace(offering, zone=None), kind))
    return None if found is None else found.value


def bench_state(bench: Mapping[Offering, BenchEntry], offering: Offering | None) -> BenchState:
    entry = bench.get(offering) if offering is not None else None
    return entry.state if entry is not None else BenchState()


def config_views(
    pool_id: str,
    configs: Sequence[LaunchConfigRecord],
    offerings: Mapping[str, Offering | None],
    reading: Reading,
) -> list[ConfigView]:
    """Each launch config as the cost choice sees it."""
    views = []
    for lc in configs:
        offering = offerings.get(lc.launch_config_id)
        known = offering is not None

        def value(kind: SignalKind, offering: Offering | None = offering) -> float | None:
            return signal(reading.signals, offering, kind) if offering is not None else None

        views.append(
            ConfigView(
                launch_config_id=lc.launch_config_id,
                weight=lc.weight,
                offering=offering,
                capacity_per_worker=lc.capacity_per_worker,
                price_per_hour=value(SignalKind.PRICE) if known else None,
                availability=value(SignalKind.AVAILABILITY) if known else None,
                preemption_prior=value(SignalKind.PREEMPTION) if known else None,
                evidence=reading.evidence.configs.get((pool_id, lc.launch_config_id), Evidence()),
                bench=bench_state(reading.bench, offering),
            )
        )
    return views


@dataclass(frozen=True)
class PoolScore:
    """One pool's scoring in a planning: what `plan_pool` launches by in cost mode."""

    choice: PoolChoice
    scored: tuple[Scored, ...]
    offerings: Mapping[str, Offering | None]  # launch config id -> its offering

    @property
    def launches_by_cost(self) -> bool:
        return self.choice.mode == ChoiceMode.COST

    def options(
        self, options: Sequence[LaunchOption], by_launch_config: Mapping[str, int]
    ) -> list[LaunchOption]:
        """Today's options with the scored weights in place of weight x error factor (the
        bench and availability say what errors said), each offering's key for the spread, and
        a benched offering's probe limited to one worker."""
        by_id = {s.launch_config_id: s for s in self.scored}
        out = []
        for option in options:
            scored = by_id.get(option.launch_config_id)
            if scored is None:
                out.append(option)
                continue
            offering = self.offerings.get(option.launch_config_id)
            spot = offering is not None and offering.market == SPOT
            out.append(
                replace(
                    option,
                    weight=scored.final_weight,
                    recent_errors=0,
                    offering_key=offering.key if offering is not None else None,
                    live_spot_capacity=by_launch_config.get(option.launch_config_id, 0)
                    if spot
                    else 0,
                    probe_only=scored.admission == Admission.PROBE,
                )
            )
        return out


def score_pool(
    pool_id: str,
    choice: PoolChoice,
    configs: Sequence[LaunchConfigRecord],
    offering_of: OfferingOf,
    reading: Reading,
    now: float,
) -> PoolScore:
    offerings = {lc.launch_config_id: offering_of(lc) for lc in configs}
    views = config_views(pool_id, configs, offerings, reading)
    facts = reading.evidence.pools.get(pool_id, PoolFacts())
    scored = score(views, facts, now, beta=choice.beta, speed=choice.clock_speed)
    return PoolScore(choice, tuple(scored), offerings)


def report(pool_id: str, provider_id: str, result: PoolScore) -> None:
    """The pool's scores as a `launch-choice` log line and its weight gauges."""
    for scored in result.scored:
        LAUNCH_CHOICE_WEIGHT.labels(pool_id, scored.launch_config_id).set(scored.final_weight)
    log(
        "launch-choice",
        provider=provider_id,
        pool=pool_id,
        mode=str(result.choice.mode),
        configs=[
            {
                "launch_config": s.launch_config_id,
                "offering": (o.key if (o := result.offerings.get(s.launch_config_id)) else None),
                "admission": str(s.admission),
                "factor": round(s.factor, 4),
                "final_weight": round(s.final_weight, 4),
                "price_per_hour": s.price_per_hour,
                "effective_price": s.effective_price,
                "availability": round(s.availability, 4),
                "why": list(s.why),
            }
            for s in result.scored
        ],
    )


def export_cost(
    pool_id: str,
    configs: Sequence[LaunchConfigRecord],
    offering_of: OfferingOf,
    signals: Mapping[tuple[Offering, SignalKind], OfferingSignal],
    running: Mapping[str, int],
) -> float | None:
    """What the pool's running workers cost per hour at the prices wm holds (a worker whose
    offering has no price counts nothing); set as its gauge, and returned."""
    total = 0.0
    priced = False
    for lc in configs:
        workers = running.get(lc.launch_config_id, 0)
        offering = offering_of(lc)
        price = signal(signals, offering, SignalKind.PRICE) if offering is not None else None
        if price is not None:
            priced = True
            total += workers * price
    if not priced:
        return None
    POOL_COST_PER_HOUR.labels(pool_id).set(total)
    return total


# -- `wm pools explain` ------------------------------------------------------------------------


def explain(
    pool_id: str,
    choice: PoolChoice,
    configs: Sequence[LaunchConfigRecord],
    offering_of: OfferingOf,
    reading: Reading,
    running: Mapping[str, int],
    now: float,
) -> dict[str, object]:
    """Why the pool launches where it does: per launch config its offering, what wm holds of
    it, its bench, Taskcluster's weight and the weight the cost choice gives it (what the
    pass would launch by in "cost" mode; in "weights" mode it launches by Taskcluster's)."""
    result = score_pool(pool_id, choice, configs, offering_of, reading, now)
    by_id = {s.launch_config_id: s for s in result.scored}
    rows = []
    cost = 0.0
    priced = False
    for lc in configs:
        scored = by_id[lc.launch_config_id]
        offering = result.offerings.get(lc.launch_config_id)
        entry = reading.bench.get(offering) if offering is not None else None
        state = entry.state if entry is not None else BenchState()
        workers = running.get(lc.launch_config_id, 0)
        if scored.price_per_hour is not None:
            priced = True
            cost += workers * scored.price_per_hour
        rows.append(
            {
                "launch_config_id": lc.launch_config_id,
                "offering": offering.key if offering is not None else None,
                "price_per_hour": scored.price_per_hour,
                "availability": scored.availability,
                "preemption_rate": scored.preemption_rate,
                "ready_s": scored.ready_s,
                "registered_ratio": scored.registered_ratio,
                "effective_price": scored.effective_price,
                "admission": str(scored.admission),
                "bench_failures": state.failures,
                "benched_until": _moment(state.benched_until),
                "bench_code": entry.last_code if entry is not None else None,
                "weight": lc.weight,
                "final_weight": scored.final_weight,
                "running_workers": workers,
                "why": list(scored.why),
            }
        )
    return {
        "pool_id": pool_id,
        "mode": str(choice.mode),
        "beta": choice.beta,
        "spread": choice.spread,
        "cost_per_hour": cost if priced else None,
        "launch_configs": rows,
    }


# -- the bench after a pass's creates --------------------------------------------------------


@dataclass(frozen=True)
class CreateOutcome:
    """One create of an opted-in pool's launch config: whether the cloud took it, and if not
    what it said."""

    offering: Offering | None
    spec: LaunchSpec
    succeeded: bool
    error: CloudError | None = None


BENCHING = frozenset({ErrorCategory.CAPACITY, ErrorCategory.QUOTA})


def covers(scope: ErrorScope, offering: Offering, failed: Offering | None) -> bool:
    """Whether a refusal's scope holds for an offering. A family-wide quota is read as
    covering only the type that met it (a type's family is each cloud's own naming, which
    wm does not model yet): the scope benches less, never more, than the cloud refused."""
    if offering == failed:
        return True
    if scope.region is not None and scope.region != offering.region:
        return False
    if scope.zone is not None and scope.zone != offering.zone:
        return False
    if scope.instance_type is not None and scope.instance_type != offering.instance_type:
        return False
    if scope.family is not None and (
        failed is None or offering.instance_type != failed.instance_type
    ):
        return False
    return scope.market is None or scope.market == offering.market


def bench_after(
    bench: Mapping[Offering, BenchEntry],
    offerings: Iterable[Offering],
    probed: Iterable[Offering],
    outcomes: Sequence[CreateOutcome],
    scope_of: Callable[[CloudError, LaunchSpec], ErrorScope | None],
    now: float,
    speed: float = 1.0,
) -> dict[Offering, BenchEntry]:
    """The bench rows a pass's creates leave, for the opted-in pools' offerings: a success
    clears its offering; a capacity or quota refusal benches every offering its scope covers
    (once a pass however many creates met it: the TTL grows with failing passes, not with
    workers); a zone the cloud names as having capacity is un-benched for its type; a probe
    sent and neither taken nor refused stays the window's probe. Only changed rows."""
    known = set(offerings)
    state = {o: bench.get(o, BenchEntry(BenchState())) for o in known}
    changed: dict[Offering, BenchEntry] = {}
    for offering in probed:
        if offering in state:
            entry = state[offering]
            changed[offering] = BenchEntry(
                offering_bench.after_probe(entry.state, now), entry.last_code
            )
    refused: dict[Offering, tuple[ErrorScope, str]] = {}
    succeeded: set[Offering] = set()
    hinted: set[Offering] = set()
    for outcome in outcomes:
        if outcome.succeeded:
            if outcome.offering is not None:
                succeeded.add(outcome.offering)
            continue
        error = outcome.error
        if error is None or error.category not in BENCHING:
            continue
        scope = scope_of(error, outcome.spec)
        if scope is None:
            continue
        for offering in known:
            if covers(scope, offering, outcome.offering):
                refused.setdefault(offering, (scope, error.code))
        hinted |= {o for o in offering_bench.unbenched_by_hint(scope) if o in known}
    for offering, (scope, code) in refused.items():
        if offering in succeeded:
            continue  # the cloud gave some: not out of capacity, whatever else it refused
        start = changed.get(offering, state[offering])
        ttl = offering_bench.first_ttl_s(scope, code)
        changed[offering] = BenchEntry(
            offering_bench.after_refusal(start.state, now, ttl, speed), code
        )
    for offering in (succeeded | hinted) - set(refused):
        entry = changed.get(offering, state[offering])
        if entry.state != BenchState():
            changed[offering] = BenchEntry(offering_bench.after_success(entry.state))
    for offering in succeeded & set(refused):
        changed[offering] = BenchEntry(offering_bench.after_success(state[offering].state))
    return {o: e for o, e in changed.items() if e != bench.get(o, BenchEntry(BenchState()))}


def probes(result: PoolScore, launched: Mapping[str, int]) -> list[Offering]:
    """The offerings a pass sent their window's probe to."""
    return [
        offering
        for s in result.scored
        if s.admission == Admission.PROBE
        and launched.get(s.launch_config_id, 0) > 0
        and (offering := result.offerings.get(s.launch_config_id)) is not None
    ]


def log_bench(provider_id: str, changes: Mapping[Offering, BenchEntry], **context: str) -> None:
    """An `offering-bench` line per bench row a pass or a scan wrote."""
    for offering, entry in changes.items():
        log(
            "offering-bench",
            provider=provider_id,
            offering=offering.key,
            failures=entry.state.failures,
            benched_until=entry.state.benched_until,
            code=entry.last_code,
            **context,
        )


def log_failed(provider_id: str, pool_id: str) -> None:
    log("launch-choice-failed", logging.ERROR, exc_info=True, provider=provider_id, pool=pool_id)


def _moment(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="seconds")


def bench_after_failed_launches(
    engine: Engine,
    provider_id: str,
    failures: Sequence[tuple[LaunchConfigRecord, CloudError]],
    offering_of: OfferingOf,
    scope_of: Callable[[CloudError, LaunchSpec], ErrorScope | None],
    now: float,
    speed: float = 1.0,
) -> dict[Offering, BenchEntry]:
    """Bench what launches the cloud failed after accepting them say (a scan finds those: an
    ARM deployment's AllocationFailed, a GCE insert operation's pool exhausted) as a refused
    create's would: the same rules, for the failed launch configs' offerings. Returns the rows
    written."""
    outcomes = []
    for lc, error in failures:
        spec = LaunchSpec(
            launch_config_id=lc.launch_config_id,
            region=lc.region,
            capacity_per_worker=lc.capacity_per_worker,
            launch_config=lc.configuration,
        )
        outcomes.append(CreateOutcome(offering_of(lc), spec, False, error))
    offerings = {o.offering for o in outcomes if o.offering is not None}
    if not offerings:
        return {}
    bench = offering_state.read_bench(engine, provider_id)
    changes = bench_after(bench, offerings, (), outcomes, scope_of, now, speed)
    offering_state.write_bench(engine, provider_id, changes)
    return changes
