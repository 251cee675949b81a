"""Issue 20: Azure ARM-template pools (one template deployment per worker) under chaos.

a. The provisioner (the real `wm run provisioner`) is SIGKILLed while its deployments run:
   the gate lets two deployment PUTs through and holds the rest in the process, and the sim
   hangs the first PUT, so when the process dies one PUT is in flight (ARM carries it out after
   the death), one was accepted but not recorded, and the rest were never sent; the deployments
   ARM took are still running. After a restart, with a scanner process scanning, every intent
   of the dead process ends with exactly one VM or cleanly stopped, and no VM is made twice.
b. Deployments fail half-way (the VM is made, then its provisioning fails and the deployment
   ends Failed, what it made left behind, as ARM leaves it): the scanner makes each a pool error
   against its launch config and tears down everything the deployment made, while the pool
   still reaches its demand with healthy deployments, whose rows record what they made and
   whose deployments are then deleted.

Both end with a drain (the tasks are done and every worker removes itself) and count what
is left from the sim's own resources by type, never from wm's rows: no VM, NIC, public IP or
disk may be left.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.chaos.scene import sizes, wait_until
from tests.support.stack import (
    AZURE_SUBSCRIPTION,
    DEPLOYMENT,
    FAST_GATE,
    Stack,
    WmProcess,
    azure_provider,
)
from wm.db import pools as pool_store
from wm.db import tasks, worker_writes
from wm.db.pool_errors import list_errors
from wm.db.workers import list_workers
from wm.model import WorkerRecord, WorkerState
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wm.providers.azure import arm
from wm.providers.base import TAG_DEPLOYMENT, TAG_WORKER
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import default_subnet_id
from wmsim.azure.templates import WORKER_TEMPLATE

POOL = "proj-arm/chaos"
PROVIDER = "azure-sim"
LOCATION = "eastus"
LAUNCH_CONFIG_ID = "lc-arm-chaos"
ARM_GROUP = "rg-arm-chaos"  # the launch config's own resource group (armDeploymentResourceGroup)
SPEC_GROUP = "rg-template-specs"
SPEC_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{SPEC_GROUP}/providers"
    "/Microsoft.Resources/templateSpecs/worker/versions/1.0.0"
)
IMAGE_ID = (
    f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{SPEC_GROUP}/providers"
    "/Microsoft.Compute/galleries/images/images/worker/versions/1.0.0"
)
PUT = "Deployments_CreateOrUpdate"
# What a leak is counted in: the sim's resource ids by their type segment.
RESOURCE_TYPES = {
    "virtualmachines": "vms",
    "networkinterfaces": "nics",
    "publicipaddresses": "ips",
    "disks": "disks",
}
FAILED_REASON = "arm-deployment-failed: "
CLOUD_HAS_NONE = ("never created", "gone-from-cloud")  # stop reasons of an intent never sent
HANG_S = 1.5  # how long the sim holds the first deployment PUT of the doomed process
BOOT_S = 2.0  # a deployment runs until its VM has booted: in flight when the process dies
# The restarted process looks an unanswered create up once its own gate could no longer be
# retrying it (timeout_s x max_attempts plus backoffs): about 4 s with these limits.
RECOVERY_GATE = {**FAST_GATE, "timeout_s": 2.0, "max_attempts": 2}
INTERVALS = {"provision_s": 0.3, "missing_grace_s": 0.5, "orphan_grace_s": 1.0}
SCAN_INTERVAL_S = 0.3


def held_gate(group: str | None) -> dict[str, Any]:
    """A rate limit that lets exactly two deployment PUTs of a pass reach ARM and holds the
    others in the process, for as long as the test likes. Before them the process makes a
    launch config's own resource group: a HEAD, then (missing) its PUT."""
    burst = 2 if group is None else 4
    return {**FAST_GATE, "calls_per_s": 0.001, "burst": burst, "timeout_s": 30.0}


def arm_launch_config(group: str | None) -> dict[str, Any]:
    """A launch config as fxci-config writes them: a template spec by id, its parameters, a
    resource group of its own (or, `group` None, the provider's); with a public IP and a data
    disk, so that every resource type a deployment makes is there to leak."""
    values = {
        "vmSize": "Standard_D2s_v5",
        "imageId": IMAGE_ID,
        "location": LOCATION,
        "subnetId": default_subnet_id(AZURE_SUBSCRIPTION, "wm-test"),
        "priority": "Regular",
        "createPublicIp": True,
        "dataDiskSizeGB": 32,
    }
    config: dict[str, Any] = {
        "location": LOCATION,
        "workerConfig": {},
        "armDeployment": {
            "mode": "Incremental",
            "templateLink": {"id": SPEC_ID},
            "parameters": {k: {"value": v} for k, v in values.items()},
        },
        "workerManager": {"launchConfigId": LAUNCH_CONFIG_ID, "capacityPerInstance": 1},
    }
    if group is not None:
        config["armDeploymentResourceGroup"] = group
    return config


def publish(sim: SimArm) -> None:
    """What an operator publishes before applying the pool: the template spec version its
    launch config names (the simulator's worker template) and the image that deploys."""
    sim.register_image(IMAGE_ID, LOCATION)
    # The provider's own group exists, as an operator made it.
    sim.deployments.create_resource_group(AZURE_SUBSCRIPTION, "wm-test", LOCATION)
    sim.deployments.put_template_spec(SPEC_ID, json.loads(WORKER_TEMPLATE.read_text()))


def apply_pool(
    engine: Engine,
    max_capacity: int,
    group: str | None = ARM_GROUP,
) -> None:
    """Apply the pool's Taskcluster definition, as `wm pools apply` does."""
    config: dict[str, Any] = {
        "minCapacity": 0,
        "maxCapacity": max_capacity,
        "launchConfigs": [arm_launch_config(group)],
    }
    body = {
        "providerId": PROVIDER,
        "description": "Workers deployed from a template spec",
        "owner": "relops@example.com",
        "emailOnError": False,
        "config": config,
    }
    definition = parse_pool_definition(POOL, body, {PROVIDER: "azure"})
    apply_change(engine, ApplyDefinitions((definition,)), workers_register={PROVIDER: False})
    pool_store.ensure_scan_units(engine, [(PROVIDER, LOCATION)])


def write_stack(tmp_path: Path, db_url: str, sim: SimArm, gate: dict[str, Any]) -> Stack:
    provider = azure_provider(
        sim, PROVIDER, gate=gate, workers_register=False, scan_interval_s=SCAN_INTERVAL_S
    )
    return Stack.write(tmp_path, db_url, [provider], [], intervals=INTERVALS)


# -- what the sim holds ---------------------------------------------------------------------


def resource_counts(sim: SimArm) -> dict[str, int]:
    """The sim's resources of each kind a deployment makes (VMs, NICs, IPs, disks)."""
    found = Counter(
        RESOURCE_TYPES.get(rid.rsplit("/", 2)[1].lower(), "other") for rid in sim.resources()
    )
    return {kind: found.get(kind, 0) for kind in (*RESOURCE_TYPES.values(), "other")}


def resources_of(sim: SimArm, worker_id: str) -> list[str]:
    """The sim's resources a worker's deployment made: all are named after its VM."""
    return [rid for rid in sim.resources() if f"/vm-{worker_id}".lower() in rid.lower()]


def live_vms(sim: SimArm) -> list:
    return [
        vm
        for vm in sim.instances()
        if vm.tags.get(TAG_DEPLOYMENT) == DEPLOYMENT and vm.state not in ("stopping", "gone")
    ]


def duplicate_vms(sim: SimArm) -> list[str]:
    """Workers with more than one VM in the sim (being deleted or not)."""
    per_worker = Counter(vm.tags.get(TAG_WORKER) for vm in sim.instances())
    return sorted(str(w) for w, n in per_worker.items() if n > 1)


def deployment_states(sim: SimArm) -> Counter[str]:
    return Counter(d["provisioningState"] for d in sim.deployments.summary())


def rows(engine: Engine) -> dict[str, WorkerRecord]:
    return {r.worker_id: r for r in list_workers(engine, pool_id=POOL, limit=None)}


# -- the drain ------------------------------------------------------------------------------


def drain(engine: Engine, sim: SimArm, scanner: WmProcess, timeout_s: float) -> float:
    """The work is done and each worker removes itself (as worker-runner does when idle):
    every row stops, and the scanner deletes what each deployment made. Returns how long it
    took."""
    started = time.monotonic()
    for task in tasks.claim_tasks(engine, POOL, "drain", limit=10_000):
        tasks.complete_task(engine, task.task_id, "drain")

    def drained() -> bool:
        live = [r for r in rows(engine).values() if r.state != WorkerState.STOPPED]
        for row in live:
            if row.state == WorkerState.RUNNING and row.stop_reason is None:
                worker_writes.request_removal(engine, row.worker_id, "removed-by-worker")
        return not live and not sim.resources()

    scanner.wait_for(drained, timeout_s, "every row stopped and nothing left in the sim")
    return time.monotonic() - started


def assert_nothing_left(sim: SimArm) -> dict[str, int]:
    left = resource_counts(sim)
    assert left == dict.fromkeys(left, 0), f"left in the sim: {left}: {sim.resources()}"
    return left


# -- a. the provisioner killed while its deployments run ------------------------------------


@dataclass(frozen=True)
class Crash:
    workers: int  # intents of the pass that is killed
    run: int = 0  # repetition (the long form runs several)


@pytest.mark.parametrize(
    "group",
    [
        pytest.param(None, id="provider-group"),
        pytest.param(ARM_GROUP, id="own-group"),
    ],
)
@pytest.mark.parametrize("size", sizes(Crash(3), *[Crash(10, run) for run in range(3)]))
def test_a_provisioner_killed_mid_deployment_leaves_one_vm_per_intent_and_nothing_after_drain(
    size, group, tmp_path, db_url, engine, clouds, stacks, figures
):
    sim = clouds.arm
    publish(sim)
    stack = write_stack(tmp_path, db_url, sim, held_gate(group))
    stacks.append(stack)
    apply_pool(engine, size.workers, group)
    sim.faults.behaviour.update(boot_s=BOOT_S, hang_s=HANG_S)
    sim.faults.force("hang", operation=PUT)
    tasks.submit_tasks(engine, POOL, size.workers, 600.0)

    doomed = stack.start("provisioner")

    def one_in_flight_one_made() -> bool:
        made = [r for r in sim.faults.journal(PUT) if r.outcome == "ok"]
        return sim.faults.hanging == 1 and len(made) == 1

    doomed.wait_for(one_in_flight_one_made, 20, "one deployment PUT in flight and one made")
    doomed.kill()
    wait_until(lambda: sim.faults.hanging == 0, 10, "ARM to carry out the hung PUT")

    intents = list(rows(engine).values())
    assert len(intents) == size.workers  # committed before the first call
    assert all(r.cloud_id is None for r in intents)  # no result was recorded
    in_flight = deployment_states(sim)
    # Both deployments ARM took run on after the death (their VMs boot for BOOT_S).
    assert sum(in_flight[s] for s in ("Accepted", "Running")) == 2, in_flight
    sent = {p.name for p in sim.deployments.puts()}
    assert len(sent) == 2

    stack.data["providers"][0]["gate"] = dict(RECOVERY_GATE)
    stack.save()
    sim.faults.reset_counts()  # the journal from here on is the restarted processes'
    restarted = stack.start("provisioner")
    scanner = stack.start("scanner")

    def resolved() -> bool:
        now = rows(engine)
        return all(
            now[r.worker_id].state in (WorkerState.RUNNING, WorkerState.STOPPED) for r in intents
        )

    restarted.wait_for(resolved, 30, "every intent of the dead process running or stopped")
    now = rows(engine)
    adopted = [now[r.worker_id] for r in intents if f"deploy-{r.worker_id}" in sent]
    stopped = [now[r.worker_id] for r in intents if f"deploy-{r.worker_id}" not in sent]
    vms = {vm.cloud_id.lower(): vm for vm in live_vms(sim)}
    assert len(adopted) == 2
    assert all(r.state == WorkerState.RUNNING and r.cloud_id.lower() in vms for r in adopted), (
        [(r.worker_id, r.state, r.stop_reason, r.cloud_id) for r in adopted],
        list(vms),
    )
    never = [(r.worker_id, r.state, r.stop_reason) for r in stopped]
    # Stopped by the recovery, or by the scanner's look-up first: either way, the cloud has none.
    assert all(s[1] == WorkerState.STOPPED and s[2] in CLOUD_HAS_NONE for s in never), never
    # Recovery looked the intents up: no deployment of theirs was PUT again.
    again = [p for p in sim.deployments.puts() if p.name in sent]
    assert len(again) == 2, [p.name for p in again]
    duplicates = duplicate_vms(sim)
    assert duplicates == []

    # The pool meets its demand with replacements, then drains.
    scanner.wait_for(
        lambda: sum(r.state == WorkerState.RUNNING for r in rows(engine).values()) == size.workers,
        30,
        "the pool running at its demand",
    )
    assert duplicate_vms(sim) == []
    peak = resource_counts(sim)
    drain_s = drain(engine, sim, scanner, 30)
    left = assert_nothing_left(sim)
    assert duplicate_vms(sim) == []
    figures.add(
        runs=1,
        intents=size.workers,
        deployments_in_flight_at_kill=2,
        adopted=len(adopted),
        never_created=len(stopped),
        duplicate_vms=len(duplicates),
        peak_vms=peak["vms"],
        leaked=sum(left.values()),
    )
    figures.record(drain_s=round(drain_s, 1))
    for process in (restarted, scanner):
        code, _ = process.terminate()
        assert code == 0


# -- b. deployments failing half-way ---------------------------------------------------------


@dataclass(frozen=True)
class HalfWay:
    demand: int
    forced: int  # deployments made to fail half-way, whatever the rate draws
    rate: float  # share of the other deployments failing half-way


@pytest.mark.parametrize("size", sizes(HalfWay(3, 2, 0.0), HalfWay(12, 4, 0.3)))
def test_deployments_failing_half_way_become_pool_errors_and_leave_nothing(
    size, tmp_path, db_url, engine, clouds, stacks, figures
):
    sim = clouds.arm
    publish(sim)
    stack = write_stack(tmp_path, db_url, sim, dict(FAST_GATE))
    stacks.append(stack)
    apply_pool(engine, size.demand)
    sim.faults.behaviour.update(boot_s=0.3)
    sim.deployments.fail_halfway(size.forced)
    sim.deployments.halfway_failure_rate = size.rate
    tasks.submit_tasks(engine, POOL, size.demand, 600.0)
    started = time.monotonic()

    provisioner = stack.start("provisioner")
    scanner = stack.start("scanner")
    worst_vms = 0
    duplicates: set[str] = set()

    def settled() -> bool:
        nonlocal worst_vms
        duplicates.update(duplicate_vms(sim))
        worst_vms = max(worst_vms, len(live_vms(sim)))
        now = rows(engine).values()
        failed = [r for r in now if (r.stop_reason or "").startswith(FAILED_REASON)]
        running = [r for r in now if r.state == WorkerState.RUNNING]
        # Every failed deployment's row stopped, and what it made is gone.
        torn_down = not any(resources_of(sim, r.worker_id) for r in failed)
        return len(failed) >= size.forced and len(running) == size.demand and torn_down

    scanner.wait_for(settled, 60, "the pool at its demand, every failed deployment torn down")
    reached_s = time.monotonic() - started
    now = rows(engine).values()
    failed = [r for r in now if (r.stop_reason or "").startswith(FAILED_REASON)]
    assert all(r.state == WorkerState.STOPPED for r in failed)
    assert all("OSProvisioningTimedOut" in (r.stop_reason or "") for r in failed)
    # Each failed deployment is a pool error against its launch config.
    errors = list_errors(engine, POOL)
    assert errors and all(
        (e.provider_id, e.launch_config_id) == (PROVIDER, LAUNCH_CONFIG_ID) for e in errors
    )
    assert all("OSProvisioningTimedOut" in e.description for e in errors)
    assert len(errors) == len(failed), (len(errors), len(failed))
    # What is left in the sim is the running workers' own, and nothing more.
    running = [r for r in now if r.state == WorkerState.RUNNING]
    owned = {rid for r in running for rid in resources_of(sim, r.worker_id)}
    assert set(sim.resources()) == owned
    assert not duplicates
    # Each running worker's row holds what its deployment made, and the deployment is gone
    # (deleted once recorded, as worker-manager deletes it; the scan that saw the VM run did).
    scanner.wait_for(
        lambda: deployment_states(sim)["Succeeded"] == 0, 10, "succeeded deployments deleted"
    )
    recorded = {r.worker_id: arm.made_of(rows(engine)[r.worker_id].provider_data) for r in running}
    assert all(made is not None and made.succeeded for made in recorded.values()), recorded

    provisioner_code, _ = provisioner.terminate()
    assert provisioner_code == 0
    drain_s = drain(engine, sim, scanner, 30)
    left = assert_nothing_left(sim)
    assert duplicate_vms(sim) == []
    figures.record(
        demand=size.demand,
        deployments=len(sim.deployments.puts()),
        failed_half_way=len(failed),
        pool_errors=len(errors),
        reached_demand_s=round(reached_s, 1),
        worst_live_vms=worst_vms,
        duplicate_vms=len(duplicates),
        drain_s=round(drain_s, 1),
        leaked=sum(left.values()),
    )
    code, _ = scanner.terminate()
    assert code == 0
