"""Boot data: what a worker VM is given at creation, in the shapes Taskcluster's
worker-manager writes and worker-runner reads (services/worker-manager/src/providers/aws.js,
google.js, azure/index.js; tools/worker-runner/provider/*). Pure functions, one per cloud.

worker-runner takes its rootUrl, workerPoolId, providerId and workerGroup from here and its
workerId from the cloud itself (EC2 instance id, GCE numeric instance id, Azure VM name).
`workerConfig` is still written, as worker-manager does, though worker-runner ignores it since
v29.0.1 (registerWorker returns the real one).
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping
from typing import Any

from wm.pool_definition import AZURE_ARM_INJECTED_PARAMETERS

EC2_USER_DATA_MAX_BYTES = 16384  # EC2's limit on raw user data
GCE_METADATA_KEY = "taskcluster"  # the metadata item worker-runner reads
# The only scope worker-manager gives a worker's service account: IAM roles limit what it may
# do (https://cloud.google.com/compute/docs/access/service-accounts#accesscopesiam).
GCE_SERVICE_ACCOUNT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
MANAGED_BY = "taskcluster"
_GCE_LABEL_UNSAFE = re.compile(r"[^a-zA-Z0-9-]")
_GCE_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")  # what GCE accepts as a label value


def ec2_user_data(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    region: str,
    launch_config_id: str,
    worker_config: Mapping[str, Any],
    additional: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The UserData JSON of a RunInstances call (botocore base64-encodes it): the launch
    config's `additionalUserData` first, worker-manager's keys over it."""
    return {
        **dict(additional or {}),
        "rootUrl": root_url,
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "workerGroup": region,
        "launchConfigId": launch_config_id,
        "workerConfig": dict(worker_config),
    }


def ec2_tags(*, pool_id: str, provider_id: str, owner: str) -> list[dict[str, str]]:
    """The tags worker-manager appends to the instance and volume tag specifications, in its
    order (operators' tooling keys on them); `owner` is the pool definition's."""
    tags = {
        "CreatedBy": f"taskcluster-wm-{provider_id}",
        "Owner": owner,
        "ManagedBy": MANAGED_BY,
        "Name": pool_id,
        "WorkerPoolId": pool_id,
    }
    return [{"Key": key, "Value": value} for key, value in tags.items()]


def gce_metadata(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    zone: str,
    worker_config: Mapping[str, Any],
) -> dict[str, Any]:
    """The value (as JSON) of the instance's `taskcluster` metadata item."""
    return {
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "workerGroup": zone,
        "rootUrl": root_url,
        "workerConfig": dict(worker_config),
    }


def gce_service_accounts(email: str) -> list[dict[str, Any]]:
    """The instance's `serviceAccounts`: the one account its identity tokens are minted for."""
    return [{"email": email, "scopes": list(GCE_SERVICE_ACCOUNT_SCOPES)}]


def gce_labels(
    *, pool_id: str, provider_id: str, launch_config_id: str, owner: str = ""
) -> dict[str, str]:
    """worker-manager's labels, on the instance and its persistent disks, valued as it values
    them (google.js: pool id and owner with [^a-zA-Z0-9-] made `-` and lowercased; the launch
    config id as it is). Where worker-manager's value would break GCE's rule for label values
    (lowercase [a-z0-9_-], at most 63 characters) and fail the insert, it is made to fit."""
    return {
        "created-by": _gce_label(f"taskcluster-wm-{provider_id}"),
        "managed-by": MANAGED_BY,
        "worker-pool-id": _gce_label(pool_id),
        "owner": _gce_label(owner),
        "launch-config-id": launch_config_id
        if _GCE_LABEL_VALUE.fullmatch(launch_config_id)
        else _gce_label(launch_config_id),
    }


def azure_tags(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    location: str,
    launch_config_id: str,
    owner: str,
) -> dict[str, str]:
    """The tags worker-manager puts on every resource of a worker (`#deploymentTags`, over
    the launch config's own `tags`): worker-runner reads the first four from IMDS
    `compute.tagsList` (each required); operators' tooling reads the others."""
    return {
        "worker-pool-id": pool_id,
        "provider-id": provider_id,
        "worker-group": location,
        "root-url": root_url,
        "created-by": f"taskcluster-wm-{provider_id}",
        "managed-by": MANAGED_BY,
        "owner": owner,  # the pool definition's owner
        "launch-config-id": launch_config_id,
    }


def azure_custom_data(*, root_url: str, pool_id: str, provider_id: str, location: str) -> str:
    """`osProfile.customData`: base64 JSON, as worker-manager writes it (worker-runner reads
    the tags instead; customData is written for parity, its workerConfig left empty)."""
    data = {
        "workerPoolId": pool_id,
        "workerGroup": location,
        "providerId": provider_id,
        "rootUrl": root_url,
        "workerConfig": {},
    }
    return base64.b64encode(json.dumps(data).encode()).decode()


def azure_arm_parameters(
    *,
    tags: Mapping[str, str],
    vm_name: str,
    computer_name: str,
    admin_username: str,
    admin_password: str,
    custom_data: str,
) -> dict[str, dict[str, Any]]:
    """The deployment parameters worker-manager sets over the launch config's (in its ARM
    form): the `tags` worker-runner reads from IMDS, the VM's name (the workerId), the boot
    data and generated admin credentials, each as `{"value": ...}`."""
    values = {
        "tags": dict(tags),
        "vmName": vm_name,
        "computerName": computer_name,
        "adminUsername": admin_username,
        "adminPassword": admin_password,
        "customData": custom_data,
    }
    return {name: {"value": values[name]} for name in AZURE_ARM_INJECTED_PARAMETERS}


def _gce_label(value: str) -> str:
    return _GCE_LABEL_UNSAFE.sub("-", value).lower()[:63]
