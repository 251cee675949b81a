"""Scenario 5: a scanner is SIGKILLed in the middle of its scans, on each cloud at once.

Every provider has two regions; workers past their deadline wait in the first. The clouds
hang the deletes, so scanner A stops there, mid-scan, claims held, deletes in flight. Its peer
B starts, finds those regions claimed, and scans the others. A is killed: its claims die with
its connections, and B scans every region within two intervals; no region is ever scanned by
two scanners at once; B's deletes repeat A's (which the clouds still carry out later) and every
worker ends stopped with nothing left in the clouds: terminate is idempotent.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass

import pytest
from sqlalchemy import text

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import DELETE_OPERATION, KINDS, provider_config, sizes, wait_until
from tests.support.stack import START_TIMEOUT_S, Stack, pool
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue

INTERVAL_S = 1.0
HANG_S = 10.0  # A's deletes outlive A; the clouds carry them out after the peer's
SECOND_REGION = {"aws": "eu-west-1", "gcp": "europe-west4-b", "azure": "westeurope"}


@dataclass(frozen=True)
class ScannerCrash:
    workers: int  # per cloud


@pytest.mark.parametrize("size", sizes(ScannerCrash(3), ScannerCrash(25)))
def test_a_scanner_killed_mid_scan_is_covered_by_its_peer_within_two_intervals(
    size, tmp_path, db_url, engine, clouds, stacks, figures
):
    providers = []
    for kind in KINDS:
        config = provider_config(kind, clouds.of(kind), scan_interval_s=INTERVAL_S)
        config["regions"] = [*config["regions"], SECOND_REGION[kind]]
        providers.append(config)
    pools = [pool(f"proj/{k}", p, 100) for k, p in zip(KINDS, providers, strict=True)]
    stack = Stack.write(tmp_path, db_url, providers, pools)
    stacks.append(stack)
    stack.sync_pools(engine)
    launch(stack, engine, size.workers)
    with engine.begin() as conn:  # every worker is past its registration deadline
        conn.execute(text("UPDATE workers SET expires = now() - interval '1 second'"))
    for kind in KINDS:
        clouds.of(kind).faults.behaviour.update(
            hang_rate=1.0, hang_s=HANG_S, fault_operations=(DELETE_OPERATION[kind],)
        )

    first = stack.start("scanner")
    first.wait_for(
        lambda: all(clouds.of(k).faults.hanging >= 1 for k in KINDS), 30, "deletes hanging"
    )
    second = stack.start("scanner")
    second.wait_for(lambda: second.events("process-started"), START_TIMEOUT_S, "the peer started")
    # Every job of the peer runs once within an interval (their phases are spread over it). It
    # may scan none of A's free regions yet: one A scanned less than half an interval before is
    # skipped, as replicas share regions rather than repeat each other's scans. A's stuck ones
    # stay claimed.
    time.sleep(1.5 * INTERVAL_S)

    stuck = {(p["id"], p["regions"][0]) for p in providers}  # A's scans, in their deletes
    assert claimed_units(engine) >= stuck  # their claims held
    for kind in KINDS:  # the deletes the peer sends are answered again
        clouds.of(kind).faults.behaviour.update(hang_rate=0.0)
    # Read before the kill: its claims are released the moment it dies, which the peer may see
    # before this process (on a busy machine) gets to read the clock after kill() returns.
    killed_at = time.time()
    first.kill()

    every_unit = {(p["id"], r) for p in providers for r in p["regions"]}

    def covered() -> bool:
        return {(e["provider"], e["region"]) for e in after(second, killed_at)} >= every_unit

    second.wait_for(covered, 2 * INTERVAL_S + 10, "the peer scanning every region")
    first_scan = {}
    for event in after(second, killed_at):
        unit = (event["provider"], event["region"])
        first_scan.setdefault(unit, event["ts"] - event["duration_s"])
    slowest = max(first_scan[u] - killed_at for u in every_unit)
    second.wait_for(
        lambda: all(r.state == WorkerState.STOPPED for r in list_workers(engine)),
        4 * INTERVAL_S + 10,
        "every worker stopped",
    )

    # A's scans in progress ended when it died: the peer's scans of those regions came after.
    # Every scan either logged (A's earlier ones, all the peer's) never overlaps another.
    windows = defaultdict(list)
    for process in (first, second):
        for event in process.events("scan"):
            unit = (event["provider"], event["region"])
            windows[unit].append((event["ts"] - event["duration_s"], event["ts"]))
    overlaps = [
        (unit, a, b)
        for unit, spans in windows.items()
        for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False)
        if b[0] < a[1] - 0.01
    ]
    overlaps += [
        (unit, (None, killed_at), span)
        for unit in stuck
        for span in windows[unit]
        if span[1] > killed_at and span[0] < killed_at - 0.01
    ]
    # The dead scanner's deletes arrive last, on VMs the peer deleted already.
    wait_until(lambda: all(s.faults.hanging == 0 for s in clouds.sims), HANG_S + 5, "A's deletes")
    late = [
        r
        for kind in KINDS
        for r in clouds.of(kind).faults.journal(DELETE_OPERATION[kind])
        if r.hung and r.outcome == "ok"
    ]
    assert len(late) >= len(KINDS)
    failed_terminates = second.events("terminate-failed")
    assert slowest <= 2 * INTERVAL_S, f"a region waited {slowest:.2f}s for the peer"
    assert overlaps == []
    assert failed_terminates == []
    rows = list_workers(engine)
    assert len(rows) == 3 * size.workers
    assert {r.stop_reason for r in rows} == {"registration-timeout"}
    report = assert_no_leaks(engine, clouds.sims)
    assert report.vms == 0 or all(
        vm.state in ("stopping", "gone") for sim in clouds.sims for vm in sim.instances()
    )
    code, _ = second.terminate()
    assert code == 0
    figures.record(
        workers=3 * size.workers,
        regions=len(every_unit),
        slowest_cover_s=round(slowest, 2),
        interval_s=INTERVAL_S,
        overlapping_scans=len(overlaps),
        failed_terminates=len(failed_terminates),
        deletes_repeated_after_death=len(late),
        vms_leaked=len(report.unmanaged),
    )


def launch(stack: Stack, engine, workers: int) -> None:
    config = stack.config()
    for provider_config_ in config.providers:
        provider = build_provider(provider_config_, config.deployment_id)
        try:
            pool_id = next(p["id"] for p in stack.data["pools"] if p["provider"] == provider.id)
            tasks.submit_tasks(engine, pool_id, workers, 60.0)
            Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
        finally:
            provider.close()
    assert all(r.cloud_id for r in list_workers(engine))


def claimed_units(engine) -> set[tuple[str, str]]:
    """Scan units some scanner holds a claim on right now (their rows are locked)."""
    with engine.connect() as conn, conn.begin():
        every = {tuple(r) for r in conn.execute(text("SELECT provider_id, region FROM scan_units"))}
        free = conn.execute(
            text("SELECT provider_id, region FROM scan_units FOR UPDATE SKIP LOCKED")
        )
        held = every - {tuple(r) for r in free}
        conn.rollback()
    return held


def after(process, moment: float) -> list[dict]:
    return [e for e in process.events("scan") if e["ts"] - e["duration_s"] >= moment]
