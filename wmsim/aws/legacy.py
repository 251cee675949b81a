"""An EC2 instance made as Taskcluster's worker-manager makes it (services/worker-manager/src/
providers/aws.js, `provision`), through boto3: the launch config's `launchConfig` verbatim as
the RunInstances parameters, worker-manager's UserData, one instance per call here, and its
five tags appended to the instance's and the volumes' tag specifications. Nothing of wm's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from wmsim.cloud import LegacyLaunch, LegacyVm

# Fixed fake keys: the sim takes any; explicit keys keep boto3 away from metadata addresses.
ACCESS_KEY_ID = "AKIALEGACYWORKERMGR0"
SECRET_ACCESS_KEY = "legacy-worker-manager-secret"


def capacity(launch_config: Mapping[str, Any]) -> int:
    """worker-manager's capacityPerInstance: workerManager's, else the deprecated top-level."""
    wm_part = launch_config.get("workerManager") or {}
    return int(wm_part.get("capacityPerInstance") or launch_config.get("capacityPerInstance") or 1)


def tags(launch: LegacyLaunch) -> list[dict[str, str]]:
    """The tags worker-manager appends on the instance and on its volumes, in its order."""
    return [
        {"Key": "CreatedBy", "Value": f"taskcluster-wm-{launch.provider_id}"},
        {"Key": "Owner", "Value": launch.owner},
        {"Key": "ManagedBy", "Value": "taskcluster"},
        {"Key": "Name", "Value": launch.pool_id},
        {"Key": "WorkerPoolId", "Value": launch.pool_id},
    ]


def run_instances_request(launch: LegacyLaunch) -> dict[str, Any]:
    cfg = launch.launch_config
    spec = json.loads(json.dumps(cfg["launchConfig"]))
    instance_tags: list[dict[str, str]] = []
    volume_tags: list[dict[str, str]] = []
    others = []
    for item in spec.get("TagSpecifications") or []:
        if item.get("ResourceType") == "instance":
            instance_tags += item.get("Tags") or []
        elif item.get("ResourceType") == "volume":
            volume_tags += item.get("Tags") or []
        else:
            others.append(item)
    user_data = {
        **(cfg.get("additionalUserData") or {}),
        "rootUrl": launch.root_url,
        "workerPoolId": launch.pool_id,
        "providerId": launch.provider_id,
        "workerGroup": cfg["region"],
        "launchConfigId": launch.launch_config_id,
        "workerConfig": cfg.get("workerConfig") or {},
    }
    return {
        **spec,
        # botocore base64-encodes UserData itself (worker-manager's SDK does not).
        "UserData": json.dumps(user_data),
        "MinCount": 1,
        "MaxCount": 1,
        "TagSpecifications": [
            *others,
            {"ResourceType": "instance", "Tags": [*instance_tags, *tags(launch)]},
            {"ResourceType": "volume", "Tags": [*volume_tags, *tags(launch)]},
        ],
    }


def launch(launch: LegacyLaunch) -> LegacyVm:
    import boto3
    from botocore.config import Config

    region = str(launch.launch_config["region"])
    client = boto3.client(
        "ec2",
        region_name=region,
        endpoint_url=launch.settings["endpoint"],
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        config=Config(retries={"total_max_attempts": 1}),
    )
    try:
        reply = client.run_instances(**run_instances_request(launch))
    finally:
        client.close()
    instance = reply["Instances"][0]
    return LegacyVm(
        worker_id=instance["InstanceId"],
        worker_group=region,
        capacity=capacity(launch.launch_config),
        provider_data={
            "region": region,
            "imageId": instance.get("ImageId"),
            "instanceType": instance.get("InstanceType"),
            "availabilityZone": (instance.get("Placement") or {}).get("AvailabilityZone"),
            "privateIp": instance.get("PrivateIpAddress"),
            "owner": reply.get("OwnerId"),
            "state": instance["State"]["Name"],
            "workerConfig": launch.launch_config.get("workerConfig") or {},
        },
    )


def terminate(settings: Mapping[str, Any], vm: LegacyVm) -> None:
    """worker-manager's removeWorker: TerminateInstances (volumes go by DeleteOnTermination)."""
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "ec2",
        region_name=vm.worker_group,
        endpoint_url=settings["endpoint"],
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
        config=Config(retries={"total_max_attempts": 1}),
    )
    try:
        client.terminate_instances(InstanceIds=[vm.worker_id])
    finally:
        client.close()
