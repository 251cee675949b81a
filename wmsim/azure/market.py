"""A VM's create under a market (wmsim/market_sim.py): Azure's refusals when the market says
no, where and how Azure gives them.

- Allocation: the PUT is accepted (201) and the provisioning fails: the async operation ends
  Failed with AllocationFailed (ZonalAllocationFailed for a VM pinned to a zone), the VM shows
  ProvisioningState/failed/<code>, and an ARM deployment's VM operation fails with it ("Azure
  VM allocation failures": "Allocation failed. We do not have sufficient capacity for the
  requested VM size in this region.").
- A size the location holds none of now (a dry spell): SkuNotAvailable, answered at once with
  409 Conflict, as Azure answers it ("... 'Following SKUs have failed for Capacity
  Restrictions: Standard_B2s' is currently not available in location 'eastus' ...";
  terraform's "performing CreateOrUpdate: unexpected status 409 (409 Conflict) with error:
  SkuNotAvailable", Azure-Samples/azuresandbox#70).
- Quota: OperationNotAllowed, 409, "exceeding approved LowPriorityCores quota" for Spot VMs and
  the Total Regional Cores quota for the others, counted in cores.
- In an ARM deployment, quota and SKU restrictions fail its validation: the PUT is answered
  400 InvalidTemplateDeployment with QuotaExceeded or SkuNotAvailable as inner errors
  (fabragaMS/ADPE2E#4, MicrosoftLearning's "The deployment validation failed"); allocation
  fails while it runs, in the VM's deployment operation.
"""

from __future__ import annotations

from typing import Any

from wmsim.azure.errors import ArmError
from wmsim.market_sim import QUOTA, Refusal, vcpus

KIND = "azure"
GUIDANCE = "Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"


def offering_params(body: dict[str, Any]) -> tuple[str | None, str | None, bool]:
    """(zone, VM size, spot) of a VM body: a zone ("1") only when it pins exactly one, as wm's
    offering of the launch config names it (wm/kinds/azure.py)."""
    props = body.get("properties") or {}
    zones = body.get("zones") or []
    zone = str(zones[0]) if isinstance(zones, list) and len(zones) == 1 else None
    size = (props.get("hardwareProfile") or {}).get("vmSize")
    spot = str(props.get("priority", "")).lower() in ("spot", "low")
    return zone, None if size is None else str(size), spot


def synchronous_refusal(refusal: Refusal, location: str) -> ArmError | None:
    """The 409 Azure answers the PUT with, or None when the PUT is accepted and its
    provisioning fails (`allocation_failure`)."""
    o = refusal.offering
    if refusal.reason == QUOTA:
        cores = vcpus(o.instance_type)
        which = "LowPriorityCores" if o.market == "spot" else "Total Regional Cores"
        limit, used = refusal.quota_limit * cores, refusal.quota_used * cores
        return ArmError(
            409,
            "OperationNotAllowed",
            f"Operation could not be completed as it results in exceeding approved {which} "
            f"quota. Additional details - Deployment Model: Resource Manager, Location: "
            f"{location}, Current Limit: {limit}, Current Usage: {used}, Additional Required: "
            f"{cores}, (Minimum) New Limit Required: {used + cores}. Submit a request for Quota "
            "increase at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/"
            "UsageAndQuota.ReactView by specifying parameters listed in the 'Details' section "
            "for deployment to succeed.",
        )
    if not refusal.offered:
        return ArmError(
            409,
            "SkuNotAvailable",
            "The requested VM size for resource 'Following SKUs have failed for Capacity "
            f"Restrictions: {o.instance_type}' is currently not available in location "
            f"'{location}'. Please try another size or deploy to a different location or "
            "different zone. See https://aka.ms/azureskunotavailable for details.",
        )
    return None


def validation_problem(refusal: Refusal, location: str, target: str) -> dict[str, Any] | None:
    """The inner error an ARM deployment's validation gives for a VM the market would refuse
    at once: Azure's validation checks quotas and SKU restrictions before deploying (400
    InvalidTemplateDeployment, "See inner errors for details": QuotaExceeded with the cores
    quota's message, or SkuNotAvailable). None for what fails only while deploying
    (allocation)."""
    refused = synchronous_refusal(refusal, location)
    if refused is None:
        return None
    code = "QuotaExceeded" if refusal.reason == QUOTA else refused.code
    return {"code": code, "target": target, "message": refused.message}


def allocation_failure(refusal: Refusal) -> tuple[str, str]:
    """(code, message) of a provisioning that fails for want of capacity."""
    if refusal.offering.zone is not None:
        return "ZonalAllocationFailed", (
            "Allocation failed. We do not have sufficient capacity for the requested VM size in "
            f"this zone. {GUIDANCE}"
        )
    return "AllocationFailed", (
        "Allocation failed. We do not have sufficient capacity for the requested VM size in "
        f"this region. {GUIDANCE}"
    )
