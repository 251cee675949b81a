"""One scan, in process: real Postgres, the real SDKs, the simulated clouds."""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid

import pytest
from sqlalchemy import event, text
from werkzeug.test import Client

from tests.fixtures.sim_arm import AZURE_REGIONS
from tests.fixtures.sim_ec2 import EC2_REGION
from tests.fixtures.sim_gce import (
    GCE_DEPLOYMENT,
    GCE_OTHER_ZONE,
    GCE_PROJECT,
    GCE_WORKER_ACCOUNT,
    GCE_ZONE,
)
from tests.support.configs import build
from tests.support.definitions import apply_pools
from wm.config.loader import RetentionConfig
from wm.db import pool_errors, scan_writes, tasks
from wm.db import pools as pool_store
from wm.db.pool_errors import NewPoolError, list_errors, record_errors
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker, list_workers
from wm.model import WorkerState
from wm.providers.base import (
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_WORKER,
    LaunchBatch,
    LaunchIntent,
)
from wm.provisioning.pool_plan import new_worker_id
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.report import ScanOverran
from wm.scanning.scanner import Scanner
from wm.workers.lifecycle import REGISTRATION_TIMEOUT
from wmsim.gcp.identity import service_account_id

IMAGES = {
    "aws": ("m5.large", "ami-0abcdef1234567890"),
    "gcp": ("e2-small", "projects/debian-cloud/global/images/family/debian-12"),
    "azure": ("Standard_D2s_v5", "Canonical:ubuntu-24_04-lts:server:latest"),
}
X = WorkerState.STOPPED


def configure(engine, provider, kind: str, region: str, **pool_changes):
    machine, image = IMAGES[kind]
    extra = {
        "gcp": {
            "project": GCE_PROJECT,
            "worker_service_account_email": GCE_WORKER_ACCOUNT,
            "worker_service_account_id": service_account_id(GCE_WORKER_ACCOUNT),
        },
        "azure": {"subscription_id": "s", "resource_group": "g"},
    }
    data = {
        "deployment_id": "test-deploy",
        "providers": [
            {
                "id": provider.id,
                "kind": kind,
                "regions": list(provider.regions),
                **extra.get(kind, {}),
            }
        ],
        "pools": [
            {
                "id": "proj/scan",
                "provider": provider.id,
                "max_capacity": 5000,
                "requires_registration": False,
                "launch_configs": [{"region": region, "machine_type": machine, "image": image}],
                **pool_changes,
            }
        ],
    }
    config = build(data)
    apply_pools(engine, config, data["pools"])
    return config


def launch(engine, provider, count: int) -> list:
    tasks.submit_tasks(engine, "proj/scan", count, 1.0)
    Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
    rows = list_workers(engine, pool_id="proj/scan")
    assert len(rows) == count and all(r.cloud_id for r in rows)
    return rows


def scanner_for(engine, provider, **kw) -> Scanner:
    return Scanner(engine, {provider.id: provider}, missing_grace_s=0, orphan_grace_s=0, **kw)


class StatementCounter:
    def __init__(self, engine) -> None:
        self.count = 0
        event.listen(engine, "before_cursor_execute", self._count)

    def _count(self, *args) -> None:
        self.count += 1


def test_two_thousand_workers_cost_one_call_per_page_plus_one_per_missing(
    engine, sim_gce, gcp_provider
):
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    lc = pool_store.load_launch_configs(engine)[0]
    ids = [new_worker_id() for _ in range(2000)]
    insert_intents(
        engine,
        [
            NewWorker(
                w,
                "proj/scan",
                GCE_ZONE,
                gcp_provider.id,
                1,
                lc.launch_config_id,
                str(uuid.uuid4()),
                "b",
                i,
                3600,
            )
            for i, w in enumerate(ids)
        ],
    )
    client = Client(sim_gce)
    machine, image = IMAGES["gcp"]
    for worker_id in ids:
        body = {
            "name": worker_id,
            "machineType": f"zones/{GCE_ZONE}/machineTypes/{machine}",
            "disks": [{"boot": True, "initializeParams": {"sourceImage": image}}],
            "labels": {
                TAG_DEPLOYMENT: GCE_DEPLOYMENT,
                TAG_WORKER: worker_id,
                TAG_POOL: "proj_scan",
                TAG_LAUNCH_CONFIG: lc.launch_config_id,
            },
        }
        path = f"/compute/v1/projects/{GCE_PROJECT}/zones/{GCE_ZONE}/instances"
        assert client.post(path, json=body).status_code == 200
    scanner = scanner_for(engine, gcp_provider)
    scanner.scan(gcp_provider.id, GCE_ZONE)
    rows = {r.worker_id: r for r in list_workers(engine, pool_id="proj/scan")}
    assert all(rows[w].cloud_id for w in ids)  # intents learnt their ids from the list
    for worker_id in ids[:7]:
        sim_gce.remove(worker_id)  # deleted by hand: the list will not show them
    sim_gce.faults.reset_counts()
    counter = StatementCounter(engine)

    report = scanner.scan(gcp_provider.id, GCE_ZONE)

    calls = sim_gce.faults.counts()
    assert calls == {"instances.list": math.ceil(1993 / 500), "instances.get": 7}
    assert (report.listed, report.missing, report.looked_up) == (1993, 7, 7)
    assert counter.count < 25  # bounded, not one statement per worker
    rows = {r.worker_id: r for r in list_workers(engine, pool_id="proj/scan")}
    assert {rows[w].state for w in ids[7:]} == {WorkerState.RUNNING}
    assert {(rows[w].state, rows[w].stop_reason) for w in ids[:7]} == {(X, "gone-from-cloud")}


def test_workers_dying_out_of_band_are_stopped_after_one_scan(engine, sim_ec2, aws_provider):
    configure(
        engine,
        aws_provider,
        "aws",
        EC2_REGION,
        launch_configs=[
            {
                "region": EC2_REGION,
                "machine_type": "m5.large",
                "image": IMAGES["aws"][1],
                "spot": True,
            }
        ],
    )
    rows = launch(engine, aws_provider, 4)
    scanner_for(engine, aws_provider).scan(aws_provider.id, EC2_REGION)
    preempted, deleted = rows[0], rows[1]
    sim_ec2.kill(preempted.cloud_id)  # spot: terminated with the spot reason
    sim_ec2.remove(deleted.cloud_id)

    scanner_for(engine, aws_provider).scan(aws_provider.id, EC2_REGION)

    after = {r.worker_id: r for r in list_workers(engine, pool_id="proj/scan")}
    assert after[preempted.worker_id].state == X
    assert after[preempted.worker_id].stop_reason == "Server.SpotInstanceTermination"
    assert after[deleted.worker_id].state == X
    assert {after[r.worker_id].state for r in rows[2:]} == {WorkerState.RUNNING}


def test_a_worker_that_never_registers_is_terminated_at_its_deadline(engine, sim_gce, gcp_provider):
    configure(
        engine, gcp_provider, "gcp", GCE_ZONE, requires_registration=True, registration_timeout_s=60
    )
    launch(engine, gcp_provider, 1)
    scanner = scanner_for(engine, gcp_provider)
    scanner.scan(gcp_provider.id, GCE_ZONE)
    assert list_workers(engine)[0].state == WorkerState.REQUESTED  # before the deadline

    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET expires = now() - interval '1 second'"))
    report = scanner.scan(gcp_provider.id, GCE_ZONE)

    (after,) = list_workers(engine)
    assert after.stop_reason == REGISTRATION_TIMEOUT
    assert after.state in (WorkerState.STOPPING, X) and report.terminated in (0, 1)
    # The launch config is blamed, so it weighs less and `wm pools errors` shows why.
    (error,) = list_errors(engine, "proj/scan")
    assert (error.kind, error.launch_config_id) == (REGISTRATION_TIMEOUT, after.launch_config_id)
    assert error.extra["workers"] == 1
    assert sim_gce.faults.counts().get("instances.delete") == 1
    scanner.scan(gcp_provider.id, GCE_ZONE)
    assert list_workers(engine)[0].state == X


def test_only_old_tagged_orphans_are_terminated(engine, sim_gce, gcp_provider):
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    client = Client(sim_gce)
    path = f"/compute/v1/projects/{GCE_PROJECT}/zones/{GCE_ZONE}/instances"

    def make(name, labels):
        body = {
            "name": name,
            "machineType": f"zones/{GCE_ZONE}/machineTypes/e2-small",
            "disks": [{"boot": True, "initializeParams": {"sourceImage": IMAGES["gcp"][1]}}],
            "labels": labels,
        }
        assert client.post(path, json=body).status_code == 200

    make("orphan-tagged", {TAG_DEPLOYMENT: GCE_DEPLOYMENT, TAG_WORKER: "orphan-tagged"})
    make("foreign", {"team": "other"})
    make("other-deployment", {TAG_DEPLOYMENT: "someone-else", TAG_WORKER: "other-deployment"})
    scanner = Scanner(
        engine, {gcp_provider.id: gcp_provider}, missing_grace_s=0, orphan_grace_s=3600
    )
    scanner.scan(gcp_provider.id, GCE_ZONE)
    assert "instances.delete" not in sim_gce.faults.counts()  # young: left alone

    scanner_for(engine, gcp_provider).scan(gcp_provider.id, GCE_ZONE)

    remaining = {vm.name: vm.state for vm in sim_gce.instances()}
    assert "foreign" in remaining and "other-deployment" in remaining
    assert remaining.get("orphan-tagged") in (None, "gone", "stopping")


def test_an_azure_vm_runs_after_one_put_and_is_gone_after_one_delete(
    engine, sim_arm, azure_provider
):
    region = AZURE_REGIONS[0]
    configure(engine, azure_provider, "azure", region)
    sim_arm.faults.behaviour.update(boot_s=0.5)
    launch(engine, azure_provider, 1)
    scanner = scanner_for(engine, azure_provider)
    scanner.scan(azure_provider.id, region)
    assert list_workers(engine)[0].state == WorkerState.REQUESTED  # still booting
    threading.Event().wait(0.6)
    scanner.scan(azure_provider.id, region)
    assert list_workers(engine)[0].state == WorkerState.RUNNING  # the next scan sees it run
    counts = sim_arm.faults.counts()
    assert counts.get("VirtualMachines_CreateOrUpdate") == 1
    assert not any(
        k.startswith(("NetworkInterfaces_Create", "PublicIPAddresses_Create")) for k in counts
    )

    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET last_active = now() - interval '1 day'"))
    scanner.scan(azure_provider.id, region)
    scanner.scan(azure_provider.id, region)
    assert list_workers(engine)[0].state == X
    assert sim_arm.faults.counts().get("VirtualMachines_Delete") == 1
    assert sim_arm.resources() == []  # VM, NIC and disk went with the one DELETE


def test_pre_emption_is_noticed_from_the_list_with_its_reason(engine, sim_gce, gcp_provider):
    configure(
        engine,
        gcp_provider,
        "gcp",
        GCE_ZONE,
        launch_configs=[
            {
                "region": GCE_ZONE,
                "machine_type": "e2-small",
                "image": IMAGES["gcp"][1],
                "spot": True,
            }
        ],
    )
    (row,) = launch(engine, gcp_provider, 1)
    scanner = scanner_for(engine, gcp_provider)
    scanner.scan(gcp_provider.id, GCE_ZONE)
    sim_gce.kill(row.worker_id)
    sim_gce.faults.reset_counts()

    scanner.scan(gcp_provider.id, GCE_ZONE)

    (after,) = list_workers(engine)
    assert after.stop_reason == "preempted"
    calls = sim_gce.faults.counts()
    # Noticed from the one list call; the get belongs to the deletion that follows.
    assert (
        calls["instances.list"] == 1 and calls.get("instances.get", 0) <= calls["instances.delete"]
    )


def test_a_region_being_scanned_elsewhere_is_skipped(engine, sim_gce, gcp_provider):
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    with engine.connect() as other, other.begin():
        other.execute(
            text("SELECT 1 FROM scan_units WHERE region = :r FOR UPDATE"), {"r": GCE_ZONE}
        )
        assert scanner_for(engine, gcp_provider).scan(gcp_provider.id, GCE_ZONE) is None
    assert scanner_for(engine, gcp_provider).scan(gcp_provider.id, GCE_OTHER_ZONE) is not None


def test_a_scan_past_its_time_limit_stops_at_a_safe_point(engine, sim_gce, gcp_provider):
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    launch(engine, gcp_provider, 2)
    scanner = Scanner(engine, {gcp_provider.id: gcp_provider}, max_scan_s={gcp_provider.id: 0})
    with pytest.raises(ScanOverran):
        scanner.scan(gcp_provider.id, GCE_ZONE)
    # What the list taught was written before stopping.
    assert {r.state for r in list_workers(engine)} == {WorkerState.RUNNING}


def test_stopped_rows_and_old_errors_expire_after_retention(engine, sim_gce, gcp_provider):
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    launch(engine, gcp_provider, 3)
    record_errors(engine, [NewPoolError("proj/scan", "quota", "t", "d")] * 2)
    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET state = 'stopped' WHERE launch_index = 0"))
        conn.execute(text("UPDATE workers SET last_modified = now() - interval '8 days'"))
        conn.execute(
            text(
                "UPDATE worker_pool_errors SET reported = now() - interval '8 days'"
                " WHERE error_id = (SELECT min(error_id) FROM worker_pool_errors)"
            )
        )
    week = 7 * 24 * 3600
    assert scan_writes.expire_stopped(engine, gcp_provider.id, week) == 1
    assert pool_errors.expire_pool_errors(engine, RetentionConfig(pool_errors_s=week)) == 1
    assert len(list_workers(engine)) == 2 and len(list_errors(engine, "proj/scan")) == 1


def test_an_ec2_orphan_is_terminated_once_though_ec2_still_lists_it(engine, sim_ec2, aws_provider):
    configure(engine, aws_provider, "aws", EC2_REGION)
    tags = {TAG_DEPLOYMENT: aws_provider.deployment_id, TAG_WORKER: "orphan-1"}
    (orphan,) = sim_ec2.seed_instances(1, region=EC2_REGION, tags=tags)
    scanner = scanner_for(engine, aws_provider)

    first = scanner.scan(aws_provider.id, EC2_REGION)
    sim_ec2.faults.reset_counts()
    again = [scanner.scan(aws_provider.id, EC2_REGION) for _ in range(3)]

    assert first.orphans == 1
    # EC2 keeps listing a terminated instance for a while: no news, and no second delete.
    assert [r.orphans for r in again] == [0, 0, 0]
    assert "TerminateInstances" not in sim_ec2.faults.counts()
    assert orphan in {vm.cloud_id for vm in sim_ec2.instances()}


def test_a_scan_cut_short_by_a_stopping_process_is_not_a_failure(
    engine, sim_gce, gcp_provider, caplog
):
    configure(engine, gcp_provider, "gcp", GCE_ZONE)
    launch(engine, gcp_provider, 2)
    scanner = scanner_for(engine, gcp_provider)
    sim_gce.faults.reset_counts()
    sim_gce.faults.behaviour.update(latency_ms=1000)
    outcome: list = []
    scan = threading.Thread(target=lambda: outcome.append(scanner.scan(gcp_provider.id, GCE_ZONE)))
    caplog.set_level(logging.INFO, logger="wm")
    scan.start()
    # SIGTERM arrives while the list call is out.
    deadline = time.monotonic() + 10
    while not sim_gce.faults.counts().get("instances.list") and time.monotonic() < deadline:
        time.sleep(0.01)
    scanner.stop.set()
    scan.join(10)

    assert outcome == [None]  # stopped at the next safe point: no report, no exception
    # What the list taught was written before stopping.
    assert {r.state for r in list_workers(engine)} == {WorkerState.RUNNING}
    assert "scan-stopped" in [getattr(r, "wm_event", None) for r in caplog.records]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def worker_runners_id(kind: str, vm) -> str:
    """The workerId worker-runner reads on the VM: EC2's instance id (identity document), GCE's
    numeric instance id (metadata instance/id), Azure's VM name (IMDS compute.name)."""
    return vm.name if kind == "azure" else vm.cloud_id


@pytest.mark.parametrize(
    ("kind", "sim_fixture", "provider_fixture", "region"),
    [
        ("aws", "sim_ec2", "aws_provider", EC2_REGION),
        ("gcp", "sim_gce", "gcp_provider", GCE_ZONE),
        ("azure", "sim_arm", "azure_provider", AZURE_REGIONS[0]),
    ],
)
def test_rows_learn_the_workerid_worker_runner_reads_from_a_pass_and_from_a_scan(
    engine, request, kind, sim_fixture, provider_fixture, region
):
    sim = request.getfixturevalue(sim_fixture)
    provider = request.getfixturevalue(provider_fixture)
    configure(engine, provider, kind, region)

    # A pass: the create's answer names the VM.
    (launched,) = launch(engine, provider, 1)
    (vm,) = sim.instances()
    assert launched.tc_worker_id == worker_runners_id(kind, vm)

    # A create whose answer was lost: the intent row never heard of its VM...
    lc = pool_store.load_launch_configs(engine)[0]
    worker_id, token, batch_token = new_worker_id(), str(uuid.uuid4()), uuid.uuid4().hex
    intent = NewWorker(
        worker_id, "proj/scan", region, provider.id, 1, lc.launch_config_id, token,
        batch_token, 0, 3600,
    )  # fmt: skip
    insert_intents(engine, [intent])
    provider.create(
        LaunchBatch(
            "proj/scan",
            lc.spec(pool_store.load_pools(engine)[0]),
            (LaunchIntent(worker_id, token),),
            batch_token,
        )
    )
    with engine.begin() as conn:  # long past any retry of that create
        conn.execute(text("UPDATE workers SET created = created - interval '1 hour'"))

    # ...and a scan adopts it by its tags, with its workerId.
    scanner_for(engine, provider).scan(provider.id, region)

    rows = {r.worker_id: r for r in list_workers(engine, pool_id="proj/scan")}
    (adopted_vm,) = [vm for vm in sim.instances() if vm.cloud_id != launched.cloud_id]
    assert rows[worker_id].cloud_id is not None
    assert rows[worker_id].tc_worker_id == worker_runners_id(kind, adopted_vm)
    assert rows[launched.worker_id].tc_worker_id == launched.tc_worker_id  # never rewritten
