"""Taskcluster worker-manager's launch config choice, reproduced exactly: the baseline that issue
40's launch choice is measured against.

The contract is taskcluster/taskcluster at 9d59eb59 (2026-08-21), `services/worker-manager/`:
- `src/launch-config-selector.js`: `LaunchConfigSelector.forWorkerPool` (weights and remaining
  capacity per launch config, the starvation guard) and `WeightedRandomConfig` (`getAll`,
  `selectCapacity`, one weighted draw per instance);
- `src/data.js`: `initialWeight` is `workerManager.initialWeight ?? 1`; launch configs are loaded
  unarchived, ordered by launch config id (`get_worker_pool_launch_configs`, db/versions/0105.yml);
  `WorkerPoolStats.updateFromWorker` counts every non-stopped worker's capacity by launch config;
- `src/provisioner.js`: errors are `get_worker_pool_error_launch_configs(pool, now - 1 hour)`,
  counted by launch config id whatever their kind, errors without an id adding to the total;
- `src/providers/aws.js` `provision`: every config the selector keeps (`getAll`), shuffled, an
  even `ceil(toSpawn / n)` each, one all-or-nothing RunInstances per config in that order, and
  the first failure ends the pass, filed as a `creation-error` without a launch config id.
  Google and Azure draw with `selectCapacity(toSpawn)` (`src/providers/google.js`,
  `src/providers/azure/index.js`); `weighted_draw` is that.

Facts carried over, not code. `Math.random()` and lodash's `_.shuffle` become draws from an
injected `random.Random`, with the same algorithms, so a seeded run is deterministic. Floating
point is IEEE double on both sides and the running `totalWeight` is kept the same way, so a draw
picks the config JavaScript would pick for the same random number.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

# The starvation guard's weight (taskcluster #8176, PR #8177).
MIN_WEIGHT = 0.01
# Errors count towards the weights while younger than this (provisioner.js: fromNow('-1 hour')).
ERROR_WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class LaunchConfig:
    """One launch config as the selector reads it (the keys it reads, nothing else)."""

    launch_config_id: str
    # workerManager.initialWeight; None means Taskcluster's default, 1.
    initial_weight: float | None = None
    # workerManager.maxCapacity; None means the pool's maxCapacity.
    max_capacity: int | None = None
    # workerManager.capacityPerInstance, preferred over the old top-level capacityPerInstance.
    wm_capacity_per_instance: int | None = None
    # The old format's top-level capacityPerInstance.
    capacity_per_instance: int | None = None
    # Archived configs are never loaded (WorkerPoolLaunchConfig.load asks for is_archived=false).
    archived: bool = False

    def __post_init__(self) -> None:
        # A capacity below 1 would make selectCapacity loop forever; Taskcluster's schema refuses
        # it, so this does too, naming the config.
        for name in ("wm_capacity_per_instance", "capacity_per_instance"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"launch config {self.launch_config_id!r}: {name} must be >= 1")

    @property
    def weight(self) -> float:
        return 1.0 if self.initial_weight is None else self.initial_weight

    @property
    def per_instance(self) -> int:
        # The selector reads `wm ?? top ?? 1`, AWS `wm || top || 1`: the same once values < 1
        # are refused.
        if self.wm_capacity_per_instance is not None:
            return self.wm_capacity_per_instance
        if self.capacity_per_instance is not None:
            return self.capacity_per_instance
        return 1


@dataclass(frozen=True)
class Pool:
    """A worker pool's maxCapacity and its launch configs, in any order."""

    max_capacity: int
    launch_configs: tuple[LaunchConfig, ...] = ()


@dataclass(frozen=True)
class PoolStats:
    """What the provisioner hands the selector each pass (WorkerPoolStats)."""

    # Capacity of every non-stopped worker (requested, running, stopping, quarantined) by config.
    capacity_by_launch_config: Mapping[str, int] = field(default_factory=dict)
    # Errors of the last hour by launch config id; None holds the errors filed without one.
    errors_by_launch_config: Mapping[str | None, int] = field(default_factory=dict)

    @property
    def total_errors(self) -> int:
        # provisioner.js adds every row, the id-less one included, so those dilute the others.
        return sum(self.errors_by_launch_config.values())


@dataclass(frozen=True)
class PoolError:
    """One row of worker_pool_errors, as far as the weights read it."""

    reported: datetime
    # None for errors filed without a launch config (AWS's creation errors among them).
    launch_config_id: str | None
    # creation-error, operation-error, arm-deployment-error, worker-error...: every kind counts.
    kind: str = "creation-error"


def recent_error_counts(errors: Iterable[PoolError], now: datetime) -> dict[str | None, int]:
    """Errors reported in the last hour by launch config id (`reported > now - 1 hour`)."""
    since = now - ERROR_WINDOW
    return dict(Counter(e.launch_config_id for e in errors if e.reported > since))


@dataclass
class WeightedConfig:
    """A config's weight and the capacity it may still take; mutated as instances are drawn."""

    launch_config: LaunchConfig
    weight: float
    remaining_capacity: float


def weigh(pool: Pool, stats: PoolStats | None) -> list[WeightedConfig]:
    """Every unarchived config's weight and remaining capacity, as forWorkerPool computes them
    (and logs them in launch-config-selector-debug), zero and negative weights included."""
    loaded = sorted(
        (lc for lc in pool.launch_configs if not lc.archived), key=lambda lc: lc.launch_config_id
    )
    configs = [WeightedConfig(lc, lc.weight, _max_capacity(lc, pool)) for lc in loaded]
    if stats is None:
        return configs
    total_errors = stats.total_errors
    for cfg in configs:
        lc_id = cfg.launch_config.launch_config_id
        max_capacity = _max_capacity(cfg.launch_config, pool)
        existing = stats.capacity_by_launch_config.get(lc_id, 0)
        if max_capacity > 0 and existing > 0:
            cfg.weight -= existing / max_capacity
            cfg.remaining_capacity = max(0, max_capacity - existing)
        lc_errors = stats.errors_by_launch_config.get(lc_id, 0)
        if lc_errors > 0 and total_errors > 0:
            cfg.weight -= lc_errors / total_errors
    # In place and in id order, as Taskcluster does: a config raised to MIN_WEIGHT counts as
    # viable for the ones after it, so of two starved configs only the first gets to launch.
    for cfg in configs:
        if cfg.remaining_capacity > 0 and cfg.weight <= 0:
            others_viable = any(
                c is not cfg and c.remaining_capacity > 0 and c.weight > 0 for c in configs
            )
            cfg.weight = 0 if others_viable else MIN_WEIGHT
    return configs


def _max_capacity(lc: LaunchConfig, pool: Pool) -> int:
    return pool.max_capacity if lc.max_capacity is None else lc.max_capacity


class WeightedRandomConfig:
    """The configs with weight > 0, drawn in proportion to their weights."""

    def __init__(self, configs: Iterable[WeightedConfig] = ()) -> None:
        self.configs: list[WeightedConfig] = []
        self.total_weight = 0.0
        for cfg in configs:
            if cfg.weight > 0:
                self.total_weight += cfg.weight
                self.configs.append(cfg)
        # Ascending by weight, stable (JavaScript's sort is too): the cumulative walk's order.
        self.configs.sort(key=lambda c: c.weight)

    def get_all(self) -> list[LaunchConfig]:
        return [cfg.launch_config for cfg in self.configs]

    def get_random_config(self, rng: random.Random) -> WeightedConfig | None:
        if self.total_weight == 0 or not self.configs:
            return None
        point = rng.random() * self.total_weight
        cumulative = 0.0
        for cfg in self.configs:
            cumulative += cfg.weight
            if point < cumulative:
                return cfg
        return self.configs[-1]  # rounding left the point at the very top

    def select_capacity(self, to_spawn: float, rng: random.Random) -> list[LaunchConfig]:
        """One config per instance until `to_spawn` is covered (the last instance may overshoot)
        or no config is left; a config leaves once its remaining capacity is used."""
        chosen = []
        while to_spawn > 0:
            cfg = self.get_random_config(rng)
            if cfg is None:
                break
            chosen.append(cfg.launch_config)
            to_spawn -= cfg.launch_config.per_instance
            cfg.remaining_capacity -= cfg.launch_config.per_instance
            if cfg.remaining_capacity <= 0:
                # By identity, as indexOf does; the total first, as #removeConfig does.
                self.total_weight -= cfg.weight
                del self.configs[next(i for i, c in enumerate(self.configs) if c is cfg)]
        return chosen


def for_worker_pool(pool: Pool, stats: PoolStats | None) -> WeightedRandomConfig:
    return WeightedRandomConfig(weigh(pool, stats))


def weighted_draw(
    pool: Pool, stats: PoolStats | None, to_spawn: int, rng: random.Random
) -> list[LaunchConfig]:
    """Google's and Azure's choice: one config per instance to create."""
    _check_to_spawn(to_spawn)
    return for_worker_pool(pool, stats).select_capacity(to_spawn, rng)


def lodash_shuffle(items: Sequence[T], rng: random.Random) -> list[T]:
    """`_.shuffle`: Fisher-Yates from the front, `index + floor(random * (n - index))`."""
    out = list(items)
    last = len(out) - 1
    for index in range(len(out)):
        pick = index + math.floor(rng.random() * (last - index + 1))
        out[index], out[pick] = out[pick], out[index]
    return out


@dataclass(frozen=True)
class CreateAttempt:
    """One RunInstances call (MinCount = MaxCount = instances)."""

    launch_config_id: str
    instances: int
    succeeded: bool


@dataclass(frozen=True)
class FiledError:
    """The pool error AWS's provision files when a create fails."""

    kind: str
    # Always None: aws.js files creation errors without the launch config, so the config that
    # failed is never demoted by its own error.
    launch_config_id: str | None


@dataclass(frozen=True)
class AwsPass:
    attempts: tuple[CreateAttempt, ...]
    error: FiledError | None


# Asked for each create: does RunInstances succeed for this many instances of this config?
RunInstances = Callable[[LaunchConfig, int], bool]


def aws_provision(
    pool: Pool,
    stats: PoolStats | None,
    to_spawn: int,
    rng: random.Random,
    run_instances: RunInstances,
) -> AwsPass:
    """One AWS provisioning pass for a pool: weights decide only which configs take part."""
    _check_to_spawn(to_spawn)
    if to_spawn == 0:
        return AwsPass((), None)
    configs = lodash_shuffle(for_worker_pool(pool, stats).get_all(), rng)
    if not configs:
        return AwsPass((), None)
    per_config = math.ceil(to_spawn / len(configs))
    left = to_spawn
    attempts: list[CreateAttempt] = []
    for lc in configs:
        if left <= 0:
            break
        instances = math.ceil(min(left, per_config) / lc.per_instance)
        succeeded = run_instances(lc, instances)
        attempts.append(CreateAttempt(lc.launch_config_id, instances, succeeded))
        if not succeeded:
            return AwsPass(tuple(attempts), FiledError("creation-error", None))
        # Rounding up to whole instances may spawn more than this config's share.
        left -= instances * lc.per_instance
    return AwsPass(tuple(attempts), None)


def _check_to_spawn(to_spawn: float) -> None:
    # provider.js asserts it: 'toSpawn capacity must be a positive number'.
    if to_spawn < 0:
        raise ValueError(f"to_spawn must be >= 0, got {to_spawn}")
