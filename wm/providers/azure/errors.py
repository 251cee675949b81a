"""Azure's failures as wm's error categories: an azure-core or azure-identity exception (ARM's
HTTP status and error code, a token endpoint's failure, a connection's) becomes one CloudError,
once, in the provider's gate (provider.make_gate), which retries, pauses or reports by its
category."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any

from wm.errors import CloudError, ErrorCategory

MESSAGE_MAX_CHARS = 500
QUOTA_CODES = frozenset(
    {
        "quotaexceeded",
        "skunotavailable",
        "allocationfailed",
        "zonalallocationfailed",
        "overconstrainedallocationrequest",
        "overconstrainedzonalallocationrequest",
    }
)
# 409s that clear by themselves (another operation on the resource is still running).
RETRYABLE_CONFLICT_CODES = frozenset({"anotheroperationinprogress", "retryableerror", "conflict"})
NOT_FOUND_CODES = frozenset({"resourcenotfound", "notfound"})
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
        if lower in QUOTA_CODES or (lower == "operationnotallowed" and "quota" in message.lower()):
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
