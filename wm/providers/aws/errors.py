"""EC2's errors -> wm's: botocore's exceptions and EC2's error codes as a CloudError of an
ErrorCategory (`classify`, the gate's classifier for every EC2 call), with access key ids
scrubbed from the messages kept; and which launches a capacity or quota refusal holds for
(`error_scope`, pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from wm.errors import ON_DEMAND, SPOT, CloudError, ErrorCategory, ErrorScope
from wm.model import LaunchSpec

THROTTLING_CODES = frozenset(
    {"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled"}
)
TRANSIENT_CODES = frozenset(
    {"InternalError", "InternalFailure", "Unavailable", "ServiceUnavailable", "RequestTimeout"}
)
# EC2 has none of the offering (type x zone x market) to spare now. EC2's "Error codes for the
# Amazon EC2 API" page: InsufficientInstanceCapacity "not enough capacity to fulfill your
# request" (its message names the zones that have some: aws-parallelcluster#2716, Juju's
# fakes); InsufficientHostCapacity (Dedicated Hosts) and InsufficientReservedInstanceCapacity
# likewise; UnfulfillableCapacity "not enough spare capacity ... for Spot Instances";
# SpotMaxPriceTooLow: the offering's spot price is above the launch's maximum price, so this
# offering, not the account, is what to avoid until its price falls.
CAPACITY_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "UnfulfillableCapacity",
        "SpotMaxPriceTooLow",
    }
)
# The account's limits (same page): InstanceLimitExceeded and VcpuLimitExceeded, the running
# on-demand vCPU limit of the type's quota bucket in the region; MaxSpotInstanceCountExceeded,
# the spot limit (read as every spot launch in the region); InsufficientFreeAddressesInSubnet,
# the subnet's addresses, the account's own limit in one zone.
QUOTA_CODES = frozenset(
    {
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "InsufficientFreeAddressesInSubnet",
    }
)
# "Unsupported" (a type EC2 never offers in the zone asked for: "Your requested instance type
# ... is not supported in your requested Availability Zone") stays BAD_CONFIG below: no wait
# or retry makes that launch config launch.
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
    if code in CAPACITY_CODES:
        return ErrorCategory.CAPACITY
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


# EC2's on-demand and spot vCPU quotas count in buckets of instance families ("Running
# On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", "... G and VT ...", "... P ...");
# longest prefix first.
QUOTA_BUCKETS = (
    ("inf", "Inf"),
    ("trn", "Trn"),
    ("dl", "DL"),
    ("hpc", "HPC"),
    ("vt", "G and VT"),
    ("g", "G and VT"),
    ("f", "F"),
    ("p", "P"),
    ("x", "X"),
    ("u", "High Memory"),
)
STANDARD_LETTERS = frozenset("acdhimrtz")
# "... You can currently get m5.large capacity by not specifying an Availability Zone in your
# request or choosing us-east-1b, us-east-1c."
ZONES_WITH_CAPACITY = re.compile(r"or choosing ([a-z0-9-]+(?:, *[a-z0-9-]+)*)")


def error_scope(code: str, message: str, spec: LaunchSpec) -> ErrorScope | None:
    """Which launches EC2's refusal `code` of a launch of `spec` holds for: the offering (its
    type, zone, market) for a capacity refusal, with the zones the message names as having
    capacity; the region's quota bucket and market for a quota one. None for other codes."""
    run = spec.launch_config.get("launchConfig") or {}
    instance_type = str(run.get("InstanceType") or "") or None
    zone = str((run.get("Placement") or {}).get("AvailabilityZone") or "") or None
    market_type = (run.get("InstanceMarketOptions") or {}).get("MarketType")
    market = SPOT if market_type == "spot" else ON_DEMAND
    if code in CAPACITY_CODES:
        hint = ZONES_WITH_CAPACITY.search(message)
        zones = tuple(z.strip() for z in hint.group(1).split(",")) if hint else ()
        return ErrorScope(
            ErrorCategory.CAPACITY,
            spec.region,
            zone=zone,
            instance_type=instance_type,
            market=market,
            zones_with_capacity=zones,
        )
    if code == "MaxSpotInstanceCountExceeded":
        return ErrorScope(ErrorCategory.QUOTA, spec.region, market=SPOT)
    if code == "InsufficientFreeAddressesInSubnet":
        return ErrorScope(ErrorCategory.QUOTA, spec.region, zone=zone)
    if code in QUOTA_CODES:
        family = quota_bucket(instance_type) if instance_type else None
        return ErrorScope(ErrorCategory.QUOTA, spec.region, family=family, market=market)
    return None


def quota_bucket(instance_type: str) -> str | None:
    """The vCPU quota bucket EC2 counts a type in ("m5.large" -> "Standard"); None if unknown."""
    family = instance_type.split(".", 1)[0].lower()
    for prefix, bucket in QUOTA_BUCKETS:
        if family.startswith(prefix):
            return bucket
    return "Standard" if family[:1] in STANDARD_LETTERS else None


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: rare for EC2, and the gate's backoff covers it


def scrub(message: str) -> str:
    return ACCESS_KEY_PATTERN.sub("<access-key-id>", message)
