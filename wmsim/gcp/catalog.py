"""What the simulated GCE knows besides instances, and the checks `instances.insert` makes
against it, with GCE's error shapes.

Like moto's default VPC, every project has a `default` network in auto mode (a `default`
subnetwork in every region); more networks, subnetworks and images are added through the SDK
(networks.insert, subnetworks.insert, images.insert, served by wmsim/gcp/catalog_routes.py), the
`/_sim/` control endpoints or the `add_*` methods. Public images are the families of
wmsim/gcp/insert_fields.py (and images named after them, `<family>-v<date>`); machine, disk and
accelerator types are a standard set, the same in every zone.

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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wmsim.gcp.errors import invalid, not_found
from wmsim.gcp.insert_fields import (
    ACCESS_CONFIG_TYPES,
    DEFAULT_NETWORK,
    DISK_KINDS,
    DISK_TYPES,
    IMAGE_REF,
    NETWORK_REF,
    NETWORK_TIERS,
    PUBLIC_IMAGE_FAMILIES,
    SUBNETWORK_REF,
    URL_PREFIX,
    ZONAL,
    already_exists,
    check_accelerators,
    check_known_fields,
    check_name,
    checked_labels,
    checked_machine_type,
    checked_metadata,
    checked_scheduling,
    checked_service_accounts,
    enum_value,
    known_cpu_platform,
    parse_reference,
)


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
        check_name("resource.name", name)
        if self.network(project, name) is not None:
            raise already_exists(f"projects/{project}/global/networks/{name}")
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
        check_name("resource.name", name)
        parent = self._network_ref(project, network, "resource.network")
        if self.subnetwork(project, region, name) is not None:
            raise already_exists(f"projects/{project}/regions/{region}/subnetworks/{name}")
        subnetwork = Subnetwork(project, region, name, parent.path, ip_cidr_range)
        self.subnetworks[(project, region, name)] = subnetwork
        return subnetwork

    def add_image(self, project: str, name: str, family: str | None = None) -> Image:
        check_name("resource.name", name)
        if family is not None:
            check_name("resource.family", family)
        if (project, name) in self.images:
            raise already_exists(f"projects/{project}/global/images/{name}")
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
        ref = parse_reference(NETWORK_REF, value, field_name, bare=True)
        owner = ref.get("project") or project
        network = self.network(owner, ref["name"])
        if network is None:
            raise not_found(f"projects/{owner}/global/networks/{ref['name']}")
        return network

    # -- instances.insert --------------------------------------------------------------------------

    def check_insert(self, project: str, zone: str, body: Mapping[str, Any]) -> CheckedInsert:
        """The insert body as GCE would accept it, or the ApiError GCE would answer."""
        check_known_fields(body)
        name = body.get("name", "")
        check_name("resource.name", name)
        machine_type = checked_machine_type(zone, body.get("machineType"))
        disks = body.get("disks") or []
        checked_disks, image = self._disks(project, zone, disks)
        nics = [
            self._nic(project, zone, index, nic)
            for index, nic in enumerate(body.get("networkInterfaces") or [{}])
        ]
        accelerators = body.get("guestAccelerators") or []
        check_accelerators(zone, accelerators)
        scheduling = checked_scheduling(body.get("scheduling") or {}, gpus=bool(accelerators))
        platform = body.get("minCpuPlatform")
        if platform is not None and not known_cpu_platform(platform):
            raise invalid("resource.minCpuPlatform", platform, "Unknown CPU platform.")
        return CheckedInsert(
            name=name,
            machine_type=machine_type,
            labels=checked_labels(body.get("labels") or {}),
            disks=checked_disks,
            image=image,
            nics=nics,
            scheduling=scheduling,
            metadata=checked_metadata(body.get("metadata") or {}),
            service_accounts=checked_service_accounts(body.get("serviceAccounts") or []),
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
                    image = URL_PREFIX.sub("", str(source_image))
            if disk.get("source") is not None:
                # The simulation holds no standalone disks: any source disk is unknown.
                ref = parse_reference(ZONAL["disks"], disk["source"], f"{where}.source", bare=True)
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
        ref = parse_reference(
            ZONAL["diskTypes"], value, f"{where}.initializeParams.diskType", bare=True
        )
        owner, in_zone = ref.get("project") or project, ref.get("zone") or zone
        if ref["name"] not in DISK_TYPES or in_zone != zone:
            raise not_found(f"projects/{owner}/zones/{in_zone}/diskTypes/{ref['name']}")
        return f"projects/{owner}/zones/{zone}/diskTypes/{ref['name']}"

    def _image_ref(self, project: str, value: Any, where: str) -> Image:
        ref = parse_reference(IMAGE_REF, value, f"{where}.initializeParams.sourceImage")
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
        ref = parse_reference(SUBNETWORK_REF, value, f"{where}.subnetwork", bare=True)
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
