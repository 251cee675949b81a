"""Azure's failures as wm's error categories: an azure-core or azure-identity exception (ARM's
HTTP status and error code, a token endpoint's failure, a connection's) becomes one CloudError,
once, in the provider's gate (provider.make_gate), which retries, pauses or reports by its
category; and which launches a capacity or quota refusal holds for (`error_scope`, pure)."""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

from wm.errors import ON_DEMAND, SPOT, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec

MESSAGE_MAX_CHARS = 500
# Azure has none of the size to spare in the location or zone ("Troubleshoot allocation
# failures when you create ... a VM": AllocationFailed / ZonalAllocationFailed "We do not have
# sufficient capacity for the requested VM size in this region"; SkuNotAvailable "The requested
# VM size for resource 'Following SKUs have failed for Capacity Restrictions: ...' is currently
# not available in location ..."; the Overconstrained* ones: capacity that meets every
# constraint of the request; Karpenter-Azure's fakes, pkg/fake).
CAPACITY_CODES = frozenset(
    {
        "skunotavailable",
        "allocationfailed",
        "zonalallocationfailed",
        "overconstrainedallocationrequest",
        "overconstrainedzonalallocationrequest",
    }
)
# The subscription's vCPU quotas: QuotaExceeded, or OperationNotAllowed whose message says
# "... results in exceeding approved <Total Regional | standardDSv3Family | Low Priority> Cores
# quota" (see error_scope).
QUOTA_CODES = frozenset({"quotaexceeded"})
# 409s that clear by themselves (another operation on the resource is still running).
RETRYABLE_CONFLICT_CODES = frozenset({"anotheroperationinprogress", "retryableerror", "conflict"})
NOT_FOUND_CODES = frozenset({"resourcenotfound", "notfound"})
# Errors that carry their reasons as inner errors (a deployment's validation or its failure).
WRAPPER_CODES = frozenset({"invalidtemplatedeployment", "deploymentfailed"})
# Resource deletes refused because something still holds the resource (a NIC or public IP
# still attached, a disk still attached to its VM): try again next time.
IN_USE_CODES = frozenset(
    {"nicinuse", "publicipaddresscannotbedeleted", "inuse", "operationnotallowed"}
)


def classify(provider_id: str, exc: BaseException) -> CloudError:
    """Translate an azure-core / azure-identity exception into a CloudError, once."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )

    def error(category: ErrorCategory, code: str, message: str, **kw: Any) -> CloudError:
        return CloudError(provider_id, category, code, message[:MESSAGE_MAX_CHARS], **kw)

    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return error(ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))
    if isinstance(exc, HttpResponseError):
        status = exc.status_code
        code = (exc.error.code if exc.error is not None else None) or ""
        message = (exc.error.message if exc.error is not None else None) or exc.reason or ""
        headers = exc.response.headers if exc.response is not None else {}
        lower = code.lower()
        if status is None and isinstance(exc, ClientAuthenticationError):
            # The credential failed before any ARM call. azure-identity wraps an unreachable
            # token endpoint in this error too, with the connection error as its cause.
            if isinstance(exc.__cause__, ServiceRequestError | ServiceResponseError):
                return error(ErrorCategory.TRANSIENT, "TokenEndpointUnreachable", str(exc))
            return error(ErrorCategory.BAD_CONFIG, "AuthenticationFailed", str(exc))
        if status == 429 or lower == "toomanyrequests":
            return error(
                ErrorCategory.THROTTLED,
                code or "TooManyRequests",
                message,
                retry_after_s=retry_after_s(headers),
            )
        if status is not None and status >= 500:
            return error(
                ErrorCategory.TRANSIENT,
                code or f"HTTP{status}",
                message,
                retry_after_s=retry_after_s(headers),
            )
        if lower in WRAPPER_CODES:
            # ARM's validation of a deployment refuses with the reasons inside: a size the
            # location has none of, or a quota, is a capacity or quota refusal all the same.
            inner = _inner_refusal(exc.error)
            if inner is not None:
                code, message = inner
                lower = code.lower()
        if lower in CAPACITY_CODES:
            return error(ErrorCategory.CAPACITY, code, message)
        if quota_refusal(lower, message):
            return error(ErrorCategory.QUOTA, code, message)
        if status == 404 or lower in NOT_FOUND_CODES:
            return error(ErrorCategory.NOT_FOUND, code or "NotFound", message)
        if status == 409 and lower in RETRYABLE_CONFLICT_CODES:
            return error(ErrorCategory.TRANSIENT, code, message)
        # 400 InvalidParameter / ImageNotFound, 401, 403 AuthorizationFailed, other 409s.
        return error(ErrorCategory.BAD_CONFIG, code or f"HTTP{status}", message)
    from azure.identity import CredentialUnavailableError

    if isinstance(exc, CredentialUnavailableError):
        return error(ErrorCategory.BAD_CONFIG, "CredentialUnavailable", str(exc))
    return error(ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))


def _inner_refusal(error: Any) -> tuple[str, str] | None:
    """The first capacity or quota refusal among an ARM error's inner errors (any depth)."""
    for detail in getattr(error, "details", None) or ():
        code = str(getattr(detail, "code", "") or "")
        message = str(getattr(detail, "message", "") or "")
        if code.lower() in CAPACITY_CODES or quota_refusal(code.lower(), message):
            return code, message
        deeper = _inner_refusal(detail)
        if deeper is not None:
            return deeper
    return None


def quota_refusal(lower_code: str, message: str) -> bool:
    return lower_code in QUOTA_CODES or (
        lower_code == "operationnotallowed" and "quota" in message.lower()
    )


# "... results in exceeding approved standardDSv3Family Cores quota. Additional details -
# Deployment Model: Resource Manager, Location: eastus, Current Limit: 10, ..." (Azure's
# "Resolve errors for resource quotas"; Karpenter-Azure's fakes for "Low Priority Cores").
QUOTA_MESSAGE = re.compile(r"exceeding approved (?P<which>.+?) ?Cores quota", re.IGNORECASE)
QUOTA_LOCATION = re.compile(r"Location: (?P<location>[A-Za-z0-9]+)")
SPOT_PRIORITIES = frozenset({"spot", "low"})


def error_scope(code: str, message: str, spec: LaunchSpec) -> ErrorScope | None:
    """Which launches Azure's refusal `code` of a launch of `spec` holds for: the offering (VM
    size, location, zone if the launch config pins one, market) for a capacity refusal; for a
    quota, the location and the family its message names (Total Regional: every family),
    spot only for Low Priority cores, on-demand only for the others (spot VMs count against
    Low Priority cores alone). None for other codes."""
    lower = code.lower()
    config = spec.launch_config
    parameters = (config.get("armDeployment") or {}).get("parameters") or {}

    def field(name: str) -> str:
        value = config.get(name) or (parameters.get(name) or {}).get("value") or ""
        return str(value)

    size = str((config.get("hardwareProfile") or {}).get("vmSize") or "") or field("vmSize")
    spot = field("priority").lower() in SPOT_PRIORITIES
    zones = config.get("zones") or []
    if lower in CAPACITY_CODES:
        return ErrorScope(
            ErrorCategory.CAPACITY,
            spec.region,
            zone=str(zones[0]) if len(zones) == 1 else None,
            instance_type=size or None,
            market=SPOT if spot else ON_DEMAND,
        )
    if not quota_refusal(lower, message):
        return None
    location = QUOTA_LOCATION.search(message)
    region = location["location"] if location else spec.region
    found = QUOTA_MESSAGE.search(message)
    which = re.sub(r"[ -]", "", found["which"]).lower() if found else ""
    if which == "lowpriority":
        return ErrorScope(ErrorCategory.QUOTA, region, market=SPOT)
    if which.endswith("family"):
        family = found["which"] if found else None
        return ErrorScope(ErrorCategory.QUOTA, region, family=family, market=ON_DEMAND)
    if which == "totalregional":
        return ErrorScope(ErrorCategory.QUOTA, region, market=ON_DEMAND)
    # A quota wm cannot read: the launch's own market in its location.
    return ErrorScope(ErrorCategory.QUOTA, region, market=SPOT if spot else ON_DEMAND)


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from retry-after-ms / x-ms-retry-after-ms / Retry-After, if any."""
    if not headers:
        return None
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) / 1000)
            except ValueError:
                pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
