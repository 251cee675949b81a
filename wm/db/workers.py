"""Worker rows: the one row mapper, the records a write starts from, and the reads.

Every write is wm/db/worker_writes.py's: this module issues none."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, Integer, Interval, any_, bindparam, func, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql import Executable

from wm.db.arrays import ids_array, ids_param
from wm.db.engine import one_statement
from wm.db.filters import where_given
from wm.db.tables import workers
from wm.model import WorkerRecord, WorkerState

LIST_LIMIT = 10_000


def worker_from_row(row) -> WorkerRecord:
    # The names rows share are held once, not once a row (a scan holds a unit's live rows).
    return WorkerRecord(
        worker_id=row.worker_id,
        pool_id=sys.intern(row.pool_id),
        worker_group=sys.intern(row.worker_group),
        provider_id=sys.intern(row.provider_id),
        state=WorkerState(row.state),
        capacity=row.capacity,
        launch_config_id=sys.intern(row.launch_config_id),
        created=row.created,
        last_modified=row.last_modified,
        idempotency_token=row.idempotency_token,
        last_checked=row.last_checked,
        expires=row.expires,
        registered_at=row.registered_at,
        cloud_id=row.cloud_id,
        batch_token=row.batch_token,
        launch_index=row.launch_index,
        provider_data=row.provider_data,
        stop_reason=row.stop_reason,
        version=row.version,
        last_active=row.last_active,
        should_terminate=row.should_terminate,
        demand_at=row.demand_at,
        accepted_at=row.accepted_at,
        cloud_running_at=row.cloud_running_at,
        first_claimed_at=row.first_claimed_at,
        stopping_at=row.stopping_at,
        delete_called_at=row.delete_called_at,
        stopped_at=row.stopped_at,
        preempted_at=row.preempted_at,
        unanswered_at=row.unanswered_at,
        tc_worker_id=row.tc_worker_id,
        booted_at=row.booted_at,
        launch_refused=row.launch_refused,
    )


def first_worker(conn: Connection, statement: Executable) -> WorkerRecord | None:
    """The one worker a statement selects or returns (its first row), None when there is none."""
    row = conn.execute(statement).first()
    return worker_from_row(row) if row else None


def list_workers(
    engine: Engine,
    *,
    pool_id: str | None = None,
    state: WorkerState | None = None,
    limit: int | None = LIST_LIMIT,  # None: every row
) -> list[WorkerRecord]:
    query = select(workers).order_by(workers.c.created, workers.c.worker_id).limit(limit)
    query = where_given(
        query,
        (workers.c.pool_id, pool_id),
        (workers.c.state, state.value if state is not None else None),
    )
    with engine.connect() as conn:
        return [worker_from_row(row) for row in conn.execute(query)]


@dataclass(frozen=True)
class NewWorker:
    """An intent row: written and committed before the cloud is called."""

    worker_id: str
    pool_id: str
    worker_group: str
    provider_id: str
    capacity: int
    launch_config_id: str
    idempotency_token: str
    batch_token: str
    launch_index: int
    expires_in_s: float  # registration deadline from now
    demand_at: datetime | None = None  # when the oldest pending task it is launched for arrived


@dataclass(frozen=True)
class LaunchOutcome:
    """What the provisioner learnt about one intent from the cloud."""

    worker_id: str
    cloud_id: str | None
    provider_data: Mapping[str, Any]
    stop_reason: str | None = None  # set when the cloud surely made nothing: row -> stopped
    refused: str | None = None  # the class of the cloud's refusal, when it refused the create
    tc_worker_id: str | None = None  # Taskcluster's workerId for the VM, when the cloud named it
    # Its create was never sent (the process stopped first): no VM, no worker; the row goes.
    withdrawn: bool = False


@dataclass(frozen=True)
class PoolCapacity:
    requested: int = 0
    running: int = 0
    stopping: int = 0
    by_launch_config: Mapping[str, int] = field(default_factory=dict)  # non-stopped capacity

    @property
    def existing(self) -> int:
        """Capacity of requested and running workers (what the estimator calls existing)."""
        return self.requested + self.running


# A provisioning pass's reads, built once (wm/db/arrays.py: ids_param).
_CAPACITY = (
    select(
        workers.c.pool_id,
        workers.c.launch_config_id,
        workers.c.state,
        func.sum(workers.c.capacity),
    )
    .where(workers.c.pool_id == any_(ids_param("pool_ids")), workers.c.state != WorkerState.STOPPED)
    .group_by(workers.c.pool_id, workers.c.launch_config_id, workers.c.state)
)
_RUNNING_TOTALS = (
    select(
        workers.c.pool_id,
        func.sum(workers.c.capacity),
        func.count().filter(workers.c.capacity <= 0),
        func.array_agg(workers.c.worker_id).filter(workers.c.should_terminate),
    )
    .where(workers.c.pool_id == any_(ids_param("pool_ids")), workers.c.state == WorkerState.RUNNING)
    .group_by(workers.c.pool_id)
)
_UNRESOLVED_INTENTS = select(workers).where(
    workers.c.pool_id == any_(ids_param("pool_ids")),
    workers.c.provider_id == bindparam("provider_id"),
    workers.c.state == WorkerState.REQUESTED,
    workers.c.cloud_id.is_(None),
)
_LIVE_POOLS = (
    select(workers.c.pool_id)
    .where(
        workers.c.pool_id == any_(ids_param("pool_ids")),
        workers.c.provider_id == bindparam("provider_id"),
        workers.c.state != WorkerState.STOPPED,
    )
    .distinct()
)
_PREEMPTIONS = (
    select(workers.c.pool_id, workers.c.launch_config_id, func.count())
    .where(
        workers.c.pool_id == any_(ids_param("pool_ids")),
        workers.c.preempted_at > func.now() - bindparam("window", type_=Interval),
    )
    .group_by(workers.c.pool_id, workers.c.launch_config_id)
)


def capacity_by_pool(engine: Engine, pool_ids: Sequence[str]) -> dict[str, PoolCapacity]:
    """Non-stopped capacity per pool, by state and by launch config, in one query."""
    totals: dict[str, dict[WorkerState, int]] = {p: {} for p in pool_ids}
    by_lc: dict[str, dict[str, int]] = {p: {} for p in pool_ids}
    with one_statement(engine) as conn:
        rows = conn.execute(_CAPACITY, {"pool_ids": list(pool_ids)})
        for pool_id, lc_id, state, capacity in rows:
            key = WorkerState(state)
            totals[pool_id][key] = totals[pool_id].get(key, 0) + int(capacity)
            by_lc[pool_id][lc_id] = by_lc[pool_id].get(lc_id, 0) + int(capacity)
    return {
        pool_id: PoolCapacity(
            requested=totals[pool_id].get(WorkerState.REQUESTED, 0),
            running=totals[pool_id].get(WorkerState.RUNNING, 0),
            stopping=totals[pool_id].get(WorkerState.STOPPING, 0),
            by_launch_config=by_lc[pool_id],
        )
        for pool_id in pool_ids
    }


@dataclass(frozen=True)
class RunningTotals:
    """A pool's running workers in aggregate, as scale-down advice starts from them."""

    capacity: int
    zero_capacity: int  # running workers of capacity 0 or less (they spare nothing)
    advised: frozenset[str]  # the running workers advised to terminate now


@dataclass(frozen=True)
class NewestWorker:
    """A running worker, as scale-down advice reads it (wm.workers.lifecycle.Running)."""

    worker_id: str
    capacity: int
    created: datetime


@dataclass(frozen=True)
class RunningSnapshot:
    """Reads of the running workers that agree with each other: one snapshot of the database
    (REPEATABLE READ), so the newest workers read are counted in the totals read before them.
    Otherwise a worker stopped between the two reads would leave the totals too high, and the
    advice would take its pool below the target."""

    _conn: Connection

    def totals(self, pool_ids: Sequence[str]) -> dict[str, RunningTotals]:
        """Running capacity per pool, in one aggregate: pools without running workers are
        left out (no worker to advise, nor to stop advising)."""
        rows = self._conn.execute(_RUNNING_TOTALS, {"pool_ids": list(pool_ids)})
        return {
            pool_id: RunningTotals(int(capacity), zero, frozenset(advised or ()))
            for pool_id, capacity, zero, advised in rows
        }

    def newest(self, counts: Mapping[str, int]) -> dict[str, list[NewestWorker]]:
        """Each pool's `counts[pool]` newest running workers, in one query (none is read of a
        pool not named). Newest is the advice's order: created, then worker id, both
        descending; ids compare by code point (COLLATE "C"), as Python compares them, since
        the intents of one batch share their `created`."""
        if not counts:
            return {}
        wanted = (
            func.unnest(
                ids_array(list(counts)),
                bindparam(None, list(counts.values()), type_=ARRAY(Integer)),
            )
            .table_valued("pool_id", "n")
            .render_derived(name="wanted")
        )
        newest = (
            select(workers.c.pool_id, workers.c.worker_id, workers.c.capacity, workers.c.created)
            .where(workers.c.pool_id == wanted.c.pool_id, workers.c.state == WorkerState.RUNNING)
            .order_by(workers.c.created.desc(), workers.c.worker_id.collate("C").desc())
            .limit(wanted.c.n)
            .lateral("newest")
        )
        found: dict[str, list[NewestWorker]] = {pool_id: [] for pool_id in counts}
        for row in self._conn.execute(select(newest).select_from(wanted.join(newest, true()))):
            found[row.pool_id].append(NewestWorker(row.worker_id, row.capacity, row.created))
        return found


@contextlib.contextmanager
def running_snapshot(engine: Engine) -> Iterator[RunningSnapshot]:
    repeatable = {"isolation_level": "REPEATABLE READ"}
    with engine.connect().execution_options(**repeatable) as conn, conn.begin():
        yield RunningSnapshot(conn)


def unresolved_intents(
    engine: Engine, pool_ids: Sequence[str], provider_id: str
) -> list[WorkerRecord]:
    """Intent rows whose create never returned a cloud id (a crash, or an unclear failure)."""
    params = {"pool_ids": list(pool_ids), "provider_id": provider_id}
    with one_statement(engine) as conn:
        return [worker_from_row(row) for row in conn.execute(_UNRESOLVED_INTENTS, params)]


def live_pools_on_provider(engine: Engine, pool_ids: Sequence[str], provider_id: str) -> set[str]:
    """Which of these pools still have non-stopped workers on this provider."""
    params = {"pool_ids": list(pool_ids), "provider_id": provider_id}
    with one_statement(engine) as conn:
        return set(conn.execute(_LIVE_POOLS, params).scalars())


PREEMPTION_WINDOW = timedelta(hours=1)


def recent_preemption_counts(
    engine: Engine, pool_ids: Sequence[str], window: timedelta = PREEMPTION_WINDOW
) -> dict[tuple[str, str], int]:
    """Workers the cloud took back per (pool, launch config) within the window."""
    params = {"pool_ids": list(pool_ids), "window": window}
    with one_statement(engine) as conn:
        return {(pool, lc): n for pool, lc, n in conn.execute(_PREEMPTIONS, params)}


def existing_worker_ids(conn: Connection, worker_ids: Sequence[str]) -> set[str]:
    """Which of these worker ids have a row, whatever its state (`wm import`: a worker it
    wrote once is not written again), in the caller's transaction."""
    if not worker_ids:
        return set()
    query = select(workers.c.worker_id).where(workers.c.worker_id.in_(list(worker_ids)))
    return {row.worker_id for row in conn.execute(query)}
