"""GCE's errors -> wm's: google-cloud-compute's exceptions (`classify`, the gate's classifier for
every GCE call) and the errors of Operations GCE already finished with one, as a CloudError of
an ErrorCategory; and which launches a capacity or quota refusal holds for (`error_scope`,
pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from wm.errors import ON_DEMAND, SPOT, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec

THROTTLE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
# The zone has none of the machine type to spare ("The zone '...' does not have enough resources
# available to fulfill the request. Try a different zone, or try again later."; GCE's
# "Troubleshooting VM creation", google/syzkaller#4385), in the insert's Operation or, as a
# google.rpc.ErrorInfo reason, in a synchronous answer.
CAPACITY_REASONS = frozenset(
    {"ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"}
)
# The project's quota ("Quota 'N2_CPUS' exceeded.  Limit: 24.0 in region us-central1."): the
# Operation's QUOTA_EXCEEDED, or a synchronous 403 quotaExceeded.
QUOTA_REASONS = frozenset({"quotaExceeded", "QUOTA_EXCEEDED"})
TRANSIENT_REASONS = frozenset({"backendError", "internalError", "resourceNotReady"})
# Operation error codes (Operation.error.errors[].code), for creates that failed in the cloud.
OPERATION_ERROR_CATEGORIES: Mapping[str, ErrorCategory] = {
    "QUOTA_EXCEEDED": ErrorCategory.QUOTA,
    "ZONE_RESOURCE_POOL_EXHAUSTED": ErrorCategory.CAPACITY,
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": ErrorCategory.CAPACITY,
    "RATE_LIMIT_EXCEEDED": ErrorCategory.THROTTLED,
    "INTERNAL_ERROR": ErrorCategory.TRANSIENT,
}


def done(op: Any) -> bool:
    return op.status.name == "DONE"


def operation_error(provider_id: str, op: Any, operation: str) -> CloudError | None:
    """The error of an Operation that GCE already finished with one, else None."""
    errors = list(op.error.errors) if done(op) else []
    if not errors:
        return None
    first = errors[0]
    category = OPERATION_ERROR_CATEGORIES.get(first.code)
    if category is None:
        category = _category_for_status(op.http_error_status_code or 400)
    message = "; ".join(f"{e.code}: {e.message}{_zones_available(e)}" for e in errors)
    return CloudError(provider_id, category, first.code, message, operation=operation)


def _zones_available(error: Any) -> str:
    """GCE names the zones that do have the machine type in a pool-exhausted error's
    ErrorInfo (`metadatas.zonesAvailable`, comma-separated); carried in the message, where
    `error_scope` reads it, as EC2's ICE message carries its own."""
    zones = [
        str(detail.error_info.metadatas["zonesAvailable"])
        for detail in getattr(error, "error_details", ())
        if "zonesAvailable" in detail.error_info.metadatas
    ]
    return f" {ZONES_AVAILABLE_MARK}{','.join(zones)})" if zones else ""


# A worker's stop reason when GCE refused its insert in the operation, after accepting it:
# "gce-operation-failed: <code>: <message>" (the provider's lookup writes it).
OPERATION_FAILED = "gce-operation-failed: "
REASON_MAX_CHARS = 500


def failed_launch(provider_id: str, reason: str | None) -> CloudError | None:
    """The refusal a worker's stop reason records, when GCE failed its insert after taking
    it, classified as the operation's error is; None for any other reason."""
    if not reason or not reason.startswith(OPERATION_FAILED):
        return None
    code, _, message = reason.removeprefix(OPERATION_FAILED).partition(": ")
    category = OPERATION_ERROR_CATEGORIES.get(code, ErrorCategory.BAD_CONFIG)
    return CloudError(provider_id, category, code, message, operation="instances.insert")


def _category_for_status(status: int) -> ErrorCategory:
    if status == 429:
        return ErrorCategory.THROTTLED
    if status >= 500:
        return ErrorCategory.TRANSIENT
    if status == 404:
        return ErrorCategory.NOT_FOUND
    return ErrorCategory.BAD_CONFIG


def classify(provider_id: str, exc: BaseException) -> CloudError:
    """Translate an exception of google-cloud-compute (REST) into a CloudError, once."""
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    if isinstance(exc, gexc.GoogleAPICallError) and exc.code is not None:
        return _classify_api_error(provider_id, exc)
    if isinstance(exc, requests.ConnectionError | requests.Timeout):
        category = ErrorCategory.TRANSIENT
    elif isinstance(exc, requests.RequestException):
        category = ErrorCategory.BAD_CONFIG  # a malformed endpoint and the like
    elif isinstance(exc, auth_exc.TransportError | gexc.RetryError | OSError):
        category = ErrorCategory.TRANSIENT
    elif isinstance(exc, auth_exc.GoogleAuthError):
        category = ErrorCategory.BAD_CONFIG  # no or bad credentials
    else:
        category = ErrorCategory.BAD_CONFIG  # a bug or an unexpected answer: not worth retrying
    return CloudError(provider_id, category, type(exc).__name__, str(exc)[:500])


def _classify_api_error(provider_id: str, exc: Any) -> CloudError:
    # REST errors carry `error.errors[].reason` (exc.errors, a list of dicts) and sometimes a
    # google.rpc.ErrorInfo in `error.details` (exc.reason).
    reasons = [e.get("reason") for e in exc.errors if isinstance(e, Mapping) and e.get("reason")]
    if exc.reason:
        reasons.append(exc.reason)
    status = int(exc.code)
    if THROTTLE_REASONS.intersection(reasons):
        category = ErrorCategory.THROTTLED
    elif CAPACITY_REASONS.intersection(reasons):
        category = ErrorCategory.CAPACITY
    elif QUOTA_REASONS.intersection(reasons):
        category = ErrorCategory.QUOTA
    elif TRANSIENT_REASONS.intersection(reasons):
        category = ErrorCategory.TRANSIENT
    else:
        category = _category_for_status(status)
    code = reasons[0] if reasons else f"http-{status}"
    if category in (ErrorCategory.CAPACITY, ErrorCategory.QUOTA):
        # The reason that made it one, whatever other reasons come first: error_scope reads it.
        code = next(r for r in reasons if r in CAPACITY_REASONS | QUOTA_REASONS)
    return CloudError(
        provider_id, category, code, exc.message, retry_after_s=_retry_after_s(exc.response)
    )


# "Quota 'N2_CPUS' exceeded.  Limit: 24.0 in region us-central1." (GCE's quota page; SkyPilot's
# provisioner reads the same) and "... Limit: 8.0 globally." for project-wide ones.
QUOTA_MESSAGE = re.compile(
    r"Quota '(?P<metric>[A-Z0-9_]+)' exceeded.*?(?:in region (?P<region>[a-z0-9-]+)|globally)"
)
ZONES_AVAILABLE_MARK = "(zonesAvailable: "
ZONES_AVAILABLE = re.compile(r"\(zonesAvailable: ([a-z0-9,\s-]+)\)")
# Quotas that count no one family: every type's instances or vCPUs, addresses, disks.
FAMILY_BLIND_METRICS = frozenset({"CPUS", "INSTANCES", "CPUS_ALL_REGIONS", "IN_USE_ADDRESSES"})


def error_scope(code: str, message: str, spec: LaunchSpec) -> ErrorScope | None:
    """Which launches GCE's refusal `code` of a launch of `spec` holds for: the offering
    (machine type, zone, market) for a pool exhausted; for a quota, the region (None for a
    global one), the family its metric counts (N2_CPUS: "N2"; CPUS: every family) and, for a
    PREEMPTIBLE_* metric, spot only. None for other codes."""
    config = spec.launch_config
    machine_type = str(config.get("machineType") or "").rsplit("/", 1)[-1] or None
    scheduling = config.get("scheduling") or {}
    model = str(scheduling.get("provisioningModel") or "").upper()
    spot = model == "SPOT" or bool(scheduling.get("preemptible"))
    zone = str(config.get("zone") or spec.region)
    if code in CAPACITY_REASONS:
        hint = ZONES_AVAILABLE.search(message)
        zones = tuple(z.strip() for z in hint.group(1).split(",") if z.strip()) if hint else ()
        return ErrorScope(
            ErrorCategory.CAPACITY,
            zone.rsplit("-", 1)[0],
            zone=zone,
            instance_type=machine_type,
            market=SPOT if spot else ON_DEMAND,
            zones_with_capacity=zones,
        )
    if code not in QUOTA_REASONS:
        return None
    found = QUOTA_MESSAGE.search(message)
    if found is None:  # a quota wm cannot read: the launch's region, every family and market
        return ErrorScope(ErrorCategory.QUOTA, str(config.get("region") or zone.rsplit("-", 1)[0]))
    metric = found["metric"]
    market = None
    if metric.startswith("PREEMPTIBLE_"):
        market, metric = SPOT, metric.removeprefix("PREEMPTIBLE_")
    family = None
    if metric.endswith("_CPUS") and metric not in FAMILY_BLIND_METRICS:
        family = metric.removesuffix("_CPUS")
    return ErrorScope(ErrorCategory.QUOTA, found["region"], family=family, market=market)


def _retry_after_s(response: Any) -> float | None:
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return float(value) if value else None
    except ValueError:  # an HTTP date: GCE does not send one
        return None
