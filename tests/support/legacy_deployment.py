"""A legacy worker-manager deployment on the test fixtures' simulated clouds: its providers
(`aws`, `fxci-level1-gcp`, `azure2`, as Firefox CI names them), one pool per provider with a
launch config each sim launches, and what Azure needs made first (resource group, subnet)."""

from __future__ import annotations

from typing import Any

from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBNET, make_subnet
from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_ZONE
from tests.support.legacy_vms import launch_config, settings
from wmsim.legacy.provisioner import LegacyProvider

ISSUER = ("static/taskcluster/worker-manager", "issuer-token-" + "x" * 30)
AZURE_LOCATION = "eastus"
# providerId, Taskcluster providerType, wmsim kind, pool, region
LEGACY_PROVIDERS = (
    ("aws", "aws", "aws", "proj-legacy/linux-aws", EC2_REGION),
    ("fxci-level1-gcp", "google", "gcp", "proj-legacy/linux-gcp", GCE_ZONE),
    ("azure2", "azure", "azure", "proj-legacy/win-azure", AZURE_LOCATION),
)


def legacy_providers(sim_ec2: Any, sim_gce: Any, sim_arm: Any) -> list[LegacyProvider]:
    sims = {"aws": sim_ec2, "gcp": sim_gce, "azure": sim_arm}
    for sim in sims.values():
        sim.faults.behaviour.update(boot_s=0)
    sim_arm.deployments.create_resource_group(
        settings("azure", sim_arm)["subscription_id"], AZURE_RESOURCE_GROUP, AZURE_LOCATION
    )
    make_subnet(sim_arm, AZURE_SUBNET, AZURE_LOCATION)
    return [
        LegacyProvider(provider_id, provider_type, kind, settings(kind, sims[kind]))
        for provider_id, provider_type, kind, _, _ in LEGACY_PROVIDERS
    ]


def legacy_pools(max_capacity: int = 2, **lifecycle: int) -> list[dict[str, Any]]:
    return [
        {
            "workerPoolId": pool_id,
            "providerId": provider_id,
            "description": f"a legacy {kind} pool",
            "owner": "relops@example.com",
            "emailOnError": False,
            "config": {
                "minCapacity": 0,
                "maxCapacity": max_capacity,
                "lifecycle": lifecycle,
                "launchConfigs": [launch_config(kind, region, f"lc-{kind}")],
            },
        }
        for provider_id, _, kind, pool_id, region in LEGACY_PROVIDERS
    ]
