"""Scenario 4: orphans, strangers and a launch in flight, on each cloud at once.

Each cloud holds, besides wm's own workers: VMs tagged with this deployment that have no row
(left by a crash long ago), one such VM younger than the orphan grace period, a VM of the same
account without wm's tags (someone else's), one of another wm deployment, and the VMs of a
launch in flight: a provisioner whose creates the clouds carried out but whose answers have
not come back (held by the cloud; the rest of the pass held by its rate limit), so their rows
have no cloud id while the VMs age past the grace period. (A pass records each VM as its
create answers: only an answer still out leaves a made VM's row without its id.) A scan
terminates only the old tagged orphans; the young one goes once it is old; the strangers are
never touched, and the launch in flight is adopted.
"""

from __future__ import annotations

import time

import pytest

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import (
    CREATE_OPERATION,
    KINDS,
    held_gate,
    launch_configs,
    plant_vm,
    provider_config,
    sizes,
)
from tests.support.stack import DEPLOYMENT, RECOVERY_GATE, Stack
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.providers.base import TAG_DEPLOYMENT, TAG_POOL, TAG_WORKER
from wm.scanning.scanner import Scanner

# Orphan grace period: longer than scanning every unit takes on a busy machine, so that the
# orphan planted just before the scans is still young when its own unit is scanned.
GRACE_S = 6.0
ANSWER_HELD_S = 120.0  # longer than the scenario: cut short when the test resets the sims
INTERVALS = {"provision_s": 0.3, "orphan_grace_s": GRACE_S}


def pools_for(providers: list[dict]) -> list[dict]:
    return [
        {
            "id": f"proj/{kind}",
            "provider": provider["id"],
            "max_capacity": 100,
            "launch_configs": launch_configs(kind),
        }
        for kind, provider in zip(KINDS, providers, strict=True)
    ]


@pytest.mark.parametrize("old_orphans", sizes(2, 25))
def test_only_old_tagged_orphans_are_terminated_while_a_launch_is_in_flight(
    old_orphans, tmp_path, db_url, engine, clouds, stacks, figures
):
    providers = [provider_config(k, clouds.of(k)) for k in KINDS]
    stack = Stack.write(tmp_path, db_url, providers, pools_for(providers), intervals=INTERVALS)
    held = [provider_config(k, clouds.of(k), gate=held_gate(k)) for k in KINDS]
    (tmp_path / "held").mkdir()
    held_stack = Stack.write(tmp_path / "held", db_url, held, pools_for(held), intervals=INTERVALS)
    stacks += [stack, held_stack]
    stack.sync_pools(engine)

    planted: dict[str, dict[str, str]] = {kind: {} for kind in KINDS}
    for kind in KINDS:
        sim = clouds.of(kind)
        ours = {TAG_DEPLOYMENT: DEPLOYMENT, TAG_POOL: f"proj/{kind}"}
        for n in range(old_orphans):
            planted[kind][f"old{n}"] = plant_vm(
                kind, sim, f"orphan-old{n}", {**ours, TAG_WORKER: f"orphan-old{n}"}
            )
        planted[kind]["foreign"] = plant_vm(kind, sim, "foreign", {"team": "someone-else"})
        planted[kind]["other"] = plant_vm(
            kind, sim, "other-deploy", {TAG_DEPLOYMENT: "other-deploy", TAG_WORKER: "x"}
        )
        tasks.submit_tasks(engine, f"proj/{kind}", 3, 60.0)
        # Each create is carried out at once and its answer held until the sim is reset.
        sim.faults.behaviour.update(
            lose_rate=1.0, hang_s=ANSWER_HELD_S, fault_operations=(CREATE_OPERATION[kind],)
        )
    in_flight = held_stack.start("provisioner")

    def creates_returned() -> bool:
        # wm's creates carry an idempotency key; a VM planted by hand on GCE carries none.
        return all(
            len([r for r in clouds.of(k).faults.journal(CREATE_OPERATION[k]) if r.key]) == 2
            for k in KINDS
        )

    in_flight.wait_for(creates_returned, 30, "two creates made on every cloud")
    made_at = time.monotonic()
    for sim in clouds.sims:  # their answers stay held; what comes later is answered
        sim.faults.behaviour.update(lose_rate=0.0)
    assert not any(r.cloud_id for r in list_workers(engine))  # not answered: still in flight
    flying = {vm.cloud_id for sim in clouds.sims for vm in sim.instances()} - {
        cid for by_name in planted.values() for cid in by_name.values()
    }
    config = stack.config()
    built = {p.id: build_provider(p, config.deployment_id) for p in config.providers}
    units = [(p.id, region) for p in config.providers for region in p.regions]
    for provider_id, region in units:  # SDK clients made and imported before the clock matters
        built[provider_id].list_instances(region)
    scanner = Scanner(engine, built, orphan_grace_s=GRACE_S)
    time.sleep(max(0.0, GRACE_S + 0.5 - (time.monotonic() - made_at)))  # all past the grace
    for kind in KINDS:
        ours = {TAG_DEPLOYMENT: DEPLOYMENT, TAG_POOL: f"proj/{kind}", TAG_WORKER: "young"}
        planted[kind]["young"] = plant_vm(kind, clouds.of(kind), "orphan-young", ours)

    try:
        reports = [scanner.scan(provider_id, region) for provider_id, region in units]
        states = {vm.cloud_id: vm.state for sim in clouds.sims for vm in sim.instances()}
        for kind in KINDS:
            cloud_ids = planted[kind]
            for name in (f"old{n}" for n in range(old_orphans)):
                assert states.get(cloud_ids[name], "gone") in ("stopping", "gone"), (kind, name)
            for name in ("young", "foreign", "other"):
                assert states.get(cloud_ids[name]) in ("pending", "running"), (kind, name)
        assert all(states.get(cid) in ("pending", "running") for cid in flying)
        # The scan recognised the launch in flight by its tags and recorded the cloud ids.
        assert {r.cloud_id for r in list_workers(engine) if r.cloud_id} == flying
        assert sum(r.orphans for r in reports if r) == old_orphans * len(KINDS)

        # The launch ends (the process dies; its successor adopts what it made) and the young
        # orphan ages past the grace period: the next scans take it too, and only it.
        in_flight.kill()
        for provider in stack.data["providers"]:
            provider["gate"] = dict(RECOVERY_GATE)
        stack.save()
        successor = stack.start("provisioner")
        successor.wait_for(
            lambda: all(r.cloud_id or r.state == WorkerState.STOPPED for r in list_workers(engine)),
            30,
            "intent recovery",
        )
        time.sleep(GRACE_S)
        for provider_id, region in units:
            scanner.scan(provider_id, region)
        states = {vm.cloud_id: vm.state for sim in clouds.sims for vm in sim.instances()}
        for kind in KINDS:
            assert states.get(planted[kind]["young"], "gone") in ("stopping", "gone")
            for name in ("foreign", "other"):
                assert states.get(planted[kind][name]) == "running", (kind, name)
        report = assert_no_leaks(engine, clouds.sims)
    finally:
        for provider in built.values():
            provider.close()
    figures.record(
        old_orphans_terminated=old_orphans * len(KINDS),
        young_orphans_kept_until_old=len(KINDS),
        strangers_touched=0,
        in_flight_vms_adopted=len(flying),
        vms_leaked=len(report.unmanaged),
    )
