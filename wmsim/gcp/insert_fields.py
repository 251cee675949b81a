"""What every zone of the simulated GCE has (machine, disk and accelerator types, public image
families, CPU platforms), the enumerations and patterns of an insert body's fields, and the
checks of its single fields, each refused as GCE refuses it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from wmsim.gcp.errors import ApiError, invalid

NAME_PATTERN = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
LABELS_MAX = 64
LABEL_KEY_PATTERN = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE_PATTERN = re.compile(r"[a-z0-9_-]{0,63}")
DEFAULT_NETWORK = "default"

# Public image projects and the families they publish (the ones operators and the demo use).
PUBLIC_IMAGE_FAMILIES: Mapping[str, frozenset[str]] = {
    "debian-cloud": frozenset({"debian-11", "debian-12", "debian-12-arm64"}),
    "ubuntu-os-cloud": frozenset(
        {"ubuntu-2004-lts", "ubuntu-2204-lts", "ubuntu-2404-lts-amd64", "ubuntu-2404-lts-arm64"}
    ),
    "ubuntu-os-accelerator-images": frozenset({"ubuntu-accelerator-2204-amd64-with-nvidia-550"}),
    "cos-cloud": frozenset({"cos-stable", "cos-beta", "cos-dev", "cos-113-lts", "cos-117-lts"}),
    "rocky-linux-cloud": frozenset({"rocky-linux-8", "rocky-linux-9"}),
    "windows-cloud": frozenset({"windows-2019", "windows-2022", "windows-2025"}),
}
# Series -> (kinds, vCPU counts): `<series>-<kind>-<n>` exists in every zone.
MACHINE_SERIES: Mapping[str, tuple[tuple[str, ...], tuple[int, ...]]] = {
    "e2": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 32)),
    "n1": (("standard", "highmem", "highcpu"), (1, 2, 4, 8, 16, 32, 64, 96)),
    "n2": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)),
    "n2d": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)),
    "n4": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 32, 48, 64, 80)),
    "c2": (("standard",), (4, 8, 16, 30, 60)),
    "c2d": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 32, 56, 112)),
    "c3": (("standard", "highmem", "highcpu"), (4, 8, 22, 44, 88, 176)),
    "c3d": (("standard", "highmem", "highcpu"), (4, 8, 16, 30, 60, 90, 180, 360)),
    "t2d": (("standard",), (1, 2, 4, 8, 16, 32, 48, 60)),
    "t2a": (("standard",), (1, 2, 4, 8, 16, 32, 48)),
    "g2": (("standard",), (4, 8, 12, 16, 24, 32, 48, 96)),
    "c4": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 24, 32, 48, 96, 144, 192, 288)),
    "c4d": (("standard", "highmem", "highcpu"), (2, 4, 8, 16, 32, 48, 64, 96, 192, 384)),
}
# Series whose `<series>-standard-<n>-lssd` (with local SSDs attached) exist, and their sizes.
LSSD_SERIES: Mapping[str, tuple[int, ...]] = {
    "c3": (4, 8, 22, 44, 88, 176),
    "c3d": (8, 16, 30, 60, 90, 180, 360),
    "c4": (4, 8, 16, 24, 32, 48, 96, 144, 192, 288),
    "c4d": (8, 16, 32, 48, 64, 96, 192, 384),
}
OTHER_MACHINE_TYPES = frozenset(
    {"e2-micro", "e2-small", "e2-medium", "f1-micro", "g1-small", "a3-highgpu-8g"}
    | {f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)}
    | {"a2-megagpu-16g"}
    | {f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)}
)
MACHINE_TYPES = (
    OTHER_MACHINE_TYPES
    | {
        f"{series}-{kind}-{n}"
        for series, (kinds, sizes) in MACHINE_SERIES.items()
        for kind in kinds
        for n in sizes
    }
    | {f"{series}-standard-{n}-lssd" for series, sizes in LSSD_SERIES.items() for n in sizes}
)
# Custom machine types; N1's is named with or without its series (Firefox CI's n1-custom-40-…).
CUSTOM_MACHINE_TYPE = re.compile(r"((n1|e2|n2|n2d|n4)-)?custom-\d+-\d+(-ext)?")
DISK_TYPES = frozenset(
    {"pd-standard", "pd-balanced", "pd-ssd", "pd-extreme", "local-ssd"}
    | {"hyperdisk-balanced", "hyperdisk-extreme", "hyperdisk-throughput"}
)
ACCELERATOR_TYPES = frozenset(
    {"nvidia-tesla-t4", "nvidia-tesla-p4", "nvidia-tesla-p100", "nvidia-tesla-v100"}
    | {"nvidia-l4", "nvidia-tesla-a100", "nvidia-a100-80gb", "nvidia-h100-80gb"}
)
CPU_PLATFORMS = frozenset(
    {"Automatic", "Intel Broadwell", "Intel Skylake", "Intel Cascade Lake", "Intel Ice Lake"}
    | {"Intel Sapphire Rapids", "Intel Emerald Rapids", "AMD Rome", "AMD Milan", "AMD Genoa"}
    | {"Ampere Altra"}
)
_CPU_PLATFORM_KEYS = frozenset(p.replace(" ", "").lower() for p in CPU_PLATFORMS)
PROVISIONING_MODELS = frozenset({"STANDARD", "SPOT"})
HOST_MAINTENANCE = frozenset({"MIGRATE", "TERMINATE"})
TERMINATION_ACTIONS = frozenset({"STOP", "DELETE"})
DISK_KINDS = frozenset({"PERSISTENT", "SCRATCH"})
ACCESS_CONFIG_TYPES = frozenset({"ONE_TO_ONE_NAT", "DIRECT_IPV6"})
NETWORK_TIERS = frozenset({"PREMIUM", "STANDARD"})

# A resource URL: full (`https://compute.googleapis.com/compute/v1/projects/...`) or partial.
URL_PREFIX = re.compile(r"^https?://[^/]+/compute/(v1|beta|alpha)/")
_SEGMENT = r"[a-z0-9](?:[-a-z0-9_.]*[a-z0-9])?"
_PROJECT = rf"(?:projects/(?P<project>{_SEGMENT})/)?"


def _pattern(scope: str, collection: str) -> re.Pattern[str]:
    return re.compile(rf"{_PROJECT}{scope}/{collection}/(?P<name>{_SEGMENT})")


ZONAL = {
    kind: re.compile(rf"{_PROJECT}zones/(?P<zone>{_SEGMENT})/{kind}/(?P<name>{_SEGMENT})")
    for kind in ("machineTypes", "diskTypes", "acceleratorTypes", "disks")
}
NETWORK_REF = _pattern("global", "networks")
SUBNETWORK_REF = re.compile(
    rf"{_PROJECT}regions/(?P<region>{_SEGMENT})/subnetworks/(?P<name>{_SEGMENT})"
)
IMAGE_REF = re.compile(rf"{_PROJECT}global/images/(?P<family>family/)?(?P<name>{_SEGMENT})")
BARE_NAME = re.compile(_SEGMENT)


# -- checks of single fields -----------------------------------------------------------------------


def load_instance_schema() -> None:
    """Import what `check_known_fields` parses with: seconds on a first use, which a started
    sim pays up front rather than in the answer to its first insert."""
    from google.cloud import compute_v1  # noqa: F401
    from google.protobuf import json_format  # noqa: F401


def check_known_fields(body: Mapping[str, Any]) -> None:
    """Refuse what the API does not have, as GCE's front end does for any JSON body."""
    from google.cloud import compute_v1
    from google.protobuf import json_format

    try:
        json_format.ParseDict(dict(body), compute_v1.Instance.pb(compute_v1.Instance()))
    except json_format.ParseError as error:
        first_line = str(error).splitlines()[0]
        raise ApiError(400, "invalid", f"Invalid JSON payload received. {first_line}") from None


def check_name(field_name: str, name: Any) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise invalid(field_name, name, f"Must be a match of regex '{NAME_PATTERN.pattern}'")


def parse_reference(
    pattern: re.Pattern[str], value: Any, field_name: str, *, bare: bool = False
) -> dict:
    """A resource reference's parts (project, zone/region, name); 400 when malformed."""
    text = URL_PREFIX.sub("", str(value)) if isinstance(value, str) else ""
    match = pattern.fullmatch(text)
    if match is not None:
        return {k: v for k, v in match.groupdict().items() if v}
    if bare and BARE_NAME.fullmatch(text):
        return {"name": text}
    raise invalid(field_name, value, "The URL is malformed.")


def checked_machine_type(zone: str, value: Any) -> str:
    ref = parse_reference(ZONAL["machineTypes"], value, "resource.machineType", bare=True)
    name = ref["name"]
    if ref.get("zone", zone) != zone:
        raise invalid("resource.machineType", value, "Cross-zone references are not allowed.")
    if name not in MACHINE_TYPES and not CUSTOM_MACHINE_TYPE.fullmatch(name):
        raise invalid(
            "resource.machineType",
            value,
            f"Machine type with name '{name}' does not exist in zone '{zone}'.",
        )
    return name


def check_accelerators(zone: str, accelerators: list[Mapping[str, Any]]) -> None:
    for index, accelerator in enumerate(accelerators):
        where = f"resource.guestAccelerators[{index}]"
        value = accelerator.get("acceleratorType")
        ref = parse_reference(
            ZONAL["acceleratorTypes"], value, f"{where}.acceleratorType", bare=True
        )
        if ref["name"] not in ACCELERATOR_TYPES or ref.get("zone", zone) != zone:
            raise invalid(
                f"{where}.acceleratorType",
                value,
                f"Accelerator type '{ref['name']}' does not exist in zone '{zone}'.",
            )
        if int(accelerator.get("acceleratorCount", 0)) < 1:
            raise invalid(f"{where}.acceleratorCount", accelerator.get("acceleratorCount"), "")


def enum_value(value: Any, names: frozenset[str]) -> str | None:
    """The canonical name of an enum value given in any case (as GCE matches them), or None
    when it names none."""
    if not isinstance(value, str):
        return None
    return value.upper() if value.upper() in names else None


def known_cpu_platform(value: Any) -> bool:
    """Whether a minCpuPlatform names a platform, matched without regard to case or spaces."""
    return isinstance(value, str) and value.replace(" ", "").lower() in _CPU_PLATFORM_KEYS


def _scheduling_enum(scheduling: Mapping[str, Any], key: str, names: frozenset[str]) -> str | None:
    given = scheduling.get(key)
    if given is None:
        return None
    value = enum_value(given, names)
    if value is None:
        raise invalid(f"resource.scheduling.{key}", given, "Unknown value.")
    return value


def checked_scheduling(scheduling: Mapping[str, Any], *, gpus: bool) -> dict[str, Any]:
    model = _scheduling_enum(scheduling, "provisioningModel", PROVISIONING_MODELS) or "STANDARD"
    maintenance = _scheduling_enum(scheduling, "onHostMaintenance", HOST_MAINTENANCE)
    action = _scheduling_enum(scheduling, "instanceTerminationAction", TERMINATION_ACTIONS)
    spot = model == "SPOT" or bool(scheduling.get("preemptible"))
    if spot and (scheduling.get("automaticRestart") is True or maintenance == "MIGRATE"):
        raise invalid(
            "resource.scheduling",
            "",
            "Spot and preemptible instances need automaticRestart false and onHostMaintenance "
            "TERMINATE.",
        )
    if gpus and maintenance != "TERMINATE" and not spot:
        raise invalid(
            "resource.scheduling.onHostMaintenance",
            maintenance or "MIGRATE",
            "Instances with guest accelerators do not support live migration.",
        )
    out: dict[str, Any] = {
        "onHostMaintenance": "TERMINATE" if spot or gpus else (maintenance or "MIGRATE"),
        "automaticRestart": False if spot else scheduling.get("automaticRestart", True),
        "preemptible": bool(scheduling.get("preemptible", False)),
        "provisioningModel": model,
    }
    if spot:
        out["instanceTerminationAction"] = action or "STOP"
    return out


def checked_labels(labels: Any) -> dict[str, str]:
    if not isinstance(labels, dict) or len(labels) > LABELS_MAX:
        raise invalid("resource.labels", labels, f"At most {LABELS_MAX} labels are allowed.")
    for key, value in labels.items():
        if not LABEL_KEY_PATTERN.fullmatch(str(key)) or not LABEL_VALUE_PATTERN.fullmatch(
            str(value)
        ):
            raise invalid(
                "resource.labels",
                "",
                f"Label '{key}: {value}' violates format constraints. Keys and values can only "
                "contain lowercase letters, numeric characters, underscores and dashes, at most "
                "63 characters; keys start with a lowercase letter.",
            )
    return {str(k): str(v) for k, v in labels.items()}


def checked_metadata(metadata: Mapping[str, Any]) -> list[dict[str, str]]:
    items = list(metadata.get("items") or [])
    keys = [str(item.get("key")) for item in items]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise invalid(
            "resource.metadata", "", f"Metadata has duplicate keys: {', '.join(duplicates)}."
        )
    return [{"key": str(i.get("key")), "value": str(i.get("value", ""))} for i in items]


def checked_service_accounts(accounts: Any) -> list[dict[str, Any]]:
    if not isinstance(accounts, list) or len(accounts) > 1:
        raise invalid("resource.serviceAccounts", accounts, "At most one service account.")
    out = []
    for account in accounts:
        email = account.get("email") if isinstance(account, Mapping) else None
        scopes = account.get("scopes", []) if isinstance(account, Mapping) else None
        if not isinstance(email, str) or not email or not isinstance(scopes, list):
            raise invalid("resource.serviceAccounts[0].email", email, "Invalid service account.")
        out.append({"email": email, "scopes": [str(scope) for scope in scopes]})
    return out


def already_exists(path: str) -> ApiError:
    return ApiError(409, "alreadyExists", f"The resource '{path}' already exists")
