"""The demo's workload: when tasks arrive, for which pool, and how long each runs (pure).

A steady stream (`tasks_per_minute`, one task at a time at even spacing) and a burst
(`burst_tasks` at once, a third of the way in), split over the pools in the production
proportions by cloud (EC2 84 %, Azure 13 %, GCE 3 % by default), and within a cloud by the
pools' max capacity. Durations are drawn from `task_s` with a fixed seed, so a run repeats.
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from wmsim.config import DemoConfig

K = TypeVar("K", bound=Hashable)

BURST_AT_FRACTION = 1 / 3  # of the workload's length
DURATION_STEP_S = 1.0  # durations are whole seconds, so a burst submits in a few statements


@dataclass(frozen=True)
class PoolShare:
    """A pool the workload may send tasks to."""

    pool_id: str
    cloud: str  # the kind of its provider: aws, gcp or azure
    max_capacity: int


@dataclass(frozen=True)
class Arrival:
    """Tasks submitted together: one statement of the builtin queue."""

    at_s: float  # seconds after the workload starts
    pool_id: str
    count: int
    duration_s: float


def pool_weights(pools: Sequence[PoolShare], cloud_shares: Mapping[str, float]) -> dict[str, float]:
    """Each pool's share of the work, summing to 1 over the pools given.

    A cloud's share is split over its pools by max capacity; clouds without pools (or pools
    without capacity) leave their share to the others, in proportion.
    """
    capacity_by_cloud: dict[str, int] = {}
    for pool in pools:
        capacity_by_cloud[pool.cloud] = capacity_by_cloud.get(pool.cloud, 0) + pool.max_capacity
    weights = {
        pool.pool_id: cloud_shares.get(pool.cloud, 0.0)
        * pool.max_capacity
        / capacity_by_cloud[pool.cloud]
        for pool in pools
        if capacity_by_cloud[pool.cloud] > 0
    }
    total = sum(weights.values())
    return {pool_id: weight / total for pool_id, weight in weights.items()} if total else {}


def split(total: int, weights: Mapping[K, float]) -> dict[K, int]:
    """`total` split by weight, largest remainders first (ties in the given order), summing
    to `total`."""
    exact = {key: total * weight for key, weight in weights.items()}
    counts = {key: math.floor(value) for key, value in exact.items()}
    by_remainder = sorted(exact, key=lambda k: exact[k] - counts[k], reverse=True)
    for key in by_remainder[: total - sum(counts.values())]:
        counts[key] += 1
    return counts


def schedule(pools: Sequence[PoolShare], demo: DemoConfig) -> list[Arrival]:
    """Every arrival of the workload, in time order."""
    weights = pool_weights(pools, demo.cloud_shares)
    if not weights:
        return []
    rng = random.Random(demo.seed)
    length_s = demo.minutes * 60
    arrivals: list[Arrival] = []
    if demo.workload in ("steady-burst", "steady") and demo.tasks_per_minute > 0:
        arrivals += _steady(weights, demo, length_s, rng)
    if demo.workload in ("steady-burst", "burst") and demo.burst_tasks > 0:
        burst_at_s = length_s * BURST_AT_FRACTION if demo.workload == "steady-burst" else 0.0
        arrivals += _burst(weights, demo, burst_at_s, rng)
    return sorted(arrivals, key=lambda a: (a.at_s, a.pool_id, a.duration_s))


def _duration(demo: DemoConfig, rng: random.Random) -> float:
    shortest, longest = demo.task_s
    drawn = rng.uniform(shortest, longest)
    return max(shortest, round(drawn / DURATION_STEP_S) * DURATION_STEP_S)


def _steady(
    weights: Mapping[str, float], demo: DemoConfig, length_s: float, rng: random.Random
) -> list[Arrival]:
    # Smooth weighted round robin: each pool gets its share at even spacing, no clumps.
    gap_s = 60.0 / demo.tasks_per_minute
    credit = dict.fromkeys(weights, 0.0)
    arrivals = []
    at_s = 0.0
    while at_s < length_s:
        for pool_id, weight in weights.items():
            credit[pool_id] += weight
        chosen = max(credit, key=lambda p: credit[p])
        credit[chosen] -= 1.0
        arrivals.append(Arrival(round(at_s, 3), chosen, 1, _duration(demo, rng)))
        at_s += gap_s
    return arrivals


def _burst(
    weights: Mapping[str, float], demo: DemoConfig, at_s: float, rng: random.Random
) -> list[Arrival]:
    arrivals = []
    for pool_id, count in split(demo.burst_tasks, weights).items():
        durations: dict[float, int] = {}
        for _ in range(count):
            duration = _duration(demo, rng)
            durations[duration] = durations.get(duration, 0) + 1
        arrivals += [
            Arrival(round(at_s, 3), pool_id, n, duration) for duration, n in durations.items()
        ]
    return arrivals
