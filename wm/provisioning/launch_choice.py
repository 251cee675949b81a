"""Choose launch configs for the capacity a pass adds: a pure function.

Taskcluster's semantics, made deterministic: each config starts from its weight; a per-config
max capacity lowers the weight as that config fills (to zero when full); configs with errors in
the last hour weigh less, halving per error, down to a floor — the starvation guard that keeps
a recovering config getting a trickle of launches instead of none. Workers are handed out one
at a time to the config with the highest weight per worker already given (D'Hondt), so the
split follows the weights exactly over a pass and never depends on a random draw; a tie goes
to the config with the least live capacity, then to the lowest id, so passes
of one worker each still spread over equal configs as Taskcluster's weighted draw does.

Two more limits, off unless asked for (the cost choice asks, wm.provisioning.cost_choice):
an option that is only a probe of a benched offering gets one worker, ahead of the shares; and
`spread` caps any one offering's share of the pass's new capacity and of the pool's spot
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

    `spread` (0 < spread <= 1; None: no cap) holds each offering (options of one offering_key
    together) to two shares, while an option of another offering, or of none, with weight and
    room is not held: its share of the pass, new capacity over `to_add` (an offering's first
    worker of a pass always allowed); and its share of the pool's spot capacity after the
    pass, live and new capacity over the pool's live spot capacity plus `to_add` (allowed
    while it has none). When every option is held by the pass share, the pool share alone
    holds them (a pool whose live workers crowd one offering fills the others first); when
    every option is held by that too, the weights alone choose.
    """
    if spread is not None and not 0 < spread <= 1:
        raise ValueError(f"spread must be in (0, 1], not {spread!r}")
    given = {o.launch_config_id: 0 for o in options}  # capacity handed out this pass
    workers = dict.fromkeys(given, 0)
    ordered = sorted(options, key=lambda o: o.launch_config_id)
    live: dict[str, int] = {}
    for option in ordered:
        if option.offering_key is not None:
            key = option.offering_key
            live[key] = live.get(key, 0) + option.live_spot_capacity
    live_total = sum(live.values())
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
            scores = _spread(scores, ordered, given, live, live_total, spread, to_add)
        best, best_score = None, 0.0
        for option in ordered:
            score = scores.get(option.launch_config_id, 0.0)
            if score > best_score or (
                # a tie goes to the config with less live capacity: with the lowest id winning
                # every tie, a pool adding a worker a pass (the steady state) put every
                # worker in its first config
                score == best_score
                and best is not None
                and option.current_capacity < best.current_capacity
            ):
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


def _spread(
    scores: dict[str, float],
    ordered: Sequence[LaunchOption],
    given: dict[str, int],
    live: dict[str, int],
    live_total: int,
    spread: float,
    to_add: int,
) -> dict[str, float]:
    """The candidates `spread` leaves for the next worker (see choose)."""
    new: dict[str, int] = {}
    for option in ordered:
        if option.offering_key is not None:
            key = option.offering_key
            new[key] = new.get(key, 0) + given[option.launch_config_id]
    candidates = [o for o in ordered if o.launch_config_id in scores]

    def over_pool(option: LaunchOption) -> bool:
        key = option.offering_key
        if key is None:
            return False
        had = live.get(key, 0) + new.get(key, 0)
        after = had + option.capacity_per_worker
        return had > 0 and after > spread * (live_total + to_add)

    def over_pass(option: LaunchOption) -> bool:
        key = option.offering_key
        if key is None:
            return False
        had = new.get(key, 0)
        return had > 0 and had + option.capacity_per_worker > spread * to_add

    for held in (lambda o: over_pool(o) or over_pass(o), over_pool):
        free = {o.launch_config_id for o in candidates if not held(o)}
        if free:
            return {lc_id: s for lc_id, s in scores.items() if lc_id in free}
    return scores


def _weight(option: LaunchOption, given: int) -> float:
    weight = option.weight * error_factor(option.recent_errors)
    if option.max_capacity is None:
        return weight
    room = option.max_capacity - option.current_capacity - given
    if room < option.capacity_per_worker or option.max_capacity <= 0:
        return 0.0
    return weight * room / option.max_capacity
