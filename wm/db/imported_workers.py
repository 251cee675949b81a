"""The rows of workers imported from a legacy worker-manager (wm/take_over/marks.py): the rows
`wm import` adopts, an imported worker's first reregistration on its own credentials, and how
many imported workers remain. Only the take-over (wm/take_over/) calls these: a wm/db module of
its own, because SQL lives in wm/db (tests/unit/test_layout.py); remove it with the take-over.
wm/db/worker_writes.py holds the rules every writer of `workers` follows (`guard`, `moved`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Engine, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from wm.db.engine import one_statement
from wm.db.tables import workers
from wm.db.worker_writes import guard, moved
from wm.db.workers import worker_from_row
from wm.model import WorkerRecord, WorkerState
from wm.take_over.marks import IMPORTED_FROM
from wm.workers.transitions import ADOPTED_REREGISTER, ADOPTIONS


@dataclass(frozen=True)
class AdoptedWorker:
    """A worker as the legacy worker-manager's API showed it, under wm's key for it."""

    worker_id: str  # wm.take_over.marks.imported_worker_id
    pool_id: str
    worker_group: str
    tc_worker_id: str
    provider_id: str
    state: WorkerState  # requested, running or stopping: a stopped worker is not imported
    capacity: int
    launch_config_id: str
    created: datetime
    last_modified: datetime
    expires: datetime | None
    registered_at: datetime | None  # when it registered with worker-manager, if it did
    provider_data: Mapping[str, Any]  # wm.take_over.marks.IMPORTED_FROM and what the import learnt


def adopt_workers(conn: Connection, adopted: Sequence[AdoptedWorker]) -> list[WorkerRecord]:
    """ADOPT_*: one row per worker wm has no row for, in the state worker-manager gave it, in
    the caller's transaction (the import writes pools and workers at once). Workers it has a
    row for already are left as they are: a second import adds only what is new. Returns the
    rows written."""
    if not adopted:
        return []
    rows = []
    for worker in adopted:
        transition = ADOPTIONS[worker.state]  # KeyError: no transition imports that state
        assert transition.to_state is not None
        rows.append(
            {
                "worker_id": worker.worker_id,
                "pool_id": worker.pool_id,
                "worker_group": worker.worker_group,
                "tc_worker_id": worker.tc_worker_id,
                "provider_id": worker.provider_id,
                "state": transition.to_state.value,
                "capacity": worker.capacity,
                "launch_config_id": worker.launch_config_id,
                "idempotency_token": worker.worker_id,  # wm made no create call for it
                "created": worker.created,
                "last_modified": worker.last_modified,
                "expires": worker.expires,
                "registered_at": worker.registered_at,
                # wm has seen no claim by it yet, and the legacy API does not tell the queue's
                # lastDateActive: its queue inactivity clock starts when wm starts watching,
                # not at its registration (maybe days ago), which would stop it at once.
                "last_active": func.now(),
                "stopping_at": (
                    worker.last_modified if transition.to_state is WorkerState.STOPPING else None
                ),
                "provider_data": dict(worker.provider_data),
            }
        )
    statement = (
        pg_insert(workers)
        .values(rows)
        .on_conflict_do_nothing(index_elements=[workers.c.worker_id])
        .returning(*workers.c)
    )
    return [worker_from_row(row) for row in conn.execute(statement)]


def renew_imported(
    engine: Engine, worker_id: str, new_hash: str, timeout_s: float
) -> datetime | None:
    """ADOPTED_REREGISTER of a worker imported from a legacy worker-manager, on its own credentials
    (wm/take_over/registration.py): its first secret from wm, only
    while it holds none and its row says it was imported (None: refused). From then on the
    secret guard of `reregister` applies to it as to any other."""
    renewed_until = func.now() + timedelta(seconds=timeout_s)
    statement = (
        update(workers)
        .where(
            workers.c.worker_id == worker_id,
            guard(ADOPTED_REREGISTER),
            workers.c.secret_hash.is_(None),
            workers.c.provider_data.has_key(IMPORTED_FROM),
            workers.c.expires > func.now(),
        )
        .values(
            secret_hash=new_hash,
            expires=renewed_until,
            # One imported as requested registered with worker-manager after the import.
            registered_at=func.coalesce(workers.c.registered_at, func.now()),
            **moved(ADOPTED_REREGISTER),
        )
        .returning(renewed_until)
    )
    with one_statement(engine) as conn:  # one UPDATE: its own transaction
        return conn.execute(statement).scalar_one_or_none()


def imported_left(engine: Engine, provider_id: str | None) -> dict[str, int]:
    """How many live (not stopped) imported workers each provider (or only `provider_id`)
    still has, in one query; a provider with none is absent."""
    query = (
        select(workers.c.provider_id, func.count())
        .where(
            workers.c.provider_data.has_key(IMPORTED_FROM),
            workers.c.state != WorkerState.STOPPED,
        )
        .group_by(workers.c.provider_id)
    )
    if provider_id is not None:
        query = query.where(workers.c.provider_id == provider_id)
    with engine.connect() as conn:
        return {row[0]: int(row[1]) for row in conn.execute(query)}
