"""Azure's signal APIs in the simulated ARM, in Azure's own JSON, from the cloud's SignalValues
(wmsim/signals.py: a market's values, else a static table):

- Retail Prices `GET /api/retail/prices` (prices.azure.com on Azure: public, no token), its
  OData `$filter` read for the `eq` terms Azure's clients send (`serviceName`,
  `armRegionName`, `armSkuName`, `priceType`, `skuName`, `productName`, terms joined by `and`,
  alternatives of one field by `or`), answered as `{"Items": [...], "NextPageLink", "Count"}`
  in pages of 100 (a page's NextPageLink carries `$skip`). Per region and size four meters:
  Linux and Windows ("... Series Windows"), regular and Spot (skuName "... Spot").
- Resource Graph `POST /providers/Microsoft.ResourceGraph/resources` (a token needed, as on
  ARM): a `SpotResources` query on `microsoft.compute/skuspotevictionrate/location` answers a
  row per location and size its `in~ (...)` lists name, with `properties.evictionRate`
  ("0-5", "5-10", ... "20+"); the sim reads those lists, not the rest of the KQL.
- Spot Placement Score `POST /subscriptions/{sub}/providers/Microsoft.Compute/locations/{l}/
  placementScores/spot/generate` (Compute Recommender, a token needed): per location, size
  and (with `availabilityZones`) zone "High", "Medium" or "Low", from the values' 1..10
  placement score, at most 8 locations and 5 sizes a request as on Azure.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from werkzeug.wrappers import Request, Response

from wmsim.azure.errors import ArmError
from wmsim.signals import (
    FORBIDDEN,
    GARBAGE,
    GARBAGE_BODY,
    ON_DEMAND,
    SPOT,
    WINDOWS_SHARE,
    Offering,
    SignalFates,
    SignalValues,
)

KIND = "azure"  # the market's name of this cloud
SPOT_SHARE = 0.2
DEFAULT_SIGNAL_TYPES = ("Standard_D2s_v3", "Standard_D4s_v3", "Standard_F8s_v2", "Standard_B2s")
DEFAULT_LOCATIONS = ("eastus", "westus2", "westeurope", "northeurope")
RETAIL_PRICES = "RetailPrices_List"
RESOURCE_GRAPH = "Resources_Query"
SPOT_PLACEMENT_SCORES = "SpotPlacementScores_Post"
PLACEMENT_LOCATIONS_MAX = 8  # Azure's limits on one request
PLACEMENT_SIZES_MAX = 5
RETAIL_PAGE_SIZE = 100
EVICTION_TYPE = "microsoft.compute/skuspotevictionrate/location"
_TERM = re.compile(r"(\w+)\s+eq\s+'((?:[^']|'')*)'", re.IGNORECASE)
_IN_LIST = re.compile(r"([\w.]+)\s+in~?\s*\(([^)]*)\)", re.IGNORECASE)


def _meter(size: str) -> str:
    """Azure's meter words for a size: Standard_D2s_v3 -> "D2s v3"."""
    return size.removeprefix("Standard_").replace("_", " ")


def _series(size: str) -> str:
    letters = re.match(r"[A-Za-z]+", size.removeprefix("Standard_"))
    return (letters.group(0) if letters else "D").upper()


def filter_terms(odata: str) -> dict[str, set[str]]:
    """field (lower case) -> the values an `eq` term allows; terms of one field are
    alternatives (`or`), of different fields all required (`and`)."""
    terms: dict[str, set[str]] = {}
    for field, value in _TERM.findall(odata):
        terms.setdefault(field.lower(), set()).add(value.replace("''", "'"))
    return terms


class ArmSignals:
    """SimArm's signal routes (state on SimArm, wmsim/azure/arm.py)."""

    signals: SignalValues
    signal_fates: SignalFates

    def _signal_fault(self, operation: str) -> Response | None:
        fate = self.signal_fates.next(operation)
        if fate == FORBIDDEN:
            raise ArmError(
                403,
                "AuthorizationFailed",
                f"The client does not have authorization to perform action {operation}.",
            )
        if fate == GARBAGE:
            return Response(GARBAGE_BODY, status=200, mimetype="application/json")
        return None

    # -- Retail Prices ------------------------------------------------------------------------

    def _retail_prices(self, request: Request) -> Response:
        if (fault := self._signal_fault(RETAIL_PRICES)) is not None:
            return fault
        odata = request.args.get("$filter", "")
        terms = filter_terms(odata)
        items = [item for item in self._retail_items(terms) if _matches(item, terms)]
        try:
            skip = int(request.args.get("$skip") or 0)
        except ValueError:
            raise ArmError(400, "BadRequest", "$skip must be an integer") from None
        page = items[skip : skip + RETAIL_PAGE_SIZE]
        following = None
        if skip + RETAIL_PAGE_SIZE < len(items):
            args = {k: v for k, v in request.args.items() if k != "$skip"}
            args["$skip"] = str(skip + RETAIL_PAGE_SIZE)
            following = f"{request.host_url.rstrip('/')}{request.path}?{urlencode(args)}"
        body = {
            "BillingCurrency": "USD",
            "CustomerEntityId": "Default",
            "CustomerEntityType": "Retail",
            "Items": page,
            "NextPageLink": following,
            "Count": len(page),
        }
        return Response(json.dumps(body), status=200, mimetype="application/json")

    def _retail_items(self, terms: dict[str, set[str]]) -> list[dict[str, Any]]:
        regions = sorted(terms.get("armregionname") or self.signals.regions(DEFAULT_LOCATIONS))
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT00:00:00Z")
        items = []
        for region in regions:
            sizes = sorted(terms.get("armskuname") or self.signals.types_in(region))
            for size in sizes:
                for market in (ON_DEMAND, SPOT):
                    linux = self.signals.price(Offering(KIND, region, None, size, market))
                    for windows in (False, True):
                        meter = _meter(size) + (" Spot" if market == SPOT else "")
                        product = f"Virtual Machines {_series(size)} Series" + (
                            " Windows" if windows else ""
                        )
                        price = round(linux * WINDOWS_SHARE if windows else linux, 6)
                        items.append(
                            {
                                "currencyCode": "USD",
                                "tierMinimumUnits": 0.0,
                                "retailPrice": price,
                                "unitPrice": price,
                                "armRegionName": region,
                                "location": region,
                                "effectiveStartDate": stamp,
                                "meterId": f"{region}-{size}-{market}-{int(windows)}",
                                "meterName": meter,
                                "productId": f"DZH318Z0{_series(size)}",
                                "skuId": f"DZH318Z0{_series(size)}/{size}",
                                "productName": product,
                                "skuName": meter,
                                "serviceName": "Virtual Machines",
                                "serviceId": "DZH313Z7MMC8",
                                "serviceFamily": "Compute",
                                "unitOfMeasure": "1 Hour",
                                "type": "Consumption",
                                "isPrimaryMeterRegion": True,
                                "armSkuName": size,
                            }
                        )
        return items

    # -- Spot Placement Score -----------------------------------------------------------------

    def _spot_placement_scores(self, location: str) -> Response:
        if (fault := self._signal_fault(SPOT_PLACEMENT_SCORES)) is not None:
            return fault
        body = self._body()
        locations = [str(x) for x in body.get("desiredLocations") or []]
        sizes = [str(x.get("sku", "")) for x in body.get("desiredSizes") or [] if x.get("sku")]
        if not locations or not sizes:
            raise ArmError(400, "BadRequest", "desiredLocations and desiredSizes are required.")
        if len(locations) > PLACEMENT_LOCATIONS_MAX or len(sizes) > PLACEMENT_SIZES_MAX:
            raise ArmError(
                400,
                "BadRequest",
                f"At most {PLACEMENT_LOCATIONS_MAX} locations and {PLACEMENT_SIZES_MAX} sizes.",
            )
        zonal = bool(body.get("availabilityZones"))
        scores = []
        for region in locations:
            for size in sizes:
                zones = [
                    o.zone
                    for o in self.signals.known()
                    if (o.region, o.instance_type, o.market) == (region, size, SPOT) and o.zone
                ]
                if zonal and not zones and self.signals.market is None:
                    zones = ["1", "2", "3"]
                for zone in zones if zonal and zones else [None]:
                    score = self.signals.placement_score(Offering(KIND, region, zone, size, SPOT))
                    entry = {
                        "sku": size,
                        "region": region,
                        "score": placement_words(score),
                        "isQuotaAvailable": True,
                    }
                    if zone is not None:
                        entry["availabilityZone"] = zone
                    scores.append(entry)
        answer = {**body, "placementScores": scores}
        return Response(json.dumps(answer), status=200, mimetype="application/json")

    # -- Resource Graph -----------------------------------------------------------------------

    def _resource_graph(self, request: Request) -> Response:
        if (fault := self._signal_fault(RESOURCE_GRAPH)) is not None:
            return fault
        body = request.get_json(silent=True) or {}
        query = str(body.get("query") or "")
        if not query.strip():
            raise ArmError(400, "BadRequest", "Please provide below info when asking for support")
        rows: list[dict[str, Any]] = []
        if "spotresources" in query.lower() and EVICTION_TYPE in query.lower():
            lists = {
                field.lower(): [v.strip().strip("'\"") for v in values.split(",") if v.strip()]
                for field, values in _IN_LIST.findall(query)
            }
            locations = lists.get("location") or self.signals.regions(DEFAULT_LOCATIONS)
            for location in locations:
                sizes = lists.get("sku.name") or self.signals.types_in(location)
                for size in sizes:
                    canonical = _canonical_size(size)
                    bucket = self.signals.eviction_bucket(
                        Offering(KIND, location, None, canonical, SPOT)
                    )
                    rows.append(
                        {
                            "id": f"/providers/Microsoft.Compute/skuSpotEvictionRate/{size.lower()}"
                            f"/location/{location}",
                            "name": size.lower(),
                            "type": EVICTION_TYPE,
                            "location": location,
                            "sku": {"name": size.lower()},
                            "properties": {"evictionRate": bucket},
                        }
                    )
        answer = {
            "totalRecords": len(rows),
            "count": len(rows),
            "data": rows,
            "facets": [],
            "resultTruncated": "false",
        }
        return Response(json.dumps(answer), status=200, mimetype="application/json")


def placement_words(score: int) -> str:
    """A 1..10 placement score in Azure's words."""
    return "High" if score >= 7 else "Medium" if score >= 4 else "Low"


def _canonical_size(size: str) -> str:
    """standard_d2s_v3 -> Standard_D2s_v3: Resource Graph lower-cases sizes, prices do not."""
    if not size.lower().startswith("standard_"):
        return size
    rest = size[len("standard_") :]
    return "Standard_" + rest[:1].upper() + rest[1:]


def _matches(item: dict[str, Any], terms: dict[str, set[str]]) -> bool:
    fields = {k.lower(): v for k, v in item.items()}
    fields["pricetype"] = item["type"]
    for field, allowed in terms.items():
        value = fields.get(field)
        if value is None or not any(str(value).lower() == a.lower() for a in allowed):
            return False
    return True
