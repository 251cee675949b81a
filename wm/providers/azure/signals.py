"""Azure's signals for the launch choice, read through the provider's gate at its lowest
priority (background calls):

- price: Retail Prices (`https://prices.azure.com/api/retail/prices`, public, no SDK: read
  through the provider's HTTP session), one OData-filtered query a location for its sizes
  (`serviceName`, `priceType eq 'Consumption'`, `armRegionName`, the `armSkuName`s),
  following NextPageLink; spot meters are the skuNames ending " Spot", Windows meters the
  productNames ending " Windows" (the provider's `signals.os`); Azure prices a location, so
  every zone of it gets the location's price. Its own host, with no ARM quota: it still
  draws a read from the account's budget (CALL_CLASSES).
- pre-emption: Resource Graph `SpotResources`, the `skuspotevictionrate` rows of the
  locations and sizes wanted (one query), each `evictionRate` bucket ("0-5" ... "20+": the
  share of spot VMs evicted in a day of running) read at its middle as a rate per
  instance-hour. It counts against ARM's reads.

- availability: Compute Recommender's Spot Placement Score (azure-mgmt-computerecommender,
  a preview API), per location, size and, for zonal offerings, zone: "High", "Medium" or
  "Low" read as 0.9, 0.5, 0.2; at most 8 locations and 5 sizes a request, so one request per
  (up to 8 locations, up to 5 sizes); only for offerings of pools with demand. It counts
  against ARM's writes (a POST).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from wm.calls import CallClass
from wm.errors import SPOT, CloudError, ErrorCategory
from wm.kinds.azure import AzureProviderConfig
from wm.model import Offering, OfferingSignal, SignalKind
from wm.providers.gate import Gate
from wm.providers.signal_sources import DAY_S, Cadence, SignalSource, SourceGarbage

PRICES = SignalSource("RetailPrices_List", (SignalKind.PRICE,), Cadence.PRICE, DAY_S)
EVICTIONS = SignalSource("Resources_Query", (SignalKind.PREEMPTION,), Cadence.PREEMPTION, DAY_S)
SCORES = SignalSource(
    "SpotPlacementScores_Post",
    (SignalKind.AVAILABILITY,),
    Cadence.CAPACITY,
    900.0,
    demand_only=True,
)
SOURCES = (PRICES, EVICTIONS, SCORES)
# Retail Prices is its own public host with no ARM quota; it still draws a read, so that every
# call wm makes is paced by one bucket or another (a daily read costs nothing that matters).
CALL_CLASSES = {
    "RetailPrices_List": (CallClass.READ,),
    "Resources_Query": (CallClass.READ,),
    "SpotPlacementScores_Post": (CallClass.WRITE,),
}
PLACEMENT_LOCATIONS_MAX = 8
PLACEMENT_SIZES_MAX = 5
PLACEMENT_AVAILABILITY = {"High": 0.9, "Medium": 0.5, "Low": 0.2}
PLACEMENT_COUNT = 10  # VMs asked about: one fixed request per set, as on EC2
RETAIL_ENDPOINT = "https://prices.azure.com"
RETAIL_API_VERSION = "2023-01-01-preview"
RETAIL_PAGES_MAX = 50
EVICTION_TYPE = "microsoft.compute/skuspotevictionrate/location"
# Each bucket's middle share of spot VMs evicted in a day; "20+" read as 25 %.
EVICTION_SHARE_A_DAY = {"0-5": 0.025, "5-10": 0.075, "10-15": 0.125, "15-20": 0.175, "20+": 0.25}


def eviction_rate_per_h(bucket: str) -> float:
    """A bucket as pre-emptions per instance-hour (a constant hazard over a day)."""
    share = EVICTION_SHARE_A_DAY.get(bucket.strip())
    if share is None:
        raise SourceGarbage(f"eviction rate bucket {bucket!r}")
    return -math.log(1 - share) / 24


def retail_filter(region: str, sizes: Sequence[str]) -> str:
    alternatives = " or ".join(f"armSkuName eq '{size}'" for size in sizes)
    return (
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and "
        f"armRegionName eq '{region}' and ({alternatives})"
    )


def _quoted(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "") + "'" for v in values)


class AzureSignals:
    """The signal reads of one Azure provider (wm.providers.signal_sources.SignalCollector)."""

    sources = SOURCES

    def __init__(self, config: AzureProviderConfig, gate: Gate, clients: Any) -> None:
        self.provider_id = config.id
        self._config = config
        self.gate = gate
        self._clients = clients

    def collect(self, source: str, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        spot = [o for o in offerings if o.market == SPOT]
        if source == PRICES.name:
            return self._prices(offerings)
        if source == EVICTIONS.name:
            return self._evictions(spot)
        if source == SCORES.name:
            return self._placement_scores(spot)
        raise KeyError(f"Azure has no signal source {source!r}")

    # -- Retail Prices ----------------------------------------------------------------------

    def _prices(self, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        by_region: dict[str, list[Offering]] = defaultdict(list)
        for offering in offerings:
            by_region[offering.region].append(offering)
        windows = self._config.signals.os == "windows"
        now = datetime.now(UTC)
        found = []
        for region, wanted in sorted(by_region.items()):
            sizes = sorted({o.instance_type for o in wanted})
            prices: dict[tuple[str, bool], float] = {}
            url: str | None = f"{self._config.endpoint or RETAIL_ENDPOINT}/api/retail/prices"
            params: dict[str, str] | None = {
                "api-version": RETAIL_API_VERSION,
                "$filter": retail_filter(region, sizes),
            }
            for _ in range(RETAIL_PAGES_MAX):
                if url is None:
                    break
                page = self.gate.call("RetailPrices_List", self._get, url, params, background=True)
                for item in _items(page):
                    name, product = str(item.get("skuName", "")), str(item.get("productName", ""))
                    if "Low Priority" in name or product.endswith(" Windows") != windows:
                        continue
                    try:
                        key = (str(item["armSkuName"]), name.endswith(" Spot"))
                        prices[key] = float(item["retailPrice"])
                    except (KeyError, TypeError, ValueError) as error:
                        raise SourceGarbage(f"a retail price item: {error}") from None
                url, params = page.get("NextPageLink"), None  # the link carries the query
            for offering in wanted:
                price = prices.get((offering.instance_type, offering.market == SPOT))
                if price is not None:
                    found.append(
                        PRICES.signal(self.provider_id, offering, price, now, SignalKind.PRICE)
                    )
        return found

    def _get(self, url: str, params: dict[str, str] | None) -> dict[str, Any]:
        """One Retail Prices page; its HTTP errors as the gate's CloudErrors."""
        timeout_s = self._config.gate.timeout_s
        answer = self._clients.session.get(
            url, params=params, timeout=timeout_s, verify=self._config.ca_bundle or True
        )
        status = answer.status_code
        if status >= 400:
            if status == 429:
                category, code = ErrorCategory.THROTTLED, "TooManyRequests"
            elif status >= 500:
                category, code = ErrorCategory.TRANSIENT, f"HTTP{status}"
            else:
                category = ErrorCategory.BAD_CONFIG
                code = "Forbidden" if status in (401, 403) else f"HTTP{status}"
            raise CloudError(
                self.provider_id, category, code, answer.text[:200], operation=PRICES.name
            )
        try:
            body = answer.json()
        except ValueError as error:
            raise SourceGarbage(f"Retail Prices answered no JSON: {error}") from None
        if not isinstance(body, dict):
            raise SourceGarbage("Retail Prices answered no object")
        return body

    # -- Spot Placement Score ---------------------------------------------------------------

    def _placement_scores(self, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        locations = sorted({o.region for o in offerings})
        sizes = sorted({o.instance_type for o in offerings})
        zonal = any(o.zone is not None for o in offerings)
        client = self._clients.recommender
        scores: dict[tuple[str, str, str | None], float] = {}
        for where in _chunks(locations, PLACEMENT_LOCATIONS_MAX):
            for what in _chunks(sizes, PLACEMENT_SIZES_MAX):
                request = {
                    "desiredLocations": where,
                    "desiredSizes": [{"sku": size} for size in what],
                    "desiredCount": PLACEMENT_COUNT,
                    "availabilityZones": zonal,
                }
                answer = self.gate.call(
                    "SpotPlacementScores_Post",
                    client.spot_placement_scores.post,
                    where[0],
                    request,
                    background=True,
                )
                for item in answer.placement_scores or []:
                    value = PLACEMENT_AVAILABILITY.get(str(item.score))
                    if value is None or not item.region or not item.sku:
                        continue  # DataNotFoundOrStale, RestrictedSkuNotAvailable: neutral
                    key = (item.region.lower(), item.sku.lower(), item.availability_zone)
                    scores[key] = value
        now = datetime.now(UTC)
        found = []
        for offering in offerings:
            region, size = offering.region.lower(), offering.instance_type.lower()
            value = scores.get((region, size, offering.zone))
            if value is None and offering.zone is None:
                # Any zone will do: the best zone's score, else the region's.
                zoned = [v for (r, s, _), v in scores.items() if (r, s) == (region, size)]
                value = max(zoned, default=None)
            if value is None:
                value = scores.get((region, size, None))
            if value is not None:
                found.append(
                    SCORES.signal(self.provider_id, offering, value, now, SignalKind.AVAILABILITY)
                )
        return found

    # -- Resource Graph ---------------------------------------------------------------------

    def _evictions(self, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        if not offerings:
            return []
        from azure.mgmt.resourcegraph.models import QueryRequest

        locations = sorted({o.region for o in offerings})
        sizes = sorted({o.instance_type.lower() for o in offerings})
        query = (
            f"SpotResources | where type =~ '{EVICTION_TYPE}' "
            f"| where location in~ ({_quoted(locations)}) "
            f"| where sku.name in~ ({_quoted(sizes)})"
        )
        request = QueryRequest(
            subscriptions=[self._config.subscription_id],
            query=query,
            options={"resultFormat": "objectArray"},
        )
        client = self._clients.resource_graph
        answer = self.gate.call("Resources_Query", client.resources, request, background=True)
        rates: dict[tuple[str, str], float] = {}
        rows = answer.data if isinstance(answer.data, list) else None
        if rows is None:
            raise SourceGarbage("Resource Graph answered no rows")
        for row in rows:
            try:
                key = (str(row["location"]).lower(), str(row["sku"]["name"]).lower())
                rates[key] = eviction_rate_per_h(str(row["properties"]["evictionRate"]))
            except (KeyError, TypeError) as error:
                raise SourceGarbage(f"an eviction rate row: {error}") from None
        now = datetime.now(UTC)
        found = []
        for offering in offerings:
            rate = rates.get((offering.region.lower(), offering.instance_type.lower()))
            if rate is not None:
                found.append(
                    EVICTIONS.signal(self.provider_id, offering, rate, now, SignalKind.PREEMPTION)
                )
        return found

    def close(self) -> None:
        """The clients close with the provider."""


def _chunks(values: Sequence[str], size: int) -> list[list[str]]:
    return [list(values[i : i + size]) for i in range(0, len(values), size)]


def _items(page: dict[str, Any]) -> list[dict[str, Any]]:
    items = page.get("Items")
    if not isinstance(items, list):
        raise SourceGarbage("a Retail Prices page without Items")
    return [i for i in items if isinstance(i, dict)]


def make_signals(config: AzureProviderConfig, provider: Any) -> AzureSignals:
    """The provider's signal reads, through its gate and clients (wm/providers/__init__.py)."""
    return AzureSignals(config, provider.gate, provider.clients)
