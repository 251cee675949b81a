"""A scan's report counts what that scan did, while other regions of its provider are being
scanned at the same time by other threads sharing the provider and its gate."""

from __future__ import annotations

import math
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

from werkzeug.test import Client

from tests.fixtures.sim_gce import GCE_DEPLOYMENT, GCE_OTHER_ZONE, GCE_PROJECT, GCE_ZONE
from tests.integration.scanner.test_scan import IMAGES, configure, scanner_for
from wm.db import pools as pool_store
from wm.db.workers import NewWorker, insert_intents, list_workers
from wm.model import CloudInstance, WorkerState
from wm.providers.base import TAG_DEPLOYMENT, TAG_LAUNCH_CONFIG, TAG_POOL, TAG_WORKER
from wm.scanner import Scanner, ScanReport

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
PAGE = 500  # GCE's largest page: instances.list calls per zone = ceil(listed / PAGE)


def intents(engine, zone: str, names: list[str]) -> None:
    lc = pool_store.load_launch_configs(engine)[0]
    token = uuid.uuid4().hex
    rows = [
        NewWorker(n, "proj/scan", zone, "gcp-test", 1, lc.launch_config_id, token, "b", i, 3600)
        for i, n in enumerate(names)
    ]
    insert_intents(engine, rows)


def labels(name: str) -> dict[str, str]:
    return {TAG_DEPLOYMENT: GCE_DEPLOYMENT, TAG_WORKER: name, TAG_POOL: "proj_scan"}


def spot_vm(sim_gce, zone: str, name: str) -> None:
    machine, image = IMAGES["gcp"]
    body = {
        "name": name,
        "machineType": f"zones/{zone}/machineTypes/{machine}",
        "disks": [{"boot": True, "initializeParams": {"sourceImage": image}}],
        "labels": {**labels(name), TAG_LAUNCH_CONFIG: "lc"},
        "scheduling": {
            "provisioningModel": "SPOT",
            "automaticRestart": False,
            "onHostMaintenance": "TERMINATE",
        },
    }
    path = f"/compute/v1/projects/{GCE_PROJECT}/zones/{zone}/instances"
    assert Client(sim_gce).post(path, json=body).status_code == 200


def scan_at_once(scanner, units: list[tuple[str, str]]) -> tuple[list[ScanReport], list]:
    """Scan the units in threads started together; the reports and when each scan ran."""
    start = threading.Barrier(len(units))
    reports: list = [None] * len(units)
    spans: list = [None] * len(units)

    def scan(index: int, provider_id: str, region: str) -> None:
        start.wait()
        began = time.monotonic()
        reports[index] = scanner.scan(provider_id, region)
        spans[index] = (began, time.monotonic())

    threads = [threading.Thread(target=scan, args=(i, *u)) for i, u in enumerate(units)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return reports, spans


def test_two_regions_scanned_at_once_each_report_only_their_own_calls_and_preemptions(
    engine, sim_gce, gcp_provider
):
    # Scenario: one provider, two zones. In the first, two workers were deleted by hand (the
    # scan must look them up); in the second, a fleet two pages long, two of it Spot VMs the
    # cloud takes back. Both zones are scanned at once, each call a little slow.
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    here = [f"w-here-{i}" for i in range(4)]
    there = [f"w-there-{i:03d}" for i in range(600)]
    spot = ["w-spot-0", "w-spot-1"]
    intents(engine, GCE_ZONE, here)
    intents(engine, GCE_OTHER_ZONE, there + spot)
    sim_gce.seed_instances(GCE_PROJECT, GCE_ZONE, {n: labels(n) for n in here})
    sim_gce.seed_instances(GCE_PROJECT, GCE_OTHER_ZONE, {n: labels(n) for n in there})
    for name in spot:
        spot_vm(sim_gce, GCE_OTHER_ZONE, name)
    scanner = scanner_for(engine, gcp_provider)
    for zone in (GCE_ZONE, GCE_OTHER_ZONE):
        scanner.scan(gcp_provider.id, zone)  # every worker is running now
    assert {r.state for r in list_workers(engine)} == {WorkerState.RUNNING}
    for name in here[:2]:
        sim_gce.remove(name)
    for name in spot:
        sim_gce.kill(name, "preempted")
    sim_gce.faults.behaviour.update(latency_ms=20, latency_jitter_ms=0)
    sim_gce.faults.reset_counts()

    (a, b), spans = scan_at_once(
        scanner, [(gcp_provider.id, GCE_ZONE), (gcp_provider.id, GCE_OTHER_ZONE)]
    )

    # The scans ran at the same time, so provider-wide counters would have mixed them up.
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    counts = sim_gce.faults.counts()
    # The first zone cost one list page and one look-up per vanished worker (GCE: one
    # instances.get each); the second, its pages and the deletion of the pre-empted VMs:
    # together every request the cloud received, nothing counted twice or lost.
    pages_b = math.ceil((len(there) + len(spot)) / PAGE)
    assert (a.listed, a.missing, a.looked_up, a.preempted) == (2, 2, 2, 0)
    assert a.api_calls == 1 + 2
    assert (b.listed, b.missing, b.looked_up, b.preempted) == (602, 0, 0, 2)
    assert b.api_calls == sum(counts.values()) - a.api_calls
    assert counts["instances.list"] == 1 + pages_b and counts["instances.delete"] == 2


def test_a_look_up_that_failed_looked_nothing_up(engine, sim_gce, gcp_provider):
    # Scenario: two workers vanished, and the cloud answers every look-up with a 5xx.
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    names = ["w-a", "w-b", "w-c"]
    intents(engine, GCE_ZONE, names)
    sim_gce.seed_instances(GCE_PROJECT, GCE_ZONE, {n: labels(n) for n in names})
    scanner = scanner_for(engine, gcp_provider)
    scanner.scan(gcp_provider.id, GCE_ZONE)
    for name in names[:2]:
        sim_gce.remove(name)
    sim_gce.faults.behaviour.update(failure_rate=1.0, fault_operations=["instances.get"])
    sim_gce.faults.reset_counts()

    report = scanner.scan(gcp_provider.id, GCE_ZONE)

    # Outcome: two were missing, none was looked up (so neither is stopped), and the report
    # still counts the calls the failed look-up made.
    assert report is not None and (report.missing, report.looked_up) == (2, 0)
    assert {r.state for r in list_workers(engine)} == {WorkerState.RUNNING}
    assert report.api_calls == sum(sim_gce.faults.counts().values())


def test_first_sightings_are_kept_per_unit_and_forgotten_once_no_longer_listed():
    scanner = Scanner(engine=None, providers={})  # type: ignore[arg-type]  # no scan runs
    vm = CloudInstance(None, "vm-1", GCE_ZONE, WorkerState.RUNNING)
    dated = CloudInstance(None, "vm-2", GCE_ZONE, WorkerState.RUNNING, launched_at=T0)
    later = T0 + timedelta(minutes=5)

    assert scanner.first_seen("gcp-test", GCE_ZONE, [vm, dated], T0) == {"vm-1": T0}
    assert scanner.first_seen("gcp-test", GCE_ZONE, [vm], later) == {"vm-1": T0}
    assert scanner.first_seen("gcp-test", GCE_OTHER_ZONE, [], later) == {}
    # Gone from its unit's list: forgotten, so the map never grows without bound.
    assert scanner.first_seen("gcp-test", GCE_ZONE, [], later) == {}
    assert scanner.first_seen("gcp-test", GCE_ZONE, [vm], later) == {"vm-1": later}
