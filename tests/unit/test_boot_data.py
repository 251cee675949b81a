"""Boot data in worker-manager's shapes (services/worker-manager/src/providers/*.js), and
Azure VM names that fit a Taskcluster workerId."""

from __future__ import annotations

import base64
import json
import re

import pytest

from wm.kinds import aws, azure, gcp
from wm.providers.azure.names import vm_name

ROOT = "https://tc.example.com"
POOL = "proj-ci/linux"
WORKER_ID_PATTERN = re.compile(r"[a-zA-Z0-9_-]{1,38}")  # Taskcluster's workerId


def test_ec2_user_data_has_exactly_worker_managers_keys():
    data = aws.ec2_user_data(
        root_url=ROOT,
        pool_id=POOL,
        provider_id="aws",
        region="us-east-1",
        launch_config_id="lc-1",
        worker_config={"genericWorker": {"config": {}}},
    )
    assert data == {
        "rootUrl": ROOT,
        "workerPoolId": POOL,
        "providerId": "aws",
        "workerGroup": "us-east-1",
        "launchConfigId": "lc-1",
        "workerConfig": {"genericWorker": {"config": {}}},
    }


def test_gce_metadata_and_service_account_are_worker_managers():
    data = gcp.gce_metadata(
        root_url=ROOT, pool_id=POOL, provider_id="gcp", zone="us-central1-a", worker_config={}
    )
    assert data == {
        "workerPoolId": POOL,
        "providerId": "gcp",
        "workerGroup": "us-central1-a",
        "rootUrl": ROOT,
        "workerConfig": {},
    }
    assert gcp.gce_service_accounts("w@p.iam.gserviceaccount.com") == [
        {
            "email": "w@p.iam.gserviceaccount.com",
            "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
        }
    ]
    labels = gcp.gce_labels(pool_id=POOL, provider_id="gcp_1", launch_config_id="lc-1")
    assert labels["worker-pool-id"] == "proj-ci-linux"  # GCE label values: no "/"
    assert labels["created-by"] == "taskcluster-wm-gcp-1"


def test_azure_tags_carry_what_worker_runner_requires_and_custom_data_is_base64_json():
    tags = azure.azure_tags(
        root_url=ROOT,
        pool_id=POOL,
        provider_id="azure",
        location="eastus",
        launch_config_id="l",
        owner="ci@example.com",
    )
    assert {k: tags[k] for k in ("worker-pool-id", "provider-id", "worker-group", "root-url")} == {
        "worker-pool-id": POOL,
        "provider-id": "azure",
        "worker-group": "eastus",
        "root-url": ROOT,
    }
    custom = azure.azure_custom_data(
        root_url=ROOT, pool_id=POOL, provider_id="azure", location="eastus"
    )
    assert json.loads(base64.b64decode(custom)) == {
        "workerPoolId": POOL,
        "workerGroup": "eastus",
        "providerId": "azure",
        "rootUrl": ROOT,
        "workerConfig": {},
    }


@pytest.mark.parametrize(
    "worker_id",
    ["w0123456789abcd", "w-1", "w" * 60, "w.with.dots", "ends-with-", "has space"],
)
def test_azure_vm_names_are_valid_taskcluster_worker_ids_and_stable(worker_id):
    name = vm_name(worker_id)
    assert WORKER_ID_PATTERN.fullmatch(name)
    assert not name.endswith("-")
    assert vm_name(worker_id) == name  # the same intent always names the same VM


def test_distinct_long_worker_ids_give_distinct_vm_names():
    assert vm_name("w" * 60) != vm_name("w" * 59 + "x")
