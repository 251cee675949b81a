"""Scenario 2: four provisioner replicas on one database through a sustained burst.

Two pools on each cloud, demand far above their max capacity arriving all the time, and VMs
dying out of band so that capacity keeps coming free: four `wm run provisioner` race to refill
it while a `wm run scanner` notices the deaths. At every sample (the database's rows as often
as a query allows, the clouds' VMs between bursts) each pool's requested + running + stopping
capacity stays within its max capacity, and no pool is ever provisioned by two replicas at once
(the provision-pass windows the replicas log for one pool never overlap).
"""

from __future__ import annotations

import random
import re
import time
from collections import defaultdict
from dataclasses import dataclass

import pytest

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import KINDS, CapacitySampler, provider_config, sizes
from tests.support.stack import START_TIMEOUT_S, Stack, pool
from wm.db import tasks
from wm.providers.base import TAG_POOL

REPLICAS = 4
INTERVAL_S = 0.3
# Log lines carry milliseconds; a claim's window is measured inside it (from just after it is
# taken to just before it is given up), so two windows of one pool never overlap.
OVERLAP_TOLERANCE_S = 0.02


@dataclass(frozen=True)
class Burst:
    duration_s: float
    max_capacity: int  # of each pool
    seed: int = 0


def pool_tag(value: str) -> str:
    # GCE keeps the pool as a label, where "/" is not allowed: compare in label form.
    return re.sub(r"[^a-z0-9_-]", "_", value.lower())


@pytest.mark.parametrize(
    "size", sizes(Burst(12.0, 5), Burst(60.0, 12, seed=1), Burst(60.0, 12, seed=2))
)
def test_four_replicas_never_exceed_max_capacity_nor_share_a_pool(
    size, tmp_path, db_url, engine, clouds, stacks, figures
):
    rng = random.Random(size.seed)
    for sim in clouds.sims:
        sim.faults.behaviour.update(boot_s=0.3, latency_ms=20)
    providers = [provider_config(k, clouds.of(k), scan_interval_s=INTERVAL_S) for k in KINDS]
    pools = [
        pool(f"proj/{kind}-{i}", provider, size.max_capacity, requires_registration=False)
        for kind, provider in zip(KINDS, providers, strict=True)
        for i in range(2)
    ]
    intervals = {"provision_s": INTERVAL_S}
    stack = Stack.write(tmp_path, db_url, providers, pools, intervals=intervals)
    stacks.append(stack)
    stack.sync_pools(engine)
    replicas = [stack.start("provisioner") for _ in range(REPLICAS)]
    scanner = stack.start("scanner")
    for process in [*replicas, scanner]:
        process.wait_for(process.started, START_TIMEOUT_S, "start")

    max_capacity = {p["id"]: size.max_capacity for p in pools}
    cloud_worst: dict[str, int] = defaultdict(int)
    kills = 0
    turned_over = len(pools) * size.max_capacity  # launches beyond every pool filled once

    def launched_so_far() -> int:
        return sum(e["launched"] for p in replicas for e in p.events("provision-pass"))

    with CapacitySampler(engine, max_capacity) as sampler:
        # The burst's duration at least, and on until capacity has turned over: a busy machine
        # launches less in the same seconds (bounded: a replica that stopped launching fails).
        started = time.monotonic()
        while time.monotonic() - started < size.duration_s or (
            not (kills and launched_so_far() > turned_over)
            and time.monotonic() - started < size.duration_s + START_TIMEOUT_S
        ):
            # More work than the pools may ever run, in bursts, to random pools.
            tasks.submit_tasks(engine, rng.choice(pools)["id"], rng.randint(1, 6), 60.0)
            live = [(s, vm) for s in clouds.sims for vm in s.instances() if vm.state == "running"]
            if live and rng.random() < 0.7:
                sim, victim = rng.choice(live)
                sim.kill(victim.cloud_id)  # pre-empted, or died: the scanner must notice
                kills += 1
            for pool_id, count in cloud_count(clouds).items():
                cloud_worst[pool_id] = max(cloud_worst[pool_id], count)
            time.sleep(0.2)
    passes = [
        e | {"replica": n} for n, p in enumerate(replicas) for e in p.events("provision-pass")
    ]
    overlaps = shared_passes(passes)
    launched = sum(e["launched"] for e in passes)

    assert sampler.over == [], f"capacity above max: {sampler.over[:5]}"
    assert all(n <= size.max_capacity for n in cloud_worst.values()), cloud_worst
    assert overlaps == [], f"a pool provisioned by two replicas at once: {overlaps[:5]}"
    assert kills > 0 and launched > turned_over  # capacity did turn over
    assert {e["replica"] for e in passes if e["launched"]} == set(range(REPLICAS))
    for process in [*replicas, scanner]:
        assert process.popen.poll() is None
    for process in replicas:
        process.terminate()
    report = assert_no_leaks(engine, clouds.sims, settle_s=10)
    figures.record(
        seconds=size.duration_s,
        samples=sampler.samples,
        max_capacity_exceeded=len(sampler.over),
        worst_over_max=max(sampler.worst[p] - size.max_capacity for p in max_capacity),
        passes=len(passes),
        overlapping_passes=len(overlaps),
        launched=launched,
        kills=kills,
        vms_leaked=len(report.unmanaged),
        duplicates=len(report.duplicates),
    )


def cloud_count(clouds) -> dict[str, int]:
    """VMs per pool that cost money and are not being deleted, as the clouds hold them."""
    counts: dict[str, int] = defaultdict(int)
    for sim in clouds.sims:
        for vm in sim.instances():
            if vm.state not in ("stopping", "gone"):
                counts[pool_tag(vm.tags[TAG_POOL])] += 1
    return counts


def shared_passes(passes: list[dict]) -> list[tuple[str, dict, dict]]:
    """Passes of one pool by two replicas that held its claim at the same time: each pass
    logs when it took the claim and for how long it held it."""
    by_pool: dict[str, list[dict]] = defaultdict(list)
    for event in passes:
        by_pool[event["pool_id"]].append(event)
    found = []
    for pool_id, events in by_pool.items():
        events.sort(key=lambda e: e["claimed_at"])
        latest = events[0]  # the claim that ends last among those seen so far
        for event in events[1:]:
            if event["replica"] != latest["replica"] and event["claimed_at"] < released(latest) - (
                OVERLAP_TOLERANCE_S
            ):
                found.append((pool_id, latest, event))
            if released(event) > released(latest):
                latest = event
    return found


def released(event: dict) -> float:
    return event["claimed_at"] + event["held_s"]
