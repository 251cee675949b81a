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

EC2_USER_DATA_MAX_BYTES = 16384  # EC2's limit on raw user data
GCE_METADATA_KEY = "taskcluster"  # the metadata item worker-runner reads
# The only scope worker-manager gives a worker's service account: IAM roles limit what it may
# do (https://cloud.google.com/compute/docs/access/service-accounts#accesscopesiam).
GCE_SERVICE_ACCOUNT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
MANAGED_BY = "taskcluster"
_GCE_LABEL_UNSAFE = re.compile(r"[^a-zA-Z0-9-]")


def ec2_user_data(
    *,
    root_url: str,
    pool_id: str,
    provider_id: str,
    region: str,
    launch_config_id: str,
    worker_config: Mapping[str, Any],
) -> dict[str, Any]:
    """The UserData JSON of a RunInstances call (botocore base64-encodes it)."""
    return {
        "rootUrl": root_url,
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "workerGroup": region,
        "launchConfigId": launch_config_id,
        "workerConfig": dict(worker_config),
    }


def ec2_tags(*, pool_id: str, provider_id: str) -> dict[str, str]:
    """The tags worker-manager puts on instances and volumes (operators' tooling keys on them)."""
    return {
        "CreatedBy": f"taskcluster-wm-{provider_id}",
        "ManagedBy": MANAGED_BY,
        "Name": pool_id,
        "WorkerPoolId": pool_id,
    }


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


def gce_labels(*, pool_id: str, provider_id: str, launch_config_id: str) -> dict[str, str]:
    """worker-manager's labels (values sanitised as it does: GCE allows [a-z0-9_-])."""
    return {
        "created-by": _gce_label(f"taskcluster-wm-{provider_id}"),
        "managed-by": MANAGED_BY,
        "worker-pool-id": _gce_label(pool_id),
        "launch-config-id": _gce_label(launch_config_id),
    }


def azure_tags(
    *, root_url: str, pool_id: str, provider_id: str, location: str, launch_config_id: str
) -> dict[str, str]:
    """The tags worker-runner reads from IMDS `compute.tagsList` (the first four, each
    required), with worker-manager's own beside them."""
    return {
        "worker-pool-id": pool_id,
        "provider-id": provider_id,
        "worker-group": location,
        "root-url": root_url,
        "created-by": f"taskcluster-wm-{provider_id}",
        "managed-by": MANAGED_BY,
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


def _gce_label(value: str) -> str:
    return _GCE_LABEL_UNSAFE.sub("-", value).lower()[:63]
