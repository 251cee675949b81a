"""What one scan must change: the cloud's list against the database's rows. A pure function.

Rows are matched to instances by worker id, else by EC2's batch tag and launch index, else by
cloud id. Every outcome is data for the scanner to apply in batched statements:

- seen: the instance was listed; its row may change state (`SCAN_SIGHTINGS` in
  wm/workers/transitions.py) and records the cloud id if it had none yet (an intent whose
  create never returned);
- missing: a row the list did not show, that an earlier scan saw, that is being deleted, or
  that is old enough that listing lag is no excuse: look it up. An intent whose create may
  still be in flight is never missing: its VM may yet appear. That is while its pool's pass
  runs, and until `intent_grace` after a scan first saw it with no pass running (by then
  every attempt was sent: wm/provisioning/intent_sightings.py);
- in_flight: those open intents the list did not show whose create may still be in flight. No
  deadline ends them: a delete sent now finds nothing, and the VM the create then makes is
  left running with its row stopped. Their deadline applies once the create is answered, the
  list shows the VM, or a look-up finds none;
- to_terminate: instances the cloud stopped on its own (pre-empted, evicted, died) and rows
  already stopping: delete until the cloud confirms nothing is left;
- orphans: instances with this deployment's tag and no live row, past a grace period;
- unadopted: live instances a legacy worker-manager made (`CloudInstance.legacy`) with no live
  row: never deleted on sight, reported until an import writes their rows;
- cloud_running: rows whose VM the cloud runs, seen so for the first time (a stage's end);
- a change to stopping says whether the cloud pre-empted the VM (its tasks go back).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from wm.model import CloudInstance, WorkerRecord, WorkerState
from wm.workers.transitions import LOST, RowChange, scan_sighting

# Listing lags creation: a fresh row the lists never showed may not show yet. A row a scan has
# seen before has no such excuse, however young (a VM deleted by hand a minute after launch).
MISSING_GRACE = timedelta(seconds=30)
ORPHAN_GRACE = timedelta(minutes=5)  # a VM whose row is being written must not be killed

U, S, X = WorkerState.RUNNING, WorkerState.STOPPING, WorkerState.STOPPED


@dataclass(frozen=True)
class ScanDiff:
    changes: tuple[RowChange, ...]
    seen: tuple[str, ...]  # worker ids to mark checked
    missing: tuple[WorkerRecord, ...]
    to_terminate: tuple[WorkerRecord, ...]  # rows whose cloud resources must be deleted
    orphans: tuple[CloudInstance, ...]
    cloud_running: tuple[WorkerRecord, ...] = ()  # rows whose VM runs, first seen so now
    in_flight: tuple[str, ...] = ()  # open intents, not listed, whose create may be in flight
    unadopted: tuple[CloudInstance, ...] = ()  # a legacy worker-manager's, with no row

    def applied(self, rows: Mapping[str, WorkerRecord]) -> ScanDiff:
        """Once its changes are written: without them (a fleet's first scan changes every
        row), and its rows to stamp as they are now (`rows`: by worker id)."""
        return replace(
            self,
            changes=(),
            cloud_running=tuple(rows[r.worker_id] for r in self.cloud_running),
        )


@dataclass(frozen=True)
class RowIndex:
    """A unit's rows as a listing's instances are matched to them."""

    by_worker: Mapping[str, WorkerRecord]
    by_batch: Mapping[tuple[str | None, int | None], WorkerRecord]
    by_cloud: Mapping[str, WorkerRecord]

    def now_holding(self, rows: Iterable[WorkerRecord]) -> RowIndex:
        """The index of `rows`, the unit's rows as a scan's writes left them: built anew rather
        than beside this one, so each row is held once, as it is now, not beside the row as
        read (a fleet's first scan changes every row of its unit: issue 28's memory)."""
        return RowIndex.of(rows)

    @classmethod
    def of(cls, rows: Iterable[WorkerRecord]) -> RowIndex:
        rows = list(rows)
        return cls(
            {r.worker_id: r for r in rows},
            {(r.batch_token, r.launch_index): r for r in rows if r.batch_token is not None},
            {r.cloud_id: r for r in rows if r.cloud_id},
        )


@dataclass(frozen=True)
class Sightings:
    """What some listed instances (a page of a listing) change: `ScanDiff` without what only
    the whole listing tells (the rows it did not show)."""

    changes: tuple[RowChange, ...]
    matched: tuple[str, ...]  # worker ids of the rows these instances matched
    to_terminate: tuple[WorkerRecord, ...]
    orphans: tuple[CloudInstance, ...]
    cloud_running: tuple[WorkerRecord, ...]
    unadopted: tuple[CloudInstance, ...]


@dataclass(frozen=True)
class Unlisted:
    """The rows a whole listing did not show: looked up now, or held while their create may
    be in flight."""

    missing: tuple[WorkerRecord, ...]
    in_flight: tuple[str, ...]


def diff(
    instances: Sequence[CloudInstance],
    rows: Sequence[WorkerRecord],
    *,
    now: datetime,
    requires_registration: Mapping[str, bool],
    missing_grace: timedelta = MISSING_GRACE,
    orphan_grace: timedelta = ORPHAN_GRACE,
    first_seen: Mapping[str, datetime] | None = None,
    intent_grace: timedelta = timedelta(0),
    in_flight_pools: AbstractSet[str] = frozenset(),
    intents_free_since: Mapping[str, datetime] | None = None,
) -> ScanDiff:
    """The whole listing against the rows: `sight` of every instance, then `unlisted`. A scan
    makes the same decisions a page at a time (wm/scanning/scanner.py)."""
    seen = sight(
        instances,
        RowIndex.of(rows),
        now=now,
        requires_registration=requires_registration,
        orphan_grace=orphan_grace,
        first_seen=first_seen,
    )
    matched = set(seen.matched)
    left = unlisted(
        rows,
        matched,
        now=now,
        missing_grace=missing_grace,
        intent_grace=intent_grace,
        in_flight_pools=in_flight_pools,
        intents_free_since=intents_free_since,
    )
    return ScanDiff(
        changes=seen.changes,
        seen=tuple(sorted(matched)),
        missing=left.missing,
        to_terminate=seen.to_terminate,
        orphans=seen.orphans,
        cloud_running=seen.cloud_running,
        in_flight=left.in_flight,
        unadopted=seen.unadopted,
    )


def sight(
    instances: Iterable[CloudInstance],
    rows: RowIndex,
    *,
    now: datetime,
    requires_registration: Mapping[str, bool],
    orphan_grace: timedelta = ORPHAN_GRACE,
    first_seen: Mapping[str, datetime] | None = None,
) -> Sightings:
    """What these listed instances change, each on its own: its row's state and ids, an
    orphan, a legacy VM with no row."""
    by_worker, by_batch, by_cloud = rows.by_worker, rows.by_batch, rows.by_cloud
    matched: list[str] = []
    changes: list[RowChange] = []
    to_terminate: list[WorkerRecord] = []
    orphans: list[CloudInstance] = []
    unadopted: list[CloudInstance] = []
    cloud_running: list[WorkerRecord] = []
    first_seen = first_seen or {}

    for instance in instances:
        row = _match(instance, by_worker, by_batch, by_cloud)
        if instance.legacy and (row is None or row.state == X):
            # worker-manager's VM, not imported (or its row is done): it is not wm's to delete.
            # One the cloud already ended (EC2 lists terminated ones for an hour) is no news.
            if instance.state != X:
                unadopted.append(instance)
            continue
        if row is None or row.state == X:
            born = instance.launched_at or first_seen.get(instance.cloud_id) or now
            if now - born >= orphan_grace:
                orphans.append(instance)
            continue
        matched.append(row.worker_id)
        if instance.state == U and row.cloud_running_at is None and row.state != S:
            cloud_running.append(row)
        # The cloud's state against the row's: the transitions table says where it leads.
        transition = scan_sighting(
            row.state, instance.state, requires_registration.get(row.pool_id, True)
        )
        target = transition.target(row.state)
        assert target is not None  # a sighting never deletes a row
        learns_ids = (row.cloud_id is None and instance.cloud_id) or (
            row.tc_worker_id is None and instance.tc_worker_id
        )
        if target != row.state or learns_ids:
            lost = transition is LOST
            changes.append(
                RowChange(
                    row.worker_id,
                    row.version,
                    row.state,
                    transition,
                    instance.cloud_id,
                    instance.reason if lost else None,
                    preempted=lost and instance.preempted,
                    tc_worker_id=instance.tc_worker_id,
                )
            )
        if target == S:
            to_terminate.append(row)
    return Sightings(
        changes=tuple(changes),
        matched=tuple(matched),
        to_terminate=tuple(to_terminate),
        orphans=tuple(orphans),
        cloud_running=tuple(cloud_running),
        unadopted=tuple(unadopted),
    )


def unlisted(
    rows: Iterable[WorkerRecord],
    matched: AbstractSet[str],
    *,
    now: datetime,
    missing_grace: timedelta = MISSING_GRACE,
    intent_grace: timedelta = timedelta(0),
    in_flight_pools: AbstractSet[str] = frozenset(),
    intents_free_since: Mapping[str, datetime] | None = None,
) -> Unlisted:
    """The live rows no listed instance matched (`matched`: their worker ids), once the whole
    listing is read: which to look up, which to hold while their create may be in flight."""
    free_since = intents_free_since or {}
    # Listing lag excuses a fresh VM's absence, not that of one a scan already saw or one we
    # are deleting: those are looked up at once, so dead capacity stops counting.
    intent_wait = max(missing_grace, intent_grace)

    def create_in_flight(r: WorkerRecord) -> bool:
        if r.pool_id in in_flight_pools or r.worker_id not in free_since:
            return True
        last_sent = max(r.unanswered_at or r.created, free_since[r.worker_id])
        return now - last_sent < intent_wait

    def may_be_missing(r: WorkerRecord) -> bool:
        if r.unresolved_intent:
            return True  # its create is answered or given up: in_flight holds the others
        return r.state == S or r.last_checked is not None or now - r.created >= missing_grace

    left = [r for r in rows if r.worker_id not in matched and r.state != X]
    in_flight = [r.worker_id for r in left if r.unresolved_intent and create_in_flight(r)]
    held = set(in_flight)
    missing = [r for r in left if r.worker_id not in held and may_be_missing(r)]
    return Unlisted(missing=tuple(missing), in_flight=tuple(in_flight))


def _match(
    instance: CloudInstance,
    by_worker: Mapping[str, WorkerRecord],
    by_batch: Mapping[tuple[str | None, int | None], WorkerRecord],
    by_cloud: Mapping[str, WorkerRecord],
) -> WorkerRecord | None:
    if instance.worker_id and instance.worker_id in by_worker:
        return by_worker[instance.worker_id]
    if instance.batch_token is not None:
        row = by_batch.get((instance.batch_token, instance.launch_index))
        if row is not None:
            return row
    return by_cloud.get(instance.cloud_id)
