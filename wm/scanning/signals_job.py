"""The launch choice's signal reads: one job per provider in the scanner process.

Each run reads the sources that are due (each on its own cadence: EC2 prices every 10 min,
GCE and Azure prices daily, capacity every 15 min and only for offerings of pools with pending
tasks; a provider's `signals` table changes them) for the offerings of the provider's pools
that choose by cost, and writes what it read to Postgres (wm/db/offering_state.py), where
every provisioner, scanner and replica reads the same values and a restarted process starts
warm: a source whose newest stored value is younger than its cadence, for the offerings
wanted, is not read again, whichever replica read it.

A source that fails (down, 403, garbage, slow beyond the gate's timeout, the budget busy)
is neutral: a `signal-fetch-failed` log line naming provider, source and reason, a count in
`wm_signal_fetch_failures_total`, nothing written (the last good values stay in use for three
of the source's intervals, then count as unknown), and another try after `retry_s`. Nothing
raises out of a run, and the reads are background calls of the provider's gate (never waiting
on the API budget, never pausing the provider) on the job's own thread: a scan never waits
for a signal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine

from wm.db import offering_state
from wm.db import pools as pool_store
from wm.model import LaunchConfigRecord, Offering, OfferingSignal
from wm.ops.telemetry import SIGNAL_FETCH_FAILURES, SIGNAL_LAST_SUCCESS, log
from wm.providers.signal_sources import Cadence, SignalCollector, SignalSource, failure_reason
from wm.queues.base import QueueSource

SIGNALS_TICK_S = 30.0  # how often the job looks for a source that is due
# A value is read for this many of its source's intervals: it outlives one or two failed
# refreshes, not a source that stays down.
FRESH_FOR_INTERVALS = 3
ERROR_TEXT_MAX = 300


@dataclass(frozen=True)
class Wanted:
    """The offerings to read signals for: every offering of the pools that choose by cost,
    and those of the pools among them with pending tasks."""

    all: tuple[Offering, ...]
    with_demand: tuple[Offering, ...]


def wanted_offerings(
    engine: Engine,
    provider_id: str,
    chooses_by_cost: Callable[[str], bool],
    offering_of: Callable[[LaunchConfigRecord], Offering | None],
    queue: QueueSource | None,
) -> Wanted:
    """The provider's pools' offerings, read from the database (a scanner launches nothing:
    what its pools launch is the pools' definitions, not what the process did)."""
    pools = [
        p.pool_id
        for p in pool_store.load_pools(engine)
        if p.provider_id == provider_id and not p.removed and chooses_by_cost(p.pool_id)
    ]
    if not pools:
        return Wanted((), ())
    by_pool: dict[str, set[Offering]] = {}
    for lc in pool_store.load_launch_configs(engine, include_archived=False, pool_ids=pools):
        offering = offering_of(lc)
        if offering is not None:
            by_pool.setdefault(lc.pool_id, set()).add(offering)
    pending: Collection[str] = ()
    if queue is not None:
        try:
            counts = queue.counts(sorted(by_pool))
            pending = {pool for pool, c in counts.items() if c.pending > 0}
        except Exception as error:  # an unreadable queue: no demand-only read this run
            log(
                "signal-demand-unknown",
                logging.WARNING,
                provider=provider_id,
                error=f"{type(error).__name__}: {error}"[:ERROR_TEXT_MAX],
            )
    everything = sorted({o for offerings in by_pool.values() for o in offerings})
    demanded = sorted({o for pool in pending for o in by_pool.get(pool, ())})
    return Wanted(tuple(everything), tuple(demanded))


def source_interval_s(source: SignalSource, configured: Mapping[Cadence, float | None]) -> float:
    """The source's cadence: the provider's configured one for its kind of source, else its
    own."""
    return configured.get(source.cadence) or source.default_interval_s


class SignalsJob:
    """One provider's signal reads; `run` is the scheduler's job."""

    def __init__(
        self,
        engine: Engine,
        collector: SignalCollector,
        wanted: Callable[[], Wanted],
        intervals: Mapping[Cadence, float | None],
        retry_s: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.collector = collector
        self.provider_id = collector.provider_id
        self._wanted = wanted
        self._intervals = dict(intervals)
        self._retry_s = retry_s
        self._clock = clock
        self._next_at: dict[str, float] = {}  # source -> when to look at it again
        self._read: dict[str, frozenset[Offering]] = {}  # source -> offerings last read for

    def run(self) -> None:
        now = self._clock()
        due = [s for s in self.collector.sources if now >= self._next_at.get(s.name, 0.0)]
        if not due:
            return
        try:
            wanted = self._wanted()
            stored = offering_state.read_signals(self.engine, self.provider_id)
        except Exception as error:  # the database or the pools unreadable: try again later
            log(
                "signal-read-skipped",
                logging.WARNING,
                provider=self.provider_id,
                error=f"{type(error).__name__}: {error}"[:ERROR_TEXT_MAX],
            )
            return
        for source in due:
            offerings = wanted.with_demand if source.demand_only else wanted.all
            self._read_source(source, offerings, stored.values(), now)

    def _read_source(
        self,
        source: SignalSource,
        offerings: Sequence[Offering],
        stored: Collection[OfferingSignal],
        now: float,
    ) -> None:
        interval_s = source_interval_s(source, self._intervals)
        fresh_until = self._fresh_until(source, offerings, stored, interval_s)
        if not offerings or fresh_until > now:
            self._next_at[source.name] = (
                min(fresh_until, now + interval_s)
                if offerings
                else (now + min(interval_s, SIGNALS_TICK_S * 4))
            )
            return
        try:
            signals = self.collector.collect(source.name, offerings)
            offering_state.write_signals(
                self.engine, signals, fresh_for_s=FRESH_FOR_INTERVALS * interval_s
            )
        except Exception as error:
            self._failed(source, error, now, interval_s)
            return
        self._read[source.name] = frozenset(offerings)
        self._next_at[source.name] = now + interval_s
        SIGNAL_LAST_SUCCESS.labels(self.provider_id, source.name).set(now)
        log(
            "signals-read",
            provider=self.provider_id,
            source=source.name,
            offerings=len(offerings),
            signals=len(signals),
        )

    def _fresh_until(
        self,
        source: SignalSource,
        offerings: Sequence[Offering],
        stored: Collection[OfferingSignal],
        interval_s: float,
    ) -> float:
        """Until when what is known of these offerings from this source is fresh: by the
        newest stored value of the source (another replica's read counts), unless an offering
        wanted now was never asked about (a new pool's) by this process or any."""
        mine = [s for s in stored if s.source == source.name]
        if not mine:
            return 0.0
        covered = {s.offering for s in mine} | self._read.get(source.name, frozenset())
        if any(o not in covered for o in offerings):
            return 0.0
        newest = max(s.observed_at for s in mine)
        return _epoch(newest) + interval_s

    def _failed(
        self, source: SignalSource, error: BaseException, now: float, interval_s: float
    ) -> None:
        reason = failure_reason(error)
        SIGNAL_FETCH_FAILURES.labels(self.provider_id, source.name, reason).inc()
        self._next_at[source.name] = now + min(self._retry_s, interval_s)
        log(
            "signal-fetch-failed",
            logging.WARNING,
            provider=self.provider_id,
            source=source.name,
            reason=reason,
            error=f"{type(error).__name__}: {error}"[:ERROR_TEXT_MAX],
            retry_in_s=round(min(self._retry_s, interval_s), 1),
        )


def _epoch(moment: datetime) -> float:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
