"""The writer of worker rows for the provisioner, the API and hand-made workers; its sibling
scan_writes.py writes what the scanner changes, and the take-over's wm/db/imported_workers.py
what `wm import` and an imported worker's first reregistration write: every INSERT, UPDATE and
DELETE on `workers` is in these three, with the guards here (`guard`, `moved`).

Each function makes one transition of wm/workers/transitions.py (or, for a batch, one per row),
refuses a transition from a state the table does not allow (`TransitionRefused`: nothing is
written), and guards the table's from-states in its WHERE clause too, so that a row another
process moved meanwhile is left alone rather than moved where the table does not lead. Rows
changed are returned as `WorkerRecord`s through the one row mapper. Batches stay batches: a
statement per transition kind, never one per row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    DateTime,
    Engine,
    Float,
    Insert,
    Text,
    Update,
    any_,
    bindparam,
    case,
    cast,
    column,
    delete,
    func,
    insert,
    literal,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert

from wm.db.arrays import ids_array
from wm.db.engine import one_statement
from wm.db.tables import launch_configs, worker_pools, workers
from wm.db.workers import LaunchOutcome, NewWorker, first_worker, worker_from_row
from wm.model import WorkerRecord
from wm.workers.transitions import (
    ACCEPT,
    ADVISE_STOP,
    AMEND,
    CHECK_IN,
    CREATE,
    LAPSE,
    MAKE,
    REFUSE,
    REGISTER,
    REMOVE,
    REREGISTER,
    STOP,
    TASK_CLAIMED,
    UNANSWERED,
    WITHDRAW,
    WITHDRAW_ADVICE,
    Outcome,
    Transition,
)


def guard(transition: Transition) -> ColumnElement[bool]:
    """The SQL guard: the row is in a state the table lets this transition leave."""
    return workers.c.state.in_(transition.from_values)


def moved(transition: Transition) -> dict[str, Any]:
    """What every state-moving transition writes besides its own columns: the state, and a
    new version, so a writer that read the row before this cannot overwrite it."""
    moved: dict[str, Any] = {"last_modified": func.now(), "version": workers.c.version + 1}
    to_state = transition.to_state
    # A transition that leads a row back to its only from-state need not write the state.
    if transition.outcome is Outcome.MOVE and transition.from_states != {to_state}:
        assert to_state is not None
        moved["state"] = to_state.value
    return moved


# --- the provisioner: intents and what the cloud answered ------------------------------------


def insert_intents(engine: Engine, intents: Sequence[NewWorker]) -> list[WorkerRecord]:
    """Commit intent rows in one statement, all or none."""
    if not intents:
        return []
    with engine.begin() as conn:
        return insert_intent_rows(conn, intents)


def insert_intent_rows(conn: Connection, intents: Sequence[NewWorker]) -> list[WorkerRecord]:
    """CREATE: insert intent rows in one statement, in the caller's transaction; return them."""
    if not intents:
        return []
    assert CREATE.to_state is not None
    # The database's clock, not this host's: every deadline is compared with now() there.
    expires = func.now() + bindparam("expires_in_s", type_=Float) * text("interval '1 second'")
    rows = conn.execute(
        insert(workers).values(expires=expires).returning(*workers.c),
        [
            {
                "worker_id": i.worker_id,
                "pool_id": i.pool_id,
                "worker_group": i.worker_group,
                "provider_id": i.provider_id,
                "state": CREATE.to_state.value,
                "capacity": i.capacity,
                "launch_config_id": i.launch_config_id,
                "idempotency_token": i.idempotency_token,
                "batch_token": i.batch_token,
                "launch_index": i.launch_index,
                "expires_in_s": i.expires_in_s,
                "demand_at": i.demand_at,
            }
            for i in intents
        ],
    )
    return [worker_from_row(row) for row in rows]


def _accept_statement():
    """ACCEPT a pass's creates, their answers as array parameters: the statement is built and
    compiled once (a VALUES list of the answers was a new statement at every pass: compiling it
    took 1.5 ms of CPU, while a pass of another cloud waited for the interpreter)."""
    launched = (
        func.unnest(
            bindparam("l_worker_ids", type_=ARRAY(Text)),
            bindparam("l_cloud_ids", type_=ARRAY(Text)),
            bindparam("l_provider_data", type_=ARRAY(Text)),  # JSON objects as text
            bindparam("l_tc_worker_ids", type_=ARRAY(Text)),
        )
        .table_valued(
            column("worker_id", Text),
            column("cloud_id", Text),
            column("provider_data", Text),
            column("tc_worker_id", Text),
        )
        .render_derived(name="launched")
    )
    return (
        update(workers)
        .where(workers.c.worker_id == launched.c.worker_id, guard(ACCEPT))
        .values(
            cloud_id=launched.c.cloud_id,
            tc_worker_id=func.coalesce(launched.c.tc_worker_id, workers.c.tc_worker_id),
            provider_data=workers.c.provider_data.op("||")(cast(launched.c.provider_data, JSONB)),
            accepted_at=func.coalesce(workers.c.accepted_at, func.now()),
            **moved(ACCEPT),
        )
        .returning(*workers.c)
    )


def _refuse_statement():
    """REFUSE rows the cloud surely made nothing for, with their reasons: built once."""
    refused = (
        func.unnest(
            bindparam("r_worker_ids", type_=ARRAY(Text)),
            bindparam("r_reasons", type_=ARRAY(Text)),
            bindparam("r_refused", type_=ARRAY(Text)),
        )
        .table_valued(
            column("worker_id", Text), column("stop_reason", Text), column("refused", Text)
        )
        .render_derived(name="refused")
    )
    return (
        update(workers)
        .where(
            workers.c.worker_id == refused.c.worker_id,
            guard(REFUSE),
            # A row that holds a cloud id has a VM, whatever a create's answer said.
            workers.c.cloud_id.is_(None),
        )
        .values(
            stop_reason=refused.c.stop_reason,
            launch_refused=refused.c.refused,
            **moved(REFUSE),
        )
    )


_ACCEPT = _accept_statement()
_REFUSE = _refuse_statement()


def record_launches(engine: Engine, outcomes: Sequence[LaunchOutcome]) -> list[WorkerRecord]:
    """ACCEPT the creates that told their cloud ids (and Taskcluster workerIds), REFUSE the
    rows the cloud surely made nothing for, stamp the creates that went UNANSWERED (their VM
    may exist: a scan or the next pass adopts it by its tag), and WITHDRAW the intents whose
    create was never sent, in at most four statements. Returns the rows that learnt their
    cloud id now, as they are now."""
    if not outcomes:
        return []
    withdrawn = [o.worker_id for o in outcomes if o.withdrawn]
    outcomes = [o for o in outcomes if not o.withdrawn]
    created = [o for o in outcomes if o.cloud_id is not None]
    refused = [o for o in outcomes if o.cloud_id is None and o.stop_reason]
    unanswered = [o.worker_id for o in outcomes if o.cloud_id is None and not o.stop_reason]
    accepted: list[WorkerRecord] = []
    with engine.begin() as conn:
        if withdrawn:
            # No create left wm for these: no VM can exist, so no row is needed to find one.
            conn.execute(
                delete(workers).where(
                    workers.c.worker_id.in_(withdrawn),
                    guard(WITHDRAW),
                    workers.c.cloud_id.is_(None),
                )
            )
        if created:
            rows = conn.execute(
                _ACCEPT,
                {
                    "l_worker_ids": [o.worker_id for o in created],
                    "l_cloud_ids": [o.cloud_id for o in created],
                    "l_provider_data": [json.dumps(dict(o.provider_data)) for o in created],
                    "l_tc_worker_ids": [o.tc_worker_id for o in created],
                },
            )
            accepted = [worker_from_row(row) for row in rows]
        if refused:
            conn.execute(
                _REFUSE,
                {
                    "r_worker_ids": [o.worker_id for o in refused],
                    "r_reasons": [o.stop_reason for o in refused],
                    "r_refused": [o.refused for o in refused],
                },
            )
        if unanswered:
            conn.execute(
                update(workers)
                .where(
                    workers.c.worker_id.in_(unanswered),
                    guard(UNANSWERED),
                    workers.c.cloud_id.is_(None),
                )
                # A new version: a scan that read the row before this must not stop it.
                .values(unanswered_at=func.now(), **moved(UNANSWERED))
            )
    return accepted


def advise_scale_down(engine: Engine, flag: Sequence[str], unflag: Sequence[str]) -> None:
    """ADVISE_STOP these running workers and WITHDRAW_ADVICE from those, in every pool at
    once: at most two statements a pass however many pools, and none when the advice stands.
    Advice moves no version: it never makes a scan's conditional change fail."""
    if not flag and not unflag:
        return
    with engine.begin() as conn:
        for worker_ids, transition, advice in (
            (flag, ADVISE_STOP, True),
            (unflag, WITHDRAW_ADVICE, False),
        ):
            if worker_ids:
                conn.execute(
                    update(workers)
                    .where(workers.c.worker_id.in_(list(worker_ids)), guard(transition))
                    .values(should_terminate=advice)
                )


# --- the worker API ----------------------------------------------------------------------------


def register(
    engine: Engine,
    worker_id: str,
    secret_hash: str,
    timeout_s: float,
    booted_at: datetime | None = None,
) -> datetime | None:
    """REGISTER, once: of concurrent calls exactly one gets the new expiry (None: refused).

    `booted_at` is the worker's own word (systemBootTime): kept only within what wm knows,
    after the cloud accepted the create (or the row was written) and not after now."""
    boot = None
    if booted_at is not None:
        boot = func.least(
            func.greatest(
                literal(booted_at, DateTime(timezone=True)),
                func.coalesce(workers.c.accepted_at, workers.c.created),
            ),
            func.now(),
        )
    statement = (
        update(workers)
        .where(workers.c.worker_id == worker_id, guard(REGISTER), workers.c.expires > func.now())
        .values(
            registered_at=func.now(),
            booted_at=boot,
            last_active=func.now(),
            secret_hash=secret_hash,
            expires=func.now() + timedelta(seconds=timeout_s),
            **moved(REGISTER),
        )
        .returning(workers.c.expires)
    )
    with one_statement(engine) as conn:  # one UPDATE: its own transaction
        return conn.execute(statement).scalar_one_or_none()


@dataclass(frozen=True)
class Reregistered:
    expires: datetime  # of the new credentials
    provider_id: str  # the worker's


def reregister(
    engine: Engine,
    pool_id: str,
    worker_group: str,
    tc_worker_id: str,
    old_hash: str,
    new_hash: str,
    *,
    hand_made_providers: Sequence[str],
    hand_made_timeout_s: float,
) -> Reregistered | None:
    """REREGISTER the worker Taskcluster names: rotate the secret and extend the deadline,
    only with the current secret (None: refused, or no such registrable worker), in one
    statement: the worker found by its names (in its pool, with its launch config row, as
    registration finds it), its pool's timeout and the write together, one round trip.

    A worker of `hand_made_providers` (made by createWorker: its `expires` is its operator's)
    keeps its row's expiry and has its activity noted; its credentials last
    `hand_made_timeout_s`. Any other has its deadline moved to its pool's timeout from now."""
    hand_made = workers.c.provider_id == any_(ids_array(hand_made_providers))
    timeout_s = case(
        (hand_made, hand_made_timeout_s), else_=worker_pools.c.reregistration_timeout_s
    )
    renewed_until = func.now() + func.make_interval(0, 0, 0, 0, 0, 0, timeout_s)
    statement = (
        update(workers)
        .where(
            workers.c.pool_id == pool_id,
            workers.c.worker_group == worker_group,
            workers.c.tc_worker_id == tc_worker_id,
            worker_pools.c.pool_id == workers.c.pool_id,
            launch_configs.c.pool_id == workers.c.pool_id,
            launch_configs.c.launch_config_id == workers.c.launch_config_id,
            guard(REREGISTER),
            workers.c.secret_hash == old_hash,
            workers.c.expires > func.now(),
        )
        .values(
            secret_hash=new_hash,
            expires=case((hand_made, workers.c.expires), else_=renewed_until),
            last_active=case((hand_made, func.now()), else_=workers.c.last_active),
            **moved(REREGISTER),
        )
        .returning(renewed_until.label("expires"), workers.c.provider_id)
    )
    with one_statement(engine) as conn:  # one UPDATE: its own transaction
        row = conn.execute(statement).first()
    return None if row is None else Reregistered(row.expires, row.provider_id)


def request_removal(engine: Engine, worker_id: str, reason: str) -> bool:
    """REMOVE a live worker: to stopping; the scanner deletes its VM at its next scan. False:
    refused (not live)."""
    return _end_live(engine, worker_id, reason, REMOVE)


def _end_live(engine: Engine, worker_id: str, reason: str, transition: Transition) -> bool:
    """A live worker's removal (REMOVE, or STOP for one no cloud launched): its reason kept,
    its secret dropped. False: refused (not live)."""
    statement = (
        update(workers)
        .where(workers.c.worker_id == worker_id, guard(transition))
        .values(stop_reason=reason, secret_hash=None, **moved(transition))
    )
    with engine.begin() as conn:
        return conn.execute(statement).rowcount == 1


def note_task_claimed(conn: Connection, worker_id: str) -> None:
    """TASK_CLAIMED, in the caller's transaction (the claim's): the queue inactivity clock
    restarts. No new version: activity never makes a scan's conditional change fail."""
    conn.execute(
        update(workers)
        .where(workers.c.worker_id == worker_id, guard(TASK_CLAIMED))
        .values(
            last_active=func.now(),
            first_claimed_at=func.coalesce(workers.c.first_claimed_at, func.now()),
        )
    )


# --- workers no cloud launches (a static provider's) ---------------------------------------------


@dataclass(frozen=True)
class HandMadeWorker:
    """A worker createWorker makes: Taskcluster's names for it and what the body gave."""

    worker_id: str  # wm's key for it
    pool_id: str
    worker_group: str
    tc_worker_id: str  # Taskcluster's workerId, as createWorker named it
    provider_id: str
    launch_config_id: str
    capacity: int
    expires: datetime
    provider_data: Mapping[str, Any]  # its secret's hash, never the secret


def make_hand_made(engine: Engine, worker: HandMadeWorker) -> WorkerRecord | None:
    """MAKE: the row, running from the start (None: a worker of that name exists already,
    whatever its state: worker-manager's 409)."""
    assert MAKE.to_state is not None
    statement = (
        pg_insert(workers)
        .values(
            worker_id=worker.worker_id,
            pool_id=worker.pool_id,
            worker_group=worker.worker_group,
            tc_worker_id=worker.tc_worker_id,
            provider_id=worker.provider_id,
            state=MAKE.to_state.value,
            capacity=worker.capacity,
            launch_config_id=worker.launch_config_id,
            idempotency_token=worker.worker_id,  # no create call to make idempotent
            expires=worker.expires,
            provider_data=dict(worker.provider_data),
        )
        .on_conflict_do_nothing(index_elements=[workers.c.worker_id])
    )
    return _hand_made_written(engine, statement)


def amend_hand_made(
    engine: Engine,
    worker_id: str,
    expires: datetime,
    capacity: int,
    provider_data: Mapping[str, Any] | None,
) -> WorkerRecord | None:
    """AMEND: a new expiry and capacity, and with `provider_data` (a new secret's hash) that
    too; None: no such worker. An expiry in the past stops it at the next expiry pass."""
    values: dict[str, Any] = {"expires": expires, "capacity": capacity}
    if provider_data is not None:
        values["provider_data"] = workers.c.provider_data.op("||")(
            literal(dict(provider_data), JSONB)
        )
    statement = (
        update(workers)
        .where(workers.c.worker_id == worker_id, guard(AMEND))
        .values(**values, last_modified=func.now(), version=workers.c.version + 1)
    )
    return _hand_made_written(engine, statement)


def _hand_made_written(engine: Engine, statement: Insert | Update) -> WorkerRecord | None:
    """The row MAKE or AMEND wrote, in its own transaction (None: it wrote none)."""
    with engine.begin() as conn:
        return first_worker(conn, statement.returning(*workers.c))


def check_in(
    engine: Engine,
    worker_id: str,
    secret_hash: str,
    timeout_s: float,
    booted_at: datetime | None = None,
) -> datetime | None:
    """CHECK_IN: a running worker registers (again: a rack machine restarts). Its expiry is
    its operator's and stays; the answer is its credentials' expiry (None: refused, it is
    not running or its expiry passed)."""
    boot = None
    if booted_at is not None:
        boot = func.least(literal(booted_at, DateTime(timezone=True)), func.now())
    statement = (
        update(workers)
        .where(workers.c.worker_id == worker_id, guard(CHECK_IN), workers.c.expires > func.now())
        .values(
            registered_at=func.coalesce(workers.c.registered_at, func.now()),
            booted_at=func.coalesce(boot, workers.c.booted_at),
            last_active=func.now(),
            secret_hash=secret_hash,
            **moved(CHECK_IN),
        )
        .returning(func.now() + timedelta(seconds=timeout_s))
    )
    with one_statement(engine) as conn:  # one UPDATE: its own transaction
        return conn.execute(statement).scalar_one_or_none()


def stop_hand_made(engine: Engine, worker_id: str, reason: str) -> bool:
    """STOP a live worker at once: nothing in a cloud to delete, no scanner to wait for.
    False: refused (not live)."""
    return _end_live(engine, worker_id, reason, STOP)


def stop_lapsed(engine: Engine, provider_id: str) -> list[WorkerRecord]:
    """LAPSE: stop the provider's live workers whose `expires` passed; return them."""
    statement = (
        update(workers)
        .where(
            workers.c.provider_id == provider_id,
            guard(LAPSE),
            workers.c.expires <= func.now(),
        )
        .values(stop_reason="expired", secret_hash=None, **moved(LAPSE))
        .returning(*workers.c)
    )
    with engine.begin() as conn:
        return [worker_from_row(found) for found in conn.execute(statement)]
