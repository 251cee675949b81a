"""Choose launch configs for the capacity a pass adds: a pure function.

Taskcluster's semantics, made deterministic: each config starts from its weight; a per-config
max capacity lowers the weight as that config fills (to zero when full); configs with errors in
the last hour weigh less, halving per error, down to a floor — the starvation guard that keeps
a recovering config getting a trickle of launches instead of none. Workers are handed out one
at a time to the config with the highest weight per worker already given (D'Hondt), so the
split follows the weights exactly over a pass and never depends on a random draw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ERROR_WEIGHT_DECAY = 0.5  # each error in the last hour halves the weight...
ERROR_WEIGHT_FLOOR = 0.05  # ...but never below this share of it


@dataclass(frozen=True)
class LaunchOption:
    launch_config_id: str
    weight: float
    capacity_per_worker: int
    max_capacity: int | None  # per-config ceiling, None for none
    current_capacity: int  # capacity of this config's non-stopped workers
    recent_errors: int = 0  # pool errors and pre-emptions of this config in the last hour


@dataclass(frozen=True)
class Allocation:
    launch_config_id: str
    workers: int
    capacity: int


def error_factor(recent_errors: int) -> float:
    return max(ERROR_WEIGHT_FLOOR, ERROR_WEIGHT_DECAY**recent_errors)


def choose(to_add: int, options: Sequence[LaunchOption]) -> list[Allocation]:
    """Workers per launch config covering `to_add` capacity (the last may overshoot it)."""
    given = {o.launch_config_id: 0 for o in options}  # capacity handed out this pass
    workers = dict.fromkeys(given, 0)
    remaining = to_add
    while remaining > 0:
        best, best_score = None, 0.0
        for option in sorted(options, key=lambda o: o.launch_config_id):
            score = _weight(option, given[option.launch_config_id]) / (
                workers[option.launch_config_id] + 1
            )
            if score > best_score:
                best, best_score = option, score
        if best is None:
            break  # every config is full or weighs nothing
        given[best.launch_config_id] += best.capacity_per_worker
        workers[best.launch_config_id] += 1
        remaining -= best.capacity_per_worker
    return [
        Allocation(lc_id, workers[lc_id], given[lc_id])
        for lc_id in sorted(given)
        if workers[lc_id] > 0
    ]


def _weight(option: LaunchOption, given: int) -> float:
    weight = option.weight * error_factor(option.recent_errors)
    if option.max_capacity is None:
        return weight
    room = option.max_capacity - option.current_capacity - given
    if room < option.capacity_per_worker or option.max_capacity <= 0:
        return 0.0
    return weight * room / option.max_capacity
