"""What a VM body may ask for, as ARM checks it without looking anything up: the sizes, the
marketplace images, priorities, eviction policies, disk create options, and the rules of the
body's hardware, data disks and Spot settings. Refusals are ARM's 400 InvalidParameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wmsim.azure.errors import ArmError, invalid, missing
from wmsim.azure.resources import as_object

# Marketplace images (publisher, offer, sku), lower case as ARM compares them; any version.
MARKETPLACE_IMAGES = frozenset(
    {
        ("canonical", "ubuntu-24_04-lts", "server"),
        ("canonical", "ubuntu-24_04-lts", "server-gen1"),
        ("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts"),
        ("canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2"),
        ("canonical", "0001-com-ubuntu-server-focal", "20_04-lts-gen2"),
        ("canonical", "ubuntuserver", "18.04-lts"),
        ("debian", "debian-12", "12"),
        ("debian", "debian-12", "12-gen2"),
        ("microsoftwindowsserver", "windowsserver", "2019-datacenter"),
        ("microsoftwindowsserver", "windowsserver", "2022-datacenter"),
        ("microsoftwindowsserver", "windowsserver", "2022-datacenter-azure-edition"),
        ("microsoftwindowsserver", "windowsserver", "2025-datacenter-azure-edition"),
        ("microsoftwindowsdesktop", "windows-11", "win11-23h2-pro"),
    }
)
# VM sizes the sim offers in every location: name -> (vCPUs, memory GiB), Azure's published
# figures. Besides the demo's and the tests' own, every size the two public Taskcluster
# deployments' Azure pools name (tests/fixtures/real_pools: vmSize of each ARM launch config).
VM_SIZE_SPECS: Mapping[str, tuple[int, float]] = {
    "Basic_A1": (1, 1.75),
    "Standard_A1_v2": (1, 2),
    "Standard_A2_v2": (2, 4),
    "Standard_B1s": (1, 1),
    "Standard_B2s": (2, 4),
    "Standard_B2ms": (2, 8),
    "Standard_D2s_v3": (2, 8),
    "Standard_D4s_v3": (4, 16),
    "Standard_D8s_v3": (8, 32),
    "Standard_D16s_v3": (16, 64),
    "Standard_D2s_v5": (2, 8),
    "Standard_D4s_v5": (4, 16),
    "Standard_D8s_v5": (8, 32),
    "Standard_D16s_v5": (16, 64),
    "Standard_D32s_v5": (32, 128),
    "Standard_D2as_v5": (2, 8),
    "Standard_D4as_v5": (4, 16),
    "Standard_D8ads_v5": (8, 32),
    "Standard_D32ads_v5": (32, 128),
    "Standard_D96ads_v5": (96, 384),
    "Standard_D2ds_v5": (2, 8),
    "Standard_D4ds_v5": (4, 16),
    "Standard_D8pds_v5": (8, 32),  # Arm64 (Ampere Altra)
    "Standard_D16pds_v5": (16, 64),
    "Standard_E8ads_v5": (8, 64),
    "Standard_F2s_v2": (2, 4),
    "Standard_F4s_v2": (4, 8),
    "Standard_F8s_v2": (8, 16),
    "Standard_F16s_v2": (16, 32),
    "Standard_F32s_v2": (32, 64),
    "Standard_NC4as_T4_v3": (4, 28),
    "Standard_NC6s_v3": (6, 112),
    "Standard_NV12s_v3": (12, 112),  # one Tesla M60
    "Standard_NV12ads_A10_v5": (12, 110),  # a third of an A10
}
VM_SIZE_NAMES = tuple(VM_SIZE_SPECS)
VM_SIZES = frozenset(size.lower() for size in VM_SIZE_NAMES)
PRIORITIES = frozenset({"regular", "low", "spot"})
EVICTION_POLICIES = frozenset({"deallocate", "delete"})
DISK_CREATE_OPTIONS = frozenset({"fromimage", "empty", "attach", "copy", "restore"})


def check_size(props: dict[str, Any]) -> None:
    size = as_object(props.get("hardwareProfile")).get("vmSize")
    if not size:
        raise missing("hardwareProfile.vmSize")
    if str(size).lower() not in VM_SIZES:
        raise invalid(
            f"The value {size} provided for the VM size is not valid. The valid sizes in the "
            "current region are: " + ", ".join(VM_SIZE_NAMES) + ".",
            "hardwareProfile.vmSize",
        )


def check_create_option(disk: dict[str, Any], kind: str) -> str:
    """The disk's createOption (`kind` osDisk or dataDisk), lower case, if ARM knows it."""
    create = str(disk.get("createOption") or "")
    if not create:
        raise missing(f"{kind}.createOption")
    if create.lower() not in DISK_CREATE_OPTIONS:
        raise invalid(
            f"The value '{create}' of parameter '{kind}.createOption' is not valid.",
            f"{kind}.createOption",
        )
    return create.lower()


def check_data_disks(disks: Any) -> None:
    luns: set[int] = set()
    for disk in disks or []:
        disk = as_object(disk)
        lun = disk.get("lun")
        if not isinstance(lun, int) or isinstance(lun, bool) or lun < 0:
            raise missing("dataDisk.lun")
        if lun in luns:
            raise invalid(f"A disk at LUN {lun} already exists.", "dataDisks")
        luns.add(lun)
        create = check_create_option(disk, "dataDisk")
        if create == "empty" and not disk.get("diskSizeGB"):
            raise missing("dataDisk.diskSizeGB")


def check_priority(props: dict[str, Any]) -> None:
    priority = props.get("priority")
    if priority is not None and str(priority).lower() not in PRIORITIES:
        raise invalid(
            f"The value '{priority}' of parameter 'priority' is not valid. Allowed values are "
            "Regular, Low, Spot.",
            "priority",
        )
    spot = str(priority or "").lower() in ("spot", "low")
    policy = props.get("evictionPolicy")
    if policy is not None:
        if str(policy).lower() not in EVICTION_POLICIES:
            raise invalid(
                f"The value '{policy}' of parameter 'evictionPolicy' is not valid. Allowed "
                "values are Deallocate, Delete.",
                "evictionPolicy",
            )
        if not spot:
            raise invalid(
                "Eviction policy can be set only for Azure Spot Virtual Machines (priority Spot).",
                "evictionPolicy",
            )
    billing = props.get("billingProfile")
    if billing is None:
        return
    if not spot:
        raise invalid(
            "Billing profile can be set only for Azure Spot Virtual Machines (priority Spot).",
            "billingProfile",
        )
    price = as_object(billing).get("maxPrice")
    if price is not None and (
        isinstance(price, bool)
        or not isinstance(price, int | float)
        or (price != -1 and price <= 0)
    ):
        raise invalid(
            f"The value '{price}' of parameter 'billingProfile.maxPrice' is not valid: it "
            "must be -1 or greater than zero.",
            "billingProfile.maxPrice",
        )


def check_marketplace_image(image: dict[str, Any]) -> None:
    """A marketplace imageReference (publisher, offer, sku) names an image the sim offers."""
    if not image:
        raise missing("imageReference")
    for part in ("publisher", "offer", "sku"):
        if not image.get(part):
            raise missing(f"imageReference.{part}")
    triple = tuple(str(image[part]).lower() for part in ("publisher", "offer", "sku"))
    if triple not in MARKETPLACE_IMAGES:
        urn = ":".join([*map(str, (image["publisher"], image["offer"], image["sku"]))])
        raise ArmError(
            404,
            "PlatformImageNotFound",
            f"The platform image '{urn}:{image.get('version') or 'latest'}' is not "
            "available. Verify that all fields in the storage profile are correct. For more "
            "details about storage profile information, please refer to "
            "https://aka.ms/storageprofile",
            target="imageReference",
        )
