"""VMs made in the simulated clouds as Taskcluster's worker-manager makes them (the launchers
of wmsim/<kind>/legacy.py, through each cloud's one table entry), with the settings that
point them at the test fixtures' sims."""

from __future__ import annotations

from typing import Any

from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBNET, AZURE_SUBSCRIPTION
from tests.fixtures.sim_gce import GCE_PROJECT, GCE_WORKER_ACCOUNT
from wmsim.aws.run_instances import example_launch_config as ec2_launch_config
from wmsim.azure.launch_configs import example_launch_config as azure_launch_config
from wmsim.cloud import LegacyLaunch, LegacyVm
from wmsim.clouds import sim_cloud
from wmsim.gcp.launch_config import example_launch_config as gce_launch_config

LEGACY_ROOT_URL = "https://tc.legacy.example.test"
OWNER = "Relops@Example.com"


def settings(kind: str, sim: Any) -> dict[str, Any]:
    """wm's provider config keys for the fixtures' sim of this kind."""
    if kind == "aws":
        return {"endpoint": sim.endpoint}
    if kind == "gcp":
        return {
            "endpoint": sim.endpoint,
            "project": GCE_PROJECT,
            "worker_service_account_email": GCE_WORKER_ACCOUNT,
        }
    return {
        "endpoint": sim.endpoint,
        "ca_bundle": str(sim.cert_path),
        "authority": sim.endpoint,
        "subscription_id": AZURE_SUBSCRIPTION,
        "resource_group": AZURE_RESOURCE_GROUP,
    }


def launch_config(kind: str, region: str, launch_config_id: str, **kw: Any) -> dict[str, Any]:
    if kind == "aws":
        return ec2_launch_config(region, launch_config_id=launch_config_id, **kw)
    if kind == "gcp":
        return gce_launch_config(region, launch_config_id=launch_config_id, **kw)
    return azure_launch_config(
        region, launch_config_id=launch_config_id, subnet_id=AZURE_SUBNET, **kw
    )


def legacy_vm(
    kind: str,
    sim: Any,
    *,
    provider_id: str,
    pool_id: str,
    region: str,
    launch_config_id: str = "lc-legacy",
    root_url: str = LEGACY_ROOT_URL,
    config: dict[str, Any] | None = None,
    **kw: Any,
) -> LegacyVm:
    cloud = sim_cloud(kind)
    assert cloud.legacy_launch is not None
    return cloud.legacy_launch(
        LegacyLaunch(
            settings=settings(kind, sim),
            provider_id=provider_id,
            root_url=root_url,
            pool_id=pool_id,
            owner=OWNER,
            launch_config_id=launch_config_id,
            launch_config=config or launch_config(kind, region, launch_config_id, **kw),
            description="a legacy pool",
        )
    )
