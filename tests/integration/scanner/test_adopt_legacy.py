"""A provider taking over a live worker-manager adopts the VMs it made: the scan finds each by
worker-manager's own tags and labels, matches it to the row `wm import` wrote, counts and
deletes it like any worker, reports the ones nobody imported and never touches another
provider's. Real Postgres, the real SDKs, the simulated clouds; the VMs are made by the
legacy launchers of wmsim/<kind>/legacy.py, exactly as worker-manager makes them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import REGISTRY

from tests.fixtures.sim_arm import (
    AZURE_RESOURCE_GROUP,
    AZURE_ROOT_URL,
    AZURE_SUBNET,
    AZURE_SUBSCRIPTION,
    make_subnet,
)
from tests.fixtures.sim_ec2 import EC2_DEPLOYMENT, EC2_REGION, EC2_ROOT_URL, aws_config
from tests.fixtures.sim_gce import GCE_DEPLOYMENT, GCE_ROOT_URL, GCE_ZONE, gcp_config
from tests.integration.scanner.test_scan import configure
from tests.support.legacy_vms import legacy_vm
from wm.db import pools as pool_store
from wm.db import tasks, worker_writes
from wm.db.imported_workers import AdoptedWorker, adopt_workers
from wm.db.pool_errors import list_errors
from wm.db.scans import db_now
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers import build_provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wm.take_over.adoption_report import DONE_EVENT, status_line
from wm.take_over.marks import IMPORTED_FROM, imported_worker_id
from wmsim.cloud import LegacyVm

POOL = "proj/scan"  # test_scan's configure()


@dataclass
class Cloud:
    kind: str
    sim: Any
    region: str
    root_url: str
    make_provider: Any  # (adopt_legacy) -> provider

    def resources(self) -> list[str]:
        """Every resource the sim holds that is still alive (VMs, and on Azure NICs, IPs,
        disks)."""
        if self.kind == "azure":
            return list(self.sim.resources())
        return [v.cloud_id for v in self.sim.instances() if v.state not in ("terminated", "gone")]


@pytest.fixture(params=["aws", "gcp", "azure"])
def cloud(request, monkeypatch) -> Cloud:
    kind = request.param
    built: list[Any] = []
    if kind == "aws":
        monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
        sim = request.getfixturevalue("sim_ec2")

        def make_provider(adopt: bool) -> Any:
            config = aws_config(sim.endpoint).model_copy(update={"adopt_legacy": adopt})
            built.append(build_provider(config, EC2_DEPLOYMENT, root_url=EC2_ROOT_URL))
            return built[-1]

        found = Cloud(kind, sim, EC2_REGION, EC2_ROOT_URL, make_provider)
    elif kind == "gcp":
        sim = request.getfixturevalue("sim_gce")

        def make_provider(adopt: bool) -> Any:
            config = gcp_config(sim.endpoint).model_copy(update={"adopt_legacy": adopt})
            built.append(build_provider(config, GCE_DEPLOYMENT, root_url=GCE_ROOT_URL))
            return built[-1]

        found = Cloud(kind, sim, GCE_ZONE, GCE_ROOT_URL, make_provider)
    else:
        sim = request.getfixturevalue("sim_arm")
        factory = request.getfixturevalue("make_azure_provider")
        sim.deployments.create_resource_group(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, "eastus")
        make_subnet(sim, AZURE_SUBNET, "eastus")

        def make_provider(adopt: bool) -> Any:
            return factory(sim, adopt_legacy=adopt)

        found = Cloud(kind, sim, "eastus", AZURE_ROOT_URL, make_provider)
    yield found
    for provider in built:
        provider.close()


def made(cloud: Cloud, provider_id: str, *, root_url: str | None = None, **kw: Any) -> LegacyVm:
    extra = {"public_ip": True} if cloud.kind == "azure" else {}
    return legacy_vm(
        cloud.kind,
        cloud.sim,
        provider_id=provider_id,
        pool_id=POOL,
        region=cloud.region,
        root_url=root_url or cloud.root_url,
        **extra,
        **kw,
    )


def imported(engine, cloud: Cloud, provider_id: str, vm: LegacyVm) -> str:
    """The row `wm import` writes for a worker worker-manager shows running."""
    now = db_now(engine)
    worker_id = imported_worker_id(POOL, vm.worker_group, vm.worker_id)
    launch_config = pool_store.load_launch_configs(engine)[0].launch_config_id
    with engine.begin() as conn:
        adopt_workers(
            conn,
            [
                AdoptedWorker(
                    worker_id=worker_id,
                    pool_id=POOL,
                    worker_group=vm.worker_group,
                    tc_worker_id=vm.worker_id,
                    provider_id=provider_id,
                    state=WorkerState.RUNNING,
                    capacity=vm.capacity,
                    launch_config_id=launch_config,
                    created=now - timedelta(hours=1),
                    last_modified=now - timedelta(minutes=5),
                    expires=now + timedelta(days=7),
                    registered_at=now - timedelta(minutes=50),
                    provider_data={IMPORTED_FROM: cloud.root_url},
                )
            ],
        )
    return worker_id


def scanner(engine, provider) -> Scanner:
    return Scanner(engine, {provider.id: provider}, missing_grace_s=0, orphan_grace_s=0)


def row(engine, worker_id: str):
    (found,) = [r for r in list_workers(engine, pool_id=POOL) if r.worker_id == worker_id]
    return found


def test_an_imported_workers_vm_is_adopted_counted_and_removed_with_all_it_holds(engine, cloud):
    provider = cloud.make_provider(True)
    configure(engine, provider, cloud.kind, cloud.region, max_capacity=2)
    vm = made(cloud, provider.id)
    worker_id = imported(engine, cloud, provider.id, vm)
    before = set(cloud.resources())

    report = scanner(engine, provider).scan(provider.id, cloud.region)

    adopted = row(engine, worker_id)
    assert adopted.cloud_id and adopted.tc_worker_id == vm.worker_id
    assert adopted.state == WorkerState.RUNNING
    assert report.unadopted == 0 and report.orphans == 0
    # The provisioner counts it: 5 tasks pending, room for one more worker under max 2.
    tasks.submit_tasks(engine, POOL, 5, 1.0)
    Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
    live = [r for r in list_workers(engine, pool_id=POOL) if r.state != WorkerState.STOPPED]
    assert sum(r.capacity for r in live) == 2

    assert worker_writes.request_removal(engine, worker_id, "removeWorker")
    scan = scanner(engine, provider)
    reports = []
    for _ in range(6):
        reports.append(scan.scan(provider.id, cloud.region))
        if row(engine, worker_id).state == WorkerState.STOPPED:
            break
    assert row(engine, worker_id).state == WorkerState.STOPPED
    # Everything worker-manager made for it is gone; wm's own worker (which carries
    # worker-manager's tags too) is neither reported nor touched.
    assert not (before & set(cloud.resources()))
    assert [r.unadopted for r in reports] == [0] * len(reports)
    assert len(cloud.resources()) >= 1


def imported_left(provider, region: str) -> float | None:
    labels = {"provider": provider.id, "region": region}
    return REGISTRY.get_sample_value("wm_imported_workers", labels)


def test_wm_says_once_when_the_last_imported_worker_is_gone(engine, cloud, caplog):
    provider = cloud.make_provider(True)
    configure(engine, provider, cloud.kind, cloud.region, max_capacity=2)
    config = [SimpleNamespace(id=provider.id, adopt_legacy=True)]  # what status reads of it
    workers = [imported(engine, cloud, provider.id, made(cloud, provider.id)) for _ in range(2)]
    scan = scanner(engine, provider)

    with caplog.at_level(logging.INFO, logger="wm"):
        scan.scan(provider.id, cloud.region)
        assert imported_left(provider, cloud.region) == 2
        assert status_line(engine, config) == (
            f"take-over: 2 imported workers remain ({provider.id} 2); when 0 you can set "
            "adopt_legacy = false on its providers and drop [take_over] from the config."
        )
        for worker_id in workers:
            assert worker_writes.request_removal(engine, worker_id, "removeWorker")
        # The scans delete their VMs; the one after the last is stopped reads none left.
        for _ in range(8):
            scan.scan(provider.id, cloud.region)
            if imported_left(provider, cloud.region) == 0:
                break
        scan.scan(provider.id, cloud.region)  # said once, not at every scan

    assert all(row(engine, w).state == WorkerState.STOPPED for w in workers)
    assert imported_left(provider, cloud.region) == 0
    done = [r for r in caplog.records if getattr(r, "wm_event", None) == DONE_EVENT]
    assert [r.wm_fields["provider"] for r in done] == [provider.id]
    assert status_line(engine, config) == (
        "take-over: no imported worker remains: you can set adopt_legacy = false on its "
        "providers and drop [take_over] from the config."
    )


def test_an_adopted_workers_vm_that_dies_is_stopped_and_deleted_like_any(engine, cloud):
    provider = cloud.make_provider(True)
    configure(engine, provider, cloud.kind, cloud.region)
    vm = made(cloud, provider.id)
    worker_id = imported(engine, cloud, provider.id, vm)
    scan = scanner(engine, provider)
    scan.scan(provider.id, cloud.region)
    before = set(cloud.resources())

    cloud.sim.kill(row(engine, worker_id).cloud_id)
    for _ in range(6):
        scan.scan(provider.id, cloud.region)
        if row(engine, worker_id).state == WorkerState.STOPPED:
            break

    assert row(engine, worker_id).state == WorkerState.STOPPED
    assert row(engine, worker_id).stop_reason
    assert not (before & set(cloud.resources()))


def test_an_unknown_legacy_vm_is_reported_and_kept_and_others_are_never_touched(engine, cloud):
    provider = cloud.make_provider(True)
    configure(engine, provider, cloud.kind, cloud.region)
    unknown = made(cloud, provider.id)
    other_provider = made(cloud, "someone-else")
    before = set(cloud.resources())
    other_root = None
    if cloud.kind != "aws":  # EC2 keeps the root URL only in user data
        other_root = made(cloud, provider.id, root_url="https://other.example.test")
        before = set(cloud.resources())

    scan = scanner(engine, provider)
    reports = [scan.scan(provider.id, cloud.region) for _ in range(2)]
    # Another scanner process (a replica, or this one restarted) scans the unit next.
    reports.append(scanner(engine, provider).scan(provider.id, cloud.region))

    assert [r.unadopted for r in reports] == [1, 1, 1]
    # Named once as an error of its pool, for `wm status` and `wm pools errors`, whichever
    # process scans: the database says it was named.
    (error,) = list_errors(engine, POOL)
    assert error.kind == "legacy-vm-unadopted" and unknown.worker_id in error.description
    assert [r.orphans for r in reports] == [0, 0, 0]
    assert set(cloud.resources()) == before  # nothing deleted, nothing of theirs
    assert list_workers(engine, pool_id=POOL) == []
    assert unknown and other_provider and (other_root or cloud.kind == "aws")


def test_without_adopt_legacy_a_provider_lists_nothing_of_worker_managers(engine, cloud):
    provider = cloud.make_provider(False)
    configure(engine, provider, cloud.kind, cloud.region)
    made(cloud, provider.id)

    assert provider.list_instances(cloud.region) == []
    report = scanner(engine, provider).scan(provider.id, cloud.region)
    assert report.unadopted == 0 and report.orphans == 0 and report.listed == 0


def test_an_imported_arm_worker_in_its_own_group_goes_with_every_resource_of_its_deployment(
    engine, sim_arm, make_azure_provider
):
    from tests.integration.clouds.test_azure_arm import (
        ARM_GROUP,
        IMAGE_ID,
        LOCATION,
        TEMPLATE,
        publish,
    )
    from tests.integration.clouds.test_azure_arm import launch_config as arm_launch_config

    sim_arm.register_image(IMAGE_ID, LOCATION)
    sim_arm.deployments.create_resource_group(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, LOCATION)
    make_subnet(sim_arm, AZURE_SUBNET, LOCATION)
    provider = make_azure_provider(sim_arm, adopt_legacy=True)
    configure(engine, provider, "azure", LOCATION)
    cloud = Cloud("azure", sim_arm, LOCATION, AZURE_ROOT_URL, None)
    config = arm_launch_config(publish(sim_arm, TEMPLATE))
    vm = made(cloud, provider.id, config=config)
    worker_id = imported(engine, cloud, provider.id, vm)
    in_group = [r for r in sim_arm.resources() if f"/{ARM_GROUP}/".lower() in r.lower()]
    assert len(in_group) >= 3  # the VM, its NIC, its OS disk (and more, as the template says)
    deployment = vm.provider_data["deployment"]["name"]
    assert deployment in sim_arm.deployments.history(AZURE_SUBSCRIPTION, ARM_GROUP)

    scanner(engine, provider).scan(provider.id, LOCATION)
    assert f"/{ARM_GROUP}/".lower() in row(engine, worker_id).cloud_id.lower()

    worker_writes.request_removal(engine, worker_id, "removeWorker")
    scan = scanner(engine, provider)
    for _ in range(6):
        scan.scan(provider.id, LOCATION)
        if row(engine, worker_id).state == WorkerState.STOPPED:
            break
    assert row(engine, worker_id).state == WorkerState.STOPPED
    assert [r for r in sim_arm.resources() if f"/{ARM_GROUP}/".lower() in r.lower()] == []
    assert deployment not in sim_arm.deployments.history(AZURE_SUBSCRIPTION, ARM_GROUP)
