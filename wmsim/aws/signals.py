"""EC2's signal APIs in the simulated EC2: DescribeSpotPriceHistory (in place of moto's constant
0.00001) and GetSpotPlacementScores, in EC2's own XML, from the cloud's SignalValues
(wmsim/signals.py: a market's values, else a static table).

DescribeSpotPriceHistory answers, per availability zone of the region (or the one asked for)
and instance type asked for (or every type the values know in the region), the current price
as one item stamped now: what a `StartTime=now` request gets from EC2. GetSpotPlacementScores
answers 1..10 per region, or per zone id with SingleAvailabilityZone; as on EC2, a request
with fewer than three instance types scores low (at most 3), whatever the capacity.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any
from xml.sax.saxutils import escape

from wmsim.aws.wire import Answer, ec2_error
from wmsim.signals import (
    FORBIDDEN,
    GARBAGE,
    GARBAGE_BODY,
    SPOT,
    WINDOWS_SHARE,
    Offering,
    SignalFates,
    SignalValues,
)

SIGNAL_ACTIONS = frozenset({"DescribeSpotPriceHistory", "GetSpotPlacementScores"})
XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
FEW_TYPES_SCORE_MAX = 3  # EC2: "fewer than three instance types ... low score"
LINUX = "Linux/UNIX"
# Each product description's price, as a share of Linux's.
PRODUCT_SHARE = {
    LINUX: 1.0,
    "SUSE Linux": 1.1,
    "Red Hat Enterprise Linux": 1.2,
    "Windows": WINDOWS_SHARE,
}
KIND = "aws"  # the market's name of this cloud
SPOT_SHARE = 0.35  # spot's share of on-demand in the static table
DEFAULT_SIGNAL_TYPES = ("t3.small", "t3.medium", "m5.large", "m5.xlarge", "c5.large", "c5.xlarge")


def _listed(params: Mapping[str, str], name: str) -> list[str]:
    """A Query API list parameter (`Name.1`, `Name.2`, ...) in order."""
    pattern = re.compile(rf"^{re.escape(name)}\.(\d+)$")
    found = sorted((int(m.group(1)), v) for k, v in params.items() if (m := pattern.match(k)))
    return [v for _, v in found]


def _filters(params: Mapping[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for index in sorted({k.split(".")[1] for k in params if k.startswith("Filter.")}):
        name = params.get(f"Filter.{index}.Name")
        if name:
            out[name] = _listed(params, f"Filter.{index}.Value")
    return out


def _xml(action: str, inner: str) -> Answer:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{XMLNS}">'
        f"<requestId>{uuid.uuid4()}</requestId>{inner}</{action}Response>"
    ).encode()
    return Answer("200 OK", [("Content-Type", "text/xml;charset=UTF-8")], body)


def _price_item(
    zone: str, zone_id: str, instance_type: str, product: str, price: float, stamp: str
) -> str:
    return (
        "<item>"
        f"<availabilityZone>{zone}</availabilityZone>"
        f"<availabilityZoneId>{zone_id}</availabilityZoneId>"
        f"<instanceType>{escape(instance_type)}</instanceType>"
        f"<productDescription>{escape(product)}</productDescription>"
        f"<spotPrice>{price:.6f}</spotPrice>"
        f"<timestamp>{stamp}</timestamp>"
        "</item>"
    )


class Ec2Signals:
    """SimEc2's signal APIs (state on SimEc2, wmsim/aws/ec2.py)."""

    signals: SignalValues
    signal_fates: SignalFates
    _backend: Callable[[str], Any]  # moto's EC2 backend of a region (Ec2Lifecycle)

    def _zones(self, region: str) -> list[tuple[str, str]]:
        """(zone name, zone id) of the region, as moto's DescribeAvailabilityZones has them."""
        return [(z.name, z.zone_id) for z in self._backend(region).describe_availability_zones()]

    def _signal_answer(self, action: str, params: Mapping[str, str], region: str) -> Answer:
        fate = self.signal_fates.next(action)
        if fate == FORBIDDEN:
            return ec2_error(
                403,
                "UnauthorizedOperation",
                f"You are not authorized to perform this operation. (ec2:{action})",
            )
        if fate == GARBAGE:
            return Answer("200 OK", [("Content-Type", "text/xml;charset=UTF-8")], GARBAGE_BODY)
        if action == "DescribeSpotPriceHistory":
            return self._spot_price_history(params, region)
        return self._placement_scores(params, region)

    def _spot_price_history(self, params: Mapping[str, str], region: str) -> Answer:
        filters = _filters(params)
        types = _listed(params, "InstanceType") or filters.get("instance-type")
        wanted_zone = (
            params.get("AvailabilityZone") or (filters.get("availability-zone") or [None])[0]
        )
        zones = [z for z in self._zones(region) if wanted_zone in (None, z[0])]
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        products = _listed(params, "ProductDescription") or filters.get("product-description")
        items = []
        for instance_type in types or self.signals.types_in(region):
            for zone, zone_id in zones:
                offering = Offering(KIND, region, zone, instance_type, SPOT)
                if not self.signals.knows(offering):
                    continue  # a market's cloud offers only its own offerings
                for product in products or [LINUX]:
                    if product in PRODUCT_SHARE:
                        price = self.signals.price(offering) * PRODUCT_SHARE[product]
                        items.append(
                            _price_item(zone, zone_id, instance_type, product, price, stamp)
                        )
        inner = f"<spotPriceHistorySet>{''.join(items)}</spotPriceHistorySet><nextToken/>"
        return _xml("DescribeSpotPriceHistory", inner)

    def _placement_scores(self, params: Mapping[str, str], region: str) -> Answer:
        types = _listed(params, "InstanceType")
        if not types or not params.get("TargetCapacity"):
            return ec2_error(
                400, "MissingParameter", "InstanceTypes and TargetCapacity are required."
            )
        single_zone = params.get("SingleAvailabilityZone", "false").lower() == "true"
        items = []
        for name in _listed(params, "RegionName") or [region]:
            places = self._zones(name) if single_zone else [(None, None)]
            for zone, zone_id in places:
                # The best type's score: EC2 scores the set as a whole (any of them will do).
                score = max(
                    self.signals.placement_score(Offering(KIND, name, zone, t, SPOT)) for t in types
                )
                if len(types) < 3:
                    score = min(score, FEW_TYPES_SCORE_MAX)
                zone_part = f"<availabilityZoneId>{zone_id}</availabilityZoneId>" if zone else ""
                items.append(
                    f"<item><region>{name}</region>{zone_part}<score>{score}</score></item>"
                )
        inner = f"<spotPlacementScoreSet>{''.join(items)}</spotPlacementScoreSet>"
        return _xml("GetSpotPlacementScores", inner)
