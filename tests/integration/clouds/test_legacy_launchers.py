"""The legacy launchers make VMs as Taskcluster's worker-manager does, through the real SDKs
against the simulated clouds: its names, tags, labels, boot data and separate resources."""

from __future__ import annotations

import base64
import json

from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBNET, compute_client, make_subnet
from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_PROJECT, GCE_ZONE
from tests.integration.clouds.test_azure_arm import (
    ARM_GROUP,
    IMAGE_ID,
    LOCATION,
    TEMPLATE,
    publish,
)
from tests.integration.clouds.test_azure_arm import launch_config as arm_launch_config
from tests.support.legacy_vms import LEGACY_ROOT_URL, legacy_vm, settings
from wmsim.clouds import sim_cloud

POOL = "proj_x/Linux_Big"


def test_ec2_instance_and_volumes_carry_worker_managers_tags_and_user_data(sim_ec2):
    vm = legacy_vm("aws", sim_ec2, provider_id="aws", pool_id=POOL, region=EC2_REGION)

    import boto3

    ec2 = boto3.client(
        "ec2",
        region_name=EC2_REGION,
        endpoint_url=sim_ec2.endpoint,
        aws_access_key_id="k",
        aws_secret_access_key="s",
    )
    raw = ec2.describe_instances(InstanceIds=[vm.worker_id])["Reservations"][0]["Instances"][0]
    expected = {
        "CreatedBy": "taskcluster-wm-aws",
        "Owner": "Relops@Example.com",
        "ManagedBy": "taskcluster",
        "Name": POOL,
        "WorkerPoolId": POOL,
    }
    assert {t["Key"]: t["Value"] for t in raw["Tags"]} == expected
    volumes = ec2.describe_volumes(
        Filters=[{"Name": "attachment.instance-id", "Values": [vm.worker_id]}]
    )["Volumes"]
    assert volumes and all({t["Key"]: t["Value"] for t in v["Tags"]} == expected for v in volumes)
    user_data = ec2.describe_instance_attribute(InstanceId=vm.worker_id, Attribute="userData")
    boot = json.loads(base64.b64decode(user_data["UserData"]["Value"]))
    assert boot["rootUrl"] == LEGACY_ROOT_URL and boot["workerGroup"] == EC2_REGION
    assert (vm.worker_group, vm.capacity) == (EC2_REGION, 1)

    sim_cloud("aws").legacy_terminate(settings("aws", sim_ec2), vm)
    assert [v.state for v in sim_ec2.instances()] in (["terminated"], ["gone"], [])


def test_gce_instance_is_named_labelled_and_addressed_by_its_numeric_id(sim_gce):
    pool = "proj_x/linux_big"  # GCE names are lowercase: so are the pools of GCE providers
    vm = legacy_vm("gcp", sim_gce, provider_id="fxci-level1-gcp", pool_id=pool, region=GCE_ZONE)

    (listed,) = sim_gce.instances()
    assert vm.worker_id == listed.cloud_id and vm.worker_id.isdigit()
    assert listed.name.startswith("proj-x-linux-big-") and len(listed.name) == 17 + 22
    assert listed.tags == {
        "created-by": "taskcluster-wm-fxci-level1-gcp",
        "managed-by": "taskcluster",
        "worker-pool-id": "proj-x-linux-big",
        "owner": "relops-example-com",
        "launch-config-id": "lc-legacy",
    }
    (insert,) = sim_gce.inserts()
    items = {i["key"]: i["value"] for i in insert.body["metadata"]["items"]}
    assert json.loads(items["taskcluster"])["workerPoolId"] == pool
    assert insert.body["scheduling"]["automaticRestart"] is False
    assert all(
        d["initializeParams"]["labels"]["created-by"] == "taskcluster-wm-fxci-level1-gcp"
        for d in insert.body["disks"]
        if d.get("type") == "PERSISTENT"
    )
    assert vm.provider_data["project"] == GCE_PROJECT

    sim_cloud("gcp").legacy_terminate(settings("gcp", sim_gce), vm)  # by the numeric id
    assert all(v.state in ("stopping", "gone") for v in sim_gce.instances())


def test_azure_sequential_worker_is_a_public_ip_a_nic_a_vm_and_its_disk(sim_arm):
    sim_arm.deployments.create_resource_group(
        settings("azure", sim_arm)["subscription_id"], AZURE_RESOURCE_GROUP, "eastus"
    )
    make_subnet(sim_arm, AZURE_SUBNET, "eastus")
    vm = legacy_vm(
        "azure", sim_arm, provider_id="azure2", pool_id=POOL, region="eastus", public_ip=True
    )

    assert vm.worker_id.startswith("vm-") and len(vm.worker_id) == 38
    kinds = sorted(r.split("/providers/")[1].split("/")[1] for r in sim_arm.resources())
    assert kinds == ["disks", "networkInterfaces", "publicIPAddresses", "virtualMachines"]
    with compute_client(sim_arm) as compute:
        model = compute.virtual_machines.get(AZURE_RESOURCE_GROUP, vm.worker_id)
    assert model.tags["created-by"] == "taskcluster-wm-azure2"
    assert model.tags["root-url"] == LEGACY_ROOT_URL
    assert model.tags["worker-pool-id"] == POOL
    assert model.storage_profile.os_disk.name == f"disk-{vm.worker_id[3:]}-os"
    nic_id = model.network_profile.network_interfaces[0].id
    assert nic_id.rsplit("/", 1)[1] == vm.provider_data["nic"]["name"]

    sim_cloud("azure").legacy_terminate(settings("azure", sim_arm), vm)
    assert sim_arm.resources() == []


def test_azure_arm_worker_is_a_tagged_deployment_whose_resources_go_with_it(sim_arm):
    sim_arm.register_image(IMAGE_ID, LOCATION)
    sim_arm.deployments.create_resource_group(
        settings("azure", sim_arm)["subscription_id"], AZURE_RESOURCE_GROUP, LOCATION
    )
    make_subnet(sim_arm, AZURE_SUBNET, LOCATION)
    config = arm_launch_config(publish(sim_arm, TEMPLATE))

    vm = legacy_vm(
        "azure", sim_arm, provider_id="azure2", pool_id=POOL, region=LOCATION, config=config
    )

    deployment = vm.provider_data["deployment"]["name"]
    assert deployment == "deploy-" + vm.worker_id.removeprefix("vm-")
    assert vm.provider_data["resourceGroupName"] == ARM_GROUP
    with compute_client(sim_arm) as compute:
        model = compute.virtual_machines.get(ARM_GROUP, vm.worker_id)
    assert model.tags["created-by"] == "taskcluster-wm-azure2"
    assert model.tags["team"] == "relops"  # the launch config's own tags, under worker-manager's
    assert any(ARM_GROUP.lower() in r.lower() for r in sim_arm.resources())

    sim_cloud("azure").legacy_terminate(settings("azure", sim_arm), vm)
    assert [r for r in sim_arm.resources() if ARM_GROUP.lower() in r.lower()] == []
