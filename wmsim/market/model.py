"""The simulated market: what each offering costs, how much spare capacity it has and how
often it reclaims spot, moving over simulated time; pure and seeded.

Time only moves forward, in fixed ticks of TICK_S, whatever times a caller passes: two markets
made from the same scenario and seed go through the same prices, regimes and events whoever
launches in them, so the arms of a benchmark meet the same market. What the arms do changes
only their own instances (spare capacity is what the place has minus what is in use).

- Price: spot = on-demand x a share within the cloud's band (clouds.toml), one share per zone
  (EC2) or region (GCE, Azure), starting at the band's middle x the offering's `price` x a
  seeded spread, then drifting (mean-reverting in log space) at the cloud's step.
- Spare capacity: each place (a zone, or a zoneless region) moves between ample, tight and
  dry (a Markov chain in ticks, or scripted events that override it), so every type in a zone
  runs short together; an offering has `capacity` x (1, 0.08, 0) spare instances, less its
  instances in use.
- Hazard: the cloud's rate x the offering's `hazard` x (1 + 24·(1 - spare share)²), so it
  rises as spare capacity falls (the spare share: spare over what the offering holds when
  ample, so an unused offering in an ample place runs at exactly the cloud's rate x
  `hazard`); entering a dry spell adds a spike that reclaims the spell's `reclaim` share of
  running spot within RECLAIM_WINDOW_S (Spot-and-Scoot: co-interruptions in one type and zone
  come within three minutes).
- Signals (placement score, obtainability, eviction bucket, estimated uptime) are derived from
  that state with seeded noise, so a policy reading them can be misled as in life.
"""

from __future__ import annotations

import bisect
import math
import random
from collections import Counter, defaultdict

from wmsim.market.ledger import Ledger
from wmsim.market.scenario import (
    CloudModel,
    OfferingSpec,
    Scenario,
    SimOffering,
    load,
)

TICK_S = 60.0
RECLAIM_WINDOW_S = 180.0
REGIME_SPARE = {"ample": 1.0, "tight": 0.08, "dry": 0.0}
# On-demand runs short far less often than spot: a dry spell still leaves some.
ON_DEMAND_SPARE = {"ample": 1.0, "tight": 0.6, "dry": 0.3}
HAZARD_RISE = 24.0
PRICE_PULL = 0.05  # how fast a drifting price returns to its level, per step
EVICTION_BUCKETS = ((5, "0-5"), (10, "5-10"), (15, "10-15"), (20, "15-20"))
SIGNAL_NOISE_S = 300.0  # a signal's noise is redrawn every five minutes
SPOT = "spot"
MAX_SPAN_S = 400 * 86400.0  # no scenario runs longer: a later time is an epoch second by mistake


class Market:
    def __init__(self, scenario: Scenario, seed: int, *, origin: float = 0.0) -> None:
        self.scenario = scenario
        self.seed = seed
        # The time the scenario starts at: every `now` is read as now - origin (0: times are
        # seconds since the start; a served market passes the epoch second it started at).
        self.origin = origin
        self.offerings: list[SimOffering] = [s.offering for s in scenario.offerings]
        self.ledger = Ledger()
        self._spec: dict[str, OfferingSpec] = {s.offering.key: s for s in scenario.offerings}
        self._rng = random.Random(f"market:{seed}")
        self._t = 0.0
        self._in_use: Counter[str] = Counter()
        self._running: dict[str, SimOffering] = {}
        self._places = sorted({o.place for o in self.offerings})
        self._chain = dict.fromkeys(self._places, "ample")
        self._regime_hist: dict[str, list[tuple[float, str]]] = {
            p: [(0.0, "ample")] for p in self._places
        }
        self._spike: dict[str, tuple[float, float]] = {}  # place -> (start, reclaim share)
        # when a place went dry (seconds since the origin), in order
        self.dry_starts: list[tuple[float, str]] = []
        self._idio = {
            o.key: 0.8 + 0.4 * self._rng.random() for o in self.offerings
        }  # offerings in one place differ a little in depth
        self._level: dict[str, float] = {}
        self._x: dict[str, float] = {}
        self._share_hist: dict[str, list[tuple[float, float]]] = {}
        for spec in scenario.offerings:
            key = self._price_key(spec.offering)
            if key in self._level:
                continue
            low, high = self.cloud(spec.offering).spot_band
            spread = scenario.price_spread * (2 * self._rng.random() - 1)
            share = min(high, max(low, (low + high) / 2 * spec.price * (1 + spread)))
            self._level[key] = self._x[key] = math.log(share)
            self._share_hist[key] = [(0.0, share)]
        self._apply_events(0.0)

    @classmethod
    def from_scenario(cls, name_or_path: str, seed: int, *, origin: float = 0.0) -> Market:
        return cls(load(name_or_path), seed, origin=origin)

    def _rel(self, now: float) -> float:
        rel = now - self.origin
        if rel > MAX_SPAN_S:
            raise ValueError(
                f"time {now:.0f} is {rel:.0f} s after the market's origin ({self.origin:.0f}):"
                " pass seconds since the scenario's start, or make the market with"
                " origin=<the epoch second it starts at>"
            )
        return max(0.0, rel)

    # -- time ------------------------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Regime switches, price drift and scripted events up to `now`, tick by tick."""
        rel = self._rel(now)
        while self._t + TICK_S <= rel:
            self._t += TICK_S
            self._step(self._t)

    def _step(self, t: float) -> None:
        regimes = self.scenario.regimes
        if regimes.enabled:
            for place in self._places:
                state = self._chain[place]
                dwell = {"ample": regimes.ample_min, "tight": regimes.tight_min}.get(
                    state, regimes.dry_min
                )
                if self._rng.random() < TICK_S / (dwell * 60):
                    if state == "ample":
                        self._chain[place] = "tight"
                    elif state == "tight":
                        dry = self._rng.random() < regimes.dry_share
                        self._chain[place] = "dry" if dry else "ample"
                    else:
                        self._chain[place] = "tight"
        for key in sorted(self._x):
            cloud = self.scenario.clouds[key.split("/", 1)[0]]
            sigma = cloud.price_sigma * self.scenario.drift
            if sigma <= 0 or t % cloud.price_step_s >= TICK_S:
                continue
            x = self._x[key] + PRICE_PULL * (self._level[key] - self._x[key])
            x += sigma * self._rng.gauss(0.0, 1.0)
            low, high = cloud.spot_band
            self._x[key] = min(math.log(high), max(math.log(low), x))
            self._share_hist[key].append((t, math.exp(self._x[key])))
        self._apply_events(t)

    def _apply_events(self, t: float) -> None:
        for place in self._places:
            regime, reclaim = self._chain[place], self.scenario.regimes.reclaim
            for event in self.scenario.events:
                if event.place == place and event.at_s <= t < event.at_s + event.for_s:
                    regime, reclaim = event.regime, event.reclaim
            history = self._regime_hist[place]
            if history[-1][1] != regime:
                history.append((t, regime))
                if regime == "dry":
                    self._spike[place] = (t, reclaim)
                    self.dry_starts.append((t, place))

    # -- state -----------------------------------------------------------------------------

    def cloud(self, o: SimOffering) -> CloudModel:
        return self.scenario.clouds[o.cloud]

    def spec(self, o: SimOffering) -> OfferingSpec:
        return self._spec[o.key]

    def regime(self, place: str, now: float) -> str:
        self.advance(now)
        history = self._regime_hist[place]
        rel = self._rel(now)
        if rel >= history[-1][0]:
            return history[-1][1]
        i = bisect.bisect_right([t for t, _ in history], rel) - 1
        return history[max(0, i)][1]

    def _price_key(self, o: SimOffering) -> str:
        zone = o.zone if self.cloud(o).price_scope == "zone" else None
        return SimOffering(o.cloud, o.region, zone, o.instance_type, SPOT).key

    def _share(self, o: SimOffering, t: float) -> float:
        history = self._share_hist[self._price_key(o)]
        i = bisect.bisect_right(history, (t, math.inf)) - 1
        return history[max(0, i)][1]

    def price(self, o: SimOffering, now: float) -> float:
        """$ per instance-hour."""
        self.advance(now)
        base = self.cloud(o).on_demand[o.instance_type]
        return base if o.market != SPOT else base * self._share(o, self._rel(now))

    def price_segments(self, o: SimOffering, start: float, end: float) -> list[tuple]:
        """[(from, to, $/h)] covering start..end, for the ledger (prices known up to now)."""
        base = self.cloud(o).on_demand[o.instance_type]
        if o.market != SPOT:
            return [(start, end, base)]
        history = self._share_hist[self._price_key(o)]
        out, at, stop = [], self._rel(start), self._rel(end)
        i = max(0, bisect.bisect_right(history, (at, math.inf)) - 1)
        while at < stop:
            nxt = history[i + 1][0] if i + 1 < len(history) else math.inf
            upto = min(stop, nxt)
            out.append((at + self.origin, upto + self.origin, base * history[i][1]))
            at, i = upto, i + 1
        return out

    def cost(self, until: float) -> float:
        """Dollars the ledger bills up to `until`."""
        self.advance(until)
        return self.ledger.cost(self.price_segments, until)

    def capacity(self, o: SimOffering, now: float) -> int:
        """Instances the place holds for this offering now, in use or not."""
        regime = self.regime(o.place, now)
        table = REGIME_SPARE if o.market == SPOT else ON_DEMAND_SPARE
        return int(self.spec(o).capacity * self._idio[o.key] * table[regime])

    def spare(self, o: SimOffering, now: float) -> int:
        return max(0, self.capacity(o, now) - self._in_use[o.key])

    def _ample(self, o: SimOffering) -> int:
        """What the offering holds with its place ample: what its spare share is a share of.
        (Not the scenario's `capacity` alone: an offering shallower than that by its seeded
        depth would otherwise count as short, and run at a higher hazard, with nothing used.)"""
        return max(1, int(self.spec(o).capacity * self._idio[o.key]))

    def hazard(self, o: SimOffering, now: float, *, extra_in_use: int = 0) -> float:
        """Pre-emptions per instance-hour (`extra_in_use`: as if that many more instances
        of it ran, for a reader weighing what its launches would do to the hazard)."""
        if o.market != SPOT:
            return 0.0
        spec = self.spec(o)
        spare = max(0, self.spare(o, now) - extra_in_use)
        short = 1.0 - min(1.0, spare / self._ample(o))
        rate = self.cloud(o).hazard_per_h * spec.hazard * (1 + HAZARD_RISE * short**2)
        spike = self._spike.get(o.place)
        rel = self._rel(now)
        if spike and spike[1] > 0 and spike[0] <= rel < spike[0] + RECLAIM_WINDOW_S:
            rate += -math.log(1 - min(spike[1], 0.999)) / (RECLAIM_WINDOW_S / 3600)
        return rate

    def _quota_left(self, o: SimOffering) -> int | None:
        left = None
        for q in self.scenario.quotas:
            if (q.cloud, q.region, q.market) == (o.cloud, o.region, o.market):
                used = sum(
                    n
                    for key, n in self._in_use.items()
                    if SimOffering.parse(key).region == o.region
                    and SimOffering.parse(key).cloud == o.cloud
                    and SimOffering.parse(key).market == o.market
                )
                room = max(0, q.instances - used)
                left = room if left is None else min(left, room)
        return left

    def obtainable(self, o: SimOffering, now: float) -> int:
        """Instances a create could be granted now: spare capacity within the spot quota."""
        quota = self._quota_left(o)
        spare = self.spare(o, now)
        return spare if quota is None else min(spare, quota)

    def refusal(self, o: SimOffering, count: int, now: float) -> str | None:
        """The code a create of `count` instances would be refused with now (None: granted
        in full): the quota's when the quota is what stops it, else the capacity one."""
        quota = self._quota_left(o)
        if quota is not None and quota < count:
            return self.cloud(o).quota_code
        if self.spare(o, now) < count:
            return self.cloud(o).capacity_code
        return None

    def zones_with_capacity(self, o: SimOffering, now: float) -> list[str]:
        """The other zones of o's region where its type and market could be had now: what
        EC2's InsufficientInstanceCapacity message and GCE's zonesAvailable name."""
        return sorted(
            other.zone
            for other in self.offerings
            if other.zone
            and other.zone != o.zone
            and (other.cloud, other.region, other.instance_type, other.market)
            == (o.cloud, o.region, o.instance_type, o.market)
            and self.spare(other, now) > 0
        )

    def try_launch(self, o: SimOffering, count: int, now: float, *, all_or_nothing: bool) -> int:
        """Instances granted (and held in use until `stop`); all or none when asked."""
        room = self.spare(o, now)
        quota = self._quota_left(o)
        if quota is not None:
            room = min(room, quota)
        granted = min(count, room)
        if all_or_nothing and granted < count:
            granted = 0
        self._in_use[o.key] += granted
        return granted

    def start(self, instance_id: str, o: SimOffering, now: float) -> None:
        """Bill a granted instance from now."""
        self.ledger.start(instance_id, o, now)
        self._running[instance_id] = o

    def stop(self, instance_id: str, now: float) -> None:
        """Stop billing it and give its capacity back."""
        o = self._running.pop(instance_id, None)
        if o is not None:
            self.ledger.stop(instance_id, now)
            self._in_use[o.key] -= 1

    def release(self, o: SimOffering, count: int) -> None:
        """Give back granted instances that were never started."""
        self._in_use[o.key] = max(0, self._in_use[o.key] - count)

    def reclaims(
        self, o: SimOffering, running: int, now: float, dt: float, rng: random.Random
    ) -> int:
        """How many of `running` instances the cloud pre-empts in the dt seconds after now."""
        p = 1.0 - math.exp(-self.hazard(o, now) * dt / 3600)
        if p <= 0:
            return 0
        return sum(rng.random() < p for _ in range(running))

    # -- signals: derived from the state, with noise ----------------------------------------

    def _noise(self, kind: str, o: SimOffering, now: float) -> random.Random:
        return random.Random(f"{self.seed}:{kind}:{o.key}:{int(now // SIGNAL_NOISE_S)}")

    def _spare_share(self, o: SimOffering, now: float) -> float:
        return min(1.0, self.spare(o, now) / self._ample(o))

    def placement_score(self, o: SimOffering, now: float) -> int:
        """1..10, as EC2's and Azure's Spot Placement Scores."""
        noisy = 1 + 9 * self._spare_share(o, now) + self._noise("sps", o, now).gauss(0, 1.2)
        return int(min(10, max(1, round(noisy))))

    def obtainability(self, o: SimOffering, now: float) -> float:
        """0..1, as GCE's capacity advice."""
        noisy = self._spare_share(o, now) + self._noise("obt", o, now).gauss(0, 0.12)
        return min(1.0, max(0.0, noisy))

    def _noisy_hazard(self, o: SimOffering, now: float) -> float:
        # A trailing, smoothed view: the state's hazard without a dry spell's spike.
        if o.market != SPOT:
            return 0.0
        spec = self.spec(o)
        short = 1.0 - self._spare_share(o, now)
        rate = self.cloud(o).hazard_per_h * spec.hazard * (1 + HAZARD_RISE * short**2)
        return rate * math.exp(self._noise("haz", o, now).gauss(0, 0.3))

    def eviction_bucket(self, o: SimOffering, now: float) -> str:
        """Azure's eviction-rate bucket: % of instances evicted in a day of running."""
        pct = 100 * (1 - math.exp(-self._noisy_hazard(o, now) * 24))
        for bound, name in EVICTION_BUCKETS:
            if pct < bound:
                return name
        return "20+"

    def estimated_uptime_s(self, o: SimOffering, now: float) -> float:
        """GCE's estimatedUptime: mean time to pre-emption."""
        rate = self._noisy_hazard(o, now)
        return math.inf if rate <= 0 else 3600.0 / rate


def dry_spells(market: Market) -> list[tuple[float, str]]:
    return list(market.dry_starts)


def places_in_use(offerings: list[SimOffering]) -> dict[str, list[SimOffering]]:
    out: dict[str, list[SimOffering]] = defaultdict(list)
    for o in offerings:
        out[o.place].append(o)
    return out
