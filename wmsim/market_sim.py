"""A market the simulated clouds obey (issue 40): which creates they grant, which running spot
VMs they reclaim, and what each VM costs.

Off unless a scenario is named (`[sim] market = "S1"`, or POST /_sim/market): without one every
create is decided as before and nothing is billed. With one, each sim holds a `SimMarket` over
the pure `wmsim.market.Market` (its scenario and seed), on the market's own clock: seconds since
the market was attached times `speed` (a compressed clock for benchmarks), plus `start_s`.

- Creates: a sim asks `grant` for the offering (cloud, region, zone, type, market) a create
  names; an offering the scenario does not list is not governed (granted, never billed). A
  refusal says whether the quota or the spare capacity stopped it and which other zones of the
  region have the type to spare; each sim answers it in its own cloud's shape and place.
- Pre-emption: `reclaims` draws, from the market's hazard over the time since the last look,
  which running spot VMs the cloud takes back; the sim then pre-empts them through its own
  path (EC2 Server.SpotInstanceTermination, GCE preempted, Azure eviction) after the cloud's
  notice, so its scanners see real pre-emptions.
- Billing: the market's ledger, per VM from the accepted create to its delete request or
  pre-emption, per second with a 60 s minimum, at the offering's price in effect each second.
  (EC2 and GCE start billing when the VM runs; the sims' boot times are seconds, so the ledger
  starts at the accepted create, as launch-choice-research §8(c) proposes.) GET /_sim/ledger
  gives the total, per pool and per launch config (read from wm's tags on each VM).

Every sim calls this under its own lock; `SimMarket` holds its own too (the sims serve requests
on many threads).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wm.providers.base import TAG_LAUNCH_CONFIG, TAG_POOL
from wmsim.behaviour import Preemptions
from wmsim.market import Market, SimOffering

SPOT = "spot"
ON_DEMAND = "on-demand"
CAPACITY = "capacity"
QUOTA = "quota"
SWEEP_STEP_S = 60.0  # market seconds per reclaim draw: the market's own tick
SWEEP_MIN_S = 5.0  # market seconds between draws (a draw costs one per running spot VM)


@dataclass(frozen=True)
class MarketSettings:
    """A market scenario as a sim is told to obey it."""

    scenario: str  # a name under wmsim/market/scenarios or a path to a scenario file
    seed: int = 1
    speed: float = 1.0  # market seconds per real second
    start_s: float = 0.0  # the market's time when it is attached

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> MarketSettings:
        unknown = set(body) - {"scenario", "seed", "speed", "start_s"}
        if unknown:
            raise ValueError(f"unknown market settings: {sorted(unknown)}")
        speed = float(body.get("speed", 1.0))
        if speed <= 0:
            raise ValueError("market speed must be above 0")
        return cls(
            str(body["scenario"]),
            int(body.get("seed", 1)),
            speed,
            float(body.get("start_s", 0.0)),
        )


@dataclass(frozen=True)
class Refusal:
    """Why the market refuses a create, for the sim to answer in its cloud's shape."""

    reason: str  # CAPACITY or QUOTA
    offering: SimOffering
    # Other zones of the region that have the type to spare for this create (EC2's message,
    # GCE's zonesAvailable).
    zones_with_capacity: tuple[str, ...] = ()
    offered: bool = True  # False: the place holds none of it at all now (a dry spell)
    quota_limit: int = 0  # instances the quota allows (QUOTA)
    quota_used: int = 0  # instances it counts now


@dataclass(frozen=True)
class Grant:
    """A create the market decided: `count` VMs of `offering` (None: not governed) or a
    refusal."""

    offering: SimOffering | None
    count: int
    refusal: Refusal | None = None


@dataclass(frozen=True)
class _Held:
    kind: str
    offering: SimOffering


@dataclass
class SimMarket:
    """One sim's market: the scenario's state on the market's clock, what the sim holds in it."""

    settings: MarketSettings
    clock: Callable[[], float] = time.monotonic
    market: Market = field(init=False)
    _attached_at: float = field(init=False)
    _held: dict[str, _Held] = field(init=False, default_factory=dict)
    _tags: dict[str, dict[str, str]] = field(init=False, default_factory=dict)  # ever billed
    # Running spot VMs not yet chosen for reclaim, by cloud and offering.
    _spot: dict[str, dict[SimOffering, set[str]]] = field(
        init=False, default_factory=lambda: defaultdict(lambda: defaultdict(set))
    )
    _swept: dict[str, float] = field(init=False, default_factory=dict)
    lock: threading.RLock = field(init=False, default_factory=threading.RLock)
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.market = Market.from_scenario(self.settings.scenario, self.settings.seed)
        self._attached_at = self.clock()
        self._rng = random.Random(f"reclaims:{self.settings.seed}")

    def now(self) -> float:
        """The market's time (seconds since its scenario starts)."""
        elapsed = self.clock() - self._attached_at
        return self.settings.start_s + elapsed * self.settings.speed

    def real_s(self, market_s: float) -> float:
        """Real seconds that take this many market seconds."""
        return market_s / self.settings.speed

    # -- creates -----------------------------------------------------------------------------

    def offering(
        self, kind: str, region: str, zone: str | None, instance_type: str, spot: bool
    ) -> SimOffering | None:
        """The market's offering a create names; with no zone, the one the cloud would pick
        (the region's zoneless offering, else its zone with the most to spare). None: the
        scenario does not list it, and the market does not govern it."""
        market = SPOT if spot else ON_DEMAND
        with self.lock:
            now = self.now()
            same = [
                o
                for o in self.market.offerings
                if (o.cloud, o.region, o.instance_type, o.market)
                == (kind, region, instance_type, market)
            ]
            if zone is not None:
                return next((o for o in same if o.zone == zone), None)
            zoneless = next((o for o in same if o.zone is None), None)
            if zoneless is not None or not same:
                return zoneless
            return max(sorted(same, key=lambda o: o.key), key=lambda o: self.market.spare(o, now))

    def grant(self, offering: SimOffering | None, minimum: int, maximum: int) -> Grant:
        """Decide a create of `minimum`..`maximum` VMs (all or nothing when they are equal).
        Granted VMs count as in use until `started` bills them or `release` gives them back."""
        if offering is None:
            return Grant(None, maximum)
        with self.lock:
            now = self.now()
            granted = self.market.try_launch(offering, maximum, now, all_or_nothing=False)
            if granted >= minimum:
                return Grant(offering, granted)
            self.market.release(offering, granted)
            return Grant(offering, 0, self._refusal(offering, minimum, now))

    def check(self, offering: SimOffering | None, count: int) -> Refusal | None:
        """How a create of `count` would be refused now (None: it would be granted), taking
        nothing: a deployment's validation asks before anything is made."""
        if offering is None:
            return None
        with self.lock:
            now = self.now()
            if self.market.refusal(offering, count, now) is None:
                return None
            return self._refusal(offering, count, now)

    def release(self, offering: SimOffering | None, count: int) -> None:
        """Give back granted VMs the cloud did not make after all."""
        if offering is not None and count > 0:
            with self.lock:
                self.market.release(offering, count)

    def _refusal(self, o: SimOffering, count: int, now: float) -> Refusal:
        code = self.market.refusal(o, count, now)
        quota = self._quota(o)
        if quota is not None and code == self.market.cloud(o).quota_code:
            return Refusal(QUOTA, o, quota_limit=quota, quota_used=self._used(o))
        zones = sorted(
            {
                other.zone
                for other in self.market.offerings
                if other.zone is not None
                and other.zone != o.zone
                and (other.cloud, other.region, other.instance_type, other.market)
                == (o.cloud, o.region, o.instance_type, o.market)
                and self.market.spare(other, now) >= count
            }
        )
        return Refusal(
            CAPACITY,
            o,
            zones_with_capacity=tuple(zones),
            offered=self.market.capacity(o, now) > 0,
        )

    def _quota(self, o: SimOffering) -> int | None:
        limits = [
            q.instances
            for q in self.market.scenario.quotas
            if (q.cloud, q.region, q.market) == (o.cloud, o.region, o.market)
        ]
        return min(limits) if limits else None

    def _used(self, o: SimOffering) -> int:
        return sum(
            1
            for h in self._held.values()
            if (h.offering.cloud, h.offering.region, h.offering.market)
            == (o.cloud, o.region, o.market)
        )

    # -- what runs ---------------------------------------------------------------------------

    def started(
        self, kind: str, key: str, offering: SimOffering | None, tags: Mapping[str, str]
    ) -> None:
        """A granted VM the cloud made, billed from now; `key` is how the sim pre-empts it."""
        if offering is None:
            return
        with self.lock:
            if key in self._held:
                return
            self._held[key] = _Held(kind, offering)
            self._tags[key] = dict(tags)
            if offering.market == SPOT:
                self._spot[kind][offering].add(key)
            self.market.start(key, offering, self.now())

    def stopped(self, key: str) -> None:
        """The VM was deleted, pre-empted or vanished: billing ends, its capacity is free."""
        with self.lock:
            held = self._held.pop(key, None)
            if held is not None:
                self._spot[held.kind][held.offering].discard(key)
                self.market.stop(key, self.now())

    def reclaims(self, kind: str) -> list[str]:
        """The keys of running spot VMs of this cloud the market takes back since the last
        call (each once): draws from the hazard of each offering, a market tick at a time."""
        with self.lock:
            now = self.now()
            since = self._swept.get(kind, self.settings.start_s)
            if now - since < SWEEP_MIN_S:
                return []  # a request a moment after the last: nothing worth a draw
            self._swept[kind] = now
            chosen: list[str] = []
            t = since
            while t < now:
                dt = min(SWEEP_STEP_S, now - t)
                chosen += self._reclaim_step(kind, t + dt, dt)
                t += dt
            return chosen

    def _reclaim_step(self, kind: str, t: float, dt: float) -> list[str]:
        chosen = []
        running = self._spot[kind]
        for offering in sorted((o for o in running if running[o]), key=lambda o: o.key):
            count = self.market.reclaims(offering, len(running[offering]), t, dt, self._rng)
            if count <= 0:
                continue
            keys = sorted(running[offering])
            for key in self._rng.sample(keys, min(count, len(keys))):
                running[offering].discard(key)  # doomed: pre-empted after the notice
                chosen.append(key)
        return chosen

    # -- billing -----------------------------------------------------------------------------

    def ledger(self, kind: str) -> dict[str, Any]:
        """What this cloud billed so far: every VM it holds or held, and the sums by pool and
        by launch config (wm's tags), in dollars."""
        with self.lock:
            now = self.now()
            ledger = self.market.ledger
            rows = []
            by_pool: dict[str, float] = defaultdict(float)
            by_config: dict[str, float] = defaultdict(float)
            for key, entry in ledger.entries.items():
                if entry.offering.cloud != kind:
                    continue
                cost = ledger.instance_cost(key, self.market.price_segments, now)
                tags = self._tags.get(key, {})
                pool = tags.get(TAG_POOL, "")
                config = tags.get(TAG_LAUNCH_CONFIG, "")
                by_pool[pool] += cost
                by_config[f"{pool}/{config}"] += cost
                rows.append(
                    {
                        "id": key,
                        "offering": entry.offering.key,
                        "pool": pool,
                        "launch_config": config,
                        "start_s": entry.start,
                        "stop_s": entry.stop,
                        "billed_s": ledger.billed_s(key, now),
                        "cost": cost,
                    }
                )
            return {
                "now_s": now,
                "total": sum(row["cost"] for row in rows),
                "by_pool": dict(by_pool),
                "by_launch_config": dict(by_config),
                "instances": rows,
            }

    def describe(self) -> dict[str, Any]:
        s = self.settings
        return {
            "scenario": s.scenario,
            "seed": s.seed,
            "speed": s.speed,
            "start_s": s.start_s,
            "now_s": self.now(),
        }


class Locked:
    """A market whose every method runs under the sim's market lock: the pure Market moves its
    state as it is read (`advance`), and the signal APIs read it from their own threads."""

    def __init__(self, market: Market, lock: threading.RLock) -> None:
        self._market = market
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._market, name)
        if not callable(value):
            return value

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return value(*args, **kwargs)

        return locked


class MarketBound:
    """What a simulated cloud adds to obey a market: `use_market`, the reclaims it turns into
    its own pre-emptions, and the /_sim/market and /_sim/ledger control routes. The sim sets
    `market_kind` (wm's kind name) and `market_notice_s`, and has `preemptions`."""

    market_kind: str
    # The cloud's notice before it takes a spot VM back, in market seconds: EC2's two-minute
    # spot interruption notice, GCE's and Azure's 30 s (preemption notice, Scheduled Events).
    market_notice_s: float = 30.0
    preemptions: Preemptions
    market: SimMarket | None = None
    market_initial: MarketSettings | None = None  # what `reset` goes back to

    def use_market(self, settings: MarketSettings | None, *, initial: bool = False) -> None:
        """Obey this market from now on (None: none). ScenarioError for a scenario that
        cannot be read."""
        self.market = None if settings is None else SimMarket(settings)
        if initial:
            self.market_initial = settings
        # The signal APIs (prices, scores) read the same market, when the sim serves them.
        signals = getattr(self, "signals", None)
        if signals is not None:
            market = self.market
            if market is None:
                signals.use_market(None, None)
            else:
                signals.use_market(Locked(market.market, market.lock), market.now)

    def _market_reclaims(self) -> None:
        """Schedule the pre-emption of the spot VMs the market takes back, after the cloud's
        notice (what their metadata service announces meanwhile)."""
        market = self.market
        if market is None:
            return
        keys = market.reclaims(self.market_kind)
        if keys:
            at = time.monotonic() + market.real_s(self.market_notice_s)
            for key in keys:
                self.preemptions.schedule_at(key, at)

    def _market_stopped(self, key: str) -> None:
        if self.market is not None:
            self.market.stopped(key)

    def _market_control(self, method: str, path: str, body: Any) -> tuple[int, Any] | None:
        """A /_sim/market or /_sim/ledger request's (status, JSON answer); None for others."""
        from wmsim.market import ScenarioError

        route = (method, path.rstrip("/"))
        market = self.market
        if route == ("GET", "/_sim/market"):
            return 200, market.describe() if market else {"scenario": None}
        if route == ("POST", "/_sim/market"):
            if not isinstance(body, Mapping):
                return 400, {"error": 'body must be {"scenario", "seed"?, "speed"?, "start_s"?}'}
            try:
                settings = None if body.get("scenario") is None else MarketSettings.from_json(body)
                self.use_market(settings)
            except (ScenarioError, ValueError, TypeError) as exc:
                return 400, {"error": str(exc)}
            return 200, self.market.describe() if self.market else {"scenario": None}
        if route == ("GET", "/_sim/ledger"):
            if market is None:
                return 200, {"now_s": None, "total": 0.0, "by_pool": {}, "by_launch_config": {},
                             "instances": []}  # fmt: skip
            return 200, market.ledger(self.market_kind)
        return None


def vcpus(instance_type: str) -> int:
    """The vCPUs a type's name suggests (n2-standard-4: 4, Standard_D8ads_v5: 8, m5.2xlarge:
    8), for quota messages that count cores; 1 when it says nothing."""
    if "." in instance_type:  # EC2: large 2, xlarge 4, Nxlarge 4N
        size = instance_type.split(".", 1)[1]
        if size.endswith("xlarge"):
            factor = size.removesuffix("xlarge")
            return 4 * (int(factor) if factor.isdigit() else 1)
        return 2
    numbers = re.findall(r"\d+", instance_type.replace("_v", "_"))
    gce = re.fullmatch(r"[a-z0-9]+-[a-z]+-(\d+)(-.*)?", instance_type)
    if gce:
        return int(gce.group(1))
    return int(numbers[0]) if numbers else 1
