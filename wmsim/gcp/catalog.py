"""What the simulated GCE knows besides instances, and the checks `instances.insert` makes
against it, with GCE's error shapes.

Like moto's default VPC, every project has a `default` network in auto mode (a `default`
subnetwork in every region); more networks, subnetworks and images are added through the SDK
(networks.insert, subnetworks.insert, images.insert, served by wmsim/gcp/gce.py), the `/_sim/`
control endpoints or the `add_*` methods. Public images are the families below (and images
named after them, `<family>-v<date>`); machine, disk and accelerator types are a standard set,
the same in every zone.

An insert body is checked as GCE does, the first problem answered:
- fields the API does not have: 400 `invalid` ("Invalid JSON payload received. Unknown name");
- a malformed or unknown-valued field (name, machine type, accelerator type, scheduling,
  access config type, labels, duplicate metadata keys, service accounts): 400 `invalid`;
- enum fields (scheduling's, a disk's type, an access config's type and tier) are matched
  without regard to case and kept under their canonical (upper case) names: the REST reference
  lists only the upper case names, but every GCE launch config of the two public Taskcluster
  deployments (tests/fixtures/real_pools: Firefox CI's 1,708 and community-tc's 336) writes
  `onHostMaintenance: "terminate"` and launches on real GCE. Likewise `minCpuPlatform` is
  matched without regard to case or spaces (Firefox CI writes "Intel Cascadelake" for the
  documented "Intel Cascade Lake");
- no boot disk (or two): 400 `invalid` "Boot disk must be specified";
- a reference to something that does not exist (network, subnetwork, image, disk type,
  source disk): 404 `notFound` "The resource '<path>' was not found".
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Response

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
_URL_PREFIX = re.compile(r"^https?://[^/]+/compute/(v1|beta|alpha)/")
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


class ApiError(Exception):
    """An error answered in GCE's wire shape."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        domain: str = "global",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.domain = domain
        self.headers: dict[str, str] = dict(headers or {})

    def response(self) -> Response:
        body = {
            "error": {
                "code": self.status,
                "message": self.message,
                "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
            }
        }
        return Response(
            json.dumps(body),
            status=self.status,
            headers=self.headers,
            mimetype="application/json",
        )


def invalid(field_name: str, value: Any, why: str) -> ApiError:
    return ApiError(400, "invalid", f"Invalid value for field '{field_name}': '{value}'. {why}")


def not_found(path: str) -> ApiError:
    return ApiError(404, "notFound", f"The resource '{path}' was not found")


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


@dataclass(frozen=True)
class Network:
    project: str
    name: str
    auto_subnetworks: bool  # auto mode: a subnetwork named after it in every region

    @property
    def path(self) -> str:
        return f"projects/{self.project}/global/networks/{self.name}"


@dataclass(frozen=True)
class Subnetwork:
    project: str
    region: str
    name: str
    network: str  # the network's path
    ip_cidr_range: str = "10.128.0.0/20"

    @property
    def path(self) -> str:
        return f"projects/{self.project}/regions/{self.region}/subnetworks/{self.name}"


@dataclass(frozen=True)
class Image:
    project: str
    name: str
    family: str | None = None

    @property
    def path(self) -> str:
        return f"projects/{self.project}/global/images/{self.name}"


@dataclass(frozen=True)
class Nic:
    """A network interface as the insert resolved it."""

    network: str  # path
    subnetwork: str  # path
    access_configs: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class CheckedInsert:
    """An accepted insert body, with what the simulation keeps of it."""

    name: str
    machine_type: str  # the name
    labels: dict[str, str]
    disks: list[dict[str, Any]]  # the body's, each with its resolved diskType path
    image: str  # the boot disk's image, as referenced ("" for one from a snapshot)
    nics: list[Nic]
    scheduling: dict[str, Any]  # with GCE's defaults filled in
    metadata: list[dict[str, str]]
    service_accounts: list[dict[str, Any]]


@dataclass
class Catalog:
    """Networks, subnetworks and images added to the simulation (defaults are implicit)."""

    networks: dict[tuple[str, str], Network] = field(default_factory=dict)
    subnetworks: dict[tuple[str, str, str], Subnetwork] = field(default_factory=dict)
    images: dict[tuple[str, str], Image] = field(default_factory=dict)

    # -- adding ------------------------------------------------------------------------------------

    def add_network(self, project: str, name: str, *, auto_subnetworks: bool = False) -> Network:
        _check_name("resource.name", name)
        if self.network(project, name) is not None:
            raise _exists(f"projects/{project}/global/networks/{name}")
        network = Network(project, name, auto_subnetworks)
        self.networks[(project, name)] = network
        return network

    def add_subnetwork(
        self,
        project: str,
        region: str,
        name: str,
        network: str,
        ip_cidr_range: str = "10.128.0.0/20",
    ) -> Subnetwork:
        _check_name("resource.name", name)
        parent = self._network_ref(project, network, "resource.network")
        if self.subnetwork(project, region, name) is not None:
            raise _exists(f"projects/{project}/regions/{region}/subnetworks/{name}")
        subnetwork = Subnetwork(project, region, name, parent.path, ip_cidr_range)
        self.subnetworks[(project, region, name)] = subnetwork
        return subnetwork

    def add_image(self, project: str, name: str, family: str | None = None) -> Image:
        _check_name("resource.name", name)
        if family is not None:
            _check_name("resource.family", family)
        if (project, name) in self.images:
            raise _exists(f"projects/{project}/global/images/{name}")
        image = Image(project, name, family)
        self.images[(project, name)] = image
        return image

    # -- looking up --------------------------------------------------------------------------------

    def network(self, project: str, name: str) -> Network | None:
        if name == DEFAULT_NETWORK:
            return Network(project, name, auto_subnetworks=True)
        return self.networks.get((project, name))

    def subnetwork(self, project: str, region: str, name: str) -> Subnetwork | None:
        found = self.subnetworks.get((project, region, name))
        if found is not None:
            return found
        network = self.network(project, name)  # an auto-mode network's own, in every region
        if network is not None and network.auto_subnetworks:
            return Subnetwork(project, region, name, network.path)
        return None

    def image(self, project: str, name: str, *, family: bool = False) -> Image | None:
        """The image (or the newest of the family) a reference names, if the sim knows it."""
        public = PUBLIC_IMAGE_FAMILIES.get(project)
        if public is not None:
            return _public_image(project, name, public, family=family)
        if not family:
            return self.images.get((project, name))
        members = [i for (p, _), i in self.images.items() if p == project and i.family == name]
        return members[-1] if members else None

    def _network_ref(self, project: str, value: Any, field_name: str) -> Network:
        ref = _parse(NETWORK_REF, value, field_name, bare=True)
        owner = ref.get("project") or project
        network = self.network(owner, ref["name"])
        if network is None:
            raise not_found(f"projects/{owner}/global/networks/{ref['name']}")
        return network

    # -- instances.insert --------------------------------------------------------------------------

    def check_insert(self, project: str, zone: str, body: Mapping[str, Any]) -> CheckedInsert:
        """The insert body as GCE would accept it, or the ApiError GCE would answer."""
        _check_known_fields(body)
        name = body.get("name", "")
        _check_name("resource.name", name)
        machine_type = _machine_type(zone, body.get("machineType"))
        disks = body.get("disks") or []
        checked_disks, image = self._disks(project, zone, disks)
        nics = [
            self._nic(project, zone, index, nic)
            for index, nic in enumerate(body.get("networkInterfaces") or [{}])
        ]
        accelerators = body.get("guestAccelerators") or []
        _accelerators(zone, accelerators)
        scheduling = _scheduling(body.get("scheduling") or {}, gpus=bool(accelerators))
        platform = body.get("minCpuPlatform")
        if platform is not None and not known_cpu_platform(platform):
            raise invalid("resource.minCpuPlatform", platform, "Unknown CPU platform.")
        return CheckedInsert(
            name=name,
            machine_type=machine_type,
            labels=_labels(body.get("labels") or {}),
            disks=checked_disks,
            image=image,
            nics=nics,
            scheduling=scheduling,
            metadata=_metadata(body.get("metadata") or {}),
            service_accounts=_service_accounts(body.get("serviceAccounts") or []),
        )

    def _disks(
        self, project: str, zone: str, disks: list[Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], str]:
        boots = [d for d in disks if d.get("boot")]
        if len(boots) != 1:
            why = "Boot disk must be specified." if not boots else "Only one boot disk is allowed."
            raise invalid("resource.disks", "", why)
        image = ""
        out = []
        for index, disk in enumerate(disks):
            where = f"resource.disks[{index}]"
            kind = enum_value(disk.get("type", "PERSISTENT"), DISK_KINDS)
            if kind is None:
                raise invalid(f"{where}.type", disk.get("type"), "Must be PERSISTENT or SCRATCH.")
            params = disk.get("initializeParams") or {}
            disk_type = self._disk_type(project, zone, params.get("diskType"), where)
            source_image = params.get("sourceImage")
            if source_image is not None:
                self._image_ref(project, source_image, where)
                if disk.get("boot"):
                    # As the reference was given (the metadata server's instance/image).
                    image = _URL_PREFIX.sub("", str(source_image))
            if disk.get("source") is not None:
                # The simulation holds no standalone disks: any source disk is unknown.
                ref = _parse(ZONAL["disks"], disk["source"], f"{where}.source", bare=True)
                raise not_found(
                    f"projects/{ref.get('project') or project}/zones/{zone}/disks/{ref['name']}"
                )
            if disk.get("boot") and source_image is None and params.get("sourceSnapshot") is None:
                raise invalid(
                    f"{where}.initializeParams.sourceImage",
                    "",
                    "Source image must be specified for a boot disk.",
                )
            out.append({**disk, "type": kind, "diskType": disk_type})
        return out, image

    def _disk_type(self, project: str, zone: str, value: Any, where: str) -> str:
        if value is None:
            return f"projects/{project}/zones/{zone}/diskTypes/pd-standard"
        ref = _parse(ZONAL["diskTypes"], value, f"{where}.initializeParams.diskType", bare=True)
        owner, in_zone = ref.get("project") or project, ref.get("zone") or zone
        if ref["name"] not in DISK_TYPES or in_zone != zone:
            raise not_found(f"projects/{owner}/zones/{in_zone}/diskTypes/{ref['name']}")
        return f"projects/{owner}/zones/{zone}/diskTypes/{ref['name']}"

    def _image_ref(self, project: str, value: Any, where: str) -> Image:
        ref = _parse(IMAGE_REF, value, f"{where}.initializeParams.sourceImage")
        owner = ref.get("project") or project
        image = self.image(owner, ref["name"], family=bool(ref.get("family")))
        if image is None:
            family = "family/" if ref.get("family") else ""
            raise not_found(f"projects/{owner}/global/images/{family}{ref['name']}")
        return image

    def _nic(self, project: str, zone: str, index: int, nic: Mapping[str, Any]) -> Nic:
        where = f"resource.networkInterfaces[{index}]"
        network = None
        if nic.get("network") is not None:
            network = self._network_ref(project, nic["network"], f"{where}.network")
        subnetwork = self._subnetwork_ref(project, zone, nic.get("subnetwork"), where, network)
        if network is None:
            network = self._network_ref(project, subnetwork.network, f"{where}.network")
        for at, config in enumerate(nic.get("accessConfigs") or []):
            kind = config.get("type", "ONE_TO_ONE_NAT")
            if enum_value(kind, ACCESS_CONFIG_TYPES) is None:
                raise invalid(f"{where}.accessConfigs[{at}].type", kind, "Unknown type.")
            tier = config.get("networkTier", "PREMIUM")
            if enum_value(tier, NETWORK_TIERS) is None:
                raise invalid(f"{where}.accessConfigs[{at}].networkTier", tier, "Unknown tier.")
        return Nic(network.path, subnetwork.path, tuple(nic.get("accessConfigs") or ()))

    def _subnetwork_ref(
        self, project: str, zone: str, value: Any, where: str, network: Network | None
    ) -> Subnetwork:
        region = region_of(zone)
        if value is None:
            network = network or self.network(project, DEFAULT_NETWORK)
            assert network is not None  # the default network always exists
            if not network.auto_subnetworks:
                raise invalid(
                    f"{where}.subnetwork",
                    "",
                    "Subnetwork should be specified for custom subnetmode network",
                )
            found = self.subnetwork(network.project, region, network.name)
            assert found is not None
            return found
        ref = _parse(SUBNETWORK_REF, value, f"{where}.subnetwork", bare=True)
        owner, in_region = ref.get("project") or project, ref.get("region") or region
        found = self.subnetwork(owner, in_region, ref["name"])
        if found is None:
            raise not_found(f"projects/{owner}/regions/{in_region}/subnetworks/{ref['name']}")
        if in_region != region:
            raise invalid(f"{where}.subnetwork", value, f"Subnetwork must be in region '{region}'.")
        if network is not None and found.network != network.path:
            raise invalid(
                f"{where}.subnetwork",
                value,
                f"Subnetwork does not belong to network '{network.name}'.",
            )
        return found


# -- checks of single fields -----------------------------------------------------------------------


def load_instance_schema() -> None:
    """Import what `_check_known_fields` parses with: seconds on a first use, which a started
    sim pays up front rather than in the answer to its first insert."""
    from google.cloud import compute_v1  # noqa: F401
    from google.protobuf import json_format  # noqa: F401


def _check_known_fields(body: Mapping[str, Any]) -> None:
    """Refuse what the API does not have, as GCE's front end does for any JSON body."""
    from google.cloud import compute_v1
    from google.protobuf import json_format

    try:
        json_format.ParseDict(dict(body), compute_v1.Instance.pb(compute_v1.Instance()))
    except json_format.ParseError as error:
        first_line = str(error).splitlines()[0]
        raise ApiError(400, "invalid", f"Invalid JSON payload received. {first_line}") from None


def _check_name(field_name: str, name: Any) -> None:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise invalid(field_name, name, f"Must be a match of regex '{NAME_PATTERN.pattern}'")


def _parse(pattern: re.Pattern[str], value: Any, field_name: str, *, bare: bool = False) -> dict:
    """A resource reference's parts (project, zone/region, name); 400 when malformed."""
    text = _URL_PREFIX.sub("", str(value)) if isinstance(value, str) else ""
    match = pattern.fullmatch(text)
    if match is not None:
        return {k: v for k, v in match.groupdict().items() if v}
    if bare and BARE_NAME.fullmatch(text):
        return {"name": text}
    raise invalid(field_name, value, "The URL is malformed.")


def _public_image(
    project: str, name: str, families: frozenset[str], *, family: bool
) -> Image | None:
    if family:
        return Image(project, f"{name}-v20260101", name) if name in families else None
    # A dated image of a family: `<family>[-<codename>]-v<YYYYMMDD>`.
    for known in families:
        if name.startswith(f"{known}-") and re.search(r"-v\d{8}$", name):
            return Image(project, name, known)
    return None


def _machine_type(zone: str, value: Any) -> str:
    ref = _parse(ZONAL["machineTypes"], value, "resource.machineType", bare=True)
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


def _accelerators(zone: str, accelerators: list[Mapping[str, Any]]) -> None:
    for index, accelerator in enumerate(accelerators):
        where = f"resource.guestAccelerators[{index}]"
        value = accelerator.get("acceleratorType")
        ref = _parse(ZONAL["acceleratorTypes"], value, f"{where}.acceleratorType", bare=True)
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


def _scheduling(scheduling: Mapping[str, Any], *, gpus: bool) -> dict[str, Any]:
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


def _labels(labels: Any) -> dict[str, str]:
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


def _metadata(metadata: Mapping[str, Any]) -> list[dict[str, str]]:
    items = list(metadata.get("items") or [])
    keys = [str(item.get("key")) for item in items]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise invalid(
            "resource.metadata", "", f"Metadata has duplicate keys: {', '.join(duplicates)}."
        )
    return [{"key": str(i.get("key")), "value": str(i.get("value", ""))} for i in items]


def _service_accounts(accounts: Any) -> list[dict[str, Any]]:
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


def _exists(path: str) -> ApiError:
    return ApiError(409, "alreadyExists", f"The resource '{path}' already exists")
