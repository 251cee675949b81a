"""What a scan keeps of its unit's listing while it reads it a page at a time: the decisions each
page made (wm/scanning/scan_diff.py), the few instances it acts on later, and how many listed
instances it held at once (each page is let go of before the next is asked for)."""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from wm.model import CloudInstance, PoolRecord, WorkerRecord
from wm.scanning import scan_diff
from wm.workers.transitions import RowChange


class Held:
    """How many listed instances a scan held at once, at most: counted as each page arrives,
    each instance until the last reference to it goes (CPython frees it then), so a listing
    kept whole anywhere, by the scan or by its provider, shows."""

    def __init__(self) -> None:
        # id of the weak reference -> the reference (an instance's own hash may not exist)
        self.alive: dict[int, weakref.ref[CloudInstance]] = {}
        self.most = 0

    def arrived(self, page: Sequence[CloudInstance]) -> None:
        alive = self.alive

        def gone(ref: weakref.ref[CloudInstance]) -> None:
            alive.pop(id(ref), None)

        for instance in page:
            ref = weakref.ref(instance, gone)
            alive[id(ref)] = ref
        self.most = max(self.most, len(alive))


@dataclass
class Listing:
    """What a scan keeps of its unit's listing once each page is let go of."""

    listed: int = 0
    pages: int = 0
    matched: set[str] = field(default_factory=set)
    changes: list[RowChange] = field(default_factory=list)
    to_terminate: list[WorkerRecord] = field(default_factory=list)
    orphans: list[CloudInstance] = field(default_factory=list)
    cloud_running: list[WorkerRecord] = field(default_factory=list)
    unadopted: list[CloudInstance] = field(default_factory=list)
    # Listed instances asking their rows to keep data the rows do not hold yet.
    records: list[CloudInstance] = field(default_factory=list)
    first_seen: dict[str, datetime] = field(default_factory=dict)
    held: Held = field(default_factory=Held)

    def hand_over(self, left: scan_diff.Unlisted) -> scan_diff.ScanDiff:
        """The scan's diff: what the pages decided, and `left` (the rows they did not show).
        The listing lets go of the decisions it hands over (rows matched, changes, rows to
        delete or stamp): the diff holds them now, and a fleet's are many."""
        found = scan_diff.ScanDiff(
            changes=tuple(self.changes),
            seen=tuple(sorted(self.matched)),
            missing=left.missing,
            to_terminate=tuple(self.to_terminate),
            orphans=tuple(self.orphans),
            cloud_running=tuple(self.cloud_running),
            in_flight=left.in_flight,
            unadopted=tuple(self.unadopted),
        )
        self.matched = set()
        self.changes = []
        self.to_terminate = []
        self.cloud_running = []
        return found

    def add(self, seen: scan_diff.Sightings) -> None:
        self.pages += 1
        self.matched.update(seen.matched)
        self.changes += seen.changes
        self.to_terminate += seen.to_terminate
        self.orphans += seen.orphans
        self.cloud_running += seen.cloud_running
        self.unadopted += seen.unadopted


def launch_configs_of(provider_id: str, pools: Iterable[PoolRecord]) -> list[Mapping[str, Any]]:
    """The launch configs of the pools a provider launches for, as their definitions hold them."""
    found: list[Mapping[str, Any]] = []
    for pool in pools:
        if pool.provider_id != provider_id or pool.removed:
            continue
        configs = pool.config.get("launchConfigs")
        found += [c for c in configs or () if isinstance(c, Mapping)]
    return found
