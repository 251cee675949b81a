"""One scan of one (provider, region): keep the database true to the cloud.

The steps of DESIGN.md, each a function: list the deployment's instances (paged, largest page);
load the unit's live rows (one query); diff; write changes in batched, conditional statements
(a row that changed since it was read, e.g. a worker that just registered, is left alone);
write what the list asks rows to keep (`CloudInstance.record`: what an ARM deployment made,
before wm deletes the deployment), then tell the provider (`recorded`);
look up only what the list did not show; enforce lifecycle deadlines; terminate orphans and
finish deletions until the cloud confirms nothing is left. A scan costs about
(pages + missing workers + deletions) calls, never one call per worker (an ARM deployment
adds one delete once it succeeded, or one read of its operations once it failed).

Only the list is needed for the rest: a look-up or a delete that fails (a timeout, a paused
provider) is logged and left to the next scan, and the scan goes on with what remains.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy import Engine

from wm.config.launch_choice import LaunchChoiceConfig
from wm.db import claims, pool_errors, scan_writes, scans
from wm.db import pools as pool_store
from wm.errors import CloudError
from wm.model import CloudInstance, PoolRecord, WorkerRecord, WorkerRef, WorkerState
from wm.ops.telemetry import (
    SCAN_SECONDS,
    WORKERS_PREEMPTED,
    log,
    observe_stages,
)
from wm.providers.base import Provider, TerminateResult, UnitRecords
from wm.providers.meter import CallMeter, metered
from wm.provisioning.intent_sightings import IntentSightings
from wm.queues import QueueSource
from wm.scanning import launch_failures, scan_diff
from wm.scanning.listing import Listing, launch_configs_of
from wm.scanning.report import ScanOverran, ScanReport, ScanStopped
from wm.scanning.scan_errors import registration_errors
from wm.take_over.adoption_report import AdoptionReport
from wm.workers import lifecycle, stages
from wm.workers.transitions import DEADLINE, DELETED, GONE, RowChange

GONE_FROM_CLOUD = "gone-from-cloud"
# Stages whose end another process writes (the web process, a worker's claim): the scan that
# follows observes them, once.
WINDOW_STAGES = ("running_to_registered", "registered_to_claim")
RUNNING_STAGES = ("accepted_to_running",)  # observed when a scan first sees the cloud run it
ORPHAN = "orphan"


@dataclass
class Scanner:
    """The scanner service: what lives across scans. Each scan is a `ScanPass` of its own, so
    scans of a provider's regions running at once never mix their figures."""

    engine: Engine
    providers: Mapping[str, Provider]
    replica: str = "scanner"
    max_scan_s: Mapping[str, float] = field(default_factory=dict)  # provider id -> limit
    # provider id -> least time between two scans of one region, by any replica
    min_gap_s: Mapping[str, float] = field(default_factory=dict)
    missing_grace_s: float = scan_diff.MISSING_GRACE.total_seconds()
    orphan_grace_s: float = scan_diff.ORPHAN_GRACE.total_seconds()
    stop: threading.Event = field(default_factory=threading.Event)
    # Where the tasks of pre-empted workers go back to pending (None: nowhere to put them).
    queue: QueueSource | None = None
    # Which pools' launch choice reads the bench a failed launch moves ([launch_choice]).
    launch_choice: LaunchChoiceConfig = field(default_factory=LaunchChoiceConfig)
    # (provider id, region) -> cloud id -> when this process first saw that tagged instance
    # without a launch time (orphan grace); one no longer listed in its unit is forgotten.
    _first_seen: dict[tuple[str, str], dict[str, datetime]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # (provider id, region) -> open intent -> first seen with its pool's claim free: from
    # then on its create is surely sent, and the gate's longest call is counted.
    intent_sightings: IntentSightings = field(default_factory=IntentSightings)
    # The take-over's report of its scans (wm/take_over/adoption_report.py).
    adoption_report: AdoptionReport = field(default_factory=AdoptionReport)

    def scan(self, provider_id: str, region: str) -> ScanReport | None:
        """Scan one unit unless another replica is scanning it right now."""
        gap_s = self.min_gap_s.get(provider_id, 0.0)
        with claims.claim_scan(self.engine, provider_id, region, self.replica, gap_s) as claim:
            if claim is None or self.stop.is_set():
                return None
            try:
                report = ScanPass(self, self.providers[provider_id], region, claim).run()
            except ScanStopped as stopped:
                log("scan-stopped", provider=provider_id, region=region, before=str(stopped))
                return None
        log("scan", **report.__dict__)
        SCAN_SECONDS.labels(provider_id, region).observe(report.duration_s)
        return report

    def first_seen(
        self, provider_id: str, region: str, instances: Sequence[CloudInstance], now: datetime
    ) -> dict[str, datetime]:
        """When each listed instance without a launch time was first seen in this unit (a
        whole listing at once; a scan does it a page at a time with the two below)."""
        known = self.known_first_seen(provider_id, region)
        seen = {i.cloud_id: known.get(i.cloud_id, now) for i in instances if i.launched_at is None}
        self.remember_first_seen(provider_id, region, seen)
        return dict(seen)

    def known_first_seen(self, provider_id: str, region: str) -> dict[str, datetime]:
        """When this process first saw each tagged instance without a launch time in this
        unit, as the unit's last listing left it."""
        with self._lock:
            return dict(self._first_seen.get((provider_id, region), {}))

    def remember_first_seen(
        self, provider_id: str, region: str, seen: Mapping[str, datetime]
    ) -> None:
        """A listing of this unit was read whole: its instances without a launch time and when
        each was first seen; one no longer listed is forgotten."""
        with self._lock:
            self._first_seen[(provider_id, region)] = dict(seen)


@dataclass
class ScanPass:
    """One scan of one (provider, region): its working state, and figures of its own."""

    scanner: Scanner
    provider: Provider
    region: str
    claim: claims.ScanClaim
    preempted: int = 0  # workers this scan found pre-empted
    looked_up: int = 0  # rows this scan looked up (0 when the look-up call failed)
    # Rows this scan changed (state, or a listing's record), as they are now: its later steps
    # act on these, not on the versions it read first (which its own changes made stale).
    changed_rows: dict[str, WorkerRecord] = field(default_factory=dict)

    @property
    def engine(self) -> Engine:
        return self.scanner.engine

    def run(self) -> ScanReport:
        # The calls this scan makes, wherever they run: not the provider's, which other
        # regions' scans share at the same time.
        with metered() as calls:
            return self._scan(calls)

    def _scan(self, calls: CallMeter) -> ScanReport:
        provider, region = self.provider, self.region
        started = time.monotonic()
        safe_point = self._safe_points(started)
        # 1. The rows, once (they are wm's, and what the listing does not show is known only
        # from them), the pools, and the passes running now.
        rows = scans.live_workers(self.engine, provider.id, region)
        index = scan_diff.RowIndex.of(rows)
        pools = {p.pool_id: p for p in pool_store.load_pools(self.engine)}
        in_flight = self._pools_in_flight(rows)
        now = scans.db_now(self.engine)  # after the claims: one seen free was free by `now`
        # 2. The listing, a page at a time, never held whole; then what it did not show.
        listing = self._read_listing(index, pools, now)
        free_since = self._intents_free_since(rows, in_flight, now)
        found = self._diff(listing, rows, now, in_flight, free_since)
        # The take-over's hook: the legacy's VMs with no row, the imported workers left.
        self.scanner.adoption_report.scanned(
            self.engine, provider, region, found.unadopted, pools, rows
        )
        # 3. What the listing says, written: states, checks, records, first sightings.
        changed = self._apply(found.changes, index.by_worker)
        rows = [self.changed_rows.get(r.worker_id, r) for r in rows]
        index = index.now_holding(rows)
        found = found.applied(index.by_worker)
        scan_writes.mark_checked(self.engine, found.seen)
        self._record(listing.records, index.by_worker)
        self._stamp_cloud_running(found.cloud_running)
        # Stages whose end another process wrote since the last scan of this unit: each is
        # observed once, by whichever replica scans next.
        _observe_window(provider.id, rows, self.claim.previous_start, self.claim.started)
        # 4. What the listing did not show, looked up; deadlines; deletions.
        safe_point("look-ups")
        gone, found_stopping = self._look_up(found.missing, pools, now)
        stopping = [*found.to_terminate, *found_stopping]
        # An intent whose create may be in flight has no VM to delete yet: its deadline waits.
        skip = gone | _ids(stopping) | set(found.in_flight)
        current = [self.changed_rows.get(r.worker_id, r) for r in rows]
        stopping += self._enforce_deadlines(current, pools, now, skip=skip)
        safe_point("deletions")
        terminated = self._terminate(stopping)
        safe_point("orphans")
        orphans = self._terminate_orphans(found.orphans)
        return ScanReport(
            provider=provider.id,
            region=region,
            listed=listing.listed,
            changed=len(changed),
            missing=len(found.missing),
            looked_up=self.looked_up,
            terminated=terminated,
            orphans=orphans,
            preempted=self.preempted,
            api_calls=calls.total,
            duration_s=round(time.monotonic() - started, 3),
            unadopted=len(found.unadopted),
            pages=listing.pages,
            held_max=listing.held.most,
        )

    def _safe_points(self, started: float) -> Callable[[str], None]:
        """A check before each step that calls the cloud: each leaves the database consistent,
        so a scan stopped or overrunning there loses nothing."""
        provider, region = self.provider, self.region
        limit_s = self.scanner.max_scan_s.get(provider.id, float("inf"))

        def safe_point(step: str) -> None:
            if self.scanner.stop.is_set():
                raise ScanStopped(step)
            if time.monotonic() - started > limit_s:
                log(
                    "scan-abandoned",
                    logging.WARNING,
                    provider=provider.id,
                    region=region,
                    before=step,
                    limit_s=limit_s,
                )
                raise ScanOverran(f"{provider.id} {region}: stopped before {step}")

        return safe_point

    def _pools_in_flight(self, rows: Sequence[WorkerRecord]) -> set[str]:
        """Pools of open intents whose provisioning pass runs now: their creates may be out."""
        intent_pools = {r.pool_id for r in rows if r.unresolved_intent}
        return claims.held_pool_claims(self.engine, sorted(intent_pools))

    def _intents_free_since(
        self, rows: Sequence[WorkerRecord], in_flight: set[str], now: datetime
    ) -> Mapping[str, datetime]:
        """Since when no pass has held each open intent's pool (intent recovery's grace)."""
        intents = [r for r in rows if r.unresolved_intent]
        return self.scanner.intent_sightings.note(
            (self.provider.id, self.region),
            free=[r.worker_id for r in intents if r.pool_id not in in_flight],
            held=[r.worker_id for r in intents if r.pool_id in in_flight],
            now=now,
        )

    def _read_listing(
        self, rows: scan_diff.RowIndex, pools: Mapping[str, PoolRecord], now: datetime
    ) -> Listing:
        """The unit's listing, page by page: what each page's instances change is decided as
        it comes (scan_diff.sight) and the page let go of before the next is asked for; what
        is kept is those decisions, the ids of the rows seen, and the few instances the scan
        acts on later (orphans, legacy VMs with no row, records to write)."""
        provider, region = self.provider, self.region
        requires_registration = {p.pool_id: p.requires_registration for p in pools.values()}
        known = self.scanner.known_first_seen(provider.id, region)
        listing = Listing()
        # Where to look beyond the provider's config is what the database holds, never what
        # this process did: it launched nothing (the provisioner is another process).
        records = UnitRecords(
            rows=tuple(rows.by_worker.values()),
            launch_configs=launch_configs_of(provider.id, pools.values()),
        )
        for page in provider.list_pages(region, records):
            listing.held.arrived(page)
            # When each listed instance without a launch time was first seen (orphan grace).
            first_seen = {
                i.cloud_id: known.get(i.cloud_id, now) for i in page if i.launched_at is None
            }
            listing.first_seen.update(first_seen)
            listing.add(
                scan_diff.sight(
                    page,
                    rows,
                    now=now,
                    requires_registration=requires_registration,
                    orphan_grace=timedelta(seconds=self.scanner.orphan_grace_s),
                    first_seen=first_seen,
                )
            )
            self._asked_to_record(page, rows.by_worker, listing)
            listing.listed += len(page)
            del page  # before the next page is asked for
        self.scanner.remember_first_seen(provider.id, region, listing.first_seen)
        return listing

    def _diff(
        self,
        listing: Listing,
        rows: Sequence[WorkerRecord],
        now: datetime,
        in_flight_pools: set[str],
        intents_free_since: Mapping[str, datetime],
    ) -> scan_diff.ScanDiff:
        """The listing's decisions, and those about the rows it did not show."""
        left = scan_diff.unlisted(
            rows,
            listing.matched,
            now=now,
            missing_grace=timedelta(seconds=self.scanner.missing_grace_s),
            # An open intent's create may still be retried by its gate until then, counted
            # from when no pass held its pool any more.
            intent_grace=timedelta(seconds=self.provider.gate.longest_call_s()),
            in_flight_pools=in_flight_pools,
            intents_free_since=intents_free_since,
        )
        return listing.hand_over(left)

    def _apply(
        self,
        changes: Sequence[RowChange],
        rows: Mapping[str, WorkerRecord],
    ) -> list[str]:
        return [w.worker_id for w in self._change(changes, rows)]

    def _change(
        self, changes: Sequence[RowChange], read: Mapping[str, WorkerRecord]
    ) -> list[WorkerRecord]:
        """Apply row changes (one statement) to these rows as this scan holds them (`read`, by
        worker id: the latest it wrote or read); act on what they mean: a worker pre-empted, a
        deletion finished."""
        # A worker the cloud says never launched (an ARM deployment that failed): its row keeps
        # the refusal's class, and it is a launch error against its launch config, as the
        # provisioner records a refused create.
        refused = launch_failures.refusals(self.provider, changes)
        changes = launch_failures.marked(changes, refused)
        changed = scan_writes.apply_changes(self.engine, changes, read)
        self.changed_rows.update({w.worker_id: w for w in changed})
        launch_failures.record(
            self.engine, self.provider, self.scanner.launch_choice, refused, changed
        )
        preempted = {c.worker_id for c in changes if c.preempted}
        lost = [w for w in changed if w.worker_id in preempted]
        if lost:
            self._lost_to_preemption(lost)
        # A deletion finished: the row says when (stopped_at, stamped by the database).
        _observe(self.provider.id, changed, ("delete_to_gone",))
        return changed

    def _asked_to_record(
        self, page: Sequence[CloudInstance], by_id: Mapping[str, WorkerRecord], listing: Listing
    ) -> None:
        """What a page asks live rows to keep (`CloudInstance.record`): kept for `_record` to
        write where a row does not hold it yet; where it does, the provider is told at once,
        and may let go of what it kept in the cloud only until then (an ARM deployment). Told
        at every scan, so what it could not let go of at one scan it lets go of at the next."""
        asked = [i for i in page if i.record and i.worker_id in by_id]
        news = [i for i in asked if _news(by_id[i.worker_id], i.record)]
        listing.records += news
        if len(news) < len(asked):
            self._tell_recorded([i for i in asked if not _news(by_id[i.worker_id], i.record)])

    def _record(self, asked: Sequence[CloudInstance], by_id: Mapping[str, WorkerRecord]) -> None:
        """Write what the listing asks rows to keep and they do not hold yet (`asked`), then
        tell the provider of those written (stopped rows are not)."""
        if not asked:
            return
        news = [(i.worker_id, i.record) for i in asked]
        written = {w.worker_id: w for w in scan_writes.record_provider_data(self.engine, news)}
        self.changed_rows.update(written)
        self._tell_recorded([i for i in asked if i.worker_id in written])

    def _tell_recorded(self, held: Sequence[CloudInstance]) -> None:
        """Rows hold what these listed instances asked them to keep: tell the provider."""
        try:
            self.provider.recorded(held)
        except CloudError as error:
            log(
                "record-followup-failed",
                logging.WARNING,
                provider=self.provider.id,
                error=str(error),
            )

    def _lost_to_preemption(self, lost: Sequence[WorkerRecord]) -> None:
        """The cloud took these VMs back: their tasks go back to the queue at once (which wakes
        the provisioners), and they stop counting as capacity, so replacements follow."""
        queue = self.scanner.queue
        released = queue.release([w.worker_id for w in lost]) if queue else 0
        self.preempted += len(lost)
        for worker in lost:
            WORKERS_PREEMPTED.labels(worker.pool_id, self.provider.id).inc()
            log(
                "worker-preempted",
                logging.WARNING,
                provider=self.provider.id,
                pool=worker.pool_id,
                worker=worker.worker_id,
                launch_config=worker.launch_config_id,
                reason=worker.stop_reason,
            )
        log(
            "preempted-tasks-released", provider=self.provider.id, workers=len(lost), tasks=released
        )

    def _stamp_cloud_running(self, rows: Sequence[WorkerRecord]) -> None:
        stamped = scan_writes.mark_cloud_running(self.engine, [r.worker_id for r in rows])
        # A worker that registered first ended this stage at its registration, unobserved.
        _observe(self.provider.id, [w for w in stamped if w.registered_at is None], RUNNING_STAGES)

    def _look_up(
        self,
        missing: Sequence[WorkerRecord],
        pools: Mapping[str, PoolRecord],
        now: datetime,
    ) -> tuple[set[str], list[WorkerRecord]]:
        """One targeted look-up for rows the list did not show; stop what is really gone.

        Returns the rows found gone (now stopped) and the rows found whose VM must be deleted.
        """
        if not missing:
            return set(), []
        try:
            found = self.provider.lookup([r.ref() for r in missing])
        except CloudError as error:
            # Not knowing is not gone: these rows are looked up again at the next scan.
            log(
                "lookup-failed",
                logging.WARNING,
                provider=self.provider.id,
                workers=len(missing),
                error=str(error),
            )
            return set(), []
        self.looked_up = len(missing)
        # No grace here: these rows are already past every one of them.
        again = scan_diff.diff(
            list(found.values()),
            missing,
            now=now,
            requires_registration={p.pool_id: p.requires_registration for p in pools.values()},
            missing_grace=timedelta(0),
            orphan_grace=timedelta.max,
            intents_free_since={r.worker_id: now for r in missing},
        )
        self._apply(again.changes, {r.worker_id: r for r in missing})
        scan_writes.mark_checked(self.engine, again.seen)
        stopped = self._change(
            [
                RowChange(r.worker_id, r.version, r.state, GONE, reason=_gone_reason(r))
                for r in again.missing
            ],
            {r.worker_id: r for r in again.missing},
        )
        return {w.worker_id for w in stopped}, list(again.to_terminate)

    def _enforce_deadlines(
        self,
        rows: Sequence[WorkerRecord],
        pools: Mapping[str, PoolRecord],
        now: datetime,
        skip: set[str],
    ) -> list[WorkerRecord]:
        due = [d for d in lifecycle.overdue(rows, pools, now) if d.worker.worker_id not in skip]
        moved = {
            w.worker_id
            for w in self._change(
                [
                    RowChange(
                        d.worker.worker_id,
                        d.worker.version,
                        d.worker.state,
                        DEADLINE,
                        reason=d.reason,
                    )
                    for d in due
                ],
                {d.worker.worker_id: d.worker for d in due},
            )
        }
        for deadline in due:
            if deadline.worker.worker_id in moved:
                worker = deadline.worker
                log(
                    "worker-deadline",
                    worker=worker.worker_id,
                    pool=worker.pool_id,
                    reason=deadline.reason,
                )
        never_registered = [
            d.worker
            for d in due
            if d.worker.worker_id in moved and d.reason == lifecycle.REGISTRATION_TIMEOUT
        ]
        pool_errors.record_errors(self.engine, registration_errors(never_registered))
        return [d.worker for d in due if d.worker.worker_id in moved]

    def _terminate(self, stopping: Sequence[WorkerRecord]) -> int:
        """Delete; rows the cloud confirms are gone become stopped."""
        if not stopping:
            return 0
        # A row this scan recorded on is torn down from what it holds now.
        refs = [
            replace(r.ref(), provider_data=self.changed_rows.get(r.worker_id, r).provider_data)
            for r in stopping
        ]
        results = _terminate_all(self.provider, refs)
        called = scan_writes.mark_delete_called(self.engine, [r.worker_id for r in stopping])
        _observe(self.provider.id, called, ("decided_to_delete",))
        gone = {t.worker_id for t in results if t.gone}
        for result in results:
            if result.error is not None:
                log(
                    "terminate-failed",
                    logging.WARNING,
                    provider=self.provider.id,
                    worker=result.worker_id,
                    error=str(result.error),
                )
        # Versions moved when these rows went to stopping: match on state instead.
        fresh = {
            r.worker_id: r
            for r in scans.live_workers(self.engine, self.provider.id, stopping[0].worker_group)
        }
        changes = [
            RowChange(w, fresh[w].version, WorkerState.STOPPING, DELETED)
            for w in gone
            if w in fresh and fresh[w].state == WorkerState.STOPPING
        ]
        self._change(changes, fresh)
        return len(gone)

    def _terminate_orphans(self, orphans: Sequence[CloudInstance]) -> int:
        region = self.region
        if not orphans:
            return 0
        refs = [
            WorkerRef(
                o.worker_id or o.cloud_id,
                region,
                o.cloud_id,
                o.batch_token,
                o.launch_index,
                dict(o.provider_data),
            )
            for o in orphans
        ]
        results = _terminate_all(self.provider, refs)
        # An orphan already gone or going (listed again while the cloud forgets it) is no news.
        acted = [(o, r) for o, r in zip(orphans, results, strict=True) if not r.nothing_sent]
        for orphan, result in acted:
            log(
                "orphan-terminated" if result.error is None else "orphan-terminate-failed",
                logging.WARNING,
                provider=self.provider.id,
                region=region,
                cloud_id=orphan.cloud_id,
                worker=orphan.worker_id,
                pool=orphan.pool_id,
                **({"error": str(result.error)} if result.error else {}),
            )
        return sum(1 for _, r in acted if r.error is None)


def _observe(
    provider_id: str, rows: Sequence[WorkerRecord | scan_writes.Stamped], names: Sequence[str]
) -> None:
    """Observe these stages of these rows, as wm/workers/stages.py computes them (and `wm
    status`)."""
    for row in rows:
        observe_stages(row.pool_id, provider_id, stages.durations(row, names))


def _observe_window(
    provider_id: str, rows: Sequence[WorkerRecord], after: datetime | None, until: datetime
) -> None:
    """Observe the window stages of these rows that ended in (after, until]."""
    for row in rows:
        observe_stages(
            row.pool_id, provider_id, stages.ended_between(row, after, until, WINDOW_STAGES)
        )


def _terminate_all(provider: Provider, refs: Sequence[WorkerRef]) -> list[TerminateResult]:
    """Terminate; a call that failed as a whole fails each worker, to be retried next scan."""
    try:
        return provider.terminate(refs)
    except CloudError as error:
        return [TerminateResult(ref.worker_id, gone=False, error=error) for ref in refs]


def _news(row: WorkerRecord, record: Mapping[str, object]) -> bool:
    """Whether a listing's record holds something the row does not hold yet."""
    return any(row.provider_data.get(k) != v for k, v in record.items())


def _ids(rows: Sequence[WorkerRecord]) -> set[str]:
    return {r.worker_id for r in rows}


def _gone_reason(row: WorkerRecord) -> str | None:
    # A worker we were deleting keeps the reason it was deleted for.
    return None if row.state == WorkerState.STOPPING else GONE_FROM_CLOUD
