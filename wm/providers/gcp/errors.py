"""GCE's errors -> wm's: google-cloud-compute's exceptions (`classify`, the gate's classifier for
every GCE call) and the errors of Operations GCE already finished with one, as a CloudError of
an ErrorCategory."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wm.errors import CloudError, ErrorCategory

THROTTLE_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
QUOTA_REASONS = frozenset(
    {
        "quotaExceeded",
        "QUOTA_EXCEEDED",
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    }
)
TRANSIENT_REASONS = frozenset({"backendError", "internalError", "resourceNotReady"})
# Operation error codes (Operation.error.errors[].code), for creates that failed in the cloud.
OPERATION_ERROR_CATEGORIES: Mapping[str, ErrorCategory] = {
    "QUOTA_EXCEEDED": ErrorCategory.QUOTA,
    "ZONE_RESOURCE_POOL_EXHAUSTED": ErrorCategory.QUOTA,
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS": ErrorCategory.QUOTA,
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
    message = "; ".join(f"{e.code}: {e.message}" for e in errors)
    return CloudError(provider_id, category, first.code, message, operation=operation)


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
    elif QUOTA_REASONS.intersection(reasons):
        category = ErrorCategory.QUOTA
    elif TRANSIENT_REASONS.intersection(reasons):
        category = ErrorCategory.TRANSIENT
    else:
        category = _category_for_status(status)
    code = reasons[0] if reasons else f"http-{status}"
    return CloudError(
        provider_id, category, code, exc.message, retry_after_s=_retry_after_s(exc.response)
    )


def _retry_after_s(response: Any) -> float | None:
    value = getattr(response, "headers", {}).get("Retry-After") if response is not None else None
    try:
        return float(value) if value else None
    except ValueError:  # an HTTP date: GCE does not send one
        return None
