"""The enum values and catalogues the simulated clouds check, held against what the real APIs
take: GCE's REST reference names its enum values in upper case, and the two public Taskcluster
deployments (tests/fixtures/real_pools) write `onHostMaintenance: "terminate"` in every GCE
launch config and launch on real GCE, so GCE matches them without regard to case; ARM matches
its enums without regard to case too (`Spot`, `spot`). Every machine type and VM size those
deployments name is in the simulators' catalogues, and every one of their GCE launch configs,
as wm sends it, passes the simulated GCE's insert checks."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.real_pools import DEPLOYMENTS, GCE_IMAGE, definitions
from wm.providers.gcp.insert_body import insert_body
from wmsim.azure.errors import ArmError
from wmsim.azure.vm_rules import check_priority, check_size
from wmsim.gcp.catalog import Catalog
from wmsim.gcp.errors import ApiError

PROJECT = "realpools-project"
ZONE = "us-central1-a"
BASE: dict[str, Any] = {
    "name": "w-enum",
    "machineType": f"zones/{ZONE}/machineTypes/n2-standard-4",
    "disks": [
        {
            "boot": True,
            "autoDelete": True,
            "type": "PERSISTENT",
            "initializeParams": {
                "sourceImage": "projects/debian-cloud/global/images/family/debian-12"
            },
        }
    ],
    "networkInterfaces": [{"accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}],
}
GPU = [
    {"acceleratorType": f"zones/{ZONE}/acceleratorTypes/nvidia-tesla-v100", "acceleratorCount": 1}
]


def inserted(**changes: Any) -> Any:
    return Catalog().check_insert(PROJECT, ZONE, {**copy.deepcopy(BASE), **changes})


def launch_configs(kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, launch config) of every pool of both deployments, for one cloud's form."""
    for deployment in DEPLOYMENTS:
        for definition in definitions(deployment):
            for index, lc in enumerate(definition["config"].get("launchConfigs") or []):
                form = "gce" if "zone" in lc else "arm" if "armDeployment" in lc else "other"
                if form == kind:
                    yield f"{deployment} {definition['workerPoolId']}[{index}]", lc


# -- GCE -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheduling", "gpus", "kept"),
    [
        ({"onHostMaintenance": "terminate"}, False, {"onHostMaintenance": "TERMINATE"}),
        ({"onHostMaintenance": "Terminate"}, False, {"onHostMaintenance": "TERMINATE"}),
        ({"onHostMaintenance": "migrate"}, False, {"onHostMaintenance": "MIGRATE"}),
        ({"provisioningModel": "spot"}, False, {"provisioningModel": "SPOT"}),
        ({"provisioningModel": "Standard"}, False, {"provisioningModel": "STANDARD"}),
        (
            {"provisioningModel": "SPOT", "instanceTerminationAction": "delete"},
            False,
            {"instanceTerminationAction": "DELETE"},
        ),
        # Firefox CI's GPU pools on STANDARD VMs: only lower-case TERMINATE keeps them launching.
        (
            {"provisioningModel": "STANDARD", "onHostMaintenance": "terminate"},
            True,
            {"onHostMaintenance": "TERMINATE", "automaticRestart": True},
        ),
    ],
)
def test_gce_scheduling_enums_are_taken_in_any_case_and_kept_canonical(
    scheduling: dict[str, Any], gpus: bool, kept: dict[str, Any]
):
    checked = inserted(scheduling=scheduling, **({"guestAccelerators": GPU} if gpus else {}))

    assert {k: checked.scheduling[k] for k in kept} == kept


@pytest.mark.parametrize(
    ("scheduling", "gpus", "named"),
    [
        ({"onHostMaintenance": "terminated"}, False, "onHostMaintenance"),
        ({"onHostMaintenance": ""}, False, "onHostMaintenance"),
        ({"provisioningModel": "PREEMPTIBLE"}, False, "provisioningModel"),
        ({"provisioningModel": "spot-vm"}, False, "provisioningModel"),
        ({"instanceTerminationAction": "DESTROY"}, False, "instanceTerminationAction"),
        ({"provisioningModel": "spot", "onHostMaintenance": "migrate"}, False, "scheduling"),
        ({"onHostMaintenance": "migrate"}, True, "onHostMaintenance"),
    ],
)
def test_gce_scheduling_values_no_case_makes_right_are_refused(
    scheduling: dict[str, Any], gpus: bool, named: str
):
    with pytest.raises(ApiError) as refused:
        inserted(scheduling=scheduling, **({"guestAccelerators": GPU} if gpus else {}))

    assert (refused.value.status, refused.value.reason) == (400, "invalid")
    assert f"resource.scheduling{'' if named == 'scheduling' else '.' + named}'" in str(
        refused.value.message
    )


@pytest.mark.parametrize(
    ("change", "accepted"),
    [
        ({"disks": [{**BASE["disks"][0], "type": "persistent"}]}, True),
        ({"disks": [{**BASE["disks"][0], "type": "DISK"}]}, False),
        ({"networkInterfaces": [{"accessConfigs": [{"type": "one_to_one_nat"}]}]}, True),
        ({"networkInterfaces": [{"accessConfigs": [{"type": "NAT"}]}]}, False),
        ({"networkInterfaces": [{"accessConfigs": [{"networkTier": "standard"}]}]}, True),
        ({"networkInterfaces": [{"accessConfigs": [{"networkTier": "GOLD"}]}]}, False),
        ({"minCpuPlatform": "Intel Cascade Lake"}, True),
        ({"minCpuPlatform": "Intel Cascadelake"}, True),  # Firefox CI's spelling
        ({"minCpuPlatform": "intel skylake"}, True),
        ({"minCpuPlatform": "Intel Pentium"}, False),
        ({"machineType": f"zones/{ZONE}/machineTypes/c3d-standard-16-lssd"}, True),
        ({"machineType": f"zones/{ZONE}/machineTypes/c4-standard-4"}, True),
        ({"machineType": f"zones/{ZONE}/machineTypes/n1-custom-40-262144"}, True),
        ({"machineType": f"zones/{ZONE}/machineTypes/c3d-standard-4-lssd"}, False),
        ({"machineType": f"zones/{ZONE}/machineTypes/n2-standard-3"}, False),
    ],
)
def test_gce_disk_access_config_platform_and_machine_type_values(
    change: dict[str, Any], accepted: bool
):
    if accepted:
        checked = inserted(**change)
        assert [d["type"] for d in checked.disks] == ["PERSISTENT"]  # kept canonical
    else:
        with pytest.raises(ApiError) as refused:
            inserted(**change)
        assert refused.value.status == 400


def test_every_gce_launch_config_of_both_deployments_passes_the_insert_checks_as_wm_sends_it():
    catalog = Catalog()
    checked = 0
    for where, launch_config in launch_configs("gce"):
        for disk in launch_config.get("disks") or []:
            image = GCE_IMAGE.fullmatch(disk["initializeParams"].get("sourceImage") or "")
            if image and catalog.image(image["project"], image["name"]) is None:
                catalog.add_image(image["project"], image["name"])
        body = insert_body(
            launch_config,
            name="w-real",
            labels={"managed-by": "taskcluster"},
            own_labels={"wm-deployment": "realpools"},
            description="a real pool",
            service_accounts=[{"email": "workers@realpools-project.iam.gserviceaccount.com"}],
            metadata_items=[{"key": "taskcluster", "value": "{}"}],
        )
        try:
            catalog.check_insert(PROJECT, launch_config["zone"], body)
        except ApiError as refused:
            pytest.fail(f"{where}: {refused.message}")
        checked += 1
    assert checked == 336 + 1708  # community-tc's and Firefox CI's


# -- ARM -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "accepted"),
    [
        ({"priority": "Spot"}, True),
        ({"priority": "spot"}, True),
        ({"priority": "Regular"}, True),
        ({"priority": "Low"}, True),
        ({"priority": "Cheap"}, False),
        ({"priority": "Spot", "evictionPolicy": "Delete"}, True),
        ({"priority": "Spot", "evictionPolicy": "deallocate"}, True),
        ({"priority": "Spot", "evictionPolicy": "Destroy"}, False),
        ({"priority": "Regular", "evictionPolicy": "Delete"}, False),
        ({"priority": "Spot", "billingProfile": {"maxPrice": -1}}, True),
        ({"priority": "Regular", "billingProfile": {"maxPrice": -1}}, False),
    ],
)
def test_arm_priority_and_eviction_policy_are_matched_without_regard_to_case(
    props: dict[str, Any], accepted: bool
):
    if accepted:
        check_priority(props)
    else:
        with pytest.raises(ArmError) as refused:
            check_priority(props)
        assert refused.value.status == 400


def test_every_vm_size_of_both_deployments_is_offered_in_any_case():
    sizes = {
        lc["armDeployment"]["parameters"]["vmSize"]["value"] for _, lc in launch_configs("arm")
    }

    assert {"Standard_NV12s_v3", "Standard_D96ads_v5", "Standard_NV12ads_A10_v5"} <= sizes
    for size in sizes:
        for spelled in (size, size.lower()):
            check_size({"hardwareProfile": {"vmSize": spelled}})
    with pytest.raises(ArmError, match=re.escape("Standard_D3s_v5")):
        check_size({"hardwareProfile": {"vmSize": "Standard_D3s_v5"}})
