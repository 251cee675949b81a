"""Choose launch configs for the capacity a pass adds: a pure function.

Taskcluster's semantics, made deterministic: each config starts from its weight; a per-config
max capacity lowers the weight as that config fills (to zero when full); configs with errors in
the last hour weigh less, halving per error, down to a floor — the starvation guard that keeps
a recovering config getting a trickle of launches instead of none. Workers are handed out one
at a time to the config with the highest weight per worker already given (D'Hondt), so the
split follows the weights exactly over a pass and never depends on a random draw.

Two more limits, off unless asked for (the cost choice asks, wm.provisioning.cost_choice):
an option that is only a probe of a benched offering gets one worker, ahead of the shares; and
`spread` caps any one offering's share of the pass's new capacity and of the pool's live spot
capacity while another option with weight and room remains (a dry spell reclaims a zone's spot
all at once; SkyPilot's one-zone hammering, research §7).
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
    # What `spread` groups by (wm.model.Offering.key); None: never capped.
    offering_key: str | None = None
    # Capacity of this config's live spot workers (counted per offering_key for `spread`).
    live_spot_capacity: int = 0
    probe_only: bool = False  # a benched offering's probe: at most one worker this pass


@dataclass(frozen=True)
class Allocation:
    launch_config_id: str
    workers: int
    capacity: int


def error_factor(recent_errors: int) -> float:
    return max(ERROR_WEIGHT_FLOOR, ERROR_WEIGHT_DECAY**recent_errors)


def choose(
    to_add: int, options: Sequence[LaunchOption], *, spread: float | None = None
) -> list[Allocation]:
    """Workers per launch config covering `to_add` capacity (the last may overshoot it).

    `spread` (0 < spread <= 1; None: no cap): an offering that already has new capacity this
    pass takes no more once that would pass `spread` of `to_add`, nor, when it already runs
    some, once its live spot capacity and new capacity would pass `spread` of the pool's live
    spot capacity plus `to_add`, while an option of another offering (or of none) with weight
    and room remains. Each offering's first worker of a pass is never capped by the pass share.
    """
    if spread is not None and not 0 < spread <= 1:
        raise ValueError(f"spread must be in (0, 1], not {spread!r}")
    given = {o.launch_config_id: 0 for o in options}  # capacity handed out this pass
    workers = dict.fromkeys(given, 0)
    ordered = sorted(options, key=lambda o: o.launch_config_id)
    live_by_offering: dict[str, int] = {}
    for option in ordered:
        if option.offering_key is not None:
            key = option.offering_key
            live_by_offering[key] = live_by_offering.get(key, 0) + option.live_spot_capacity
    live_total = sum(live_by_offering.values())
    remaining = to_add
    # A probe tests whether a benched offering has capacity again: it goes first, so that a
    # small pass or a low weight cannot put it off window after window.
    for option in ordered:
        if remaining <= 0:
            break
        if option.probe_only and _weight(option, 0) > 0:
            given[option.launch_config_id] += option.capacity_per_worker
            workers[option.launch_config_id] += 1
            remaining -= option.capacity_per_worker
    while remaining > 0:
        scores = {}
        for option in ordered:
            lc_id = option.launch_config_id
            if option.probe_only and workers[lc_id] >= 1:
                continue
            score = _weight(option, given[lc_id]) / (workers[lc_id] + 1)
            if score > 0:
                scores[lc_id] = score
        if spread is not None:
            new_by_offering: dict[str, int] = {}
            for option in ordered:
                if option.offering_key is not None:
                    key = option.offering_key
                    new_by_offering[key] = (
                        new_by_offering.get(key, 0) + given[option.launch_config_id]
                    )
            capped = {
                option.launch_config_id
                for option in ordered
                if option.launch_config_id in scores
                and _over_spread(
                    option, spread, to_add, new_by_offering, live_by_offering, live_total
                )
            }
            if capped and len(capped) < len(scores):
                scores = {lc_id: s for lc_id, s in scores.items() if lc_id not in capped}
        best, best_score = None, 0.0
        for option in ordered:
            score = scores.get(option.launch_config_id, 0.0)
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


def _over_spread(
    option: LaunchOption,
    spread: float,
    to_add: int,
    new_by_offering: dict[str, int],
    live_by_offering: dict[str, int],
    live_total: int,
) -> bool:
    """Whether one more worker of `option` would take its offering past `spread`."""
    key = option.offering_key
    if key is None:
        return False
    new, live = new_by_offering.get(key, 0), live_by_offering.get(key, 0)
    after = new + option.capacity_per_worker
    if new > 0 and after > spread * to_add:
        return True
    return live > 0 and live + after > spread * (live_total + to_add)


def _weight(option: LaunchOption, given: int) -> float:
    weight = option.weight * error_factor(option.recent_errors)
    if option.max_capacity is None:
        return weight
    room = option.max_capacity - option.current_capacity - given
    if room < option.capacity_per_worker or option.max_capacity <= 0:
        return 0.0
    return weight * room / option.max_capacity
