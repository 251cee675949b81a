"""Scenario 3: an image whose workers never register, with 1,000 tasks waiting, for hours.

Time is compressed, not slept: a registration timeout of a second stands for the usual half
hour, so a run of D seconds is D/2 hours of a real fleet. On each cloud a pool of max capacity
M has 1,000 pending tasks and a launch config whose workers boot but never register (no worker
agent runs). A provisioner and a scanner run as processes. Capacity never exceeds M; every
worker is terminated at its registration deadline (never before, at most a scan or two after);
launches stay bounded by about duration x M / timeout; and the launch config is marked as
failing: a pool error per scan that found workers past the deadline, which lowers its weight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import KINDS, CapacitySampler, provider_config, sizes, worker_history
from tests.support.stack import Stack, pool
from wm.db import tasks
from wm.db.pool_errors import list_errors
from wm.db.pools import load_launch_configs
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.provisioning.launch_choice import error_factor
from wm.workers.lifecycle import REGISTRATION_TIMEOUT

TIMEOUT_S = 1.0  # the registration timeout: half an hour in a real fleet
INTERVAL_S = 0.25  # provisioning and scan interval
REAL_TIMEOUT_H = 0.5
PENDING = 1000


@dataclass(frozen=True)
class NeverRegisters:
    duration_s: float
    max_capacity: int


@pytest.mark.parametrize("size", sizes(NeverRegisters(8.0, 4), NeverRegisters(40.0, 10)))
def test_workers_that_never_register_are_replaced_at_their_deadline_and_no_faster(
    size, tmp_path, db_url, engine, clouds, stacks, figures
):
    providers = [provider_config(k, clouds.of(k), scan_interval_s=INTERVAL_S) for k in KINDS]
    pools = [
        pool(
            f"proj/{kind}",
            provider,
            size.max_capacity,
            registration_timeout_s=TIMEOUT_S,
            requires_registration=True,
        )
        for kind, provider in zip(KINDS, providers, strict=True)
    ]
    stack = Stack.write(tmp_path, db_url, providers, pools, intervals={"provision_s": INTERVAL_S})
    stacks.append(stack)
    stack.sync_pools(engine)
    for kind in KINDS:
        tasks.submit_tasks(engine, f"proj/{kind}", PENDING, 60.0)
    max_capacity = {p["id"]: size.max_capacity for p in pools}

    with CapacitySampler(engine, max_capacity) as sampler:
        provisioner, scanner = stack.start("provisioner"), stack.start("scanner")
        # From the first pass on every cloud: a cold start (the SDKs' first calls) on a loaded
        # machine can take one cloud's first pass many seconds past the others'.
        provisioner.wait_for(
            lambda: (
                {e["provider"] for e in provisioner.events("provision-pass")}
                >= {p["id"] for p in providers}
            ),
            60,
            "a first pass on every cloud",
        )
        started = time.time()
        time.sleep(size.duration_s)
        code, _ = provisioner.terminate()
        ended = time.time()
        # No more launches: the scanner takes every worker left to its deadline and deletes it.
        scanner.wait_for(
            lambda: all(r.state == WorkerState.STOPPED for r in list_workers(engine)),
            TIMEOUT_S + 15,
            "every worker stopped",
        )
        assert (code, scanner.terminate()[0]) == (0, 0)

    rows = list_workers(engine)
    expires = {r.worker_id: r.expires.timestamp() for r in rows}
    deadlines = {e["worker"]: e["ts"] for e in scanner.events("worker-deadline")}
    lateness = [deadlines[w] - expires[w] for w in deadlines]
    hours = (ended - started) / TIMEOUT_S * REAL_TIMEOUT_H
    bound = size.max_capacity * ((ended - started) / TIMEOUT_S + 2)  # per pool

    assert sampler.over == [], f"capacity above max: {sampler.over[:5]}"
    assert {e["reason"] for e in scanner.events("worker-deadline")} == {REGISTRATION_TIMEOUT}
    assert min(lateness) >= -0.01  # never before the deadline
    # Every one of them, and nothing else ended any.
    unexplained = set(expires) - set(deadlines)
    assert not unexplained, "ended without their deadline:\n" + worker_history(
        rows, unexplained, provisioner, scanner
    )
    # Taken by the first scan of its region that starts after its deadline, or the next:
    # counted in scans, not seconds, since a loaded machine stretches the time between scans.
    # A create still in flight at the deadline (slower than the timeout, under load) has no VM
    # to delete yet: its scans count from when its answer came (or was given up on).
    scans = [
        (e["provider"], e["region"], e["ts"] - e["duration_s"], e["ts"])
        for e in scanner.events("scan")
    ]
    late = {}
    for row in rows:
        answered = row.accepted_at or row.unanswered_at or row.expires
        due = max(expires[row.worker_id], answered.timestamp())
        missed = [
            scan
            for scan in scans
            if scan[:2] == (row.provider_id, row.worker_group)
            and scan[2] >= due
            and scan[3] < deadlines[row.worker_id]
        ]
        if len(missed) > 1:
            late[row.worker_id] = missed
    assert not late, f"scans that missed a deadline: {late}\n" + worker_history(
        rows, late, provisioner, scanner
    )
    assert {r.stop_reason for r in rows} == {REGISTRATION_TIMEOUT}
    launches = {}
    for kind in KINDS:
        pool_id = f"proj/{kind}"
        launched = [r for r in rows if r.pool_id == pool_id]
        launches[kind] = len(launched)
        # Replaced after each deadline, so: about duration x max / timeout, not more.
        assert size.max_capacity * 2 <= len(launched) <= bound, (kind, len(launched), bound)
        (config,) = [c for c in load_launch_configs(engine) if c.pool_id == pool_id]
        errors = [e for e in list_errors(engine, pool_id) if e.kind == REGISTRATION_TIMEOUT]
        assert errors and {e.launch_config_id for e in errors} == {config.launch_config_id}
        assert error_factor(len(errors)) < 1.0  # the config weighs less from now on
    assert_no_leaks(engine, clouds.sims)
    figures.record(
        simulated_hours=round(hours, 1),
        max_capacity=size.max_capacity,
        launches=launches,
        launch_bound=round(bound),
        samples=sampler.samples,
        max_capacity_exceeded=len(sampler.over),
        worst_lateness_s=round(max(lateness), 3),
        early_terminations=sum(1 for x in lateness if x < -0.01),
    )
