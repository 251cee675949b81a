"""`wm run scanner` as OS processes against real Postgres and the simulated clouds."""

from __future__ import annotations

import itertools
import time
import urllib.request
from collections import defaultdict

from tests.support.stack import (
    FAST_GATE,
    START_TIMEOUT_S,
    Stack,
    aws_provider,
    azure_provider,
    gcp_provider,
    pool,
)
from wm.db import tasks
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.ops.metrics_ports import METRICS_PORTS, metrics_port
from wm.providers import build_provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.postgres import free_port_range

REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"]


def scans(process) -> list[dict]:
    return process.events("scan")


def windows(*processes) -> dict[str, list[tuple[float, float, int]]]:
    """Per region: (start, end, replica) of every scan, from the scan log lines."""
    found: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for index, process in enumerate(processes):
        for line in scans(process):
            found[line["region"]].append((line["ts"] - line["duration_s"], line["ts"], index))
    return found


def test_two_replicas_split_regions_never_overlap_and_cover_for_a_dead_peer(
    tmp_path, db_url, engine, sim_ec2, stacks
):
    interval_s = 1.0
    sim_ec2.faults.behaviour.update(latency_ms=150)  # scans last long enough to collide
    aws = aws_provider(sim_ec2, regions=REGIONS, scan_interval_s=interval_s)
    stack = Stack.write(tmp_path, db_url, [aws], [pool("proj/a", aws)])
    stacks.append(stack)
    stack.sync_pools(engine)
    first = stack.start("scanner", "--kind", "aws")
    first.wait_for(lambda: all(windows(first)[r] for r in REGIONS), 30, "a scan of every region")

    # A second replica joins: together they scan each region about once per interval.
    second = stack.start("scanner", "--kind", "aws")
    second.wait_for(lambda: second.events("process-started"), START_TIMEOUT_S, "the second replica")
    joined_at = time.time()

    def scans_since_join() -> dict[str, list[tuple[float, float, int]]]:
        return {
            region: sorted(s for s in spans if s[0] > joined_at)
            for region, spans in windows(first, second).items()
        }

    first.wait_for(
        lambda: all(len(scans_since_join().get(r, [])) >= 4 for r in REGIONS),
        45,
        "four scans of every region with both replicas up",
    )
    elapsed_s = time.time() - joined_at
    for region, spans in windows(first, second).items():
        spans.sort()
        for (_, end, _), (start, _, _) in itertools.pairwise(spans):
            assert start >= end - 0.01, f"{region}: two scans at once"
    for region, spans in scans_since_join().items():
        # Not once per replica: a region scanned by a peer this interval is skipped.
        assert len(spans) <= elapsed_s / interval_s + 2, f"{region}: scanned {len(spans)} times"
        for (start, _, _), (later, _, _) in itertools.pairwise(spans):
            assert later - start >= 0.4 * interval_s, f"{region}: scanned twice in one interval"

    # The first replica dies: the survivor scans every region at its next intervals.
    first.kill()
    killed_at = time.time()
    second.wait_for(
        lambda: all(any(start > killed_at for start, _, _ in windows(second)[r]) for r in REGIONS),
        2 * interval_s + 5,
        "the survivor scanning every region",
    )
    code, took = second.terminate()
    assert code == 0 and took < 10


def test_a_failing_slow_azure_leaves_aws_and_gcp_scans_alone(
    tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm, stacks
):
    aws, gcp = (
        aws_provider(sim_ec2, scan_interval_s=1.0),
        gcp_provider(sim_gce, scan_interval_s=1.0),
    )
    azure_gate = {
        **FAST_GATE,
        "timeout_s": 30.0,
        "max_attempts": 1,
        "pause_after_failures": 1,
        "pause_s": 1.0,
    }
    azure = azure_provider(sim_arm, scan_interval_s=1.0, gate=azure_gate)
    stack = Stack.write(tmp_path, db_url, [aws, gcp, azure], [pool("proj/z", azure)])
    stacks.append(stack)
    stack.sync_pools(engine)
    # Azure workers exist before the storm; none of them may be lost to it.
    config = stack.config()
    provider = build_provider(config.provider("azure-sim"), config.deployment_id)
    tasks.submit_tasks(engine, "proj/z", 4, 5.0)
    Provisioner(engine, BuiltinQueue(engine), {provider.id: provider}).run_pass(provider.id)
    provider.close()
    # The storm: every call takes 20 s and half of them fail, spread evenly (fail, ok,
    # fail, …) so the scenario takes the same path every run: a failure pauses Azure, the
    # next call succeeds and resumes it.
    sim_arm.faults.behaviour.update(latency_ms=20_000, failure_rate=0.5, fault_spread="even")
    sim_arm.faults.reset_counts()

    process = stack.start("scanner")
    process.wait_for(
        lambda: process.events("cloud-api-paused") and process.events("cloud-api-resumed"),
        90,
        "Azure paused and resumed",
    )
    fast = [s for s in scans(process) if s["provider"] in ("aws-sim", "gcp-sim")]
    assert len(fast) >= 10
    durations = sorted(s["duration_s"] for s in fast)
    # None waits for an Azure call (20 s each): not even the slowest comes near one, however
    # busy the machine (the scan benchmarks say how fast they are).
    assert durations[len(durations) // 2] < 2.0 and durations[-1] < 10.0
    assert {e["provider"] for e in process.events("cloud-api-paused")} == {"azure-sim"}
    rows = list_workers(engine, pool_id="proj/z")
    assert len(rows) == 4 and all(r.state != WorkerState.STOPPED for r in rows)
    _, took = process.terminate()
    assert took < 10


def test_run_all_provisions_and_scans_in_one_process(tmp_path, db_url, engine, sim_gce, stacks):
    gcp = gcp_provider(sim_gce, scan_interval_s=0.5)
    stack = Stack.write(
        tmp_path,
        db_url,
        [gcp],
        [pool("proj/all", gcp, requires_registration=False)],
        intervals={"provision_s": 0.5},
    )
    stacks.append(stack)
    stack.sync_pools(engine)
    tasks.submit_tasks(engine, "proj/all", 3, 5.0)
    process = stack.start("all")

    def running() -> bool:
        rows = list_workers(engine, pool_id="proj/all")
        return len(rows) == 3 and all(r.state == WorkerState.RUNNING for r in rows)

    process.wait_for(running, 30, "three running workers")
    # The scan that saw them run logs its line once it is over.
    process.wait_for(lambda: process.events("scan"), 10, "the scan's log line")
    assert process.events("provision-pass")
    code, took = process.terminate()
    assert code == 0 and took < 10


def test_scanner_kinds_take_providers_named_as_taskcluster_allows(
    tmp_path, db_url, engine, sim_ec2, sim_gce, sim_arm, stacks
):
    # Firefox CI's id, and ids with capitals and `_`, of each cloud: --kind picks by kind, and
    # the logs and metrics name each provider as it is.
    aws = aws_provider(sim_ec2, "Aws_Trusted", scan_interval_s=0.5)
    gcp = gcp_provider(sim_gce, "Fxci_Level3-GCP", scan_interval_s=0.5)
    azure = azure_provider(sim_arm, "azure_trusted", scan_interval_s=0.5)
    base = free_port_range(METRICS_PORTS)
    stack = Stack.write(tmp_path, db_url, [aws, gcp, azure], [], metrics={"port": base})
    stacks.append(stack)
    port = metrics_port(base, "scanner", ("gcp", "azure"))  # the port of a scanner of clouds

    process = stack.start("scanner", "--kind", "gcp", "--kind", "azure")
    wanted = {("Fxci_Level3-GCP", "us-central1-a"), ("azure_trusted", "eastus")}
    process.wait_for(
        lambda: {(s["provider"], s["region"]) for s in scans(process)} == wanted,
        60,
        "a scan of each chosen provider's region",
    )
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    for provider, region in wanted:
        assert f'wm_scan_seconds_count{{provider="{provider}",region="{region}"}}' in (
            metrics.decode()
        )
    assert all(s["provider"] != "Aws_Trusted" for s in scans(process))
    code, _ = process.terminate()
    assert code == 0


def test_the_scanner_process_adopts_an_imported_azure_worker_and_reports_an_unknown_one(
    tmp_path, db_url, engine, sim_arm, stacks
):
    from datetime import timedelta

    from tests.fixtures.sim_arm import AZURE_RESOURCE_GROUP, AZURE_SUBNET, make_subnet
    from tests.support.legacy_vms import legacy_vm
    from tests.support.stack import AZURE_SUBSCRIPTION
    from wm.db import imported_workers, worker_writes
    from wm.db import pools as pool_store
    from wm.db.scans import db_now
    from wm.take_over.marks import IMPORTED_FROM, imported_worker_id

    root_url = "https://tc.example.test"
    sim_arm.deployments.create_resource_group(AZURE_SUBSCRIPTION, AZURE_RESOURCE_GROUP, "eastus")
    make_subnet(sim_arm, AZURE_SUBNET, "eastus")
    base = free_port_range(METRICS_PORTS)
    port = metrics_port(base, "scanner")
    azure = azure_provider(sim_arm, "azure2", scan_interval_s=0.5, adopt_legacy=True)
    stack = Stack.write(
        tmp_path,
        db_url,
        [azure],
        [pool("proj/win", azure)],
        root_url=root_url,
        metrics={"port": base},
    )
    stacks.append(stack)
    stack.sync_pools(engine)

    def make() -> object:
        return legacy_vm(
            "azure",
            sim_arm,
            provider_id="azure2",
            pool_id="proj/win",
            region="eastus",
            root_url=root_url,
            public_ip=True,
        )

    kept, unknown = make(), make()
    worker_id = imported_worker_id("proj/win", "eastus", kept.worker_id)
    now = db_now(engine)
    with engine.begin() as conn:
        imported_workers.adopt_workers(
            conn,
            [
                imported_workers.AdoptedWorker(
                    worker_id=worker_id,
                    pool_id="proj/win",
                    worker_group="eastus",
                    tc_worker_id=kept.worker_id,
                    provider_id="azure2",
                    state=WorkerState.RUNNING,
                    capacity=1,
                    launch_config_id=pool_store.load_launch_configs(engine)[0].launch_config_id,
                    created=now - timedelta(hours=1),
                    last_modified=now,
                    expires=now + timedelta(days=7),
                    registered_at=now - timedelta(minutes=50),
                    provider_data={IMPORTED_FROM: root_url},
                )
            ],
        )
    held = set(sim_arm.resources())  # of each: the VM, its NIC, public IP and OS disk

    def the_row():
        (found,) = [r for r in list_workers(engine, pool_id="proj/win") if r.worker_id == worker_id]
        return found

    process = stack.start("scanner")
    process.wait_for(lambda: the_row().cloud_id is not None, 30, "the imported worker adopted")
    process.wait_for(
        lambda: len(process.events("legacy-vm-unadopted")) >= 2, 30, "the unknown VM reported"
    )
    assert {e["tc_worker_id"] for e in process.events("legacy-vm-unadopted")} == {unknown.worker_id}
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    assert 'wm_legacy_vms_unadopted{provider="azure2",region="eastus"} 1.0' in metrics.decode()

    worker_writes.request_removal(engine, worker_id, "removeWorker")
    process.wait_for(lambda: the_row().state == WorkerState.STOPPED, 30, "the worker removed")
    left = set(sim_arm.resources())
    assert len(held) == 8 and len(left) == 4  # the unknown VM's VM, NIC, public IP and disk
    assert any(unknown.worker_id in r for r in left)
    assert not any(kept.worker_id in r for r in left)
    code, _ = process.terminate()
    assert code == 0


def test_a_scanner_reads_signals_for_pools_that_choose_by_cost_and_outlives_a_refusing_source(
    tmp_path, db_url, engine, sim_gce, stacks
):
    from wm.db import offering_state
    from wmsim.signals import FORBIDDEN

    gcp = gcp_provider(sim_gce, scan_interval_s=1.0, signals={"retry_s": 1.0})
    stack = Stack.write(
        tmp_path, db_url, [gcp], [pool("proj/cost", gcp)], launch_choice={"default": "shadow"}
    )
    stacks.append(stack)
    stack.sync_pools(engine)
    # No permission for the Billing Catalog at first (a 403), then the grant arrives.
    sim_gce.signal_fates.force("skus.list", FORBIDDEN)

    scanner = stack.start("scanner", "--kind", "gcp")

    scanner.wait_for(lambda: scanner.events("signal-fetch-failed"), 30, "the refused read logged")
    (failed, *_) = scanner.events("signal-fetch-failed")
    assert (failed["provider"], failed["source"], failed["reason"]) == (
        "gcp-sim",
        "skus.list",
        "forbidden",
    )
    scanner.wait_for(
        lambda: any(
            s.source == "skus.list" for s in offering_state.read_signals(engine, "gcp-sim").values()
        ),
        30,
        "the price read and kept in Postgres after the retry",
    )
    (price,) = offering_state.read_signals(engine, "gcp-sim").values()
    assert (price.offering.region, price.offering.zone, price.offering.instance_type) == (
        "us-central1",
        "us-central1-a",
        "e2-small",
    )
    assert price.value > 0
    assert scans(scanner)  # scanning went on meanwhile
    code, _ = scanner.terminate()
    assert code == 0
