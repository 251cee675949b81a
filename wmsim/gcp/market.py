"""instances.insert under a market (wmsim/market_sim.py): GCE's refusals when the market says
no, in the insert's Operation as GCE reports them.

- Capacity: the Operation ends DONE with error ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS, an
  ErrorInfo naming the zones that have the machine type (`metadatas.zonesAvailable`,
  comma-separated: kubernetes/k8s.io#9834, jenkinsci/google-compute-engine-plugin#555) and
  httpErrorStatusCode 503 SERVICE UNAVAILABLE; the instance is never made.
- Quota: QUOTA_EXCEEDED of PREEMPTIBLE_CPUS for Spot VMs, of the family's CPUs (N2_CPUS) for
  others, in vCPUs ("Quota 'N2_CPUS' exceeded.  Limit: 24.0 in region us-central1.").
"""

from __future__ import annotations

from typing import Any

from wmsim.market_sim import QUOTA, Refusal, vcpus

KIND = "gcp"
TROUBLESHOOTING = "https://cloud.google.com/compute/docs/resource-error"


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def quota_metric(machine_type: str, spot: bool) -> str:
    return "PREEMPTIBLE_CPUS" if spot else f"{machine_type.split('-', 1)[0].upper()}_CPUS"


def quota_message(refusal: Refusal) -> tuple[str, str, float]:
    """(metric, message, limit in vCPUs) of a quota refusal."""
    o = refusal.offering
    metric = quota_metric(o.instance_type, o.market == "spot")
    limit = float(refusal.quota_limit * vcpus(o.instance_type))
    return metric, f"Quota '{metric}' exceeded.  Limit: {limit:.1f} in region {o.region}.", limit


def operation_error(project: str, zone: str, refusal: Refusal) -> tuple[dict[str, Any], int, str]:
    """The Operation's `error`, httpErrorStatusCode and httpErrorMessage for a refusal."""
    o = refusal.offering
    if refusal.reason == QUOTA:
        metric, message, limit = quota_message(refusal)
        error = {
            "code": "QUOTA_EXCEEDED",
            "message": message,
            "errorDetails": [
                {
                    "quotaInfo": {
                        "metricName": f"compute.googleapis.com/{metric.lower()}",
                        "limitName": f"{metric}-per-project-region",
                        "dimensions": {"region": o.region},
                        "limit": limit,
                    }
                }
            ],
        }
        return {"errors": [error]}, 403, "FORBIDDEN"
    metadatas = {"zone": zone, "vmType": o.instance_type}
    if refusal.zones_with_capacity:
        metadatas["zonesAvailable"] = ",".join(refusal.zones_with_capacity)
    error = {
        "code": "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "message": (
            f"The zone 'projects/{project}/zones/{zone}' does not have enough resources "
            "available to fulfill the request.  '(resource type:compute)'."
        ),
        "errorDetails": [
            {
                "errorInfo": {
                    "reason": "resource_availability",
                    "domain": "compute.googleapis.com",
                    "metadatas": metadatas,
                }
            },
            {
                "help": {
                    "links": [
                        {"description": "Troubleshooting documentation", "url": TROUBLESHOOTING}
                    ]
                }
            },
        ],
    }
    return {"errors": [error]}, 503, "SERVICE UNAVAILABLE"


def instance_tags(labels: dict[str, str], metadata: list[dict[str, str]]) -> dict[str, str]:
    """What the ledger groups a VM by: its labels, with the metadata items' values (wm keeps
    the pool and launch config ids there verbatim; labels hold them escaped)."""
    items = {str(i.get("key")): str(i.get("value", "")) for i in metadata}
    return {**labels, **{k: v for k, v in items.items() if k in labels}}
