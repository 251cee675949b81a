"""Scenario 8: VMs, NICs, public IPs and disks deleted out of band, on each cloud.

Someone deletes resources by hand: the VM of a running worker, the VM of a worker wm is already
deleting, and on Azure the separate NIC, public IP and disk of workers made the old multi-step
way, with ARM answering 404 to GETs and to DELETEs of what is gone (as some resource providers,
and a resource group deleted by hand, do). Each of those workers is stopped by the next scan
and no longer counts as capacity; what the hand left behind (an old-style VM's NIC, IP and
disk when only the VM went) is deleted by that same scan.
"""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import text

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import (
    AZURE_GROUP,
    KINDS,
    PROVIDER_IDS,
    plant_old_style_azure_vm,
    provider_config,
    sizes,
)
from tests.support.stack import AZURE_SUBSCRIPTION, DEPLOYMENT, Stack, pool
from wm.db import tasks
from wm.db.pools import load_launch_configs
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker, capacity_by_pool, list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.providers.azure.provider import OLD_DISK_NAMES, OLD_NIC_NAMES, OLD_PUBLIC_IP_NAMES
from wm.providers.base import TAG_DEPLOYMENT, TAG_POOL, TAG_WORKER
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner

POOL = "proj/byhand"


@pytest.mark.parametrize("workers", sizes(4, 40))
@pytest.mark.parametrize("kind", KINDS)
def test_resources_deleted_by_hand_stop_their_workers_within_one_scan(
    kind, workers, tmp_path, db_url, engine, clouds, figures
):
    sim = clouds.of(kind)
    provider_cfg = provider_config(kind, sim)
    stack = Stack.write(
        tmp_path,
        db_url,
        [provider_cfg],
        [pool(POOL, provider_cfg, 100, requires_registration=False)],
    )
    stack.sync_pools(engine)
    config = stack.config()
    provider = build_provider(config.provider(PROVIDER_IDS[kind]), config.deployment_id)
    region = provider.regions[0]
    scanner = Scanner(engine, {provider.id: provider}, orphan_grace_s=3600)
    try:
        tasks.submit_tasks(engine, POOL, workers, 60.0)
        Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
        old_style = plant_old_style_workers(engine, sim) if kind == "azure" else {}
        scanner.scan(provider.id, region)
        running, deleting, *busy = sorted(
            (r for r in list_workers(engine) if r.worker_id not in old_style),
            key=lambda r: r.worker_id,
        )
        # One worker is being deleted by wm, slowly, when the hand gets to it.
        sim.faults.behaviour.update(delete_s=600)
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE workers SET last_active = now() - interval '1 day' WHERE worker_id = :w"
                ),
                {"w": deleting.worker_id},
            )
        scanner.scan(provider.id, region)
        assert state_of(engine, deleting.worker_id) == WorkerState.STOPPING
        assert all(state_of(engine, w) == WorkerState.RUNNING for w in old_style)

        sim.remove(running.cloud_id)
        sim.remove(deleting.cloud_id)
        if kind == "azure":
            sim.delete_missing_status = 404
            everything, vm_only = old_style.values()
            sim.remove(everything["vm"])
            for resource in ("nic", "ip", "disk"):
                sim.remove_resource(everything[resource])
            sim.remove(vm_only["vm"])  # its NIC, IP and disk stay behind
        scanner.scan(provider.id, region)

        rows = {r.worker_id: r for r in list_workers(engine)}
        gone = [running.worker_id, deleting.worker_id, *old_style]
        assert {rows[w].state for w in gone} == {WorkerState.STOPPED}
        assert {rows[r.worker_id].state for r in busy} == {WorkerState.RUNNING}
        (capacity,) = capacity_by_pool(engine, [POOL]).values()
        assert (capacity.requested, capacity.running, capacity.stopping) == (0, len(busy), 0)
        if kind == "azure":
            left = [
                r
                for r in sim.resources()
                if any(n in r for o in old_style.values() for n in o.values())
            ]
            assert left == []  # the old-style leftovers went with that scan
            # Both workers' NIC, IP and disk were deleted: one set answered 404, one 200.
            counts = sim.faults.counts()
            for operation in ("NetworkInterfaces", "PublicIPAddresses", "Disks"):
                assert counts.get(f"{operation}_Delete") == 2, operation
        report = assert_no_leaks(engine, clouds.sims)
    finally:
        provider.close()
    figures.record(
        deleted_by_hand=len(gone),
        scans_to_stopped=1,
        capacity_left=capacity.running,
        vms_leaked=len(report.unmanaged),
        rows_lost=len(report.lost),
    )


def state_of(engine, worker_id: str) -> WorkerState:
    (row,) = [r for r in list_workers(engine) if r.worker_id == worker_id]
    return row.state


def plant_old_style_workers(engine, sim) -> dict[str, dict[str, str]]:
    """Two running workers of an older wm that made their VMs the multi-step way."""
    (launch_config,) = [c for c in load_launch_configs(engine) if c.pool_id == POOL]
    planted = {}
    for n in range(2):
        worker_id = f"wold{n}{uuid.uuid4().hex[:8]}"
        tags = {TAG_DEPLOYMENT: DEPLOYMENT, TAG_POOL: POOL, TAG_WORKER: worker_id}
        names = plant_old_style_azure_vm(sim, f"vm-{worker_id}", tags)
        insert_intents(
            engine,
            [
                NewWorker(
                    worker_id,
                    POOL,
                    launch_config.region,
                    PROVIDER_IDS["azure"],
                    1,
                    launch_config.launch_config_id,
                    str(uuid.uuid4()),
                    uuid.uuid4().hex,
                    0,
                    3600,
                )
            ],
        )
        resource_id = (
            f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_GROUP}/providers"
            f"/Microsoft.Compute/virtualMachines/{names['vm']}"
        )
        data = {
            OLD_NIC_NAMES: [names["nic"]],
            OLD_PUBLIC_IP_NAMES: [names["ip"]],
            OLD_DISK_NAMES: [names["disk"]],
        }
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE workers SET state = 'running', cloud_id = :c,"
                    " provider_data = CAST(:d AS jsonb) WHERE worker_id = :w"
                ),
                {"c": resource_id, "d": json.dumps(data), "w": worker_id},
            )
        planted[worker_id] = names
    return planted
