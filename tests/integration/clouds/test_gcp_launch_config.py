"""Taskcluster Google launch configs through the GCP provider to the simulated GCE.

The launch config is the instances.insert body (config-google.yml); what reaches the cloud must
be that body minus worker-manager's own keys, with exactly worker-manager's overrides
(services/worker-manager/src/providers/google.js `provision`) and wm's ownership labels. The
simulated GCE records each insert's body as sent, and refuses what GCE refuses; every refusal
is a launch error after which nothing was applied. Real google-cloud-compute SDK throughout.
"""

from __future__ import annotations

import copy
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from tests.fixtures.sim_gce import (
    GCE_DEPLOYMENT,
    GCE_PROJECT,
    GCE_ROOT_URL,
    GCE_WORKER_ACCOUNT,
    GCE_ZONE,
)
from wm.errors import ErrorCategory
from wm.model import LaunchSpec, WorkerState
from wm.providers.base import LaunchBatch, LaunchIntent, LaunchResult
from wm.providers.gcp.insert_body import request_id
from wm.providers.gcp.provider import GcpProvider
from wmsim.gcp.gce import SimGce
from wmsim.gcp.launch_config import example_launch_config

POOL = "proj-ci/gpu"
OWNER = "ci-team@example.com"
REGION = "us-central1"
IMAGES_PROJECT = "wm-images"
DEBIAN = "projects/debian-cloud/global/images/family/debian-12"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"
# What worker-manager leaves out of the launch config (google.js: _.omit).
NOT_SENT = {"region", "zone", "workerConfig", "workerManager", "capacityPerInstance"}

# A launch config as an operator writes it for worker-manager: a custom network and
# subnetwork, a boot disk from the pool's own image family, a data disk, a local SSD, a GPU,
# Spot scheduling, labels, a startup script and fields worker-manager knows nothing of.
FULL: dict[str, Any] = {
    "region": REGION,
    "zone": GCE_ZONE,
    "capacityPerInstance": 4,  # the deprecated top-level form; never reaches GCE
    "workerManager": {
        "launchConfigId": "gpu-spot",
        "capacityPerInstance": 4,
        "initialWeight": 0.5,
        "maxCapacity": 10,
    },
    "workerConfig": {"genericWorker": {"config": {"workerType": "gpu"}}},
    "machineType": f"zones/{GCE_ZONE}/machineTypes/n1-standard-8",
    "minCpuPlatform": "Intel Skylake",
    "description": "GPU workers on Spot VMs",
    "disks": [
        {
            "type": "PERSISTENT",
            "boot": True,
            "autoDelete": True,
            "labels": {"disk-role": "boot"},
            "initializeParams": {
                "sourceImage": f"projects/{IMAGES_PROJECT}/global/images/family/ci-worker",
                "diskSizeGb": 75,
                "diskType": f"zones/{GCE_ZONE}/diskTypes/pd-ssd",
                "labels": {"tier": "fast"},
            },
        },
        {
            "type": "PERSISTENT",
            "autoDelete": True,
            "deviceName": "cache",
            "initializeParams": {
                "diskSizeGb": 200,
                "diskType": f"zones/{GCE_ZONE}/diskTypes/pd-balanced",
            },
        },
        {
            "type": "SCRATCH",
            "autoDelete": True,
            "interface": "NVME",
            "labels": {"dropped": "yes"},
            "initializeParams": {"diskType": f"zones/{GCE_ZONE}/diskTypes/local-ssd"},
        },
    ],
    "networkInterfaces": [
        {
            "network": f"projects/{GCE_PROJECT}/global/networks/ci-net",
            "subnetwork": f"regions/{REGION}/subnetworks/ci-{REGION}",
            "accessConfigs": [
                {"name": "External NAT", "type": "ONE_TO_ONE_NAT", "networkTier": "STANDARD"}
            ],
        }
    ],
    "guestAccelerators": [
        {
            "acceleratorType": f"zones/{GCE_ZONE}/acceleratorTypes/nvidia-tesla-t4",
            "acceleratorCount": 1,
        }
    ],
    "scheduling": {
        "provisioningModel": "SPOT",
        "onHostMaintenance": "TERMINATE",
        "instanceTerminationAction": "DELETE",
    },
    "labels": {"team": "ci", "owner": "overridden"},
    "metadata": {"items": [{"key": "startup-script", "value": "#!/bin/sh\necho ready"}]},
    # Worker-manager always sets its own worker service account: this one is replaced.
    "serviceAccounts": [
        {
            "email": "someone@other.iam.gserviceaccount.com",
            "scopes": ["https://www.googleapis.com/auth/devstorage.read_only"],
        }
    ],
    "shieldedInstanceConfig": {"enableSecureBoot": True, "enableVtpm": True},
    "tags": {"items": ["ci-worker", "allow-ssh"]},
    "canIpForward": False,
}


def spec_of(launch_config: Mapping[str, Any], *, description: str = "GPU CI") -> LaunchSpec:
    manager = launch_config.get("workerManager") or {}
    return LaunchSpec(
        launch_config_id=manager.get("launchConfigId", "lc-test"),
        region=launch_config["zone"],
        capacity_per_worker=manager.get("capacityPerInstance", 1),
        launch_config=launch_config,
        worker_config=launch_config["workerConfig"],
        pool_owner=OWNER,
        pool_description=description,
    )


def launch(
    provider: GcpProvider, launch_config: Mapping[str, Any], **spec_args: Any
) -> LaunchResult:
    intent = LaunchIntent("w-0000", "token-0")
    batch = LaunchBatch(POOL, spec_of(launch_config, **spec_args), (intent,), "batch-gpu")
    (result,) = provider.create(batch)
    return result


def sdk(client: Callable[..., Any], sim: SimGce, method: str, **kwargs: Any) -> Any:
    """One call of the plain compute SDK against the simulation (its client closed after)."""
    with client(
        credentials=AnonymousCredentials(), client_options={"api_endpoint": sim.endpoint}
    ) as opened:
        answer = getattr(opened, method)(**kwargs)
        return list(answer) if method == "list" else answer


@pytest.fixture
def ci_network(sim_gce: SimGce) -> None:
    """The pool's network, subnetwork and image family, made with the compute SDK as an
    operator's tooling would."""
    sdk(
        compute_v1.NetworksClient,
        sim_gce,
        "insert_unary",
        project=GCE_PROJECT,
        network_resource=compute_v1.Network(name="ci-net", auto_create_subnetworks=False),
    )
    sdk(
        compute_v1.SubnetworksClient,
        sim_gce,
        "insert_unary",
        project=GCE_PROJECT,
        region=REGION,
        subnetwork_resource=compute_v1.Subnetwork(
            name=f"ci-{REGION}", network="global/networks/ci-net", ip_cidr_range="10.8.0.0/16"
        ),
    )
    sdk(
        compute_v1.ImagesClient,
        sim_gce,
        "insert_unary",
        project=IMAGES_PROJECT,
        image_resource=compute_v1.Image(name="ci-worker-20261201", family="ci-worker"),
    )


def worker_manager_labels(launch_config_id: str) -> dict[str, str]:
    return {
        "created-by": "taskcluster-wm-gcp-test",
        "managed-by": "taskcluster",
        "worker-pool-id": "proj-ci-gpu",
        "owner": "ci-team-example-com",
        "launch-config-id": launch_config_id,
    }


# 1 ------------------------------------------------------------------------------------------------


def test_a_full_launch_config_reaches_gce_as_itself_plus_worker_managers_overrides(
    sim_gce: SimGce, gcp_provider: GcpProvider, ci_network: None
):
    result = launch(gcp_provider, FULL)

    assert result.error is None and result.cloud_id is not None
    (sent,) = sim_gce.inserts()
    body = sent.body
    assert (sent.project, sent.zone, sent.error) == (GCE_PROJECT, GCE_ZONE, None)
    assert sent.request_id == request_id("token-0")
    # Nothing added and nothing lost: the launch config's keys, less worker-manager's, + name.
    assert set(body) == (set(FULL) - NOT_SENT) | {"name"}
    # Verbatim, field by field.
    for key in (
        "machineType",
        "minCpuPlatform",
        "description",
        "networkInterfaces",
        "guestAccelerators",
        "shieldedInstanceConfig",
        "tags",
        "canIpForward",
    ):
        assert body[key] == FULL[key], key
    # The overrides.
    assert body["name"] == "w-0000"  # wm names the instance after its worker
    tc_labels = worker_manager_labels("gpu-spot")
    assert body["labels"] == {
        "team": "ci",
        **tc_labels,  # worker-manager's `owner` wins over the launch config's
        "wm-deployment": GCE_DEPLOYMENT,
        "wm-provider": "gcp-test",
        "wm-pool": "proj-ci_gpu",
        "wm-worker": "w-0000",
        "wm-launch-config": "gpu-spot",
        "wm-batch": "batch-gpu",
    }
    assert body["disks"] == [
        {  # the disk's own labels move into initializeParams, worker-manager's after them
            "type": "PERSISTENT",
            "boot": True,
            "autoDelete": True,
            "initializeParams": {
                "sourceImage": f"projects/{IMAGES_PROJECT}/global/images/family/ci-worker",
                "diskSizeGb": "75",  # GCE's JSON writes int64 as a string
                "diskType": f"zones/{GCE_ZONE}/diskTypes/pd-ssd",
                "labels": {"tier": "fast", "disk-role": "boot", **tc_labels},
            },
        },
        {
            "type": "PERSISTENT",
            "autoDelete": True,
            "deviceName": "cache",
            "initializeParams": {
                "diskSizeGb": "200",
                "diskType": f"zones/{GCE_ZONE}/diskTypes/pd-balanced",
                "labels": tc_labels,
            },
        },
        {  # not PERSISTENT: its labels are dropped, none added
            "type": "SCRATCH",
            "autoDelete": True,
            "interface": "NVME",
            "initializeParams": {"diskType": f"zones/{GCE_ZONE}/diskTypes/local-ssd"},
        },
    ]
    assert body["serviceAccounts"] == [{"email": GCE_WORKER_ACCOUNT, "scopes": [CLOUD_PLATFORM]}]
    assert body["scheduling"] == {**FULL["scheduling"], "automaticRestart": False}
    startup, taskcluster, original_pool = body["metadata"]["items"]
    assert startup == FULL["metadata"]["items"][0]
    assert taskcluster["key"] == "taskcluster"
    assert json.loads(taskcluster["value"]) == {
        "workerPoolId": POOL,
        "providerId": "gcp-test",
        "workerGroup": GCE_ZONE,
        "rootUrl": GCE_ROOT_URL,
        "workerConfig": FULL["workerConfig"],
    }
    assert original_pool == {"key": "wm-pool", "value": POOL}  # the label lost its "/"
    assert set(body["metadata"]) == {"items"}


def test_the_launched_instance_is_what_the_body_says(
    sim_gce: SimGce, gcp_provider: GcpProvider, ci_network: None
):
    result = launch(gcp_provider, FULL)

    instance = sdk(
        compute_v1.InstancesClient,
        sim_gce,
        "get",
        project=GCE_PROJECT,
        zone=GCE_ZONE,
        instance="w-0000",
    )
    assert str(instance.id) == result.cloud_id == result.tc_worker_id
    assert instance.scheduling.provisioning_model == "SPOT"
    assert instance.scheduling.automatic_restart is False
    assert instance.machine_type.endswith(f"/zones/{GCE_ZONE}/machineTypes/n1-standard-8")
    [nic] = instance.network_interfaces
    assert nic.subnetwork.endswith(
        f"/projects/{GCE_PROJECT}/regions/{REGION}/subnetworks/ci-{REGION}"
    )
    assert nic.access_configs[0].nat_i_p  # an external address, for worker-runner
    assert [a.accelerator_count for a in instance.guest_accelerators] == [1]
    assert instance.min_cpu_platform == "Intel Skylake"
    assert [d.type_ for d in instance.disks] == ["PERSISTENT", "PERSISTENT", "SCRATCH"]
    [seen] = gcp_provider.list_instances(GCE_ZONE)
    assert seen.provider_data["spot"] is True
    assert seen.launch_config_id == "gpu-spot"


@pytest.mark.parametrize(
    ("change", "check"),
    [
        pytest.param(
            {"description": ""},
            lambda body: body["description"] == "GPU CI",
            id="no description: the pool's",
        ),
        pytest.param(
            {"labels": None, "metadata": None},
            lambda body: (
                set(body["labels"]) >= {"owner", "created-by"}
                and [i["key"] for i in body["metadata"]["items"]] == ["taskcluster", "wm-pool"]
            ),
            id="no labels or metadata: worker-manager's alone",
        ),
        pytest.param(
            {"scheduling": {}},
            lambda body: body["scheduling"] == {"automaticRestart": False},
            id="empty scheduling: automaticRestart false",
        ),
        pytest.param(
            {"serviceAccounts": []},
            lambda body: body["serviceAccounts"][0]["email"] == GCE_WORKER_ACCOUNT,
            id="service accounts: always the worker account",
        ),
        pytest.param(
            {
                "disks": [
                    {  # GCE's default disk type, unnamed: worker-manager leaves it unlabelled
                        "boot": True,
                        "labels": {"x": "y"},
                        "initializeParams": {"sourceImage": DEBIAN},
                    }
                ]
            },
            lambda body: (
                body["disks"] == [{"boot": True, "initializeParams": {"sourceImage": DEBIAN}}]
            ),
            id="a disk without type: its labels dropped",
        ),
    ],
)
def test_worker_managers_rules_case_by_case(
    sim_gce: SimGce,
    gcp_provider: GcpProvider,
    change: dict[str, Any],
    check: Callable[[dict[str, Any]], bool],
):
    launch_config = {**example_launch_config(GCE_ZONE, launch_config_id="lc-case"), **change}
    launch_config = {k: v for k, v in launch_config.items() if v is not None}

    result = launch(gcp_provider, launch_config)

    assert result.error is None
    (sent,) = sim_gce.inserts()
    assert check(sent.body), sent.body


# 2 ------------------------------------------------------------------------------------------------


def changed(path: str, value: Any) -> dict[str, Any]:
    """example_launch_config with the value at a dotted path (list indexes as numbers)
    replaced; None removes the key."""
    launch_config = copy.deepcopy(example_launch_config(GCE_ZONE, launch_config_id="lc-bad"))
    *parents, last = path.split(".")
    node: Any = launch_config
    for part in parents:
        node = node[int(part)] if part.isdigit() else node.setdefault(part, {})
    key: Any = int(last) if last.isdigit() else last
    if value is None:
        del node[key]
    else:
        node[key] = value
    return launch_config


UNKNOWN_NETWORK = [{"network": "global/networks/no-such-net"}]
UNKNOWN_SUBNETWORK = [{"subnetwork": f"regions/{REGION}/subnetworks/no-such-subnet"}]
OTHER_REGION_SUBNETWORK = [{"subnetwork": "regions/europe-west4/subnetworks/default"}]
DATA_DISK_ONLY = [
    {"type": "PERSISTENT", "autoDelete": True, "initializeParams": {"diskSizeGb": 10}}
]
GPU = [
    {"acceleratorType": f"zones/{GCE_ZONE}/acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}
]


@pytest.mark.parametrize(
    ("launch_config", "status_reason", "named"),
    [
        pytest.param(
            changed("networkInterfaces", UNKNOWN_NETWORK),
            "notFound",
            "no-such-net",
            id="unknown network",
        ),
        pytest.param(
            changed("networkInterfaces", UNKNOWN_SUBNETWORK),
            "notFound",
            "no-such-subnet",
            id="unknown subnetwork",
        ),
        pytest.param(
            changed("networkInterfaces", OTHER_REGION_SUBNETWORK),
            "invalid",
            "subnetwork",
            id="subnetwork in another region",
        ),
        pytest.param(
            changed(
                "disks.0.initializeParams.sourceImage",
                "projects/debian-cloud/global/images/family/debian-99",
            ),
            "notFound",
            "debian-99",
            id="unknown public image",
        ),
        pytest.param(
            changed("disks.0.initializeParams.sourceImage", "global/images/never-built"),
            "notFound",
            "never-built",
            id="unknown own image",
        ),
        pytest.param(
            changed("machineType", f"zones/{GCE_ZONE}/machineTypes/n1-standard-7"),
            "invalid",
            "n1-standard-7",
            id="unknown machine type",
        ),
        pytest.param(
            changed("machineType", "zones/europe-west4-b/machineTypes/e2-small"),
            "invalid",
            "machineType",
            id="machine type of another zone",
        ),
        pytest.param(
            changed("disks.0.initializeParams.diskType", f"zones/{GCE_ZONE}/diskTypes/pd-turbo"),
            "notFound",
            "pd-turbo",
            id="unknown disk type",
        ),
        pytest.param(changed("disks", DATA_DISK_ONLY), "invalid", "Boot disk", id="no boot disk"),
        pytest.param(changed("disks", []), "invalid", "Boot disk", id="no disks"),
        pytest.param(
            changed("scheduling", {"provisioningModel": "SPOTTY"}),
            "invalid",
            "provisioningModel",
            id="malformed spot: unknown model",
        ),
        pytest.param(
            changed("scheduling", {"provisioningModel": "SPOT", "onHostMaintenance": "MIGRATE"}),
            "invalid",
            "scheduling",
            id="malformed spot: live migration",
        ),
        pytest.param(
            changed("scheduling", {"instanceTerminationAction": "HIBERNATE"}),
            "invalid",
            "instanceTerminationAction",
            id="malformed spot: termination action",
        ),
        pytest.param(
            changed("guestAccelerators", GPU),
            "invalid",
            "live migration",
            id="GPU without onHostMaintenance TERMINATE",
        ),
        pytest.param(
            changed("guestAccelerators", [{**GPU[0], "acceleratorType": "nvidia-tesla-k9"}]),
            "invalid",
            "nvidia-tesla-k9",
            id="unknown accelerator",
        ),
        pytest.param(
            changed("networkInterfaces.0.accessConfigs.0.type", "TWO_TO_ONE_NAT"),
            "invalid",
            "accessConfigs",
            id="unknown access config type",
        ),
        pytest.param(
            changed("metadata", {"items": [{"key": "taskcluster", "value": "{}"}]}),
            "invalid",
            "duplicate keys: taskcluster",
            id="metadata item taskcluster given",
        ),
        pytest.param(
            changed("labels", {"Team": "ci"}), "invalid", "Team", id="label key with a capital"
        ),
        pytest.param(
            changed("minCpuPlatform", "Intel Pentium"),
            "invalid",
            "minCpuPlatform",
            id="unknown CPU platform",
        ),
    ],
)
def test_what_gce_refuses_is_a_launch_error_after_which_nothing_was_applied(
    sim_gce: SimGce,
    gcp_provider: GcpProvider,
    launch_config: dict[str, Any],
    status_reason: str,
    named: str,
):
    result = launch(gcp_provider, launch_config)

    assert result.cloud_id is None and result.error is not None
    assert result.error.category is ErrorCategory.BAD_CONFIG  # a human must fix the config
    assert result.error.code == status_reason
    assert result.error.nothing_applied  # a definite refusal: the intent can be dropped
    assert named in result.error.message
    assert sim_gce.instances() == []
    (sent,) = sim_gce.inserts()  # it reached the cloud, which said no
    assert sent.error == status_reason


# The launch configs Taskcluster's schema lets through and the API has no field for: the SDK
# cannot make an Instance of them, so nothing is sent and the error names the key.
@pytest.mark.parametrize(
    ("launch_config", "named"),
    [
        # worker-manager's own sample (test/fixtures/schemas/sample-google-config.json) holds
        # an EC2-style `launchConfig` beside the Google fields.
        pytest.param(
            changed("launchConfig", {"ImageId": "banana"}), '"launchConfig"', id="TC sample"
        ),
        pytest.param(
            changed("disks.0.initializeParams.sizeGb", 10), '"sizeGb"', id="misspelt disk field"
        ),
        pytest.param(changed("scheduling", {"preemptible": "yes"}), "preemptible", id="wrong type"),
        pytest.param(changed("labels", ["ci"]), "labels", id="labels not an object"),
    ],
)
def test_a_key_the_api_does_not_have_fails_the_launch_before_any_call(
    sim_gce: SimGce, gcp_provider: GcpProvider, launch_config: dict[str, Any], named: str
):
    result = launch(gcp_provider, launch_config)

    assert result.cloud_id is None and result.error is not None
    assert (result.error.category, result.error.code) == (
        ErrorCategory.BAD_CONFIG,
        "invalidLaunchConfig",
    )
    assert result.error.nothing_applied
    assert named in result.error.message
    assert "lc-bad" in result.error.message
    assert sim_gce.inserts() == []
    assert "instances.insert" not in sim_gce.faults.counts()


def test_the_same_body_sent_raw_is_refused_by_the_simulation_too(sim_gce: SimGce):
    body = {
        k: v for k, v in changed("launchConfig", {"ImageId": "banana"}).items() if k not in NOT_SENT
    }
    request = urllib.request.Request(
        f"{sim_gce.endpoint}/compute/v1/projects/{GCE_PROJECT}/zones/{GCE_ZONE}/instances",
        data=json.dumps({**body, "name": "raw"}).encode(),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)

    with refused.value as answer:
        error = json.loads(answer.read())["error"]
    assert (error["code"], error["errors"][0]["reason"]) == (400, "invalid")
    assert "launchConfig" in error["message"]


# 3 ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scheduling",
    [
        {"provisioningModel": "SPOT", "instanceTerminationAction": "STOP"},
        {"preemptible": True},  # the older form many Taskcluster pools still use
    ],
)
def test_spot_is_what_the_scheduling_says_and_a_preempted_vm_shows_why(
    sim_gce: SimGce, gcp_provider: GcpProvider, scheduling: dict[str, Any]
):
    result = launch(gcp_provider, changed("scheduling", scheduling))
    sim_gce.kill(str(result.cloud_id))

    [seen] = gcp_provider.list_instances(GCE_ZONE)
    assert seen.provider_data["spot"] is True
    assert (seen.state, seen.reason, seen.preempted) == (WorkerState.STOPPED, "preempted", True)


def test_a_spot_vm_told_to_delete_itself_is_gone_after_preemption(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    scheduling = {"provisioningModel": "SPOT", "instanceTerminationAction": "DELETE"}
    result = launch(gcp_provider, changed("scheduling", scheduling))

    sim_gce.kill(str(result.cloud_id))

    assert gcp_provider.list_instances(GCE_ZONE) == []
    operations = sdk(
        compute_v1.ZoneOperationsClient, sim_gce, "list", project=GCE_PROJECT, zone=GCE_ZONE
    )
    assert "compute.instances.preempted" in {op.operation_type for op in operations}


def test_a_standard_launch_config_is_not_spot(sim_gce: SimGce, gcp_provider: GcpProvider):
    launch(gcp_provider, example_launch_config(GCE_ZONE, launch_config_id="lc-std"))

    [seen] = gcp_provider.list_instances(GCE_ZONE)
    assert seen.provider_data["spot"] is False


# 4 ------------------------------------------------------------------------------------------------


def control(sim: SimGce, path: str, body: dict[str, Any] | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        sim.endpoint + path, data=data, method="GET" if data is None else "POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def test_networks_and_images_added_through_control_endpoints_can_be_launched_into(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    control(sim_gce, "/_sim/networks", {"project": GCE_PROJECT, "name": "build"})
    control(
        sim_gce,
        "/_sim/subnetworks",
        {"project": GCE_PROJECT, "region": REGION, "name": "build-a", "network": "build"},
    )
    control(
        sim_gce, "/_sim/images", {"project": GCE_PROJECT, "name": "builder-1", "family": "builder"}
    )
    launch_config = changed(
        "networkInterfaces", [{"subnetwork": f"regions/{REGION}/subnetworks/build-a"}]
    )
    launch_config = {
        **launch_config,
        "disks": [
            {
                **launch_config["disks"][0],
                "initializeParams": {"sourceImage": "global/images/family/builder"},
            }
        ],
    }

    result = launch(gcp_provider, launch_config)

    assert result.error is None
    [record] = control(sim_gce, "/_sim/creates")
    assert record["body"]["networkInterfaces"] == launch_config["networkInterfaces"]
    assert (record["zone"], record["error"]) == (GCE_ZONE, None)
    # The network knows its subnetwork; a second network of the same name is refused.
    network = sdk(compute_v1.NetworksClient, sim_gce, "get", project=GCE_PROJECT, network="build")
    assert [s.rsplit("/", 1)[-1] for s in network.subnetworks] == ["build-a"]
    with pytest.raises(urllib.error.HTTPError) as again:
        control(sim_gce, "/_sim/networks", {"project": GCE_PROJECT, "name": "build"})
    assert again.value.code == 409
    again.value.close()


def test_example_launch_configs_are_accepted_as_they_are(
    sim_gce: SimGce, gcp_provider: GcpProvider
):
    variants = [
        example_launch_config(GCE_ZONE),
        example_launch_config(GCE_ZONE, spot=True, public_ip=False, machine_type="n2-standard-4"),
        example_launch_config(
            "europe-west4-b", image="projects/ubuntu-os-cloud/global/images/family/ubuntu-2204-lts"
        ),
    ]
    for index, launch_config in enumerate(variants):
        intent = LaunchIntent(f"w-{index:04d}", f"token-{index}")
        batch = LaunchBatch(POOL, spec_of(launch_config), (intent,), f"batch-{index}")
        assert [r.error for r in gcp_provider.create(batch)] == [None]
    assert [r.error for r in sim_gce.inserts()] == [None, None, None]
    public = [bool(r.body["networkInterfaces"][0].get("accessConfigs")) for r in sim_gce.inserts()]
    assert public == [True, False, True]
    assert example_launch_config(GCE_ZONE, weight=0.25, max_capacity=3, capacity=2)[
        "workerManager"
    ] == {"capacityPerInstance": 2, "initialWeight": 0.25, "maxCapacity": 3}
