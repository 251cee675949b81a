"""ARM-template pools run by `wm run provisioner` and `wm run scanner --kind azure` as separate
OS processes, as the Procfile runs them, against the simulated ARM.

The scanner process launches nothing: where ARM deployments are, it knows only from the config
and the database (issue 38). A deployment that succeeded is recorded on its row and then
deleted by the scanner, in the provider's own resource group (a launch config without
`armDeploymentResourceGroup`, which worker-manager deploys into) as in a group of its own;
otherwise a group's history fills up to ARM's 800 and the pool stops launching there.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine

from tests.support.stack import AZURE_SUBSCRIPTION, START_TIMEOUT_S, Stack, azure_provider
from wm.db import pools as pool_store
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerRecord, WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.providers.azure import arm
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.azure.templates import WORKER_TEMPLATE

PROVIDER = "azure-sim"
PROVIDER_GROUP = "wm-test"  # the provider's own resource group (tests.support.stack)
LOCATION = "eastus"
SPEC_GROUP = "rg-template-specs"
SPEC_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{SPEC_GROUP}/providers"
    "/Microsoft.Resources/templateSpecs/worker/versions/1.0.0"
)
IMAGE_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{SPEC_GROUP}/providers"
    "/Microsoft.Compute/galleries/images/images/worker/versions/1.0.0"
)
# pool id -> the launch config's armDeploymentResourceGroup (None: the provider's group)
POOLS: dict[str, str | None] = {
    "proj-arm/provider-group": None,
    "proj-arm/own-group": "rg-arm-own",
}
INTERVALS = {"provision_s": 0.3, "missing_grace_s": 0.5, "orphan_grace_s": 1.0}
SETTLE_S = 120.0  # two processes starting on a busy machine, a deployment, a few scans


def publish(sim: SimArm) -> None:
    """What an operator publishes before applying the pools: the template spec version the
    launch configs name, the image it deploys, and the provider's own group."""
    sim.register_image(IMAGE_ID, LOCATION)
    sim.deployments.create_resource_group(AZURE_SUBSCRIPTION, PROVIDER_GROUP, LOCATION)
    sim.deployments.put_template_spec(SPEC_ID, json.loads(WORKER_TEMPLATE.read_text()))


def launch_config(pool_id: str, group: str | None) -> dict[str, Any]:
    values = {
        "vmSize": "Standard_D2s_v5",
        "imageId": IMAGE_ID,
        "location": LOCATION,
        "subnetId": default_subnet_id(AZURE_SUBSCRIPTION, PROVIDER_GROUP),
        "priority": "Regular",
    }
    config: dict[str, Any] = {
        "location": LOCATION,
        "workerConfig": {},
        "armDeployment": {
            "mode": "Incremental",
            "templateLink": {"id": SPEC_ID},
            "parameters": {k: {"value": v} for k, v in values.items()},
        },
        "workerManager": {
            "launchConfigId": "lc-" + pool_id.rsplit("/", 1)[1],
            "capacityPerInstance": 1,
        },
    }
    if group is not None:
        config["armDeploymentResourceGroup"] = group
    return config


def apply_pools(engine: Engine) -> None:
    """The pools' Taskcluster definitions, as `wm pools apply` applies them."""
    definitions = tuple(
        parse_pool_definition(
            pool_id,
            {
                "providerId": PROVIDER,
                "description": "Workers deployed from a template spec",
                "owner": "relops@example.com",
                "emailOnError": False,
                "config": {
                    "minCapacity": 0,
                    "maxCapacity": 1,
                    "launchConfigs": [launch_config(pool_id, group)],
                },
            },
            {PROVIDER: "azure"},
        )
        for pool_id, group in POOLS.items()
    )
    apply_change(engine, ApplyDefinitions(definitions), workers_register={PROVIDER: False})
    pool_store.ensure_scan_units(engine, [(PROVIDER, LOCATION)])


def rows(engine: Engine) -> dict[str, WorkerRecord]:
    """pool id -> its one worker's row."""
    return {r.pool_id: r for r in list_workers(engine, limit=None) if r.pool_id in POOLS}


def test_the_scanner_process_deletes_succeeded_deployments_in_every_group_its_pools_name(
    tmp_path, db_url, engine, sim_arm: SimArm, stacks
):
    # Scenario: two ARM-template pools of one Azure provider, one deploying into the
    # provider's own group, one into a group of its own; the provisioner and the scanner are
    # two processes started from the same config.toml.
    publish(sim_arm)
    provider = azure_provider(sim_arm, PROVIDER, workers_register=False, scan_interval_s=0.3)
    stack = Stack.write(tmp_path, db_url, [provider], [], intervals=INTERVALS)
    stacks.append(stack)
    apply_pools(engine)
    for pool_id in POOLS:
        tasks.submit_tasks(engine, pool_id, 1, 600.0)

    provisioner = stack.start("provisioner")
    scanner = stack.start("scanner", "--kind", "azure")

    # Each pool's worker runs, its row records what its deployment made, and the deployment
    # is gone from ARM's history: the scanner read it, recorded it, and deleted it.
    def recorded_and_deleted() -> bool:
        found = rows(engine)
        return (
            len(found) == len(POOLS)
            and all(r.state is WorkerState.RUNNING for r in found.values())
            and all((m := arm.made_of(r.provider_data)) and m.succeeded for r in found.values())
            and sim_arm.deployments.summary() == []
        )

    scanner.wait_for(recorded_and_deleted, SETTLE_S, "every deployment recorded and deleted")
    assert provisioner.popen.poll() is None
    found = rows(engine)
    groups = {
        pool_id: arm.deployment_ref(row.provider_data).resource_group
        for pool_id, row in found.items()
    }
    assert groups == {p: g or PROVIDER_GROUP for p, g in POOLS.items()}
    assert sim_arm.faults.counts()["Deployments_Delete"] == len(POOLS)
    # What the deployments made stays: deleting a deployment never deletes its resources.
    assert {vm.name for vm in sim_arm.instances()} == {r.tc_worker_id for r in found.values()}
    # Both processes stop cleanly.
    assert scanner.terminate(START_TIMEOUT_S)[0] == 0
    assert provisioner.terminate(START_TIMEOUT_S)[0] == 0
