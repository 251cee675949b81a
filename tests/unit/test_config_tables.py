"""`wm pools convert`: the old [[pools]] tables as Taskcluster definitions, keeping launch
config ids so that applying them adopts the workers already running."""

import copy

import pytest

from tests.support.configs import POOLS
from wm.pools.config_tables import OldLaunchConfig, OldProvider, convert

PROVIDERS = {
    "aws-a": OldProvider("aws"),
    "gcp-a": OldProvider("gcp"),
    "azure-a": OldProvider("azure", "/subscriptions/s/resourceGroups/g/providers/x/subnets/y"),
}


def converted(pools):
    conversion = convert(pools, PROVIDERS, owner="ops@example.com")
    assert not conversion.problems, conversion.problems
    return conversion


def problems_of(pools) -> list[str]:
    return list(convert(pools, PROVIDERS, owner="ops@example.com").problems)


def test_a_launch_config_keeps_its_old_id_through_weight_and_max_edits_but_not_machine_edits():
    first = OldLaunchConfig(region="us-east-1", machine_type="m5.large", image="ami-1")
    tuned = first.model_copy(update={"weight": 5, "max_capacity": 3})
    changed = first.model_copy(update={"machine_type": "m5.xlarge"})
    assert first.old_id == tuned.old_id != changed.old_id
    (document,) = converted([POOLS[0]]).documents
    ids = [lc["workerManager"]["launchConfigId"] for lc in document["config"]["launchConfigs"]]
    assert ids[0] == OldLaunchConfig(**POOLS[0]["launch_configs"][0]).old_id


def test_each_cloud_gets_its_own_parameters():
    pools = [
        {
            "id": f"proj/{kind}",
            "provider": provider,
            "max_capacity": 4,
            "launch_configs": [
                {"region": region, "machine_type": machine, "image": image, "spot": True}
            ],
        }
        for kind, provider, region, machine, image in [
            ("ec2", "aws-a", "us-east-1", "m5.large", "ami-1"),
            ("gce", "gcp-a", "us-central1-a", "e2-small", "projects/p/global/images/i"),
            ("az", "azure-a", "eastus", "Standard_D2s_v5", "Canonical:ubuntu:22_04:latest"),
        ]
    ]
    ec2, gce, azure = (d["config"]["launchConfigs"][0] for d in converted(pools).documents)
    assert ec2["launchConfig"]["InstanceMarketOptions"]["MarketType"] == "spot"
    assert (ec2["region"], ec2["launchConfig"]["InstanceType"]) == ("us-east-1", "m5.large")
    assert (gce["region"], gce["zone"]) == ("us-central1", "us-central1-a")
    assert gce["machineType"] == "zones/us-central1-a/machineTypes/e2-small"
    assert gce["scheduling"]["provisioningModel"] == "SPOT"
    assert gce["disks"][0]["initializeParams"]["sourceImage"] == "projects/p/global/images/i"
    assert azure["subnetId"] == PROVIDERS["azure-a"].subnet_id
    assert azure["storageProfile"]["imageReference"] == {
        "publisher": "Canonical",
        "offer": "ubuntu",
        "sku": "22_04",
        "version": "latest",
    }
    assert (azure["priority"], azure["evictionPolicy"]) == ("Spot", "Deallocate")


def test_weights_become_initial_weights_relative_to_the_heaviest():
    pool = copy.deepcopy(POOLS[0])
    pool["launch_configs"][0]["weight"] = 4.0
    (document,) = converted([pool]).documents
    weights = [lc["workerManager"]["initialWeight"] for lc in document["config"]["launchConfigs"]]
    assert weights == [1.0, 0.25]


def test_what_a_definition_cannot_say_is_a_note():
    pool = {**copy.deepcopy(POOLS[0]), "requires_registration": False}
    pool["queue_inactivity_timeout_s"] = 600
    conversion = converted([pool])
    lifecycle = conversion.documents[0]["config"]["lifecycle"]
    assert lifecycle["queueInactivityTimeout"] == 1200
    assert any("workers_register = false" in n for n in conversion.notes)
    assert any("below Taskcluster's minimum" in n for n in conversion.notes)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            lambda p: p[0]["launch_configs"][0].update(capacity_per_worker=0),
            "pools[0].launch_configs[0].capacity_per_worker: must be >= 1",
        ),
        (lambda p: p[0].pop("max_capacity"), "pools[0].max_capacity: required"),
        (lambda p: p[0].update(scaling_ratio=1.5), "pools[0].scaling_ratio: must be <= 1"),
        (lambda p: p[0].update(provider="nope"), "pools[0].provider: no provider with id 'nope'"),
        (lambda p: p[0].update(maxcapacity=3), "pools[0].maxcapacity: unknown key"),
        (lambda p: p[0].update(launch_configs=[]), "pools[0].launch_configs:"),
    ],
)
def test_an_old_table_that_cannot_be_read_is_named_by_its_key_path(edit, expected):
    pools = copy.deepcopy(POOLS)
    edit(pools)
    assert any(p.startswith(expected) for p in problems_of(pools)), problems_of(pools)


def test_an_azure_provider_without_a_subnet_cannot_be_converted():
    pools = [{**copy.deepcopy(POOLS[0]), "provider": "azure-b"}]
    found = convert(pools, {"azure-b": OldProvider("azure")}, owner="o@example.com").problems
    assert found and "subnet_id" in found[0]
