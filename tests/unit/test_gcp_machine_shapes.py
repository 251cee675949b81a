"""GCE machine types as the Billing Catalog prices them (vCPUs and memory of a family): pure."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from wm.providers.gcp.machine_shapes import (
    FAMILY_WORDS,
    Shape,
    parse_sku_description,
    shape,
    sku_description,
)

REAL_POOLS = Path(__file__).resolve().parents[3] / "shared" / "real-pools"


@pytest.mark.parametrize(
    ("machine_type", "expected"),
    [
        ("n2-standard-4", Shape("n2", 4.0, 16.0)),
        ("n1-highmem-8", Shape("n1", 8.0, 52.0)),
        ("c3d-highcpu-16", Shape("c3d", 16.0, 32.0)),
        ("c3d-standard-16-lssd", Shape("c3d", 16.0, 64.0)),  # local SSD billed apart
        ("n1-custom-40-262144", Shape("n1", 40.0, 256.0)),
        ("custom-4-4096", Shape("n1", 4.0, 4.0)),
        ("e2-small", Shape("e2", 0.5, 2.0)),
        ("g1-small", Shape("n1", 0.5, 1.7)),
        ("n2-bogus-4", None),
        ("a3-megagpu-8g", None),
    ],
)
def test_a_machine_type_has_the_shape_its_family_is_billed_by(machine_type, expected):
    assert shape(machine_type) == expected


@pytest.mark.parametrize("family", sorted(FAMILY_WORDS))
@pytest.mark.parametrize("resource", ["Core", "Ram"])
@pytest.mark.parametrize("spot", [False, True])
def test_a_sku_description_reads_back_as_its_family_resource_and_market(family, resource, spot):
    description = sku_description(family, resource, spot, "Americas")
    assert parse_sku_description(description) == (family, resource, spot)


def test_other_skus_are_not_read_as_machine_prices():
    assert parse_sku_description("Storage PD Capacity in Americas") is None
    assert parse_sku_description("Network Internet Egress from Americas to APAC") is None


@pytest.mark.skipif(not REAL_POOLS.exists(), reason="the shared real pools are not here")
def test_every_gce_machine_type_of_the_real_pools_has_a_shape():
    text = ""
    for path in sorted(REAL_POOLS.glob("*-pools.json.gz")):
        with gzip.open(path, "rt") as file:
            text += file.read()
    types = {m.rsplit("/", 1)[-1] for m in re.findall(r'"machineType":\s*"([^"]+)"', text)}
    assert types
    assert sorted(t for t in types if shape(t) is None) == []
