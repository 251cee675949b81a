"""Scenario 6: a cloud call that never answers, in the middle of a scan, on each cloud.

The clouds stop answering deletes (the sims' hang knob: the request is held far longer than
the gate's per-call timeout). One scan has everything to do at once: a worker idle past its
queue-inactivity deadline to delete, one deleted by hand to notice, an old orphan to delete,
workers that simply run. The timeout fires on each delete; the rest of the scan completes (the
vanished worker is stopped, the others untouched) in about the gate's timeout x attempts, not
the hang; the next scan, with the cloud answering again, deletes what the hung calls could
not, and nothing leaks.
"""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import (
    DELETE_OPERATION,
    KINDS,
    PROVIDER_IDS,
    plant_vm,
    provider_config,
    sizes,
)
from tests.support.stack import DEPLOYMENT, FAST_GATE, Stack, pool
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.providers.base import TAG_DEPLOYMENT, TAG_WORKER
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner

TIMEOUT_S = 0.5
ATTEMPTS = 2
HANG_S = 8.0  # "never": far past every timeout and retry of the scan


@pytest.mark.parametrize("workers", sizes(4, 30))
@pytest.mark.parametrize("kind", KINDS)
def test_a_hung_delete_times_out_the_scan_completes_and_the_next_scan_retries(
    kind, workers, tmp_path, db_url, engine, clouds, figures
):
    sim = clouds.of(kind)
    gate = {**FAST_GATE, "timeout_s": TIMEOUT_S, "max_attempts": ATTEMPTS}
    provider_cfg = provider_config(kind, sim, gate=gate)
    stack = Stack.write(
        tmp_path,
        db_url,
        [provider_cfg],
        [pool("proj/hang", provider_cfg, 100, requires_registration=False)],
    )
    stack.sync_pools(engine)
    config = stack.config()
    provider = build_provider(config.provider(PROVIDER_IDS[kind]), config.deployment_id)
    region = provider.regions[0]
    scanner = Scanner(engine, {provider.id: provider}, missing_grace_s=0, orphan_grace_s=0)
    try:
        tasks.submit_tasks(engine, "proj/hang", workers, 60.0)
        Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
        scanner.scan(provider.id, region)
        idle, vanished, *busy = sorted(list_workers(engine), key=lambda r: r.worker_id)
        assert {r.state for r in (idle, vanished, *busy)} == {WorkerState.RUNNING}
        with engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE workers SET last_active = now() - interval '1 day' WHERE worker_id = :w"
                ),
                {"w": idle.worker_id},
            )
        sim.remove(vanished.cloud_id)
        orphan = plant_vm(
            kind, sim, "orphan-hung", {TAG_DEPLOYMENT: DEPLOYMENT, TAG_WORKER: "orphan-hung"}
        )
        sim.faults.behaviour.update(
            hang_rate=1.0, hang_s=HANG_S, fault_operations=(DELETE_OPERATION[kind],)
        )

        started = time.monotonic()
        report = scanner.scan(provider.id, region)
        took = time.monotonic() - started

        rows = {r.worker_id: r for r in list_workers(engine)}
        assert report is not None  # the scan ended normally, with its report
        assert took < HANG_S / 2  # the gate's timeouts, not the hang
        assert sim.faults.hanging >= 1  # the deletes are still held by the cloud
        assert rows[vanished.worker_id].state == WorkerState.STOPPED  # the look-up went on
        assert rows[idle.worker_id].state == WorkerState.STOPPING  # its delete timed out
        assert {rows[r.worker_id].state for r in busy} == {WorkerState.RUNNING}
        states = {vm.cloud_id: vm.state for vm in sim.instances()}
        assert states[idle.cloud_id] == "running" and states[orphan] == "running"

        # The cloud answers again: the next scans retry both deletes.
        sim.faults.behaviour.update(hang_rate=0.0)
        deletes_before = len(sim.faults.journal(DELETE_OPERATION[kind]))
        for _ in range(3):
            scanner.scan(provider.id, region)
        rows = {r.worker_id: r for r in list_workers(engine)}
        assert rows[idle.worker_id].state == WorkerState.STOPPED
        assert {rows[r.worker_id].state for r in busy} == {WorkerState.RUNNING}
        states = {vm.cloud_id: vm.state for vm in sim.instances()}
        assert states.get(orphan, "gone") in ("stopping", "gone")
        retried = len(sim.faults.journal(DELETE_OPERATION[kind])) - deletes_before
        sim.faults.cut_hangs()  # the first deletes are never answered at all
        report_leaks = assert_no_leaks(engine, clouds.sims)
    finally:
        provider.close()
    figures.record(
        scan_s=round(took, 2),
        hang_s=HANG_S,
        timeout_s=TIMEOUT_S,
        attempts=ATTEMPTS,
        deletes_retried=retried,
        vms_leaked=len(report_leaks.unmanaged),
    )
