"""A scan's report counts what that scan did, while other regions of its provider are being
scanned at the same time by other threads sharing the provider and its gate."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from werkzeug.test import Client

from tests.fixtures.sim_arm import (
    AZURE_DEPLOYMENT,
    AZURE_REGIONS,
    AZURE_RESOURCE_GROUP,
    AZURE_SUBSCRIPTION,
)
from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import GCE_DEPLOYMENT, GCE_OTHER_ZONE, GCE_PROJECT, GCE_ZONE
from tests.integration.scanner.test_scan import IMAGES, configure, scanner_for
from wm.db import pools as pool_store
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker, list_workers
from wm.model import CloudInstance, WorkerState
from wm.providers.base import TAG_DEPLOYMENT, TAG_LAUNCH_CONFIG, TAG_POOL, TAG_WORKER
from wm.scanning.report import ScanReport
from wm.scanning.scanner import Scanner

T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
AZURE_PAGE = 50  # the simulated ARM's pages, made small so that a short list takes two


def intents(engine, provider_id: str, region: str, names: list[str]) -> None:
    lc = pool_store.load_launch_configs(engine)[0]
    token = uuid.uuid4().hex
    rows = [
        NewWorker(n, "proj/scan", region, provider_id, 1, lc.launch_config_id, token, "b", i, 3600)
        for i, n in enumerate(names)
    ]
    insert_intents(engine, rows)


def labels(name: str) -> dict[str, str]:
    """The tags wm gives a worker's VM (both clouds' providers deploy as `test-deploy`)."""
    assert GCE_DEPLOYMENT == AZURE_DEPLOYMENT
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


def gce_vms(sim_gce, zone: str, names: list[str], *, spot: bool = False) -> None:
    if spot:
        for name in names:
            spot_vm(sim_gce, zone, name)
    else:
        sim_gce.seed_instances(GCE_PROJECT, zone, {n: labels(n) for n in names})


def azure_vms(sim_arm, region: str, names: list[str], *, spot: bool = False) -> None:
    """VMs held in the provider's resource group as if ARM had made them, tagged as wm tags
    its workers; Spot VMs are deallocated when evicted."""
    machine, _ = IMAGES["azure"]
    scheduling = {"priority": "Spot", "evictionPolicy": "Deallocate"} if spot else {}
    for name in names:
        rid = (
            f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_RESOURCE_GROUP}"
            f"/providers/Microsoft.Compute/virtualMachines/{name}"
        )
        body = {
            "location": region,
            "tags": {**labels(name), TAG_LAUNCH_CONFIG: "lc"},
            "properties": {
                "hardwareProfile": {"vmSize": machine},
                "storageProfile": {"imageReference": {"publisher": "p", "offer": "o", "sku": "s"}},
                "osProfile": {"computerName": name, "adminUsername": "worker"},
                **scheduling,
            },
        }
        sim_arm.preload(rid, body)


@dataclass(frozen=True)
class TwoRegions:
    """One cloud's provider with two scan units, and what scanning each costs."""

    sim: str  # the simulated cloud's fixture
    provider: str  # the provider's fixture
    regions: tuple[str, str]
    fleet: int  # workers of the second unit: enough for two list pages
    make_vms: Callable[..., None]  # (sim, region, names, spot=) -> None
    page_size_max: int | None  # the simulated cloud's pages, when smaller than the cloud's
    # SDK calls of each scan: the first unit's list and its two look-ups; the second's list
    # and the deletion of its two pre-empted VMs.
    calls: tuple[int, int]
    lists: dict[str, int]  # list calls the cloud received, both scans together


CLOUDS = {
    # GCE lists per zone: one page here, and 602 instances there, two pages of 500. A look-up
    # is one instances.get; a deletion, a get (the instance id names the delete's request)
    # and the delete.
    "gcp": TwoRegions(
        "sim_gce",
        "gcp_provider",
        (GCE_ZONE, GCE_OTHER_ZONE),
        600,
        gce_vms,
        None,
        calls=(1 + 2, 2 + 2 * 2),
        lists={"instances.list": 1 + 2},
    ),
    # ARM lists per resource group, every region at once, then the subscription's power
    # states: each scan pages through all 66 VMs twice (two pages of 50 each time). A look-up
    # is a GET, and nothing more: the rows have the cloud ids their VMs were seen with, so no
    # deployment can still be making them (only an intent whose create was never answered is
    # searched for among every group's deployments). A deletion is a GET (is it still ours?)
    # and the DELETE.
    "azure": TwoRegions(
        "sim_arm",
        "azure_provider",
        AZURE_REGIONS,
        60,
        azure_vms,
        AZURE_PAGE,
        calls=(2 + 2 + 2, 2 + 2 + 2 * 2),
        lists={"VirtualMachines_List": 2 * 2, "VirtualMachines_ListAll": 2 * 2},
    ),
}


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


@pytest.mark.parametrize("kind", sorted(CLOUDS))
def test_two_regions_scanned_at_once_each_report_only_their_own_calls_and_preemptions(
    request, engine, kind: str
):
    # Scenario: one provider, two regions. In the first, two workers were deleted by hand (the
    # scan must look them up); in the second, a fleet two list pages long, two of it Spot VMs
    # the cloud takes back. Both regions are scanned at once, each call a little slow; the
    # provider fans its look-ups and deletions out to threads of its own.
    cloud = CLOUDS[kind]
    sim, provider = request.getfixturevalue(cloud.sim), request.getfixturevalue(cloud.provider)
    here_region, there_region = cloud.regions
    configure(engine, provider, kind, here_region)
    here = [f"w-here-{i}" for i in range(4)]
    there = [f"w-there-{i:03d}" for i in range(cloud.fleet)]
    spot = ["w-spot-0", "w-spot-1"]
    intents(engine, provider.id, here_region, here)
    intents(engine, provider.id, there_region, there + spot)
    cloud.make_vms(sim, here_region, here)
    cloud.make_vms(sim, there_region, there)
    cloud.make_vms(sim, there_region, spot, spot=True)
    sim.faults.behaviour.update(page_size_max=cloud.page_size_max)
    scanner = scanner_for(engine, provider)
    for region in cloud.regions:
        scanner.scan(provider.id, region)  # every worker is running now
    assert {r.state for r in list_workers(engine)} == {WorkerState.RUNNING}
    for name in here[:2]:
        sim.remove(name)
    for name in spot:
        sim.kill(name, "preempted")
    sim.faults.behaviour.update(latency_ms=20, latency_jitter_ms=0)
    sim.faults.reset_counts()

    (a, b), spans = scan_at_once(scanner, [(provider.id, r) for r in cloud.regions])

    # The scans ran at the same time, so provider-wide counters would have mixed them up.
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    counts = sim.faults.counts()
    assert (a.listed, a.missing, a.looked_up, a.preempted) == (2, 2, 2, 0)
    assert (b.listed, b.missing, b.looked_up, b.preempted) == (cloud.fleet + 2, 0, 0, 2)
    # Each report counts its own calls; together, every request the cloud received, nothing
    # counted twice or lost.
    assert (a.api_calls, b.api_calls) == cloud.calls, sorted(counts.items())
    assert a.api_calls + b.api_calls == sum(counts.values())
    assert {op: counts[op] for op in cloud.lists} == cloud.lists


def test_a_look_up_that_failed_looked_nothing_up(engine, sim_gce, gcp_provider):
    # Scenario: two workers vanished, and the cloud answers every look-up with a 5xx.
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    names = ["w-a", "w-b", "w-c"]
    intents(engine, gcp_provider.id, GCE_ZONE, names)
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


STREAMED_PAGE = 5  # EC2's smallest page (MaxResults 5); the other sims page as small
STREAMED_VMS = 8 * STREAMED_PAGE


def ec2_vms(sim_ec2, region: str, names: list[str]) -> None:
    for name in names:
        sim_ec2.seed_instances(1, region=region, tags=labels(name))


STREAMING = {  # kind -> (sim, provider, region, make_vms) of the real simulated clouds
    "aws": ("sim_ec2", "aws_provider", EC2_REGION, ec2_vms),
    "azure": ("sim_arm", "azure_provider", AZURE_REGIONS[0], azure_vms),
    "gcp": ("sim_gce", "gcp_provider", GCE_ZONE, gce_vms),
}


@pytest.mark.parametrize("kind", sorted(STREAMING))
def test_a_scan_holds_one_page_of_its_listing_at_a_time(request, engine, kind: str):
    # Scenario: 40 VMs with their rows, the simulated cloud (the real one of the kind, through
    # the real SDK) paging its lists five at a time: eight pages. Two scans: the first learns
    # every VM (a change a row), the second changes nothing.
    # Observed through the scan's own report: `held_max` counts listed instances alive at once
    # (each until CPython frees it, however it is held: by the scan or by the provider's
    # pager), so a listing kept whole anywhere shows as 40, where a page is 5. A memory bound
    # (tracemalloc) would have to tell five instances from forty in the noise of the SDKs'
    # clients and caches; a test double at the provider would not test the providers.
    sim_name, provider_name, region, make_vms = STREAMING[kind]
    sim, provider = request.getfixturevalue(sim_name), request.getfixturevalue(provider_name)
    configure(engine, provider, kind, region)
    names = [f"w-{i:03d}" for i in range(STREAMED_VMS)]
    intents(engine, provider.id, region, names)
    make_vms(sim, region, names)
    sim.faults.behaviour.update(page_size_max=STREAMED_PAGE)
    scanner = scanner_for(engine, provider)

    first = scanner.scan(provider.id, region)
    second = scanner.scan(provider.id, region)

    # Outcome: both scans read every VM, page by page; the steady one held one page at most
    # (the first also keeps, until it writes them, what Azure's listing asks rows to keep).
    assert first is not None and second is not None
    assert {r.state for r in list_workers(engine)} == {WorkerState.RUNNING}
    for report in (first, second):
        assert (report.listed, report.pages, report.changed) == (
            STREAMED_VMS,
            STREAMED_VMS // STREAMED_PAGE,
            STREAMED_VMS if report is first else 0,
        )
    assert second.held_max == STREAMED_PAGE
    if kind != "azure":
        assert first.held_max == STREAMED_PAGE
