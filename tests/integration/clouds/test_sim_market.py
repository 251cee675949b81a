"""The simulated clouds under a market scenario (wmsim/market_sim.py, issue 40): creates an
offering has no spare capacity for are refused as each cloud refuses them, in its own shape
and place, and wm reads each refusal as CAPACITY (or QUOTA) with the scope the cloud's words
give; spot VMs are reclaimed through each cloud's own pre-emption path; every VM is billed.
Real SDKs and wm's providers against the sims; nothing patched."""

from __future__ import annotations

import json
import time
import urllib.error
from collections.abc import Callable
from pathlib import Path
from typing import Any

import boto3
import pytest
from azure.core.exceptions import HttpResponseError
from azure.mgmt.resource.deployments import DeploymentsMgmtClient
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.sim_arm import (
    AZURE_RESOURCE_GROUP,
    AZURE_SUBSCRIPTION,
    compute_client,
    sdk_credential,
    sdk_options,
)
from tests.fixtures.sim_gce import GCE_ZONE
from wm.errors import ON_DEMAND, SPOT, ErrorCategory, ErrorScope
from wm.model import LaunchSpec, WorkerRef, WorkerState
from wm.providers.aws.errors import classify as classify_ec2
from wm.providers.aws.errors import error_scope as ec2_scope
from wm.providers.aws.provider import AwsProvider
from wm.providers.azure import arm_workers
from wm.providers.azure.errors import classify as classify_arm
from wm.providers.azure.errors import error_scope as arm_scope
from wm.providers.azure.provider import AzureProvider
from wm.providers.azure.states import REASON_SPOT_EVICTED
from wm.providers.azure.vm_body import vm_body
from wm.providers.base import LaunchBatch, LaunchIntent
from wm.providers.gcp.errors import error_scope as gce_scope
from wm.providers.gcp.provider import GcpProvider
from wmsim.aws.ec2 import SimEc2
from wmsim.aws.moto_models import DEFAULT_IMAGE
from wmsim.aws.run_instances import example_launch_config as ec2_launch_config
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.azure.launch_configs import example_launch_config as arm_launch_config
from wmsim.azure.templates import WORKER_TEMPLATE
from wmsim.control import SimClient
from wmsim.gcp.gce import SimGce
from wmsim.gcp.launch_config import example_launch_config as gce_launch_config
from wmsim.market import SimOffering
from wmsim.market_sim import MarketSettings

POOL = "proj-ci/market"
WORKER_IMAGE = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/images/providers/Microsoft.Compute/"
    "images/win2022"
)
LC = "lc-market"
EC2_TYPE, GCE_TYPE, ARM_SIZE = "m5.large", "n2-standard-4", "Standard_D8ads_v5"
# us-east-1a, us-central1-a and Azure eastus zone 1 are dry from the start; their neighbours
# have plenty; eastus zone 2 holds a few (tight); westeurope's spot quota is two instances.
SCENARIO = f"""
name = "test-dry"
hours = 2
[regimes]
enabled = false
[[offerings]]
key = "aws/us-east-1/us-east-1a/{EC2_TYPE}/spot"
capacity = 50
[[offerings]]
key = "aws/us-east-1/us-east-1b/{EC2_TYPE}/spot"
capacity = 50
[[offerings]]
key = "aws/us-east-1/us-east-1c/{EC2_TYPE}/spot"
capacity = 50
[[offerings]]
key = "aws/us-east-1/us-east-1d/{EC2_TYPE}/spot"
capacity = 50
[[offerings]]
key = "gcp/us-central1/us-central1-a/{GCE_TYPE}/spot"
capacity = 50
[[offerings]]
key = "gcp/us-central1/us-central1-b/{GCE_TYPE}/spot"
capacity = 50
[[offerings]]
key = "azure/eastus/1/{ARM_SIZE}/spot"
capacity = 50
[[offerings]]
key = "azure/eastus/2/{ARM_SIZE}/spot"
capacity = 50
[[offerings]]
key = "azure/westeurope/*/{ARM_SIZE}/spot"
capacity = 50
[[events]]
place = "aws/us-east-1/us-east-1a"
regime = "dry"
at_min = 0
for_min = 120
[[events]]
place = "gcp/us-central1/us-central1-a"
regime = "dry"
at_min = 0
for_min = 120
[[events]]
place = "azure/eastus/1"
regime = "dry"
at_min = 0
for_min = 120
[[events]]
place = "azure/eastus/2"
regime = "tight"
at_min = 0
for_min = 120
[[events]]
place = "aws/us-east-1/us-east-1b"
regime = "dry"
at_min = 2
for_min = 60
reclaim = 0.999
[[quotas]]
cloud = "azure"
region = "westeurope"
market = "spot"
instances = 2
[[offerings]]
key = "azure/westus2/*/{ARM_SIZE}/spot"
capacity = 50
[[events]]
place = "azure/westus2/*"
regime = "dry"
at_min = 0
for_min = 120
[[offerings]]
key = "azure/centralus/*/{ARM_SIZE}/spot"
capacity = 20
[[events]]
place = "azure/centralus/*"
regime = "tight"
at_min = 0
for_min = 120
[[offerings]]
key = "gcp/us-east1/us-east1-b/{GCE_TYPE}/spot"
capacity = 50
[[events]]
place = "gcp/us-east1/us-east1-b"
regime = "dry"
at_min = 2
for_min = 60
reclaim = 0.999
[[offerings]]
key = "azure/northeurope/*/{ARM_SIZE}/spot"
capacity = 50
[[events]]
place = "azure/northeurope/*"
regime = "dry"
at_min = 2
for_min = 60
reclaim = 0.999
[[offerings]]
key = "aws/eu-west-1/eu-west-1a/{EC2_TYPE}/spot"
capacity = 50
[[quotas]]
cloud = "aws"
region = "eu-west-1"
market = "spot"
instances = 2
[[offerings]]
key = "aws/eu-west-1/eu-west-1b/{EC2_TYPE}/on-demand"
capacity = 50
[[quotas]]
cloud = "aws"
region = "eu-west-1"
market = "on-demand"
instances = 1
[[offerings]]
key = "gcp/europe-west4/europe-west4-b/{GCE_TYPE}/spot"
capacity = 50
[[quotas]]
cloud = "gcp"
region = "europe-west4"
market = "spot"
instances = 1
"""


@pytest.fixture
def scenario(tmp_path: Path) -> MarketSettings:
    path = tmp_path / "test-dry.toml"
    path.write_text(SCENARIO)
    return MarketSettings(str(path), seed=7)


def wait_for(check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


# -- EC2 ------------------------------------------------------------------------------------


def ec2_spec(zone: str) -> LaunchSpec:
    region = zone[:-1]
    config = ec2_launch_config(region, instance_type=EC2_TYPE, spot=True, launch_config_id=LC)
    config["launchConfig"]["Placement"] = {"AvailabilityZone": zone}
    return LaunchSpec(
        launch_config_id=LC, region=region, capacity_per_worker=1, launch_config=config
    )


def ec2_batch(count: int, zone: str, token: str) -> LaunchBatch:
    intents = tuple(LaunchIntent(f"{token}-w{i}", f"{token}-t{i}") for i in range(count))
    return LaunchBatch(POOL, ec2_spec(zone), intents, batch_token=token)


def raw_ec2(sim: SimEc2) -> Any:
    return boto3.client(
        "ec2",
        endpoint_url=sim.endpoint,
        region_name="us-east-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1}),
    )


SPOT_OPTIONS = {
    "MarketType": "spot",
    "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
}


def test_ec2_refuses_a_dry_zone_with_insufficient_capacity_naming_zones_that_have_some(
    sim_ec2: SimEc2, aws_provider: AwsProvider, scenario: MarketSettings
):
    sim_ec2.use_market(scenario)

    launched = ec2_batch(2, "us-east-1a", "dry")
    results = aws_provider.create(launched)

    errors = [r.error for r in results]
    assert all(e is not None and e.category is ErrorCategory.CAPACITY for e in errors)
    error = errors[0]
    assert error is not None and error.code == "InsufficientInstanceCapacity"
    assert error.message.startswith(
        f"We currently do not have sufficient {EC2_TYPE} capacity in the Availability Zone you "
        "requested (us-east-1a)."
    )
    assert ec2_scope(error.code, error.message, launched.spec) == ErrorScope(
        ErrorCategory.CAPACITY,
        "us-east-1",
        zone="us-east-1a",
        instance_type=EC2_TYPE,
        market=SPOT,
        zones_with_capacity=("us-east-1b", "us-east-1c", "us-east-1d"),
    )
    assert sim_ec2.instances() == []


def test_ec2_refusal_is_a_500_in_ec2s_error_shape_and_all_or_nothing_when_min_is_max(
    sim_ec2: SimEc2, scenario: MarketSettings
):
    sim_ec2.use_market(scenario)
    market = sim_ec2.market
    assert market is not None
    zone_c = SimOffering("aws", "us-east-1", "us-east-1c", EC2_TYPE, "spot")
    spare = market.market.spare(zone_c, market.now())
    ec2 = raw_ec2(sim_ec2)
    asked = dict(
        ImageId=DEFAULT_IMAGE,
        InstanceType=EC2_TYPE,
        Placement={"AvailabilityZone": "us-east-1c"},
        InstanceMarketOptions=SPOT_OPTIONS,
    )

    with pytest.raises(ClientError) as refused:
        ec2.run_instances(MinCount=spare + 1, MaxCount=spare + 1, **asked)
    partial = ec2.run_instances(MinCount=1, MaxCount=spare + 5, **asked)

    answer = refused.value.response
    assert answer["ResponseMetadata"]["HTTPStatusCode"] == 500
    assert answer["Error"]["Code"] == "InsufficientInstanceCapacity"
    assert classify_ec2("aws-test", refused.value).category is ErrorCategory.CAPACITY
    # MinCount below MaxCount: EC2 launches what it has.
    assert len(partial["Instances"]) == spare


def test_ec2_refuses_a_create_naming_no_zone_only_when_no_zone_can_take_it_all(
    sim_ec2: SimEc2, scenario: MarketSettings
):
    sim_ec2.use_market(scenario)
    ec2 = raw_ec2(sim_ec2)
    asked = dict(ImageId=DEFAULT_IMAGE, InstanceType=EC2_TYPE, InstanceMarketOptions=SPOT_OPTIONS)

    placed = ec2.run_instances(MinCount=3, MaxCount=3, **asked)
    with pytest.raises(ClientError) as refused:
        ec2.run_instances(MinCount=500, MaxCount=500, **asked)

    # EC2 picks a zone with room (never the dry us-east-1a) and puts all three there.
    zones = {i["Placement"]["AvailabilityZone"] for i in placed["Instances"]}
    assert len(zones) == 1 and zones != {"us-east-1a"}
    assert refused.value.response["Error"]["Message"] == (
        f"We currently do not have sufficient {EC2_TYPE} capacity in zones with support for "
        "'gp2' volumes. Our system will be working on provisioning additional capacity."
    )


def test_ec2_reclaims_spot_in_a_dry_spell_with_the_spot_termination_reason(
    sim_ec2: SimEc2, aws_provider: AwsProvider, scenario: MarketSettings
):
    # Compressed: a market minute is a real second; us-east-1b runs dry at minute 2 and its
    # spell reclaims nearly all its spot within three minutes, after EC2's two-minute notice.
    sim_ec2.use_market(MarketSettings(scenario.scenario, scenario.seed, speed=60.0))
    launched = ec2_batch(3, "us-east-1b", "reclaimed")
    results = aws_provider.create(launched)
    assert all(r.cloud_id for r in results)

    def preempted() -> list[Any]:
        found = aws_provider.list_instances("us-east-1")
        return [i for i in found if i.state is WorkerState.STOPPED and i.preempted]

    reclaimed = wait_for(preempted)

    assert {i.reason for i in reclaimed} == {"Server.SpotInstanceTermination"}


def test_ec2_refuses_spot_beyond_the_spot_instance_quota(
    sim_ec2: SimEc2, aws_provider: AwsProvider, scenario: MarketSettings
):
    sim_ec2.use_market(scenario)

    first = aws_provider.create(ec2_batch(2, "eu-west-1a", "quota-1"))
    launched = ec2_batch(1, "eu-west-1a", "quota-2")
    (refused,) = aws_provider.create(launched)

    assert all(r.error is None for r in first)
    error = refused.error
    assert error is not None
    assert (error.category, error.code) == (ErrorCategory.QUOTA, "MaxSpotInstanceCountExceeded")
    assert ec2_scope(error.code, error.message, launched.spec) == ErrorScope(
        ErrorCategory.QUOTA, "eu-west-1", market=SPOT
    )


def test_ec2_refuses_on_demand_beyond_the_instance_limit(sim_ec2: SimEc2, scenario: MarketSettings):
    sim_ec2.use_market(scenario)
    ec2 = boto3.client(
        "ec2",
        endpoint_url=sim_ec2.endpoint,
        region_name="eu-west-1",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key="secret",
        config=Config(retries={"total_max_attempts": 1}),
    )
    placed = {"AvailabilityZone": "eu-west-1b"}

    with pytest.raises(ClientError) as refused:
        ec2.run_instances(
            ImageId=DEFAULT_IMAGE, InstanceType=EC2_TYPE, MinCount=2, MaxCount=2, Placement=placed
        )

    error = classify_ec2("aws-test", refused.value)
    assert (error.category, error.code) == (ErrorCategory.QUOTA, "InstanceLimitExceeded")
    assert "current instance limit of 1" in error.message
    config = ec2_launch_config("eu-west-1", instance_type=EC2_TYPE, launch_config_id=LC)
    spec = LaunchSpec(
        launch_config_id=LC, region="eu-west-1", capacity_per_worker=1, launch_config=config
    )
    assert ec2_scope(error.code, error.message, spec) == ErrorScope(
        ErrorCategory.QUOTA, "eu-west-1", family="Standard", market=ON_DEMAND
    )


# -- GCE ------------------------------------------------------------------------------------


def gce_batch(count: int, zone: str) -> LaunchBatch:
    config = gce_launch_config(zone, machine_type=GCE_TYPE, spot=True, launch_config_id=LC)
    spec = LaunchSpec(launch_config_id=LC, region=zone, capacity_per_worker=1, launch_config=config)
    intents = tuple(LaunchIntent(f"g-{zone}-{i}", f"t-{zone}-{i}") for i in range(count))
    return LaunchBatch(POOL, spec, intents, batch_token=f"batch-{zone}")


def test_gce_ends_the_insert_operation_with_pool_exhausted_and_the_zones_available(
    sim_gce: SimGce, gcp_provider: GcpProvider, scenario: MarketSettings
):
    assert GCE_ZONE == "us-central1-a"
    sim_gce.use_market(scenario)

    launched = gce_batch(1, GCE_ZONE)
    (result,) = gcp_provider.create(launched)

    error = result.error
    assert error is not None and result.cloud_id is None
    assert (error.category, error.code) == (
        ErrorCategory.CAPACITY,
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    )
    assert gce_scope(error.code, error.message, launched.spec) == ErrorScope(
        ErrorCategory.CAPACITY,
        "us-central1",
        zone=GCE_ZONE,
        instance_type=GCE_TYPE,
        market=SPOT,
        zones_with_capacity=("us-central1-b",),
    )
    assert sim_gce.instances() == []
    # The operation is GCE's: DONE, with the 503 GCE reports for it.
    (op,) = [o for o in sim_gce._state.ops.values() if o.operation_type == "insert"]
    assert op.http_error == (503, "SERVICE UNAVAILABLE")


def test_gce_refuses_spot_beyond_the_preemptible_cpus_quota(
    sim_gce: SimGce, gcp_provider: GcpProvider, scenario: MarketSettings
):
    sim_gce.use_market(scenario)

    (first,) = gcp_provider.create(gce_batch(1, "europe-west4-b"))
    launched = gce_batch(1, "europe-west4-b")
    (refused,) = gcp_provider.create(
        LaunchBatch(POOL, launched.spec, (LaunchIntent("g-second", "t-second"),), "second")
    )

    assert first.error is None
    error = refused.error
    assert error is not None
    assert (error.category, error.code) == (ErrorCategory.QUOTA, "QUOTA_EXCEEDED")
    assert "Quota 'PREEMPTIBLE_CPUS' exceeded.  Limit: 4.0 in region europe-west4." in error.message
    assert gce_scope(error.code, error.message, launched.spec) == ErrorScope(
        ErrorCategory.QUOTA, "europe-west4", market=SPOT
    )


def test_gce_preempts_spot_in_a_dry_spell(
    sim_gce: SimGce, gcp_provider: GcpProvider, scenario: MarketSettings
):
    # A market minute is a real second; us-east1-b runs dry at minute 2.
    sim_gce.use_market(MarketSettings(scenario.scenario, scenario.seed, speed=60.0))
    made = gcp_provider.create(gce_batch(3, "us-east1-b"))
    assert all(r.cloud_id for r in made)

    def preempted() -> list[Any]:
        found = gcp_provider.list_instances("us-east1-b")
        return [i for i in found if i.state is WorkerState.STOPPED and i.preempted]

    assert wait_for(preempted)


def test_gce_bills_what_it_made_per_pool_and_launch_config(
    sim_gce: SimGce, gcp_provider: GcpProvider, scenario: MarketSettings
):
    sim_gce.use_market(scenario)

    made = gcp_provider.create(gce_batch(2, "us-central1-b"))
    gcp_provider.terminate([WorkerRef(made[0].worker_id, "us-central1-b", made[0].cloud_id)])
    ledger = sim_gce._market_control("GET", "/_sim/ledger", None)

    assert ledger is not None
    status, bill = ledger
    assert status == 200 and len(bill["instances"]) == 2
    # Two instances of at least a minute each, at the market's spot price.
    market = sim_gce.market
    assert market is not None
    price = market.market.price(
        SimOffering("gcp", "us-central1", "us-central1-b", GCE_TYPE, "spot"), market.now()
    )
    assert bill["total"] >= 2 * price / 60 * 0.99
    assert bill["by_pool"] == {POOL: pytest.approx(bill["total"])}
    assert list(bill["by_launch_config"]) == [f"{POOL}/{LC}"]
    stopped = [row for row in bill["instances"] if row["stop_s"] is not None]
    assert [row["id"] for row in stopped] == [made[0].cloud_id]


# -- Azure ----------------------------------------------------------------------------------


def arm_config(location: str, zones: list[str] | None) -> dict[str, Any]:
    config = arm_launch_config(
        location,
        vm_size=ARM_SIZE,
        image="Canonical:ubuntu-24_04-lts:server:latest",
        launch_config_id=LC,
        subscription_id=AZURE_SUBSCRIPTION,
        resource_group=AZURE_RESOURCE_GROUP,
        spot=True,
    )
    if zones is not None:
        config["zones"] = zones
    return config


def arm_batch(workers: list[str], location: str, zones: list[str] | None) -> LaunchBatch:
    spec = LaunchSpec(
        launch_config_id=LC,
        region=location,
        capacity_per_worker=1,
        launch_config=arm_config(location, zones),
    )
    intents = tuple(LaunchIntent(w, f"token-{w}") for w in workers)
    return LaunchBatch(POOL, spec, intents, batch_token=f"batch-{workers[0]}")


def test_azure_accepts_the_put_and_fails_its_provisioning_with_zonal_allocation_failed(
    sim_arm: SimArm, azure_provider: AzureProvider, scenario: MarketSettings
):
    # Zone 2 holds a few D8 spot VMs (tight): more are accepted, and their provisioning fails.
    sim_arm.use_market(scenario)
    workers = [f"w-z2-{i}" for i in range(12)]

    created = azure_provider.create(arm_batch(workers, "eastus", ["2"]))
    late_body = vm_body(
        launch_config=arm_config("eastus", ["2"]),
        location="eastus",
        worker_id="w-late",
        tags={},
        admin_username="wmadmin",
        admin_password="Wm-9market",
        custom_data="e30=",
    )
    with compute_client(sim_arm) as compute:
        poller = compute.virtual_machines.begin_create_or_update(
            AZURE_RESOURCE_GROUP, "w-late", late_body
        )
        with pytest.raises(HttpResponseError) as failed:
            poller.result()

    assert all(r.error is None for r in created)  # every PUT accepted, as Azure accepts them
    # wm's scan sees the ones the zone had no room for stopped, with the failure's code.
    listed = {i.worker_id: i for i in azure_provider.list_instances("eastus")}
    states = {(i.state, i.reason) for i in listed.values()}
    assert (WorkerState.STOPPED, "ProvisioningState/failed/ZonalAllocationFailed") in states
    assert any(i.state is WorkerState.RUNNING for i in listed.values())
    # The SDK's poller raises the async operation's error; wm reads it as capacity.
    error = classify_arm("azure-test", failed.value)
    assert (error.category, error.code) == (ErrorCategory.CAPACITY, "ZonalAllocationFailed")
    spec = arm_batch(["w-late"], "eastus", ["2"]).spec
    assert arm_scope(error.code, error.message, spec) == ErrorScope(
        ErrorCategory.CAPACITY, "eastus", zone="2", instance_type=ARM_SIZE, market=SPOT
    )


def test_azure_evicts_spot_in_a_dry_spell(
    sim_arm: SimArm, azure_provider: AzureProvider, scenario: MarketSettings
):
    # A market minute is a real second; northeurope runs dry at minute 2.
    sim_arm.use_market(MarketSettings(scenario.scenario, scenario.seed, speed=60.0))
    made = azure_provider.create(arm_batch(["w-ne-1", "w-ne-2", "w-ne-3"], "northeurope", None))
    assert all(r.error is None for r in made)

    def evicted() -> list[Any]:
        found = azure_provider.list_instances("northeurope")
        return [i for i in found if i.state is WorkerState.STOPPED and i.preempted]

    assert {i.reason for i in wait_for(evicted)} == {REASON_SPOT_EVICTED}


def test_azure_answers_a_dry_zone_with_sku_not_available_at_once(
    sim_arm: SimArm, azure_provider: AzureProvider, scenario: MarketSettings
):
    sim_arm.use_market(scenario)

    launched = arm_batch(["w-dry"], "eastus", ["1"])
    (result,) = azure_provider.create(launched)

    error = result.error
    assert error is not None and result.cloud_id is None
    assert (error.category, error.code) == (ErrorCategory.CAPACITY, "SkuNotAvailable")
    assert f"Capacity Restrictions: {ARM_SIZE}" in error.message
    assert arm_scope(error.code, error.message, launched.spec) == ErrorScope(
        ErrorCategory.CAPACITY, "eastus", zone="1", instance_type=ARM_SIZE, market=SPOT
    )


def test_azure_refuses_spot_beyond_the_low_priority_cores_quota(
    sim_arm: SimArm, azure_provider: AzureProvider, scenario: MarketSettings
):
    sim_arm.use_market(scenario)

    launched = arm_batch(["w-q1", "w-q2", "w-q3"], "westeurope", None)
    results = azure_provider.create(launched)

    errors = [r.error for r in results if r.error is not None]
    assert len(errors) == 1  # the PUTs go out at once: any one of them is the third
    assert (errors[0].category, errors[0].code) == (ErrorCategory.QUOTA, "OperationNotAllowed")
    assert "exceeding approved LowPriorityCores quota" in errors[0].message
    assert "Current Limit: 16" in errors[0].message  # two D8 VMs: 16 cores
    assert arm_scope(errors[0].code, errors[0].message, launched.spec) == ErrorScope(
        ErrorCategory.QUOTA, "westeurope", market=SPOT
    )


def deployments_client(sim: SimArm) -> DeploymentsMgmtClient:
    return DeploymentsMgmtClient(sdk_credential(sim), AZURE_SUBSCRIPTION, **sdk_options(sim))


def worker_deployment(location: str, vm: str) -> dict[str, Any]:
    """The simulated ARM's worker template (Spot by default) for one VM."""
    values = {
        "location": location,
        "vmName": vm,
        "computerName": vm[-15:],
        "adminUsername": "wmadmin",
        "adminPassword": "Wm-Secret-12345",
        "customData": "e30=",
        "vmSize": ARM_SIZE,
        "imageId": WORKER_IMAGE,
        "subnetId": default_subnet_id(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP),
    }
    return {
        "properties": {
            "mode": "Incremental",
            "template": json.loads(WORKER_TEMPLATE.read_text()),
            "parameters": {name: {"value": value} for name, value in values.items()},
        }
    }


@pytest.mark.parametrize(
    ("location", "inner"),
    [("westus2", "SkuNotAvailable"), ("westeurope", "QuotaExceeded")],
    ids=["dry", "quota"],
)
def test_an_arm_deployment_fails_validation_where_azure_checks_sku_and_quota(
    sim_arm: SimArm, scenario: MarketSettings, location: str, inner: str
):
    sim_arm.use_market(scenario)
    sim_arm.register_image(WORKER_IMAGE, location)
    sim_arm.deployments.create_resource_group(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, location)
    with deployments_client(sim_arm) as client:
        for i in range(2 if location == "westeurope" else 0):  # the spot quota's two
            body = worker_deployment(location, f"vm-fill-{i}")
            client.deployments.begin_create_or_update(AZURE_RESOURCE_GROUP, f"d-{i}", body).result()

        with pytest.raises(HttpResponseError) as refused:
            client.deployments.begin_create_or_update(
                AZURE_RESOURCE_GROUP, "d-refused", worker_deployment(location, "vm-refused")
            )

    assert refused.value.status_code == 400
    error = refused.value.response.json()["error"]
    assert error["code"] == "InvalidTemplateDeployment"
    assert [d["code"] for d in error["details"]] == [inner]
    assert sim_arm.deployments.puts("d-refused")[0].error_code == "InvalidTemplateDeployment"
    # wm reads the reason inside ARM's validation refusal, not its wrapper.
    classified = classify_arm("azure", refused.value)
    category = ErrorCategory.CAPACITY if inner == "SkuNotAvailable" else ErrorCategory.QUOTA
    assert (classified.category, classified.code) == (category, inner)


def test_an_arm_deployment_whose_vm_finds_no_room_fails_with_allocation_failed(
    sim_arm: SimArm, scenario: MarketSettings
):
    # centralus holds a few D8 spot VMs (tight): the deployments beyond them are accepted and
    # fail while they run, their VM's operation with AllocationFailed.
    sim_arm.use_market(scenario)
    sim_arm.register_image(WORKER_IMAGE, "centralus")
    sim_arm.deployments.create_resource_group(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, "centralus")
    names = [f"d-c{i}" for i in range(6)]
    with deployments_client(sim_arm) as client:
        for i, name in enumerate(names):
            body = worker_deployment("centralus", f"vm-c{i}")
            client.deployments.begin_create_or_update(
                AZURE_RESOURCE_GROUP, name, body, polling=False
            ).result()

        def all_ended() -> list[Any]:
            found = [client.deployments.get(AZURE_RESOURCE_GROUP, name) for name in names]
            running = ("Accepted", "Running")
            return [] if any(d.properties.provisioning_state in running for d in found) else found

        ended = wait_for(all_ended)

    states = [d.properties.provisioning_state for d in ended]
    assert "Succeeded" in states and "Failed" in states
    failed = next(d for d in ended if d.properties.provisioning_state == "Failed")
    view = arm_workers.view("azure-test", AZURE_RESOURCE_GROUP, failed.as_dict())
    assert view.failure is not None and view.failure.startswith("AllocationFailed: ")


# -- the control API ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_the_market_is_set_and_the_ledger_read_over_each_sims_control_api(
    request: pytest.FixtureRequest, kind: str, scenario: MarketSettings
):
    sim = request.getfixturevalue({"aws": "sim_ec2", "gcp": "sim_gce", "azure": "sim_arm"}[kind])
    cert = getattr(sim, "cert_path", None)
    client = SimClient(kind, sim.endpoint, str(cert) if cert else None)

    with pytest.raises(urllib.error.HTTPError) as refused:
        client.use_market("no-such-scenario")
    set_to = client.use_market(scenario.scenario, seed=5, speed=2.0)
    ledger = client.ledger()
    client.use_market(None)

    assert refused.value.code == 400
    assert "no market scenario 'no-such-scenario'" in json.loads(refused.value.read())["error"]
    assert (set_to["scenario"], set_to["seed"], set_to["speed"]) == (scenario.scenario, 5, 2.0)
    assert (ledger["total"], ledger["instances"]) == (0.0, [])
    assert client.market() == {"scenario": None}


# -- without a market -----------------------------------------------------------------------


def test_without_a_market_nothing_is_refused_and_nothing_billed(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    results = aws_provider.create(ec2_batch(2, "us-east-1a", "plain"))

    assert all(r.error is None for r in results)
    assert sim_ec2._market_control("GET", "/_sim/ledger", None) == (
        200,
        {"now_s": None, "total": 0.0, "by_pool": {}, "by_launch_config": {}, "instances": []},
    )
