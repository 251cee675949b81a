"""GCE's signal APIs in the simulated GCE, in Google's own JSON, from the cloud's SignalValues
(wmsim/signals.py: a market's values, else a static table):

- Cloud Billing Catalog `GET /v1/services/6F81-5844-456A/skus` (Compute Engine's service id),
  paged by pageSize/pageToken: per region and family a core-hour and a GiB-hour SKU, on-demand
  and spot (usageType "Preemptible"), priced so that the family's representative machine type
  (the market's first of that family in the region, else `<family>-standard-8`) costs exactly
  what the values say; other types of the family follow from their shapes
  (wm/providers/gcp/machine_shapes.py), as GCE prices them.
- `POST /compute/v1/projects/{p}/regions/{r}/advice/capacity`: a recommendation per zone and
  machine type asked for, its `obtainability` (0..1) and `estimatedUptime` ("3600s").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from wm.providers.gcp.machine_shapes import FAMILY_WORDS, shape, sku_description
from wmsim.gcp.errors import ApiError, invalid
from wmsim.gcp.rest import json_response
from wmsim.signals import (
    FORBIDDEN,
    GARBAGE,
    GARBAGE_BODY,
    ON_DEMAND,
    SPOT,
    Offering,
    SignalFates,
    SignalValues,
)

KIND = "gcp"  # the market's name of this cloud
COMPUTE_SERVICE = "6F81-5844-456A"  # Compute Engine in the Billing Catalog
SIGNAL_OPERATIONS = frozenset({"skus.list", "advice.capacity"})
SPOT_SHARE = 0.3
DEFAULT_SIGNAL_TYPES = ("e2-standard-4", "n2-standard-8", "n1-standard-4", "c2-standard-16")
DEFAULT_REGIONS = ("us-central1", "us-east1", "us-west1", "europe-west4", "northamerica-northeast1")
DEFAULT_ZONE_LETTERS = ("a", "b", "c", "f")
RAM_SHARE = 7.5  # a GiB-hour costs about this share of a core-hour (GCE's N2: 0.0316 / 0.0042)
SKU_PAGE_MAX = 5000
NANOS = 1_000_000_000
UPTIME_MAX_S = 30 * 86_400.0


def _money(amount: float) -> dict[str, Any]:
    units = int(amount)
    return {"currencyCode": "USD", "units": str(units), "nanos": round((amount - units) * NANOS)}


def _region_words(region: str) -> str:
    if region.startswith(("us-", "northamerica-", "southamerica-")):
        return "Americas"
    if region.startswith(("europe-", "me-", "africa-")):
        return "EMEA"
    return "APAC"


def _uptime_s(seconds: float) -> int:
    """Whole seconds, a VM that is never pre-empted reported as lasting UPTIME_MAX_S."""
    return round(min(seconds, UPTIME_MAX_S)) if math.isfinite(seconds) else round(UPTIME_MAX_S)


class GceSignals:
    """SimGce's signal routes (state on SimGce, wmsim/gcp/gce.py)."""

    signals: SignalValues
    signal_fates: SignalFates
    _lock: threading.RLock

    def _signal_fault(self, operation: str) -> Response | None:
        fate = self.signal_fates.next(operation)
        if fate == FORBIDDEN:
            permission = (
                "billing.skus.list" if operation == "skus.list" else "compute.advice.capacity"
            )
            raise ApiError(403, "forbidden", f"Required '{permission}' permission", domain="global")
        if fate == GARBAGE:
            return Response(GARBAGE_BODY, status=200, mimetype="application/json")
        return None

    # -- the Billing Catalog --------------------------------------------------------------------

    def _skus_list(self, request: Request, service: str) -> Response:
        if (fault := self._signal_fault("skus.list")) is not None:
            return fault
        if service != COMPUTE_SERVICE:
            return json_response({"skus": [], "nextPageToken": ""})
        skus = self._skus()
        try:
            size = min(int(request.args.get("pageSize") or SKU_PAGE_MAX), SKU_PAGE_MAX)
            start = int(request.args.get("pageToken") or 0)
        except ValueError as error:
            raise invalid("pageToken", request.args.get("pageToken"), str(error)) from None
        page = skus[start : start + size]
        token = str(start + size) if start + size < len(skus) else ""
        return json_response({"skus": page, "nextPageToken": token})

    def _skus(self) -> list[dict[str, Any]]:
        known = self.signals.known()
        regions = self.signals.regions(DEFAULT_REGIONS)
        stamp = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        skus = []
        for region in regions:
            for family in FAMILY_WORDS:
                representative = next(
                    (
                        o.instance_type
                        for o in known
                        if o.region == region and o.instance_type.startswith(f"{family}-")
                    ),
                    f"{family}-standard-8",
                )
                rep_shape = shape(representative)
                if rep_shape is None:
                    continue
                for market in (ON_DEMAND, SPOT):
                    price = self.signals.price(Offering(KIND, region, None, representative, market))
                    core = price / (rep_shape.vcpus + rep_shape.memory_gib / RAM_SHARE)
                    for resource, unit_price, unit in (
                        ("Core", core, "h"),
                        ("Ram", core / RAM_SHARE, "GiBy.h"),
                    ):
                        sku_id = f"{family.upper()}-{resource.upper()}-{market.upper()}-{region}"
                        skus.append(
                            {
                                "name": f"services/{COMPUTE_SERVICE}/skus/{sku_id}",
                                "skuId": sku_id,
                                "description": sku_description(
                                    family, resource, market == SPOT, _region_words(region)
                                ),
                                "category": {
                                    "serviceDisplayName": "Compute Engine",
                                    "resourceFamily": "Compute",
                                    "resourceGroup": "CPU" if resource == "Core" else "RAM",
                                    "usageType": "Preemptible" if market == SPOT else "OnDemand",
                                },
                                "serviceRegions": [region],
                                "pricingInfo": [
                                    {
                                        "effectiveTime": stamp,
                                        "pricingExpression": {
                                            "usageUnit": unit,
                                            "displayQuantity": 1,
                                            "tieredRates": [
                                                {
                                                    "startUsageAmount": 0,
                                                    "unitPrice": _money(unit_price),
                                                }
                                            ],
                                            "usageUnitDescription": "hour"
                                            if unit == "h"
                                            else "gibibyte hour",
                                            "baseUnit": "s" if unit == "h" else "By.s",
                                            "baseUnitDescription": "second",
                                            "baseUnitConversionFactor": 3600,
                                        },
                                        "currencyConversionRate": 1,
                                    }
                                ],
                                "serviceProviderName": "Google",
                            }
                        )
        return skus

    # -- capacity advice ------------------------------------------------------------------------

    def _advice_capacity(self, request: Request, project: str, region: str) -> Response:
        if (fault := self._signal_fault("advice.capacity")) is not None:
            return fault
        body = request.get_json(force=True, silent=True) or {}
        selections = (body.get("instanceFlexibilityPolicy") or {}).get("instanceSelections") or {}
        types = [t for s in selections.values() for t in (s.get("machineTypes") or [])]
        if not types:
            raise invalid(
                "instanceFlexibilityPolicy.instanceSelections",
                {},
                "At least one machine type is required.",
            )
        model = ((body.get("instanceProperties") or {}).get("scheduling") or {}).get(
            "provisioningModel", "STANDARD"
        )
        zones = self._advice_zones(
            region, (body.get("distributionPolicy") or {}).get("zones") or []
        )
        size = int(body.get("size") or 1)
        recommendations = []
        for zone in zones:
            for machine_type in types:
                o = Offering(
                    KIND, region, zone, machine_type, SPOT if model == "SPOT" else ON_DEMAND
                )
                recommendations.append(
                    {
                        "scores": {
                            "obtainability": round(self.signals.obtainability(o), 3),
                            "estimatedUptime": f"{_uptime_s(self.signals.estimated_uptime_s(o))}s",
                        },
                        "shards": [
                            {
                                "zone": zone,
                                "machineType": machine_type,
                                "instanceCount": size,
                                "provisioningModel": model,
                            }
                        ],
                    }
                )
        return json_response({"recommendations": recommendations})

    def _advice_zones(self, region: str, asked: Sequence[dict[str, Any]]) -> list[str]:
        named = [str(z.get("zone", "")).rsplit("/", 1)[-1] for z in asked if z.get("zone")]
        if named:
            return named
        known = sorted({o.zone for o in self.signals.known() if o.region == region and o.zone})
        return known or [f"{region}-{letter}" for letter in DEFAULT_ZONE_LETTERS[:3]]
