"""GCE's predefined machine types as Cloud Billing prices them: a family's vCPU and memory
SKUs (pure).

The Billing Catalog prices GCE by resource, not by machine type: per family and region, one
SKU an instance core-hour and one a GiB-hour of memory, on-demand and spot ("Preemptible").
A machine type's price is its vCPUs times the one plus its memory times the other, so wm
needs each predefined type's shape: `family-class-vcpus` with the class's memory per vCPU.
"""

from __future__ import annotations

from dataclasses import dataclass

# GiB of memory per vCPU by class; some families differ from the usual.
MEMORY_PER_VCPU_GIB = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}
FAMILY_MEMORY_PER_VCPU_GIB = {
    "n1": {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9},
    "c3": {"standard": 4.0, "highmem": 8.0, "highcpu": 2.0},
    "c3d": {"standard": 4.0, "highmem": 8.0, "highcpu": 2.0},
    "c4": {"standard": 3.75, "highmem": 7.75, "highcpu": 2.0},
    "c4d": {"standard": 3.875, "highmem": 7.875, "highcpu": 1.875},
}
# Shared-core types: (vCPUs billed, GiB).
SHARED_CORE = {
    "e2-micro": (0.25, 1.0),
    "e2-small": (0.5, 2.0),
    "e2-medium": (1.0, 4.0),
    "f1-micro": (0.2, 0.6),
    "g1-small": (0.5, 1.7),
}
# Shared-core families priced as another's SKUs.
SHARED_CORE_FAMILY = {"f1": "n1", "g1": "n1"}
# How the Billing Catalog's descriptions name each family ("N2 Instance Core running in ...").
FAMILY_WORDS = {
    "n1": "N1 Predefined",
    "n2": "N2",
    "n2d": "N2D AMD",
    "e2": "E2",
    "c2": "Compute optimized",
    "c2d": "C2D AMD",
    "c3": "C3",
    "c3d": "C3D",
    "c4": "C4",
    "c4d": "C4D",
    "t2d": "T2D AMD",
    "t2a": "T2A Arm",
}
# Suffixes that add something billed apart (local SSD) to a predefined shape.
APART_SUFFIXES = ("-lssd",)
MIB_PER_GIB = 1024


@dataclass(frozen=True)
class Shape:
    family: str  # "n2", "e2" ...
    vcpus: float
    memory_gib: float


def shape(machine_type: str) -> Shape | None:
    """The shape of a machine type, priced by its family's core and memory SKUs; None for
    what cannot be told (no price then). Custom types (`n2-custom-8-32768`, `custom-4-4096`
    for N1) are priced at their family's predefined rates: GCE bills custom ones a few per cent
    more, on SKUs of their own, so their price here is a little low. Local SSD (`-lssd`) is
    billed apart and left out."""
    if machine_type in SHARED_CORE:
        vcpus, gib = SHARED_CORE[machine_type]
        family = machine_type.split("-")[0]
        return Shape(SHARED_CORE_FAMILY.get(family, family), vcpus, gib)
    for suffix in APART_SUFFIXES:
        machine_type = machine_type.removesuffix(suffix)
    parts = machine_type.split("-")
    if parts[0] == "custom":
        parts = ["n1", *parts]
    if len(parts) == 4 and parts[1] == "custom" and parts[2].isdigit() and parts[3].isdigit():
        if parts[0] not in FAMILY_WORDS:
            return None
        return Shape(parts[0], float(parts[2]), int(parts[3]) / MIB_PER_GIB)
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    family, klass, count = parts[0], parts[1], int(parts[2])
    per_vcpu = FAMILY_MEMORY_PER_VCPU_GIB.get(family, MEMORY_PER_VCPU_GIB).get(klass)
    if per_vcpu is None or family not in FAMILY_WORDS:
        return None
    return Shape(family, float(count), count * per_vcpu)


def sku_description(family: str, resource: str, spot: bool, region_words: str) -> str:
    """A Billing Catalog SKU's description: `resource` is "Core" or "Ram"."""
    words = FAMILY_WORDS[family]
    what = "Instance Core" if resource == "Core" else "Instance Ram"
    prefix = "Spot Preemptible " if spot else ""
    return f"{prefix}{words} {what} running in {region_words}"


def parse_sku_description(description: str) -> tuple[str, str, bool] | None:
    """(family, "Core"|"Ram", spot) of a compute SKU's description; None for any other SKU."""
    spot = description.startswith(("Spot Preemptible ", "Preemptible "))
    rest = description.removeprefix("Spot Preemptible ").removeprefix("Preemptible ")
    for resource, word in (
        ("Core", " Instance Core running in "),
        ("Ram", " Instance Ram running in "),
    ):
        if word in rest:
            family_words = rest.split(word)[0]
            for family, words in FAMILY_WORDS.items():
                if words == family_words:
                    return family, resource, spot
    return None
