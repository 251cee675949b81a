"""What the simulated clouds bill: every instance from start to stop, by the second, with a
60-second minimum, at the price in effect each second (a spot price that moves while the
instance runs is billed piecewise), so a benchmark measures its cost instead of estimating it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from wmsim.market.scenario import SimOffering

MINIMUM_S = 60.0

# The price segments of an offering between two times: [(start, end, $/h), ...].
PriceSegments = Callable[[SimOffering, float, float], list[tuple[float, float, float]]]


@dataclass
class Entry:
    offering: SimOffering
    start: float
    stop: float | None = None


class Ledger:
    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}

    def start(self, instance_id: str, offering: SimOffering, now: float) -> None:
        if instance_id in self.entries:
            raise ValueError(f"instance {instance_id!r} is already in the ledger")
        self.entries[instance_id] = Entry(offering, now)

    def stop(self, instance_id: str, now: float) -> None:
        entry = self.entries[instance_id]
        if entry.stop is None:
            entry.stop = max(now, entry.start)

    def billed_s(self, instance_id: str, until: float) -> float:
        entry = self.entries[instance_id]
        end = entry.stop if entry.stop is not None else max(until, entry.start)
        return max(MINIMUM_S, end - entry.start)

    def cost(self, segments: PriceSegments, until: float) -> float:
        """Dollars billed for every instance up to `until` (a running one up to then)."""
        return sum(self.instance_cost(i, segments, until) for i in self.entries)

    def instance_cost(self, instance_id: str, segments: PriceSegments, until: float) -> float:
        entry = self.entries[instance_id]
        end = entry.stop if entry.stop is not None else max(until, entry.start)
        ran = end - entry.start
        billed_end = entry.start + max(MINIMUM_S, ran)
        dollars = 0.0
        for a, b, per_hour in segments(entry.offering, entry.start, billed_end):
            dollars += (b - a) * per_hour / 3600.0
        return dollars

    def instance_seconds(self, until: float) -> float:
        return sum(self.billed_s(i, until) for i in self.entries)
