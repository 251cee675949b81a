"""`wm run scanner` as OS processes against real Postgres and the simulated clouds."""

from __future__ import annotations

import itertools
import time
from collections import defaultdict

import pytest

from tests.support.stack import FAST_GATE, Stack, aws_provider, azure_provider, gcp_provider, pool
from wm.db import tasks
from wm.db.workers import list_workers
from wm.providers import build_provider
from wm.providers.base import WorkerState
from wm.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue

REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"]


@pytest.fixture
def stacks():
    made: list[Stack] = []
    yield made
    for stack in made:
        stack.stop_all()


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
    sim_ec2.faults.behaviour.update(latency_ms=150)  # scans last long enough to collide
    aws = aws_provider(sim_ec2, regions=REGIONS, scan_interval_s=1.0)
    stack = Stack.write(tmp_path, db_url, [aws], [pool("proj/a", aws)])
    stacks.append(stack)
    stack.sync_pools(engine)
    first, second = stack.start("scanner", "--kind", "aws"), stack.start("scanner", "--kind", "aws")

    def every_region_scanned_by_both_sides() -> bool:
        seen = windows(first, second)
        return all(len(seen[r]) >= 3 for r in REGIONS)

    first.wait_for(every_region_scanned_by_both_sides, 45, "three scans of every region")
    for region, spans in windows(first, second).items():
        spans.sort()
        for (_, end, _), (start, _, _) in itertools.pairwise(spans):
            assert start >= end - 0.01, f"{region}: two scans at once"
    replicas = {i for spans in windows(first, second).values() for (_, _, i) in spans}
    assert replicas == {0, 1}  # the work was shared

    second.kill()
    killed_at = time.time()
    first.wait_for(
        lambda: all(any(start > killed_at for start, _, _ in windows(first)[r]) for r in REGIONS),
        2 * 1.0 + 5,
        "the survivor scanning every region",
    )
    code, took = first.terminate()
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
        "pause_after_failures": 2,
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
    sim_arm.faults.behaviour.update(latency_ms=20_000, failure_rate=0.5)  # the storm

    process = stack.start("scanner")
    process.wait_for(
        lambda: process.events("cloud-api-paused") and process.events("cloud-api-resumed"),
        150,
        "Azure paused and resumed",
    )
    fast = [s for s in scans(process) if s["provider"] in ("aws-sim", "gcp-sim")]
    assert len(fast) >= 10
    durations = sorted(s["duration_s"] for s in fast)
    # Normal: a fraction of a second, far from Azure's 20 s calls (and load-tolerant).
    assert durations[len(durations) // 2] < 0.5 and durations[-1] < 3.0
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
    assert process.events("provision-pass") and process.events("scan")
    code, took = process.terminate()
    assert code == 0 and took < 10
