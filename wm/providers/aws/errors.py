"""EC2's errors -> wm's: botocore's exceptions and EC2's error codes as a CloudError of an
ErrorCategory (`classify`, the gate's classifier for every EC2 call), with access key ids
scrubbed from the messages kept."""

from __future__ import annotations

import re
from collections.abc import Mapping

from wm.errors import CloudError, ErrorCategory

THROTTLING_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled"}
)
TRANSIENT_CODES = frozenset(
    {"InternalError", "InternalFailure", "Unavailable", "ServiceUnavailable", "RequestTimeout"}
)
QUOTA_CODES = frozenset(
    {
        "InstanceLimitExceeded",
        "InsufficientInstanceCapacity",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "InsufficientFreeAddressesInSubnet",
        "SpotMaxPriceTooLow",
    }
)
BAD_CONFIG_CODES = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameter",
        "InvalidParameterCombination",
        "MissingParameter",
        "AuthFailure",
        "UnauthorizedOperation",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "OptInRequired",
        "Unsupported",
        "InvalidInstanceType",
        "InvalidInstanceID.Malformed",
        "OperationNotPermitted",
    }
)
# The launch config names something that does not exist or is malformed (image, subnet,
# security group, key pair, snapshot...): a human must fix the definition.
BAD_CONFIG_PREFIXES = (
    "InvalidAMIID.",
    "InvalidBlockDeviceMapping",
    "InvalidUserData.",
    "InvalidSubnetID.",
    "InvalidGroup.",
    "InvalidKeyPair.",
    "InvalidSnapshot.",
    "InvalidNetworkInterfaceID.",
    "InvalidPlacementGroup.",
)
NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound"})
ACCESS_KEY_PATTERN = re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{12,}\b")


def category_for(code: str, http_status: int) -> ErrorCategory:
    """The wm category of an EC2 error code (the HTTP status decides only unknown codes)."""
    if code in THROTTLING_CODES:
        return ErrorCategory.THROTTLED
    if code in QUOTA_CODES:
        return ErrorCategory.QUOTA
    if code in NOT_FOUND_CODES:
        return ErrorCategory.NOT_FOUND
    if code in BAD_CONFIG_CODES or code.startswith(BAD_CONFIG_PREFIXES):
        return ErrorCategory.BAD_CONFIG
    if code in TRANSIENT_CODES or http_status >= 500:
        return ErrorCategory.TRANSIENT
    # Any other 4xx: the request itself is wrong and sending it again will not help.
    return ErrorCategory.BAD_CONFIG


def classify(provider_id: str, exc: BaseException) -> CloudError:
    """Translate a boto3/botocore exception into a CloudError, once, for the gate."""
    from botocore import exceptions as sdk
    from botocore.parsers import ResponseParserError

    if isinstance(exc, sdk.ClientError):
        error = exc.response.get("Error", {})
        meta = exc.response.get("ResponseMetadata", {})
        code = str(error.get("Code") or "Unknown")
        status = int(meta.get("HTTPStatusCode") or 0)
        return CloudError(
            provider_id,
            category_for(code, status),
            code,
            scrub(str(error.get("Message") or code)),
            retry_after_s=retry_after_s(meta.get("HTTPHeaders", {})),
        )
    if isinstance(exc, sdk.ConnectionError | sdk.HTTPClientError | ResponseParserError):
        category = ErrorCategory.TRANSIENT
    elif isinstance(
        exc,
        sdk.NoCredentialsError
        | sdk.PartialCredentialsError
        | sdk.NoRegionError
        | sdk.ParamValidationError,
    ):
        category = ErrorCategory.BAD_CONFIG
    elif isinstance(exc, sdk.BotoCoreError):
        category = ErrorCategory.TRANSIENT
    else:
        category = ErrorCategory.BAD_CONFIG  # not the SDK's: a bug, not worth retrying
    return CloudError(provider_id, category, type(exc).__name__, scrub(str(exc)))


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare for EC2, and the gate's backoff covers it


def scrub(message: str) -> str:
    return ACCESS_KEY_PATTERN.sub("<access-key-id>", message)
