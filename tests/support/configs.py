"""Config builders for tests: small valid configs, edited per scenario."""

from __future__ import annotations

import copy
from typing import Any

from wm.config.loader import Config, parse

BASE: dict[str, Any] = {
    "deployment_id": "test-deploy",
    "providers": [
        {"id": "aws-a", "kind": "aws", "regions": ["us-east-1", "us-west-2"]},
        {
            "id": "gcp-a",
            "kind": "gcp",
            "project": "p",
            "regions": ["us-central1-a"],
            # Its workers register: they need an account to fetch identity tokens as.
            "worker_service_account_email": "workers@p.iam.gserviceaccount.com",
            "worker_service_account_id": "112233445566778899001",
        },
        {
            "id": "azure-a",
            "kind": "azure",
            "subscription_id": "sub",
            "resource_group": "rg",
            "regions": ["eastus"],
        },
    ],
}
# The pools of BASE's providers, in the old short form (tests/support/definitions.py applies
# them as Taskcluster definitions).
POOLS: list[dict[str, Any]] = [
    {
        "id": "proj/linux",
        "provider": "aws-a",
        "max_capacity": 10,
        "launch_configs": [
            {"region": "us-east-1", "machine_type": "m5.large", "image": "ami-1"},
            {"region": "us-west-2", "machine_type": "m5.large", "image": "ami-2"},
        ],
    },
    {
        "id": "proj/gce",
        "provider": "gcp-a",
        "max_capacity": 5,
        "launch_configs": [{"region": "us-central1-a", "machine_type": "e2-small", "image": "img"}],
    },
]


def raw(**changes: Any) -> dict[str, Any]:
    """BASE and its POOLS (under "pools", for tests to edit), with the changes."""
    data = copy.deepcopy({**BASE, "pools": POOLS})
    data.update(changes)
    return data


def build(data: dict[str, Any] | None = None, environ: dict[str, str] | None = None) -> Config:
    """The config of `data`; its "pools" are not config.toml's (apply_pools applies them)."""
    data = data if data is not None else raw()
    config_data = {k: v for k, v in data.items() if k != "pools"}
    return parse(config_data, environ=environ or {}, source="test.toml")
