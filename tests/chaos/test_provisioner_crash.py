"""Scenario 1: the provisioner is SIGKILLed in the middle of a launch, on each cloud.

One kill catches every window of a launch at once. The gate's rate limit lets two creates
through and holds the rest in the process; the cloud is told to hang the first create. So when
the process dies, one create is in flight (the cloud carries it out after the death), one has
returned but its result is not recorded (the pass records after every batch), and the rest
were never sent though their intents are committed. After a restart every intent is adopted
(its VM exists) or cleanly stopped ("never created"): one VM per intent, no leak, and no create
is sent again for an intent of the dead process.

The second test checks what reaches the cloud when the gate retries a create: the first attempt
hangs past the gate's timeout and is carried out late, the retry carries the same ClientToken /
requestId / VM name and the same parameters, and the cloud makes one VM.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import (
    CREATE_OPERATION,
    KINDS,
    PROVIDER_IDS,
    create_key,
    held_gate,
    launch_configs,
    provider_config,
    sizes,
    wait_until,
)
from tests.support.stack import FAST_GATE, RECOVERY_GATE, Stack
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue

HANG_S = 1.5  # how long the cloud holds the first create
INTERVALS = {"provision_s": 0.3}


@dataclass(frozen=True)
class Crash:
    workers: int  # intents of the pass that is killed
    run: int = 0  # repetition (the long form runs several)


@pytest.mark.parametrize("size", sizes(Crash(3), *[Crash(12, run) for run in range(4)]))
@pytest.mark.parametrize("kind", KINDS)
def test_a_provisioner_killed_mid_launch_leaves_one_vm_per_intent(
    kind, size, tmp_path, db_url, engine, clouds, stacks, figures
):
    sim = clouds.of(kind)
    operation = CREATE_OPERATION[kind]
    provider = provider_config(kind, sim, gate=held_gate(kind))
    pool = {
        "id": "proj/crash",
        "provider": provider["id"],
        "max_capacity": 100,
        "launch_configs": launch_configs(kind),
    }
    stack = Stack.write(tmp_path, db_url, [provider], [pool], intervals=INTERVALS)
    stacks.append(stack)
    stack.sync_pools(engine)
    sim.faults.behaviour.update(hang_s=HANG_S)
    sim.faults.force("hang", operation=operation)
    tasks.submit_tasks(engine, "proj/crash", size.workers, 5.0)

    doomed = stack.start("provisioner")

    def one_in_flight_one_made() -> bool:
        made = [r for r in sim.faults.journal(operation) if r.outcome == "ok"]
        return sim.faults.hanging == 1 and len(made) == 1

    doomed.wait_for(one_in_flight_one_made, 30, "one create in flight and one made")
    doomed.kill()
    wait_until(lambda: sim.faults.hanging == 0, 10, "the cloud to finish the hung create")

    intents = list_workers(engine, pool_id="proj/crash")
    assert len(intents) == size.workers  # committed before the first call
    assert all(r.cloud_id is None for r in intents)  # no result was recorded
    sent = {r.key for r in sim.faults.journal(operation)}
    assert len(sent) == 2  # one carried out after the death, one returned before it
    never_sent = [r for r in intents if create_key(kind, r) not in sent]
    assert never_sent  # and these were never sent at all

    stack.data["providers"][0]["gate"] = dict(RECOVERY_GATE)
    stack.save()
    sim.faults.reset_counts()  # the journal from here on is the restarted process's
    restarted = stack.start("provisioner")

    def resolved() -> bool:
        rows = list_workers(engine, pool_id="proj/crash")
        return all(r.cloud_id or r.state == WorkerState.STOPPED for r in rows)

    restarted.wait_for(resolved, 30, "intent recovery")
    passes = len(restarted.events("provision-pass"))
    restarted.wait_for(
        lambda: len(restarted.events("provision-pass")) >= passes + 3, 30, "three more passes"
    )

    rows = {r.worker_id: r for r in list_workers(engine, pool_id="proj/crash")}
    vms = {vm.cloud_id: vm for vm in sim.instances()}
    adopted = [rows[r.worker_id] for r in intents if create_key(kind, r) in sent]
    failed = [rows[r.worker_id] for r in never_sent]
    assert adopted and all(r.cloud_id in vms and r.state != WorkerState.STOPPED for r in adopted)
    assert all((r.state, r.stop_reason) == (WorkerState.STOPPED, "never created") for r in failed)
    assert len(adopted) + len(failed) == size.workers
    # Recovery looks the intents up; it never sends their creates again.
    assert not {create_key(kind, r) for r in intents} & {
        r.key for r in sim.faults.journal(operation)
    }
    report = assert_no_leaks(engine, clouds.sims)
    assert report.vms <= size.workers  # never more than the demand
    figures.add(
        runs=1,
        intents=size.workers,
        adopted=len(adopted),
        never_created=len(failed),
        vms_leaked=len(report.unmanaged),
        rows_lost=len(report.lost),
        duplicates=len(report.duplicates),
    )
    code, _ = restarted.terminate()
    assert code == 0


@pytest.mark.parametrize("run", sizes(0, *range(1, 6)))  # the long form repeats it
@pytest.mark.parametrize("kind", KINDS)
def test_a_retried_create_repeats_the_same_request_and_makes_one_vm(
    kind, run, tmp_path, db_url, engine, clouds, stacks, figures
):
    sim = clouds.of(kind)
    operation = CREATE_OPERATION[kind]
    # The first attempt hangs past the gate's timeout; the cloud carries it out afterwards.
    gate = {**FAST_GATE, "timeout_s": 0.5, "max_attempts": 3}
    provider = provider_config(kind, sim, gate=gate)
    pool = {
        "id": "proj/retry",
        "provider": provider["id"],
        "max_capacity": 100,
        "launch_configs": launch_configs(kind)[:1],
    }
    stack = Stack.write(tmp_path, db_url, [provider], [pool], intervals=INTERVALS)
    stack.sync_pools(engine)
    config = stack.config()
    cloud = build_provider(config.provider(PROVIDER_IDS[kind]), config.deployment_id)
    sim.faults.behaviour.update(hang_s=4 * gate["timeout_s"])
    sim.faults.force("hang", "fail", operation=operation)  # then a 5xx, then normal service
    tasks.submit_tasks(engine, "proj/retry", 1, 5.0)
    try:
        (report,) = Provisioner(engine, BuiltinQueue(engine), {cloud.id: cloud}).run_pass(cloud.id)
    finally:
        cloud.close()
    wait_until(lambda: sim.faults.hanging == 0, 10, "the cloud to finish the hung create")

    (row,) = list_workers(engine, pool_id="proj/retry")
    attempts = sim.faults.journal(operation)
    assert report.launched == 1 and row.cloud_id
    assert [a.outcome for a in attempts] == ["fail", "ok", "ok"]  # 5xx, retry, the hung one
    assert {a.key for a in attempts} == {create_key(kind, row)}
    assert len({a.digest for a in attempts}) == 1  # the very same parameters every time
    assert [vm.cloud_id for vm in sim.instances()] == [row.cloud_id]
    assert_no_leaks(engine, clouds.sims)
    figures.record(attempts=len(attempts), keys=1, vms=1)
