"""Taskcluster AWS launch configs through the real AWS provider and boto3 to the simulated EC2.

What reaches the cloud is read back from the sim's record of each RunInstances (decoded from
the Query API form into the dict boto3 takes): it must be the launch config's `launchConfig`
verbatim plus exactly worker-manager's overrides (services/worker-manager/src/providers/aws.js)
and wm's own ClientToken and ownership tags. What EC2 refuses, the sim refuses, and wm takes
each refusal as definite: nothing was launched, the launch failed with a pool error.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from tests.fixtures.sim_ec2 import EC2_DEPLOYMENT, EC2_REGION, EC2_ROOT_URL
from wm.errors import ErrorCategory
from wm.model import LaunchSpec, WorkerState
from wm.providers.aws.provider import AwsProvider
from wm.providers.base import (
    TAG_BATCH,
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    LaunchBatch,
    LaunchIntent,
    LaunchResult,
)
from wm.provisioning.launch_outcomes import judge_results
from wmsim.aws.ec2 import SimEc2
from wmsim.aws.moto_models import DEFAULT_IMAGE, KNOWN_IMAGES
from wmsim.aws.run_instances import example_launch_config
from wmsim.control import get_json

POOL = "proj-ci/linux-gpu"
OWNER = "ci-team@example.com"
LAUNCH_CONFIG = "lc-4f1e2d3c4b5a69788"
ZONE = f"{EC2_REGION}b"


@dataclass(frozen=True)
class Network:
    """What an operator creates before writing a launch config that names it."""

    vpc_id: str
    subnet_id: str
    security_group_id: str
    other_vpc_security_group_id: str  # the default VPC's default group
    key_name: str
    instance_profile_arn: str


def sdk(sim: SimEc2, service: str) -> Any:
    return boto3.client(
        service,
        endpoint_url=sim.endpoint,
        region_name=EC2_REGION,
        aws_access_key_id="x",
        aws_secret_access_key="x",
        config=Config(retries={"total_max_attempts": 1}),
    )


@pytest.fixture
def network(sim_ec2: SimEc2) -> Network:
    ec2, iam = sdk(sim_ec2, "ec2"), sdk(sim_ec2, "iam")
    vpc_id = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.20.1.0/24", AvailabilityZone=ZONE)
    group_id = ec2.create_security_group(
        GroupName="workers", Description="CI workers", VpcId=vpc_id
    )["GroupId"]
    [default_vpc] = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"]
    [default_group] = ec2.describe_security_groups(
        Filters=[
            {"Name": "group-name", "Values": ["default"]},
            {"Name": "vpc-id", "Values": [default_vpc["VpcId"]]},
        ]
    )["SecurityGroups"]
    ec2.create_key_pair(KeyName="ci-workers")
    profile = iam.create_instance_profile(InstanceProfileName="ci-worker")["InstanceProfile"]
    return Network(
        vpc_id=vpc_id,
        subnet_id=subnet["Subnet"]["SubnetId"],
        security_group_id=group_id,
        other_vpc_security_group_id=default_group["GroupId"],
        key_name="ci-workers",
        instance_profile_arn=profile["Arn"],
    )


def full_launch_config(network: Network) -> dict[str, Any]:
    """A launch config as an operator writes it, using most of RunInstances."""
    return {
        "region": EC2_REGION,
        "launchConfig": {
            "ImageId": DEFAULT_IMAGE,
            "InstanceType": "m5.xlarge",
            "SubnetId": network.subnet_id,
            "SecurityGroupIds": [network.security_group_id],
            "KeyName": network.key_name,
            "IamInstanceProfile": {"Arn": network.instance_profile_arn},
            "BlockDeviceMappings": [
                {
                    "DeviceName": "/dev/xvda",
                    "Ebs": {
                        "VolumeSize": 120,
                        "VolumeType": "gp3",
                        "Iops": 4000,
                        "DeleteOnTermination": True,
                        "Encrypted": True,
                    },
                },
                {"DeviceName": "/dev/xvdb", "VirtualName": "ephemeral0"},
            ],
            "InstanceMarketOptions": {
                "MarketType": "spot",
                "SpotOptions": {
                    "SpotInstanceType": "one-time",
                    "InstanceInterruptionBehavior": "terminate",
                    "MaxPrice": "0.25",
                },
            },
            "Placement": {"AvailabilityZone": ZONE, "Tenancy": "default"},
            "MetadataOptions": {
                "HttpTokens": "required",
                "HttpPutResponseHopLimit": 2,
                "HttpEndpoint": "enabled",
                "InstanceMetadataTags": "enabled",
            },
            "EbsOptimized": True,
            "Monitoring": {"Enabled": True},
            "InstanceInitiatedShutdownBehavior": "terminate",
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": [{"Key": "team", "Value": "ci"}]},
                {"ResourceType": "volume", "Tags": [{"Key": "cost-centre", "Value": "1234"}]},
                # A second instance specification: worker-manager merges it into the first.
                {"ResourceType": "instance", "Tags": [{"Key": "tier", "Value": ""}]},
                {"ResourceType": "network-interface", "Tags": [{"Key": "nic", "Value": "0"}]},
            ],
        },
        # launchConfigId is not one of the keys the schema forbids here; worker-manager's wins.
        "additionalUserData": {"deploymentId": "d-7", "launchConfigId": "from-the-user"},
        "workerConfig": {"genericWorker": {"config": {"idleTimeoutSecs": 90}}},
        "workerManager": {
            "launchConfigId": LAUNCH_CONFIG,
            "capacityPerInstance": 2,
            "initialWeight": 0.5,
            "maxCapacity": 10,
        },
    }


def with_network_interface(network: Network) -> dict[str, Any]:
    """The same pool placed through a network interface instead of SubnetId, with a root
    volume that only changes the image's type (no size: EC2 takes the image's)."""
    config = full_launch_config(network)
    launch = config["launchConfig"]
    del launch["SubnetId"], launch["SecurityGroupIds"]
    launch["NetworkInterfaces"] = [
        {
            "DeviceIndex": 0,
            "SubnetId": network.subnet_id,
            "Groups": [network.security_group_id],
            "AssociatePublicIpAddress": True,
            "DeleteOnTermination": True,
        }
    ]
    launch["BlockDeviceMappings"] = [
        {"DeviceName": "/dev/xvda", "Ebs": {"VolumeType": "gp3", "DeleteOnTermination": True}}
    ]
    return config


def spec_of(launch_config: Mapping[str, Any]) -> LaunchSpec:
    manager = launch_config.get("workerManager", {})
    return LaunchSpec(
        launch_config_id=manager.get("launchConfigId", LAUNCH_CONFIG),
        region=launch_config["region"],
        capacity_per_worker=manager.get("capacityPerInstance", 1),
        launch_config=launch_config,
        worker_config=launch_config.get("workerConfig", {}),
        pool_owner=OWNER,
    )


def batch_of(launch_config: Mapping[str, Any], count: int, token: str = "b-1") -> LaunchBatch:
    intents = tuple(LaunchIntent(f"{token}-w{i}", f"{token}-t{i}") for i in range(count))
    return LaunchBatch(POOL, spec_of(launch_config), intents, token)


def worker_manager_tags(provider: AwsProvider) -> list[dict[str, str]]:
    """aws.js: appended, in this order, to the instance and volume tags."""
    return [
        {"Key": "CreatedBy", "Value": f"taskcluster-wm-{provider.id}"},
        {"Key": "Owner", "Value": OWNER},
        {"Key": "ManagedBy", "Value": "taskcluster"},
        {"Key": "Name", "Value": POOL},
        {"Key": "WorkerPoolId", "Value": POOL},
    ]


def wm_tags(batch: LaunchBatch) -> list[dict[str, str]]:
    return [
        {"Key": TAG_DEPLOYMENT, "Value": EC2_DEPLOYMENT},
        {"Key": TAG_PROVIDER, "Value": "aws-test"},
        {"Key": TAG_POOL, "Value": POOL},
        {"Key": TAG_LAUNCH_CONFIG, "Value": batch.spec.launch_config_id},
        {"Key": TAG_BATCH, "Value": batch.batch_token},
    ]


@pytest.mark.parametrize("placed", [full_launch_config, with_network_interface])
def test_a_full_launch_config_reaches_ec2_verbatim_with_exactly_worker_managers_overrides(
    sim_ec2: SimEc2,
    aws_provider: AwsProvider,
    network: Network,
    placed: Callable[[Network], dict[str, Any]],
):
    config = placed(network)
    launched = batch_of(config, 3)

    results = aws_provider.create(launched)

    assert [r.error for r in results] == [None] * 3
    [sent] = sim_ec2.launch_requests()
    assert (sent.region, sent.error) == (EC2_REGION, None)
    assert sorted(sent.instance_ids) == sorted(r.cloud_id for r in results)
    parameters = dict(sent.parameters)
    given = config["launchConfig"]
    overrides = {"UserData", "MinCount", "MaxCount", "ClientToken", "TagSpecifications"}
    assert set(parameters) == set(given) | overrides
    for key in set(given) - overrides:
        assert parameters[key] == given[key], key
    # The counts (wm lets EC2 launch fewer than asked) and wm's idempotency token.
    assert (parameters["MinCount"], parameters["MaxCount"]) == (1, 3)
    assert parameters["ClientToken"] == launched.batch_token
    assert json.loads(parameters["UserData"]) == {
        "deploymentId": "d-7",
        "rootUrl": EC2_ROOT_URL,
        "workerPoolId": POOL,
        "providerId": aws_provider.id,
        "workerGroup": EC2_REGION,
        "launchConfigId": LAUNCH_CONFIG,
        "workerConfig": config["workerConfig"],
    }
    # Tags per resource type: other types as given, first; then instance and volume, each
    # one specification: the user's tags, worker-manager's, wm's.
    ours = worker_manager_tags(aws_provider) + wm_tags(launched)
    assert parameters["TagSpecifications"] == [
        {"ResourceType": "network-interface", "Tags": [{"Key": "nic", "Value": "0"}]},
        {
            "ResourceType": "instance",
            "Tags": [{"Key": "team", "Value": "ci"}, {"Key": "tier", "Value": ""}, *ours],
        },
        {"ResourceType": "volume", "Tags": [{"Key": "cost-centre", "Value": "1234"}, *ours]},
    ]
    # The launch spec itself is left as it was given.
    assert launched.spec.launch_config == placed(network)


def test_the_launched_instances_are_what_the_launch_config_describes(
    sim_ec2: SimEc2, aws_provider: AwsProvider, network: Network
):
    results = aws_provider.create(batch_of(full_launch_config(network), 2))

    described = sdk(sim_ec2, "ec2").describe_instances(InstanceIds=[r.cloud_id for r in results])
    instances = [i for r in described["Reservations"] for i in r["Instances"]]

    for instance in instances:
        assert instance["InstanceType"] == "m5.xlarge"
        assert (instance["SubnetId"], instance["VpcId"]) == (network.subnet_id, network.vpc_id)
        assert instance["Placement"]["AvailabilityZone"] == ZONE
        assert instance["KeyName"] == network.key_name
        assert [g["GroupId"] for g in instance["SecurityGroups"]] == [network.security_group_id]
        assert instance["InstanceLifecycle"] == "spot"
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert (tags["team"], tags["Owner"], tags[TAG_POOL]) == ("ci", OWNER, POOL)
    assert {r.provider_data["instance_type"] for r in results} == {"m5.xlarge"}


def test_spot_comes_from_the_launch_configs_market_options_and_is_pre_empted(
    sim_ec2: SimEc2, aws_provider: AwsProvider, network: Network
):
    # Scenario: every spot instance is taken back at once; on-demand ones never are.
    sim_ec2.faults.behaviour.update(preempt_share=1.0, preempt_within_s=0.0)
    spot = batch_of(full_launch_config(network), 2, token="spot")
    on_demand = batch_of(example_launch_config(EC2_REGION), 1, token="on-demand")

    spot_ids = {r.cloud_id for r in aws_provider.create(spot)}
    [kept] = aws_provider.create(on_demand)
    listed = {i.cloud_id: i for i in aws_provider.list_instances(EC2_REGION)}

    for cloud_id in spot_ids:
        assert listed[cloud_id].preempted
        assert listed[cloud_id].reason == "Server.SpotInstanceTermination"
        assert listed[cloud_id].provider_data["spot"] is True
    assert not listed[kept.cloud_id].preempted
    assert listed[kept.cloud_id].state is WorkerState.RUNNING
    assert listed[kept.cloud_id].provider_data["spot"] is False


def test_only_the_spot_market_makes_spot_instances(sim_ec2: SimEc2, aws_provider: AwsProvider):
    capacity_block = example_launch_config(EC2_REGION)
    capacity_block["launchConfig"].update(
        InstanceMarketOptions={"MarketType": "capacity-block"},
        CapacityReservationSpecification={
            "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
        },
    )
    spot = example_launch_config(EC2_REGION, spot=True)

    aws_provider.create(batch_of(capacity_block, 1, token="block"))
    aws_provider.create(batch_of(spot, 1, token="spot"))

    assert sorted((vm.tags[TAG_BATCH], vm.spot) for vm in sim_ec2.instances()) == [
        ("block", False),
        ("spot", True),
    ]


def test_the_example_launch_config_is_taskclusters_shape_and_launches_as_it_is(
    sim_ec2: SimEc2, aws_provider: AwsProvider
):
    config = example_launch_config(
        EC2_REGION,
        instance_type="c5.large",
        spot=True,
        capacity=4,
        launch_config_id="lc-example",
        weight=0.25,
        max_capacity=8,
        worker_config={"queue": "x"},
    )

    [result] = aws_provider.create(batch_of(config, 1))

    assert config == {
        "region": EC2_REGION,
        "launchConfig": {
            "ImageId": DEFAULT_IMAGE,
            "InstanceType": "c5.large",
            "InstanceMarketOptions": {
                "MarketType": "spot",
                "SpotOptions": {
                    "SpotInstanceType": "one-time",
                    "InstanceInterruptionBehavior": "terminate",
                },
            },
        },
        "workerManager": {
            "capacityPerInstance": 4,
            "launchConfigId": "lc-example",
            "initialWeight": 0.25,
            "maxCapacity": 8,
        },
        "workerConfig": {"queue": "x"},
    }
    assert result.error is None
    assert [vm.spot for vm in sim_ec2.instances()] == [True]


def changed(network: Network, **launch_config: Any) -> dict[str, Any]:
    config = example_launch_config(EC2_REGION, launch_config_id=LAUNCH_CONFIG)
    config["launchConfig"].update(launch_config)
    return config


# Each launch config EC2 refuses, and EC2's error code. `sent` says whether the request left
# wm (the provider refuses user data over 16 KiB, and botocore unknown parameters, itself).
REFUSALS: list[Any] = [
    pytest.param(
        lambda n: changed(n, SubnetId="subnet-0123456789abcdef0"),
        "InvalidSubnetID.NotFound",
        True,
        id="unknown-subnet",
    ),
    pytest.param(
        lambda n: changed(n, SecurityGroupIds=["sg-0123456789abcdef0"]),
        "InvalidGroup.NotFound",
        True,
        id="unknown-security-group",
    ),
    pytest.param(
        lambda n: changed(n, SecurityGroups=["no-such-group"]),
        "InvalidGroup.NotFound",
        True,
        id="unknown-security-group-name",
    ),
    pytest.param(
        lambda n: changed(
            n, SubnetId=n.subnet_id, SecurityGroupIds=[n.other_vpc_security_group_id]
        ),
        "InvalidParameter",
        True,
        id="security-group-of-another-vpc",
    ),
    pytest.param(
        lambda n: changed(
            n,
            NetworkInterfaces=[
                {"DeviceIndex": 0, "SubnetId": n.subnet_id, "Groups": ["sg-0123456789abcdef0"]}
            ],
        ),
        "InvalidGroup.NotFound",
        True,
        id="unknown-security-group-on-an-interface",
    ),
    pytest.param(
        lambda n: changed(n, ImageId="ami-00000000000000001"),
        "InvalidAMIID.NotFound",
        True,
        id="unknown-image",
    ),
    pytest.param(
        lambda n: changed(n, ImageId="ami-blabla"),
        "InvalidAMIID.Malformed",
        True,
        id="malformed-image",
    ),
    pytest.param(
        lambda n: changed(n, KeyName="nobodys-key"),
        "InvalidKeyPair.NotFound",
        True,
        id="unknown-key-pair",
    ),
    pytest.param(
        lambda n: changed(n, IamInstanceProfile={"Name": "nobodys-profile"}),
        "InvalidParameterValue",
        True,
        id="unknown-instance-profile",
    ),
    pytest.param(
        lambda n: changed(n, InstanceMarketOptions={"MarketType": "spotty"}),
        "InvalidParameterValue",
        True,
        id="spot-block-unknown-market",
    ),
    pytest.param(
        lambda n: changed(
            n,
            InstanceMarketOptions={
                "MarketType": "spot",
                "SpotOptions": {
                    "SpotInstanceType": "persistent",
                    "InstanceInterruptionBehavior": "terminate",
                },
            },
        ),
        "InvalidParameterCombination",
        True,
        id="spot-block-persistent-terminated",
    ),
    pytest.param(
        lambda n: changed(
            n,
            InstanceMarketOptions={"MarketType": "spot", "SpotOptions": {"MaxPrice": "cheap"}},
        ),
        "InvalidParameterValue",
        True,
        id="spot-block-price-not-a-number",
    ),
    pytest.param(
        lambda n: changed(n, InstanceMarketOptions={"SpotOptions": {"MaxPrice": "0.1"}}),
        "MissingParameter",
        True,
        id="spot-block-without-market-type",
    ),
    pytest.param(
        lambda n: changed(n, InstanceMarketOptions={"MarketType": "capacity-block"}),
        "InvalidParameterCombination",
        True,
        id="capacity-block-without-its-reservation",
    ),
    pytest.param(
        lambda n: changed(n, InstanceType="m5.enormous"),
        "InvalidParameterValue",
        True,
        id="unknown-instance-type",
    ),
    pytest.param(
        lambda n: changed(n, Placement={"AvailabilityZone": "us-west-2a"}),
        "InvalidParameterValue",
        True,
        id="zone-of-another-region",
    ),
    pytest.param(
        lambda n: changed(n, MetadataOptions={"HttpTokens": "always"}),
        "InvalidParameterValue",
        True,
        id="metadata-tokens-unknown",
    ),
    pytest.param(
        lambda n: changed(
            n, TagSpecifications=[{"ResourceType": "image", "Tags": [{"Key": "a", "Value": "b"}]}]
        ),
        "InvalidParameterValue",
        True,
        id="tags-for-what-runinstances-does-not-make",
    ),
    pytest.param(
        # worker-manager appends its own Name tag without removing the user's (aws.js); EC2
        # then refuses the duplicate key, for worker-manager as for wm.
        lambda n: changed(
            n,
            TagSpecifications=[
                {"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": "mine"}]}
            ],
        ),
        "InvalidParameterValue",
        True,
        id="tag-key-worker-manager-sets-too",
    ),
    pytest.param(
        lambda n: changed(
            n, BlockDeviceMappings=[{"DeviceName": "/dev/xvda", "Ebs": {"VolumeType": "gp9"}}]
        ),
        "InvalidParameterValue",
        True,
        id="volume-type-unknown",
    ),
    pytest.param(
        lambda n: {
            **changed(n),
            "additionalUserData": {"script": "x" * 17_000},
        },
        "UserDataTooLong",
        False,
        id="user-data-too-long",
    ),
    pytest.param(
        lambda n: changed(n, TagSpecifications=[{"ResourceType": "instance", "Tags": "a=b"}]),
        "ParamValidationError",
        False,
        id="tags-not-a-list",
    ),
    pytest.param(
        lambda n: changed(n, TagSpecifications="instance"),
        "ParamValidationError",
        False,
        id="tag-specifications-not-a-list",
    ),
    pytest.param(
        lambda n: changed(n, ImageIdentifier="ami-0abcdef1234567890"),
        "ParamValidationError",
        False,
        id="not-a-runinstances-parameter",
    ),
]


@pytest.mark.parametrize(("make_config", "code", "sent"), REFUSALS)
def test_a_launch_config_ec2_refuses_fails_its_launch_definitely(
    sim_ec2: SimEc2,
    aws_provider: AwsProvider,
    network: Network,
    make_config: Callable[[Network], dict[str, Any]],
    code: str,
    sent: bool,
):
    launched = batch_of(make_config(network), 2)

    results = aws_provider.create(launched)

    errors = [r.error for r in results]
    assert all(e is not None for e in errors)
    assert {(e.category, e.code) for e in errors} == {(ErrorCategory.BAD_CONFIG, code)}
    # A definite refusal: nothing was launched, so the rows stop and the pool gets an error.
    assert all(e.nothing_applied for e in errors)
    assert sim_ec2.instances() == []
    outcomes, pool_errors = judge_results(aws_provider.id, [launched], by_worker(results))
    assert {o.stop_reason for o in outcomes} == {f"launch failed: bad-config {code}"}
    assert [(e.pool_id, e.title) for e in pool_errors] == [(POOL, f"launch failed: {code}")]
    # What reached the cloud, and the refusal it got.
    recorded = [(r.error, r.instance_ids) for r in sim_ec2.launch_requests()]
    assert recorded == ([(code, ())] if sent else [])


def by_worker(results: list[LaunchResult]) -> dict[str, LaunchResult]:
    return {r.worker_id: r for r in results}


def test_the_sims_refusals_are_ec2s_error_answers(sim_ec2: SimEc2):
    # What any SDK user meets: botocore raises a ClientError with EC2's code and message.
    ec2 = sdk(sim_ec2, "ec2")

    with pytest.raises(ClientError) as raised:
        ec2.run_instances(
            ImageId=DEFAULT_IMAGE, MinCount=1, MaxCount=1, UserData="#!/bin/sh\n" * 2000
        )

    error = raised.value.response["Error"]
    assert (error["Code"], error["Message"]) == (
        "InvalidParameterValue",
        "User data is limited to 16384 bytes",
    )
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_images_exist_as_the_sim_knows_them_or_as_registered(sim_ec2: SimEc2):
    ec2 = sdk(sim_ec2, "ec2")
    # Taskcluster's own fixtures name images like this one; a test or demo registers them.
    get_json(
        f"{sim_ec2.endpoint}/_sim/images",
        method="POST",
        body={"image_id": "ami-blabla", "region": EC2_REGION},
    )

    for image_id in (*KNOWN_IMAGES, "ami-blabla"):
        ec2.run_instances(ImageId=image_id, MinCount=1, MaxCount=1)
    with pytest.raises(ClientError) as raised:
        sdk(sim_ec2, "ec2").run_instances(ImageId="ami-blabla2", MinCount=1, MaxCount=1)

    assert raised.value.response["Error"]["Code"] == "InvalidAMIID.Malformed"
    assert sorted(i["ImageId"] for i in ec2.describe_images()["Images"]) == sorted(
        (*KNOWN_IMAGES, "ami-blabla")
    )


def test_the_record_is_served_to_other_processes(sim_ec2: SimEc2, aws_provider: AwsProvider):
    config = example_launch_config(EC2_REGION, launch_config_id=LAUNCH_CONFIG)
    [result] = aws_provider.create(batch_of(config, 1, token="served"))

    counted = sim_ec2.faults.counts()
    [served] = get_json(f"{sim_ec2.endpoint}/_sim/launch-requests")

    assert served["region"] == EC2_REGION
    assert served["error"] is None
    assert served["instance_ids"] == [result.cloud_id]
    assert {k: served["parameters"][k] for k in config["launchConfig"]} == config["launchConfig"]
    assert json.loads(served["parameters"]["UserData"])["launchConfigId"] == LAUNCH_CONFIG
    # A control request is not an EC2 request: it is not counted.
    assert sim_ec2.faults.counts() == counted


def test_user_data_that_is_not_text_is_recorded_as_sent(sim_ec2: SimEc2):
    gzipped = bytes([0x1F, 0x8B, 0x08, 0x00, 0xFF])

    sdk(sim_ec2, "ec2").run_instances(
        ImageId=DEFAULT_IMAGE, MinCount=1, MaxCount=1, UserData=gzipped
    )

    [sent] = sim_ec2.launch_requests()
    assert base64.b64decode(sent.parameters["UserData"]) == gzipped
