"""What the simulated clouds' signal APIs serve: prices, placement scores, capacity advice and
eviction buckets per offering, and the faults a signal source can be forced into.

Each cloud serves them through its own real API shapes (wmsim/aws/signals.py,
wmsim/gcp/signals.py, wmsim/azure/signals.py); this module holds what the three share. The
values come from a market (wmsim/market: `Market`) when one is attached (`use_market`), else
from a static table: on-demand prices near the clouds' published list prices and a fixed spot
discount, ample capacity everywhere. So a sim without a market scenario answers plausibly and
behaves otherwise exactly as before.

Faults of a source beyond the common ones (throttle, 5xx and hang go through `Faults.force`):
`SignalFates` forces the next answers of one operation to be a 403 in the cloud's shape
("forbidden": no permission for it) or a body the client cannot parse ("garbage").
"""

from __future__ import annotations

import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

SPOT = "spot"
ON_DEMAND = "on-demand"
FORBIDDEN = "forbidden"
GARBAGE = "garbage"
SIGNAL_FATES = (FORBIDDEN, GARBAGE)
GARBAGE_BODY = b"<html><body>502 Bad Gateway \x00\xff{not json</body"

# On-demand $/h (Linux) for the types the tests, the demo and real pools use; others are
# priced from their size (`_size_price`).
ON_DEMAND_PRICES: dict[str, float] = {
    # EC2
    "t3.micro": 0.0104,
    "t3.small": 0.0208,
    "t3.medium": 0.0416,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "c5.2xlarge": 0.34,
    "c5.4xlarge": 0.68,
    "m5.2xlarge": 0.384,
    # GCE
    "e2-small": 0.0168,
    "e2-medium": 0.0335,
    "e2-standard-2": 0.067,
    "e2-standard-4": 0.134,
    "n2-standard-2": 0.0971,
    "n2-standard-4": 0.1942,
    "n2-standard-8": 0.3885,
    "c2-standard-16": 0.8352,
    "n1-standard-1": 0.0475,
    "n1-standard-2": 0.095,
    "n1-standard-4": 0.19,
    # Azure
    "Standard_B1s": 0.0104,
    "Standard_B2s": 0.0416,
    "Standard_D2s_v3": 0.096,
    "Standard_D4s_v3": 0.192,
    "Standard_F8s_v2": 0.338,
    "Standard_F16s_v2": 0.677,
    "Standard_D8s_v3": 0.384,
}
WINDOWS_SHARE = 1.45  # Windows meters cost about this much more (Azure's FxCI pools)
STATIC_SCORE = 9  # placement score where capacity is ample
STATIC_OBTAINABILITY = 0.9
STATIC_UPTIME_S = 6 * 3600.0
STATIC_EVICTION_BUCKET = "0-5"
# A market may be shared by the clouds of one `wmsim serve`, each answering on its own threads:
# its reads advance it, one at a time.
_MARKET_LOCK = threading.Lock()


@dataclass(frozen=True)
class Offering:
    """An offering as a signal API names it; the same fields as wmsim.market.SimOffering."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    market: str


class MarketLike(Protocol):
    """What the signal APIs read of a market (wmsim.market.Market)."""

    offerings: list[Any]

    def price(self, o: Any, now: float) -> float: ...
    def placement_score(self, o: Any, now: float) -> int: ...
    def obtainability(self, o: Any, now: float) -> float: ...
    def estimated_uptime_s(self, o: Any, now: float) -> float: ...
    def eviction_bucket(self, o: Any, now: float) -> str: ...


def _size_price(instance_type: str) -> float:
    """A stable, plausible price for a type the table lacks: by the vCPU count its name
    suggests (a trailing number), about $0.045 a vCPU-hour, with a little spread by name."""
    digits = "".join(c if c.isdigit() else " " for c in instance_type).split()
    vcpus = int(digits[-1]) if digits and int(digits[-1]) <= 192 else 2
    spread = 0.9 + (zlib.crc32(instance_type.encode()) % 200) / 1000
    return round(max(vcpus, 1) * 0.045 * spread, 4)


def on_demand_price(instance_type: str) -> float:
    return ON_DEMAND_PRICES.get(instance_type) or _size_price(instance_type)


class SignalValues:
    """The values one simulated cloud's signal APIs serve now."""

    def __init__(
        self,
        cloud: str,
        spot_share: float,
        default_types: Iterable[str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cloud = cloud  # the market's name of this cloud (its kind)
        self.spot_share = spot_share  # spot's share of on-demand in the static table
        self.default_types = tuple(default_types)  # listed where a request names no type
        self._clock = clock
        self._market: MarketLike | None = None
        self._lock = threading.Lock()

    def use_market(
        self, market: MarketLike | None, clock: Callable[[], float] | None = None
    ) -> None:
        """Serve this market's values (None: the static table again). `clock` is the market's
        time in seconds (its scenario starts at 0); by default the seconds since this call."""
        if clock is None:
            attached = time.monotonic()
            clock = lambda: time.monotonic() - attached  # noqa: E731
        with self._lock:
            self._market = market
            self._clock = clock

    @property
    def market(self) -> MarketLike | None:
        return self._market

    def _matching(self, o: Offering) -> list[Any]:
        """The market's offerings an API's offering stands for: itself, or with no zone every
        zone of its region (a regional price or score covers them all)."""
        from wmsim.market import SimOffering  # only with a market attached

        if o.zone is not None:
            return [SimOffering(o.cloud, o.region, o.zone, o.instance_type, o.market)]
        return [
            m
            for m in self.known_raw()
            if (m.region, m.instance_type, m.market) == (o.region, o.instance_type, o.market)
        ] or [SimOffering(o.cloud, o.region, None, o.instance_type, o.market)]

    def _ask(self, what: str, o: Offering, best: Callable[[list[Any]], Any] = max) -> Any:
        """The market's value (the best of the zones a zoneless offering stands for); None
        without a market or for what the market does not hold (the static value then)."""
        market = self._market
        if market is None:
            return None
        values = []
        with _MARKET_LOCK:
            for m in self._matching(o):
                try:
                    values.append(getattr(market, what)(m, self._clock()))
                except KeyError:
                    continue
        return best(values) if values else None

    def knows(self, o: Offering) -> bool:
        """Whether the APIs list this offering: any without a market, the market's own with."""
        if self._market is None:
            return True
        return any(
            (m.region, m.zone, m.instance_type) == (o.region, o.zone, o.instance_type)
            for m in self.known_raw()
        )

    def known_raw(self) -> list[Any]:
        market = self._market
        return [] if market is None else [m for m in market.offerings if m.cloud == self.cloud]

    def price(self, o: Offering) -> float:
        """$/h now."""
        if (value := self._ask("price", o, min)) is not None:
            return float(value)
        base = on_demand_price(o.instance_type)
        return round(base * self.spot_share, 6) if o.market == SPOT else base

    def placement_score(self, o: Offering) -> int:
        value = self._ask("placement_score", o)
        return STATIC_SCORE if value is None else int(value)

    def obtainability(self, o: Offering) -> float:
        value = self._ask("obtainability", o)
        return STATIC_OBTAINABILITY if value is None else float(value)

    def estimated_uptime_s(self, o: Offering) -> float:
        value = self._ask("estimated_uptime_s", o)
        return STATIC_UPTIME_S if value is None else float(value)

    def eviction_bucket(self, o: Offering) -> str:
        value = self._ask("eviction_bucket", o, lambda found: found[0])
        return STATIC_EVICTION_BUCKET if value is None else str(value)

    def known(self) -> list[Offering]:
        """The market's offerings of this cloud (none without a market: the APIs then answer
        for what they are asked about, or for the static table's types)."""
        return [
            Offering(o.cloud, o.region, o.zone, o.instance_type, o.market) for o in self.known_raw()
        ]

    def types_in(self, region: str) -> list[str]:
        """The instance types to list for a region when a request names none."""
        known = sorted({o.instance_type for o in self.known() if o.region == region})
        return known or list(self.default_types)

    def regions(self, default: Iterable[str]) -> list[str]:
        known = sorted({o.region for o in self.known()})
        return known or list(default)


class SignalFates:
    """Fates forced on the next answers of a signal operation: FORBIDDEN or GARBAGE."""

    def __init__(self) -> None:
        self._queues: dict[str, deque[str]] = {}
        self._lock = threading.Lock()

    def force(self, operation: str, *fates: str) -> None:
        for fate in fates:
            if fate not in SIGNAL_FATES:
                raise ValueError(f"a signal fate is one of {list(SIGNAL_FATES)}, not {fate!r}")
        with self._lock:
            self._queues.setdefault(operation, deque()).extend(fates)

    def next(self, operation: str) -> str | None:
        with self._lock:
            queue = self._queues.get(operation)
            return queue.popleft() if queue else None

    def clear(self) -> None:
        with self._lock:
            self._queues.clear()
