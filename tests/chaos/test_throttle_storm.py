"""Scenario 7: a throttle storm on each cloud at once, under a running provisioner.

For a few seconds every call to every cloud is throttled the way that cloud throttles: EC2's
RequestLimitExceeded, ARM's 429 with Retry-After, GCE's 403 rateLimitExceeded. The gate of
each provider pauses it: no call reaches a cloud while its provider is paused, ARM's
Retry-After is honoured after every 429, one cloud-api-paused / cloud-api-resumed pair is
logged per provider that paused (every provider throttled `pause_after_failures` times, and
Azure at its first Retry-After: EC2's create is one RunInstances, which in a short storm may
be throttled once and then wait for the budget its throttle shrank, with nothing to pause),
no create is attempted more often than the gate's max_attempts, and the calls stay within
the rate limit. When the storm ends the demand is launched exactly once
(a scanner, started once the storm is over, lets the workers of the last stormy pass run so the
estimator launches the rest), within what the storm-shrunk shared budgets allow.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

import pytest

from tests.chaos.leaks import assert_no_leaks
from tests.chaos.scene import CREATE_OPERATION, KINDS, PROVIDER_IDS, provider_config, sizes
from tests.support.stack import FAST_GATE, Stack, pool
from wm import kinds
from wm.calls import CallClass
from wm.db import tasks
from wm.db.budgets import SHRINK_FLOOR
from wm.providers.budget import SHRINK_HOLD

GATE = {
    **FAST_GATE,
    "calls_per_s": 40.0,
    "burst": 20,
    "max_attempts": 3,
    "backoff_base_s": 0.05,
    "backoff_max_s": 0.2,
    "pause_after_failures": 3,
    "pause_s": 2.0,
}
RETRY_AFTER_S = 2.5  # what ARM sends with its 429s
# A call that passed the gate's pause check just before the pause began is on its way; on a
# loaded machine (two cores, the whole suite running) it can reach the cloud 0.2 s later.
SLACK_S = 0.5
MARGIN_S = 30.0  # for a loaded machine: processes, SDKs and sims share two cores


def launch_bound_s(demand: int) -> float:
    """How long the demand may take to launch once the storm is over. The storm's throttles
    shrink each account's shared budget (halved at most once a quarter of the hold, down to the
    floor, then held): after a long storm the slowest budget (Azure's writes) launches at its
    floor's rate until the hold ends, by design. A fixed wait would be a guess."""
    writes = [d.published_budgets.get(CallClass.WRITE) for d in kinds.KINDS.values()]
    slowest = min(limit.per_s for limit in writes if limit is not None)
    return SHRINK_HOLD.total_seconds() + demand / (slowest * SHRINK_FLOOR) + MARGIN_S


@dataclass(frozen=True)
class Storm:
    storm_s: float
    demand: int  # tasks per pool


@pytest.mark.parametrize("size", sizes(Storm(3.0, 5), Storm(20.0, 40)))
def test_a_throttle_storm_pauses_each_provider_and_nothing_is_launched_twice(
    size, tmp_path, db_url, engine, clouds, stacks, figures
):
    providers = [provider_config(k, clouds.of(k), gate=GATE, scan_interval_s=0.3) for k in KINDS]
    pools = [
        pool(f"proj/{k}", p, 500, requires_registration=False)
        for k, p in zip(KINDS, providers, strict=True)
    ]
    stack = Stack.write(tmp_path, db_url, providers, pools, intervals={"provision_s": 0.3})
    stacks.append(stack)
    stack.sync_pools(engine)
    process = stack.start("provisioner")
    process.wait_for(lambda: len(process.events("provision-pass")) >= 3, 30, "passes")

    clouds.arm.faults.behaviour.update(retry_after_s=RETRY_AFTER_S)
    for sim in clouds.sims:
        sim.faults.reset_counts()
        sim.faults.behaviour.update(throttle_rate=1.0)
    storm_began = time.time()
    for kind in KINDS:
        tasks.submit_tasks(engine, f"proj/{kind}", size.demand, 60.0)
    time.sleep(size.storm_s)
    for sim in clouds.sims:
        sim.faults.behaviour.update(throttle_rate=0.0)
    storm_ended = time.time()
    time.sleep(RETRY_AFTER_S)  # the scanner's calls must not be taken for the provisioner's
    stack.start("scanner")

    def launched() -> bool:
        return all(
            len([vm for vm in clouds.of(k).instances() if vm.state != "gone"]) >= size.demand
            for k in KINDS
        )

    process.wait_for(launched, launch_bound_s(size.demand), "the demand launched after the storm")

    def providers_of(event: str) -> Counter[str]:
        return Counter(e["provider"] for e in process.events(event))

    process.wait_for(
        lambda: providers_of("cloud-api-paused") == providers_of("cloud-api-resumed"), 10, "resumed"
    )
    # More passes on every cloud: none may launch again.
    seen = {k: len(passes_of(process, k)) for k in KINDS}
    process.wait_for(
        lambda: all(len(passes_of(process, k)) >= seen[k] + 3 for k in KINDS), 30, "more passes"
    )
    ended = time.time()

    paused, resumed = providers_of("cloud-api-paused"), providers_of("cloud-api-resumed")
    throttled = {
        k: sum(1 for r in clouds.of(k).faults.journal() if r.outcome == "throttle") for k in KINDS
    }
    must_pause = {
        PROVIDER_IDS[k]
        for k, n in throttled.items()
        if n >= GATE["pause_after_failures"] or (k == "azure" and n)  # ARM sends Retry-After
    }
    assert must_pause <= set(paused)
    assert paused == resumed  # every pause ended
    assert all(n == 1 for n in paused.values())  # one pair per provider that paused
    calls_while_paused = []
    over_attempts = []
    for kind in KINDS:
        sim = clouds.of(kind)
        journal = sim.faults.journal()
        pauses = [
            e for e in process.events("cloud-api-paused") if e["provider"] == PROVIDER_IDS[kind]
        ]
        assert all(storm_began <= pause["ts"] <= storm_ended for pause in pauses)
        windows = [(pause["ts"], pause["ts"] + pause["pause_s"]) for pause in pauses]
        if kind == "azure":
            assert [pause["pause_s"] >= RETRY_AFTER_S for pause in pauses] == [True]
            windows += [(r.at, r.at + RETRY_AFTER_S) for r in journal if r.outcome == "throttle"]
        calls_while_paused += [
            (kind, r.operation, round(r.at - start, 3))
            for start, end in windows
            for r in journal
            if start + SLACK_S < r.at < end - SLACK_S and r.at < storm_ended + RETRY_AFTER_S
        ]
        attempts = Counter(r.key for r in journal if r.operation == CREATE_OPERATION[kind])
        over_attempts += [(kind, key, n) for key, n in attempts.items() if n > GATE["max_attempts"]]
        # The token bucket's budget: its burst, then its rate.
        assert len(journal) <= GATE["burst"] + GATE["calls_per_s"] * (ended - storm_began)
    assert calls_while_paused == []
    assert over_attempts == []
    for kind in KINDS:
        live = [vm for vm in clouds.of(kind).instances() if vm.state != "gone"]
        assert len(live) == size.demand  # no duplicate, nothing launched twice
    report = assert_no_leaks(engine, clouds.sims)
    code, _ = process.terminate()
    assert code == 0
    figures.record(
        storm_s=size.storm_s,
        throttled_calls=throttled,
        paused_resumed_pairs=dict(paused),
        calls_while_paused=len(calls_while_paused),
        creates_over_max_attempts=len(over_attempts),
        vms=report.vms,
        duplicates=len(report.duplicates),
    )


def passes_of(process, kind: str) -> list[dict]:
    return [e for e in process.events("provision-pass") if e["provider"] == PROVIDER_IDS[kind]]
