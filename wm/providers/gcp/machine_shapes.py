"""GCE's predefined machine types as Cloud Billing prices them: a family's vCPU and memory
SKUs (pure).

The Billing Catalog prices GCE by resource, not by machine type: per family and region, one
SKU an instance core-hour and one a GiB-hour of memory, on-demand and spot ("Preemptible").
A machine type's price is its vCPUs times the one plus its memory times the other, so wm
needs each predefined type's shape: `family-class-vcpus` with the class's memory per vCPU.
"""

from __future__ import annotations

from dataclasses import dataclass

# GiB of memory per vCPU by class; N1's differ from the newer families'.
MEMORY_PER_VCPU_GIB = {"standard": 4.0, "highmem": 8.0, "highcpu": 1.0}
N1_MEMORY_PER_VCPU_GIB = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
# Shared-core types: (vCPUs billed, GiB).
SHARED_CORE = {
    "e2-micro": (0.25, 1.0),
    "e2-small": (0.5, 2.0),
    "e2-medium": (1.0, 4.0),
    "f1-micro": (0.2, 0.6),
    "g1-small": (0.5, 1.7),
}
# How the Billing Catalog's descriptions name each family ("N2 Instance Core running in ...").
FAMILY_WORDS = {
    "n1": "N1 Predefined",
    "n2": "N2",
    "n2d": "N2D AMD",
    "e2": "E2",
    "c2": "Compute optimized",
    "c2d": "C2D AMD",
    "c3": "C3",
    "t2d": "T2D AMD",
}


@dataclass(frozen=True)
class Shape:
    family: str  # "n2", "e2" ...
    vcpus: float
    memory_gib: float


def shape(machine_type: str) -> Shape | None:
    """The shape of a predefined machine type; None for custom or unknown ones (no price)."""
    if machine_type in SHARED_CORE:
        vcpus, gib = SHARED_CORE[machine_type]
        return Shape(machine_type.split("-")[0], vcpus, gib)
    parts = machine_type.split("-")
    if len(parts) != 3 or not parts[2].isdigit():
        return None
    family, klass, count = parts[0], parts[1], int(parts[2])
    per_vcpu = (N1_MEMORY_PER_VCPU_GIB if family == "n1" else MEMORY_PER_VCPU_GIB).get(klass)
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
