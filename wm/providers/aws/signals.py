"""EC2's signals for the launch choice, read with boto3 through the provider's gate at its lowest
priority (background calls, drawing from the region's Describe bucket):

- price: DescribeSpotPriceHistory with StartTime now (one call a region, paged), the latest
  spot price per zone and type; a zoneless offering gets the mean of its region's zones (EC2
  picks the zone). On-demand offerings get no price from it (neutral).
- availability: GetSpotPlacementScores in zone mode (SingleAvailabilityZone), one fixed
  request per region for the set of its spot types (a fixed request is never a "new
  configuration" EC2 limits per day), score / 10 per zone, a zoneless offering the best
  zone's. EC2 scores a set of fewer than three types low by design, so such a region gets no
  score (neutral) rather than a misleading one; zone ids are mapped to names with
  DescribeAvailabilityZones, read once a region.
"""

from __future__ import annotations

import statistics
import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from wm.calls import CallClass, Draw
from wm.errors import SPOT
from wm.kinds.aws import AwsProviderConfig
from wm.model import Offering, OfferingSignal, SignalKind
from wm.providers.aws.clients import build_client
from wm.providers.gate import Gate
from wm.providers.signal_sources import Cadence, SignalSource, SourceGarbage

PRICES = SignalSource("DescribeSpotPriceHistory", (SignalKind.PRICE,), Cadence.PRICE, 600.0)
SCORES = SignalSource(
    "GetSpotPlacementScores",
    (SignalKind.AVAILABILITY,),
    Cadence.CAPACITY,
    900.0,
    demand_only=True,
)
SOURCES = (PRICES, SCORES)
# The operations these reads send, for the provider's gate table.
CALL_CLASSES = {
    "DescribeSpotPriceHistory": (CallClass.DESCRIBE,),
    "GetSpotPlacementScores": (CallClass.DESCRIBE,),
    "DescribeAvailabilityZones": (CallClass.DESCRIBE,),
}
PRODUCT = {"linux": "Linux/UNIX", "windows": "Windows"}
SCORE_MIN_TYPES = 3  # below this EC2 scores a set low whatever the capacity
SCORE_TARGET_CAPACITY = 10  # instances: one fixed request per type set, so never a new one
PRICE_PAGE_SIZE = 1000
PRICE_PAGES_MAX = 20  # a region's page chain longer than this is garbage, not prices


class AwsSignals:
    """The signal reads of one AWS provider (wm.providers.signal_sources.SignalCollector)."""

    sources = SOURCES

    def __init__(self, config: AwsProviderConfig, gate: Gate) -> None:
        self.provider_id = config.id
        self._config = config
        self.gate = gate
        self._clients: dict[str, Any] = {}
        self._zone_names: dict[str, dict[str, str]] = {}  # region -> zone id -> zone name
        self._lock = threading.Lock()

    def collect(self, source: str, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        spot = [o for o in offerings if o.market == SPOT]
        by_region: dict[str, list[Offering]] = defaultdict(list)
        for offering in spot:
            by_region[offering.region].append(offering)
        if source not in (PRICES.name, SCORES.name):
            raise KeyError(f"EC2 has no signal source {source!r}")
        read = self._prices if source == PRICES.name else self._scores
        found: list[OfferingSignal] = []
        for region, wanted in sorted(by_region.items()):
            found += read(region, wanted)
        return found

    # -- prices -----------------------------------------------------------------------------

    def _prices(self, region: str, wanted: Sequence[Offering]) -> list[OfferingSignal]:
        types = sorted({o.instance_type for o in wanted})
        request: dict[str, Any] = {
            "InstanceTypes": types,
            "ProductDescriptions": [PRODUCT[self._config.signals.os]],
            "StartTime": datetime.now(UTC),
            "MaxResults": PRICE_PAGE_SIZE,
        }
        latest: dict[tuple[str, str], tuple[datetime, float]] = {}
        for _ in range(PRICE_PAGES_MAX):
            page = self._call(region, "DescribeSpotPriceHistory", **request)
            for item in page.get("SpotPriceHistory", []):
                try:
                    key = (str(item["AvailabilityZone"]), str(item["InstanceType"]))
                    stamp, price = item["Timestamp"], float(item["SpotPrice"])
                except (KeyError, TypeError, ValueError) as error:
                    raise SourceGarbage(f"a spot price item without its fields: {error}") from None
                if key not in latest or latest[key][0] < stamp:
                    latest[key] = (stamp, price)
            token = page.get("NextToken")
            if not token:
                break
            request["NextToken"] = token
        now = datetime.now(UTC)
        found = []
        for offering in wanted:
            if offering.zone is not None:
                hit = latest.get((offering.zone, offering.instance_type))
                prices = [hit[1]] if hit else []
            else:
                prices = [p for (_, t), (_, p) in latest.items() if t == offering.instance_type]
            if prices:
                found.append(
                    PRICES.signal(self.provider_id, offering, statistics.fmean(prices), now)
                )
        return found

    # -- placement scores -------------------------------------------------------------------

    def _scores(self, region: str, wanted: Sequence[Offering]) -> list[OfferingSignal]:
        types = sorted({o.instance_type for o in wanted})
        if len(types) < SCORE_MIN_TYPES:
            return []
        answer = self._call(
            region,
            "GetSpotPlacementScores",
            InstanceTypes=types,
            TargetCapacity=SCORE_TARGET_CAPACITY,
            SingleAvailabilityZone=True,
            RegionNames=[region],
        )
        names = self._zones(region)
        by_zone: dict[str, float] = {}
        for item in answer.get("SpotPlacementScores", []):
            try:
                zone = names.get(str(item["AvailabilityZoneId"]))
                score = int(item["Score"])
            except (KeyError, TypeError, ValueError) as error:
                raise SourceGarbage(f"a placement score without its fields: {error}") from None
            if zone is not None:
                by_zone[zone] = min(1.0, max(0.0, score / 10))
        now = datetime.now(UTC)
        found = []
        for offering in wanted:
            if offering.zone is None:
                value = max(by_zone.values(), default=None)
            else:
                value = by_zone.get(offering.zone)
            if value is not None:
                found.append(SCORES.signal(self.provider_id, offering, value, now))
        return found

    def _zones(self, region: str) -> dict[str, str]:
        with self._lock:
            known = self._zone_names.get(region)
        if known is not None:
            return known
        answer = self._call(region, "DescribeAvailabilityZones")
        names = {
            str(z["ZoneId"]): str(z["ZoneName"])
            for z in answer.get("AvailabilityZones", [])
            if "ZoneId" in z and "ZoneName" in z
        }
        if names:
            with self._lock:
                self._zone_names[region] = names
        return names

    # -- calls ------------------------------------------------------------------------------

    def _call(self, region: str, operation: str, **request: Any) -> dict[str, Any]:
        client = self._client(region)
        method = getattr(client, _snake(operation))
        spend = tuple(Draw(region, c) for c in CALL_CLASSES[operation])
        return self.gate.call(operation, method, spend=spend, background=True, **request)

    def _client(self, region: str) -> Any:
        with self._lock:
            client = self._clients.get(region)
            if client is None:
                client = self._clients[region] = build_client(self._config, region)
            return client

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


def _snake(operation: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in operation).lstrip("_")


def make_signals(config: AwsProviderConfig, provider: Any) -> AwsSignals:
    """The provider's signal reads, through its gate (wm/providers/__init__.py calls this)."""
    return AwsSignals(config, provider.gate)
