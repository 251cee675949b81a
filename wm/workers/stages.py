"""The stages of a worker's life, and how long each took (pure).

Launch: task pending -> capacity requested -> cloud accepted -> cloud running -> registered ->
first task claimed. Removal: decided -> delete call -> gone. Each stage runs between two
points, read from a worker row's timestamps (wm/db/tables.py). "Cloud running" is the earliest
of: the VM's boot as its worker reported it at registration (systemBootTime, kept within what
wm knows), the first scan that saw the cloud run it, and the registration itself (a worker that
registers proves its VM runs, and a scan may not have looked yet).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from wm.model import WorkerRecord


@dataclass(frozen=True)
class Stage:
    name: str
    label: str
    start: str  # a point (see POINTS)
    end: str


# point -> the WorkerRecord fields it is the earliest of
POINTS: Mapping[str, tuple[str, ...]] = {
    "demand": ("demand_at",),
    "requested": ("created",),
    "accepted": ("accepted_at",),
    "cloud_running": ("booted_at", "cloud_running_at", "registered_at"),
    "registered": ("registered_at",),
    "first_claim": ("first_claimed_at",),
    "removal_decided": ("stopping_at",),
    "delete_call": ("delete_called_at",),
    "gone": ("stopped_at",),
}

STAGES: tuple[Stage, ...] = (
    Stage("pending_to_requested", "task pending -> capacity requested", "demand", "requested"),
    Stage("requested_to_accepted", "capacity requested -> cloud accepted", "requested", "accepted"),
    Stage("accepted_to_running", "cloud accepted -> cloud running", "accepted", "cloud_running"),
    Stage("running_to_registered", "cloud running -> registered", "cloud_running", "registered"),
    Stage("registered_to_claim", "registered -> first task claimed", "registered", "first_claim"),
    Stage("decided_to_delete", "removal decided -> delete call", "removal_decided", "delete_call"),
    Stage("delete_to_gone", "delete call -> gone", "delete_call", "gone"),
)
STAGE_NAMES = tuple(s.name for s in STAGES)


@dataclass(frozen=True)
class StageSummary:
    stage: str
    count: int
    p50_s: float | None
    p95_s: float | None


def point(worker: WorkerRecord, name: str) -> datetime | None:
    found = None
    for field in POINTS[name]:
        value = getattr(worker, field)
        if value is not None and (found is None or value < found):
            found = value
    return found


def durations(worker: WorkerRecord, names: Iterable[str] | None = None) -> dict[str, float]:
    """Seconds spent in each stage this worker has passed (never negative); only the named
    stages if any are named. The one computation of a stage's latency: the passes observe
    what it returns into /metrics, and `wm status` summarises it."""
    out = {}
    for stage in _chosen(names):
        start, end = point(worker, stage.start), point(worker, stage.end)
        if start is not None and end is not None:
            out[stage.name] = max(0.0, (end - start).total_seconds())
    return out


def ended_between(
    worker: WorkerRecord, after: datetime | None, until: datetime, stages: Iterable[str]
) -> dict[str, float]:
    """The given stages of this worker that ended in (after, until], with their seconds."""
    ended = []
    for stage in _known_of(tuple(stages)):
        end = point(worker, stage.end)
        if end is not None and (after is None or end > after) and end <= until:
            ended.append(stage.name)
    return durations(worker, ended) if ended else {}


@functools.cache
def _stages_of(names: tuple[str, ...] | None) -> tuple[Stage, ...]:
    chosen = STAGE_NAMES if names is None else names
    unknown = set(chosen) - set(STAGE_NAMES)
    if unknown:
        raise ValueError(f"no such stage: {sorted(unknown)}")
    return tuple(stage for stage in STAGES if stage.name in chosen)


@functools.cache
def _known_of(names: tuple[str, ...]) -> tuple[Stage, ...]:
    return tuple(stage for stage in STAGES if stage.name in names)


def _chosen(names: Iterable[str] | None) -> tuple[Stage, ...]:
    """These stages in STAGES' order (every stage for None): a scan asks for the same few
    stages of every row it observes, so the choice is made once, not once a row."""
    return _stages_of(None if names is None else tuple(names))


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100), rounded to milliseconds; None without values."""
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1], 3)


def summarise(workers: Iterable[WorkerRecord]) -> dict[str, StageSummary]:
    """Per stage: how many workers passed it and the p50 / p95 of how long it took."""
    seen: dict[str, list[float]] = {name: [] for name in STAGE_NAMES}
    for worker in workers:
        for name, seconds in durations(worker).items():
            seen[name].append(seconds)
    return {
        name: StageSummary(name, len(values), percentile(values, 50), percentile(values, 95))
        for name, values in seen.items()
    }


def slowest(summary: Mapping[str, StageSummary]) -> StageSummary | None:
    """The stage with the highest p95: where a pool's latency goes."""
    timed = [s for s in summary.values() if s.p95_s is not None]
    return max(timed, key=lambda s: s.p95_s or 0.0) if timed else None


def label(name: str) -> str:
    return next(s.label for s in STAGES if s.name == name)
