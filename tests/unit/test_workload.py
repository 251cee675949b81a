"""The demo's workload: production proportions, a steady stream and a burst, repeatable."""

from __future__ import annotations

import pytest

from wmsim.config import DemoConfig
from wmsim.demo.workload import PoolShare, pool_weights, schedule, split

POOLS = [
    PoolShare("ec2-a", "aws", 150),
    PoolShare("ec2-b", "aws", 50),
    PoolShare("azure", "azure", 40),
    PoolShare("gce", "gcp", 20),
]
MIX = {"aws": 0.84, "azure": 0.13, "gcp": 0.03}


@pytest.mark.parametrize(
    ("pools", "expected"),
    [
        (POOLS, {"ec2-a": 0.63, "ec2-b": 0.21, "azure": 0.13, "gce": 0.03}),
        # A cloud without pools leaves its share to the others, in proportion.
        (POOLS[:3], {"ec2-a": 0.63 / 0.97, "ec2-b": 0.21 / 0.97, "azure": 0.13 / 0.97}),
        # Pools without capacity get nothing.
        ([PoolShare("idle", "gcp", 0), PoolShare("ec2", "aws", 10)], {"ec2": 1.0}),
        ([], {}),
    ],
)
def test_pool_weights_follow_the_cloud_mix_then_max_capacity(pools, expected):
    weights = pool_weights(pools, MIX)
    assert weights.keys() == expected.keys()
    for pool, weight in expected.items():
        assert weights[pool] == pytest.approx(weight)


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (100, {"a": 0.84, "b": 0.13, "c": 0.03}, {"a": 84, "b": 13, "c": 3}),
        (10, {"a": 0.5, "b": 0.25, "c": 0.25}, {"a": 5, "b": 3, "c": 2}),
        (1, {"a": 0.3, "b": 0.7}, {"a": 0, "b": 1}),
        (0, {"a": 1.0}, {"a": 0}),
    ],
)
def test_split_sums_to_the_total_by_largest_remainder(total, weights, expected):
    assert split(total, weights) == expected


def test_steady_burst_spreads_the_stream_and_lands_the_burst_a_third_of_the_way_in():
    demo = DemoConfig(minutes=3, tasks_per_minute=60, burst_tasks=100, task_s=(5, 20))

    arrivals = schedule(POOLS, demo)

    stream = [a for a in arrivals if a.count == 1 and a.at_s != 60.0]
    burst = [a for a in arrivals if a.at_s == 60.0]
    assert len(stream) >= 179  # one a second for three minutes (one may share the burst's time)
    assert sum(a.count for a in burst) >= 100
    assert all(5 <= a.duration_s <= 20 for a in arrivals)
    per_pool = {p.pool_id: sum(a.count for a in arrivals if a.pool_id == p.pool_id) for p in POOLS}
    total = sum(per_pool.values())
    assert per_pool["ec2-a"] / total == pytest.approx(0.63, abs=0.02)
    assert per_pool["gce"] / total == pytest.approx(0.03, abs=0.01)
    assert [a.at_s for a in arrivals] == sorted(a.at_s for a in arrivals)


@pytest.mark.parametrize(
    ("workload", "stream_tasks", "burst_at_s", "burst_tasks"),
    [("steady", 30, None, 0), ("burst", 0, 0.0, 20), ("steady-burst", 30, 20.0, 20)],
)
def test_workload_kinds(workload, stream_tasks, burst_at_s, burst_tasks):
    demo = DemoConfig(minutes=1, workload=workload, tasks_per_minute=30, burst_tasks=20)

    arrivals = schedule(POOLS, demo)

    assert sum(a.count for a in arrivals) == stream_tasks + burst_tasks
    at_burst = sum(a.count for a in arrivals if a.at_s == burst_at_s)
    assert at_burst - (1 if stream_tasks and burst_at_s is not None else 0) == burst_tasks


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    demo = DemoConfig(minutes=1, burst_tasks=30)
    assert schedule(POOLS, demo) == schedule(POOLS, demo)
    assert schedule(POOLS, demo) != schedule(POOLS, demo.model_copy(update={"seed": 2}))


def test_the_default_mix_gives_hand_made_machines_a_share_beside_the_clouds():
    # A static pool's capacity is its machines' (it has no maxCapacity).
    pools = [*POOLS, PoolShare("rack", "static", 4)]

    weights = pool_weights(pools, DemoConfig().cloud_shares)

    assert 0 < weights["rack"] < weights["gce"] * 2
    assert sum(weights.values()) == pytest.approx(1.0)
