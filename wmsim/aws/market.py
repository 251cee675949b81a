"""RunInstances under a market (wmsim/market_sim.py): the offering a request names and EC2's
refusals when the market says no, in EC2's words and XML error shape.

- Capacity: InsufficientInstanceCapacity, HTTP 500 (EC2 lists it among its server error codes),
  naming the zones of the region that do have the type ("... You can currently get m5.large
  capacity by not specifying an Availability Zone in your request or choosing us-east-1b,
  us-east-1c.", aws-parallelcluster#2716). All or nothing when MinCount = MaxCount; otherwise
  as many as fit, refused only below MinCount.
- Quota: MaxSpotInstanceCountExceeded for spot, InstanceLimitExceeded for on-demand, HTTP 400.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wmsim.aws.wire import Answer, ec2_error
from wmsim.market_sim import QUOTA, Refusal

KIND = "aws"
ROOT_VOLUME_TYPE = "gp2"  # the sim's images' root volumes


def offering_params(request: Mapping[str, Any]) -> tuple[str | None, str | None, bool]:
    """(zone, instance type, spot) of a decoded RunInstances."""
    zone = (request.get("Placement") or {}).get("AvailabilityZone") or None
    market = (request.get("InstanceMarketOptions") or {}).get("MarketType")
    return zone, request.get("InstanceType"), market == "spot"


def instance_tags(request: Mapping[str, Any]) -> dict[str, str]:
    """The tags a RunInstances puts on its instances."""
    for spec in request.get("TagSpecifications") or []:
        if spec.get("ResourceType") == "instance":
            return {str(t.get("Key")): str(t.get("Value", "")) for t in spec.get("Tags") or []}
    return {}


def refusal_answer(refusal: Refusal, asked: int, asked_zone: bool) -> Answer:
    o = refusal.offering
    if refusal.reason == QUOTA:
        if o.market == "spot":
            return ec2_error(
                400, "MaxSpotInstanceCountExceeded", "Max spot instance count exceeded"
            )
        return ec2_error(
            400,
            "InstanceLimitExceeded",
            f"You have requested more instances ({refusal.quota_used + asked}) than your current "
            f"instance limit of {refusal.quota_limit} allows for the specified instance type. "
            "Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment "
            "to this limit.",
        )
    # A request that names no zone hears of the zones that would take its root volume
    # (fedora-copr/copr#3279: "... in zones with support for 'gp3' volumes.").
    where = (
        f"the Availability Zone you requested ({o.zone})"
        if asked_zone
        else f"zones with support for '{ROOT_VOLUME_TYPE}' volumes"
    )
    message = (
        f"We currently do not have sufficient {o.instance_type} capacity in {where}. Our system "
        "will be working on provisioning additional capacity."
    )
    if asked_zone and refusal.zones_with_capacity:
        message += (
            f" You can currently get {o.instance_type} capacity by not specifying an "
            "Availability Zone in your request or choosing "
            f"{', '.join(refusal.zones_with_capacity)}."
        )
    return ec2_error(500, "InsufficientInstanceCapacity", message)
