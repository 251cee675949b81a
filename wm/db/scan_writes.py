"""The scanner's writes of worker rows (wm/db/worker_writes.py holds the rules every writer of
`workers` follows): the diff's changes in one statement per transition kind, what listings ask
rows to keep, the stamps a scan sets once, and the expiry of long-stopped rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Engine,
    Integer,
    Text,
    any_,
    bindparam,
    case,
    column,
    delete,
    func,
    update,
    values,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB

from wm.db.arrays import ids_array
from wm.db.tables import workers
from wm.db.worker_writes import guard
from wm.db.workers import worker_from_row
from wm.model import WorkerRecord, WorkerState
from wm.workers.transitions import (
    CHECKED,
    CLOUD_RUNNING,
    DELETE_CALLED,
    EXPIRE,
    RECORD,
    RowChange,
    Transition,
)

# --- the scanner --------------------------------------------------------------------------------


def apply_changes(
    engine: Engine,
    changes: Sequence[RowChange],
    read: Mapping[str, WorkerRecord] | None = None,
) -> list[WorkerRecord]:
    """One statement for all changes; a row changed since it was read is left alone. Raises
    `TransitionRefused`, writing nothing, when any change leaves a state the table does not
    allow. Returns the rows that did change, as they are now.

    `read`: the rows as the caller read them, by worker id. Each changed row is then that row
    with what may have moved since (`_MOVED`) as the statement returns it, not the whole row
    read again: a fleet's first scan changes every row, and would otherwise hold each twice,
    its provider data decoded twice."""
    if not changes:
        return []
    targets = [c.to_state for c in changes]  # checks every change before anything is written
    # One array a column, unnested: a statement of 10,000 changes compiles as one of 1 (a
    # VALUES list would be compiled anew with 8 bound parameters a change, most of a scan's
    # CPU in SQLAlchemy's compiler).
    data = _unnest(
        "changes",
        ("worker_id", Text, [c.worker_id for c in changes]),
        ("version", Integer, [c.version for c in changes]),
        ("from_state", Text, [c.from_state.value for c in changes]),
        ("state", Text, [target.value for target in targets]),
        ("cloud_id", Text, [c.cloud_id for c in changes]),
        ("reason", Text, [c.reason for c in changes]),
        ("preempted", Boolean, [c.preempted for c in changes]),
        ("tc_worker_id", Text, [c.tc_worker_id for c in changes]),
        ("refused", Text, [c.refused for c in changes]),
    )
    statement = (
        update(workers)
        .where(
            workers.c.worker_id == data.c.worker_id,
            workers.c.version == data.c.version,
            # Each from-state was checked against the table above; the row must still be in it.
            workers.c.state == data.c.from_state,
        )
        .values(
            state=data.c.state,
            cloud_id=func.coalesce(workers.c.cloud_id, data.c.cloud_id),
            # Kept once known: a VM's workerId never changes.
            tc_worker_id=func.coalesce(workers.c.tc_worker_id, data.c.tc_worker_id),
            stop_reason=func.coalesce(data.c.reason, workers.c.stop_reason),
            launch_refused=func.coalesce(data.c.refused, workers.c.launch_refused),
            preempted_at=case(
                (data.c.preempted, func.coalesce(workers.c.preempted_at, func.now())),
                else_=workers.c.preempted_at,
            ),
            last_checked=func.now(),
            last_modified=func.now(),
            version=workers.c.version + 1,
        )
    )
    if read is None:
        with engine.begin() as conn:
            return [worker_from_row(row) for row in conn.execute(statement.returning(*workers.c))]
    with engine.begin() as conn:
        moved = conn.execute(statement.returning(*_MOVED_COLUMNS))
        times: dict[datetime, datetime] = {}
        return [_moved_over(read[row[0]], row, times) for row in moved]


# What a change of `apply_changes` can find moved in a row it matched by version and state:
# what it writes (and the state trigger stamps), and what other writers change without a new
# version (advice, task claims, the scan's own stamps). Provider data is written without a
# new version only by the scan of the row's unit (RECORD), which holds that unit's claim and
# passes rows read after its own writes: it cannot have moved.
_MOVED = ("worker_id", "state", "version", "cloud_id", "tc_worker_id", "stop_reason")
_MOVED += ("preempted_at", "last_checked", "last_modified", "stopping_at", "stopped_at")
_MOVED += ("should_terminate", "last_active", "first_claimed_at", "cloud_running_at")
_MOVED += ("delete_called_at", "launch_refused")
_MOVED_COLUMNS = tuple(workers.c[name] for name in _MOVED)


def _moved_over(row: WorkerRecord, moved: Any, times: dict[datetime, datetime]) -> WorkerRecord:
    """`row` with the `_MOVED` columns of it a statement returned (by position: about three
    times quicker than `dataclasses.replace`, once a changed row). A value that did not move
    stays the object `row` holds, and the times the statement stamped (its now(), the same on
    every row) are held once (`times`), not once a row."""
    values = list(_RECORD_VALUES(row))
    for position, value in zip(_MOVED_POSITIONS, moved, strict=True):
        if value != values[position]:
            values[position] = times.setdefault(value, value) if type(value) is datetime else value
    values[_STATE_POSITION] = WorkerState(values[_STATE_POSITION])
    return WorkerRecord(*values)


_RECORD_FIELDS = tuple(f.name for f in fields(WorkerRecord))
_RECORD_VALUES = attrgetter(*_RECORD_FIELDS)
_MOVED_POSITIONS = tuple(_RECORD_FIELDS.index(name) for name in _MOVED)
_STATE_POSITION = _RECORD_FIELDS.index("state")


def _unnest(name: str, *columns: tuple[str, Any, Sequence[Any]]) -> Any:
    """A derived table of these columns (name, SQL type, values, all of one length) from one
    array parameter each: `unnest(:a, :b) AS name(a, b)`."""
    arrays = [
        bindparam(f"{name}_{column_name}", list(items), type_=ARRAY(sql_type))
        for column_name, sql_type, items in columns
    ]
    return (
        func.unnest(*arrays)
        .table_valued(*(column(column_name, sql_type) for column_name, sql_type, _ in columns))
        .render_derived(name=name)
    )


def record_provider_data(
    engine: Engine, records: Sequence[tuple[str, Mapping[str, Any]]]
) -> list[WorkerRecord]:
    """RECORD: merge each (worker id, data) over its row's provider data, top-level keys
    replaced, in one statement. Stopped rows are left alone. The version is not moved: this
    changes no state, so it never makes another writer's conditional change fail. Returns the
    rows written, as they are now."""
    if not records:
        return []
    data = values(column("worker_id", Text), column("data", JSONB), name="records").data(
        [(worker_id, dict(found)) for worker_id, found in records]
    )
    statement = (
        update(workers)
        .where(workers.c.worker_id == data.c.worker_id, guard(RECORD))
        .values(provider_data=workers.c.provider_data.op("||")(data.c.data))
        .returning(*workers.c)
    )
    with engine.begin() as conn:
        return [worker_from_row(row) for row in conn.execute(statement)]


@dataclass(frozen=True, slots=True)  # a fleet's first scan stamps one a row
class Stamped:
    """A row a stamp was written on, as far as its stages go: its pool, and every point a
    stage is read from (wm/workers/stages.py's POINTS), as they are now. Not the whole row: a scan
    stamps every VM it first sees running, and only observes their stages."""

    worker_id: str
    pool_id: str
    demand_at: datetime | None
    created: datetime | None
    accepted_at: datetime | None
    booted_at: datetime | None
    cloud_running_at: datetime | None
    registered_at: datetime | None
    first_claimed_at: datetime | None
    stopping_at: datetime | None
    delete_called_at: datetime | None
    stopped_at: datetime | None


_STAMPED = tuple(workers.c[name] for name in Stamped.__slots__)


def mark_cloud_running(engine: Engine, worker_ids: Sequence[str]) -> list[Stamped]:
    """CLOUD_RUNNING: the cloud runs these workers' VMs: stamp the first time a scan saw it.
    Returns the rows stamped now (each row once, ever)."""
    return _stamp_once(engine, CLOUD_RUNNING, worker_ids, workers.c.cloud_running_at)


def mark_delete_called(engine: Engine, worker_ids: Sequence[str]) -> list[Stamped]:
    """DELETE_CALLED: a delete was sent for these workers' VMs: stamp the first one. Returns
    the rows stamped now (each row once, ever)."""
    return _stamp_once(engine, DELETE_CALLED, worker_ids, workers.c.delete_called_at)


def _stamp_once(
    engine: Engine, transition: Transition, worker_ids: Sequence[str], stamp: Column
) -> list[Stamped]:
    if not worker_ids:
        return []
    with engine.begin() as conn:
        rows = conn.execute(
            update(workers)
            .where(
                workers.c.worker_id == any_(ids_array(worker_ids)),
                guard(transition),
                stamp.is_(None),
            )
            .values({stamp.name: func.now()})
            .returning(*_STAMPED)
        )
        return [Stamped(*row) for row in rows]


def mark_checked(engine: Engine, worker_ids: Sequence[str]) -> None:
    """CHECKED: a scan saw these rows (one statement, nothing returned)."""
    if not worker_ids:
        return
    with engine.begin() as conn:
        conn.execute(
            update(workers)
            .where(workers.c.worker_id == any_(ids_array(worker_ids)), guard(CHECKED))
            .values(last_checked=func.now())
        )


def expire_stopped(engine: Engine, provider_id: str, older_than_s: float) -> int:
    """EXPIRE: forget stopped workers after the retention period; return how many."""
    with engine.begin() as conn:
        done = conn.execute(
            delete(workers).where(
                workers.c.provider_id == provider_id,
                guard(EXPIRE),
                workers.c.last_modified < func.now() - timedelta(seconds=older_than_s),
            )
        )
        return done.rowcount
