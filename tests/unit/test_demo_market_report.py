"""The market demo's figures: cost per task-hour from the ledgers, launches per time bucket, and
how many passes after its first refusal in a dry zone a pool launched only elsewhere."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from wm.model import Task, WorkerRecord, WorkerState
from wmsim.demo.market_report import ConfigPlace, DrySpell, MarketFacts, build

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
POOL = "proj-ci/linux-spot"
DRY = "spot:m5.large:us-east-1/us-east-1a"
CONFIGS = (
    ConfigPlace(POOL, "use1a", "aws/us-east-1/us-east-1a", DRY),
    ConfigPlace(POOL, "use1b", "aws/us-east-1/us-east-1b", "spot:m5.large:us-east-1/us-east-1b"),
)


def at(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def worker(n: int, config: str, created_s: float, accepted: bool = True) -> WorkerRecord:
    return WorkerRecord(
        worker_id=f"w{n}",
        pool_id=POOL,
        worker_group="us-east-1",
        provider_id="aws-sim",
        state=WorkerState.STOPPED,
        capacity=1,
        launch_config_id=config,
        created=at(created_s),
        last_modified=at(created_s),
        idempotency_token=f"t{n}",
        accepted_at=at(created_s + 0.1) if accepted else None,
        registered_at=at(created_s + 1.0) if accepted else None,
    )


def facts(choices_s: list[float], bench_s: list[float]) -> MarketFacts:
    return MarketFacts(
        scenario="demo",
        seed=1,
        speed=100.0,
        started_at=T0.timestamp(),
        bucket_s=5.0,
        ledgers={"aws": {"total": 2.0, "by_pool": {POOL: 2.0}, "by_launch_config": {}}},
        spells=(DrySpell("aws/us-east-1/us-east-1a", 10.0, 20.0),),
        configs=CONFIGS,
        choices=[{"ts": T0.timestamp() + s, "pool": POOL, "mode": "cost"} for s in choices_s],
        benches=[
            {"ts": T0.timestamp() + s, "offering": DRY, "failures": 1, "code": "Insufficient"}
            for s in bench_s
        ],
    )


BEFORE = [worker(1, "use1a", 2.0), worker(2, "use1b", 2.0)]


@pytest.mark.parametrize(
    ("workers", "bench_s", "passes", "left_at_s"),
    [
        # Refused at 11.2 in the pass of 11; the pass of 12 launches in use1b alone.
        ([*BEFORE, worker(3, "use1a", 11.0, False), worker(4, "use1b", 12.0)], [11.2], 1, 12.1),
        # The pass of 12 still sends a create to the dry zone; the pass of 13 does not.
        (
            [
                *BEFORE,
                worker(3, "use1a", 11.0, False),
                worker(4, "use1a", 12.0, False),
                worker(5, "use1b", 12.0),
                worker(6, "use1b", 13.0),
            ],
            [11.2],
            2,
            13.1,
        ),
        # Never refused there: nothing to time.
        ([*BEFORE, worker(4, "use1b", 12.0)], [], None, None),
        # A refusal before the spell began is not the spell's.
        ([*BEFORE, worker(4, "use1b", 12.0)], [3.0], None, None),
    ],
)
def test_passes_from_the_first_refusal_in_a_dry_zone_to_launching_only_elsewhere(
    workers, bench_s, passes, left_at_s
):
    report = build(facts([1.0, 11.0, 12.0, 13.0], bench_s), [], workers, [POOL])

    (spell,) = report["dry_spells"]
    assert report["modes"] == {POOL: "cost"}
    assert (spell["passes_to_leave"], spell["left_at_s"]) == (passes, left_at_s)
    assert spell["dry_at_s"] == 10.0 and spell["dry_until_s"] == 30.0


def test_cost_per_task_hour_counts_completed_run_time_on_the_market_clock():
    # Two tasks of 18 s each at 100x: one market hour of tasks; $2 billed.
    tasks = [Task(i, POOL, "completed", 18.0, at(0), f"w{i}", at(1), at(19)) for i in (1, 2)] + [
        Task(3, POOL, "pending", 5.0, at(0))
    ]

    cost = build(facts([], []), tasks, BEFORE, [POOL])["cost"]

    assert cost["task_hours"] == 1.0
    assert cost["per_task_hour"] == 2.0 and cost["per_task_hour_by_pool"][POOL] == 2.0


def test_launches_are_counted_per_launch_config_in_time_buckets():
    # A GCE insert accepted whose operation then failed: its VM never ran.
    failed_later = replace(worker(5, "use1a", 7.0), registered_at=None)
    workers = [*BEFORE, worker(3, "use1b", 12.0), worker(4, "use1a", 12.0, False), failed_later]

    launches = build(facts([], []), [], workers, [POOL])["launches"]

    # Creates accepted whose VMs ran (not the refused one, nor the one that failed), per 5 s.
    assert launches["pools"][POOL] == {"use1a": [1, 0, 0], "use1b": [1, 0, 1]}
    assert launches["places"][f"{POOL}/use1a"] == "aws/us-east-1/us-east-1a"
