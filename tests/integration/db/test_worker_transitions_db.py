"""The transitions table walked on real Postgres through the one writer of worker rows.

For every transition and every state a row can be in (or no row at all): where the table
allows it, the writer makes it and the row ends where the table says; everywhere else the
writer refuses it (raises `TransitionRefused`, or writes nothing) and the row is as it was. A
scan's change that claims an allowed from-state for a row in another state is refused by the
SQL guard too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.exc import IntegrityError

from wm.db import imported_workers, scan_writes
from wm.db import worker_writes as writer
from wm.db.imported_workers import AdoptedWorker
from wm.db.tables import workers
from wm.db.worker_writes import HandMadeWorker
from wm.db.workers import LaunchOutcome, NewWorker
from wm.model import WorkerState
from wm.workers.transitions import (
    ACCEPT,
    ADOPT_REQUESTED,
    ADOPT_RUNNING,
    ADOPT_STOPPING,
    ADOPTED_REREGISTER,
    ADVISE_STOP,
    AMEND,
    CHECK_IN,
    CHECKED,
    CLOUD_RUNNING,
    CREATE,
    DEADLINE,
    DELETE_CALLED,
    DELETED,
    EXPIRE,
    GONE,
    LAPSE,
    LOST,
    MAKE,
    RECORD,
    REFUSE,
    REGISTER,
    REMOVE,
    REREGISTER,
    SEEN,
    STARTED,
    STOP,
    TASK_CLAIMED,
    TRANSITIONS,
    UNANSWERED,
    WITHDRAW,
    WITHDRAW_ADVICE,
    Outcome,
    RowChange,
    Transition,
    TransitionRefused,
)

POOL, LC, PROVIDER, REGION, WORKER = "proj/walk", "lc-1", "aws-walk", "us-east-1", "w-walk"
SECRET = "old-secret-hash"

INTENT = NewWorker(
    worker_id=WORKER,
    pool_id=POOL,
    worker_group=REGION,
    provider_id=PROVIDER,
    capacity=1,
    launch_config_id=LC,
    idempotency_token="token",
    batch_token=None,
    launch_index=0,
    expires_in_s=3600.0,
)


def _make(engine: Engine, _state: WorkerState) -> Any:
    with engine.connect() as conn:
        expires = conn.execute(text("SELECT now() + interval '1 hour'")).scalar_one()
    made = HandMadeWorker(
        worker_id=WORKER,
        pool_id=POOL,
        worker_group=REGION,
        tc_worker_id="rack-1",
        provider_id=PROVIDER,
        launch_config_id=LC,
        capacity=1,
        expires=expires,
        provider_data={"staticSecretSha256": "hash"},
    )
    return writer.make_hand_made(engine, made)


def _adopt(transition: Transition) -> Callable[[Engine, WorkerState], Any]:
    def adopt(engine: Engine, _state: WorkerState) -> Any:
        with engine.connect() as conn:
            now = conn.execute(text("SELECT now()")).scalar_one()
        assert transition.to_state is not None
        imported = AdoptedWorker(
            worker_id=WORKER,
            pool_id=POOL,
            worker_group=REGION,
            tc_worker_id="i-legacy",
            provider_id=PROVIDER,
            state=transition.to_state,
            capacity=1,
            launch_config_id=LC,
            created=now,
            last_modified=now,
            expires=now,
            registered_at=None,
            provider_data={"importedFrom": "https://tc.example.com"},
        )
        with engine.begin() as conn:
            return imported_workers.adopt_workers(conn, [imported])

    return adopt


def _renew_imported(engine: Engine, _state: WorkerState) -> Any:
    return imported_workers.renew_imported(engine, WORKER, "new-secret-hash", 3600.0)


def _amend(engine: Engine, _state: WorkerState) -> Any:
    with engine.connect() as conn:
        expires = conn.execute(text("SELECT now() + interval '2 hours'")).scalar_one()
    return writer.amend_hand_made(engine, WORKER, expires, 2, {"staticSecretSha256": "new"})


def _scan(transition: Transition) -> Callable[[Engine, WorkerState], Any]:
    def change(engine: Engine, state: WorkerState) -> Any:
        version = row(engine)["version"]
        return scan_writes.apply_changes(
            engine, [RowChange(WORKER, version, state, transition, cloud_id="i-walk")]
        )

    return change


def _reregister(engine: Engine) -> Any:
    """REREGISTER names its worker as Taskcluster does: pool, group and workerId."""
    found = row(engine)
    tc_worker_id = found["tc_worker_id"] if found else "no-such-worker"
    return writer.reregister(
        engine,
        POOL,
        REGION,
        tc_worker_id,
        SECRET,
        "new-secret-hash",
        hand_made_providers=[],
        hand_made_timeout_s=3600.0,
    )


def _task_claimed(engine: Engine, _state: WorkerState) -> None:
    with engine.begin() as conn:
        writer.note_task_claimed(conn, WORKER)


# How each transition is asked of the writer, for the one row of these tests.
DRIVERS: dict[Transition, Callable[[Engine, WorkerState], Any]] = {
    CREATE: lambda e, _s: writer.insert_intents(e, [INTENT]),
    ACCEPT: lambda e, _s: writer.record_launches(e, [LaunchOutcome(WORKER, "i-walk", {})]),
    UNANSWERED: lambda e, _s: writer.record_launches(e, [LaunchOutcome(WORKER, None, {})]),
    REFUSE: lambda e, _s: writer.record_launches(
        e, [LaunchOutcome(WORKER, None, {}, stop_reason="refused")]
    ),
    WITHDRAW: lambda e, _s: writer.record_launches(
        e, [LaunchOutcome(WORKER, None, {}, withdrawn=True)]
    ),
    REGISTER: lambda e, _s: writer.register(e, WORKER, "new-secret-hash", 3600.0),
    REREGISTER: lambda e, _s: _reregister(e),
    REMOVE: lambda e, _s: writer.request_removal(e, WORKER, "removed-by-operator"),
    TASK_CLAIMED: _task_claimed,
    ADVISE_STOP: lambda e, _s: writer.advise_scale_down(e, [WORKER], []),
    WITHDRAW_ADVICE: lambda e, _s: writer.advise_scale_down(e, [], [WORKER]),
    SEEN: _scan(SEEN),
    STARTED: _scan(STARTED),
    LOST: _scan(LOST),
    DEADLINE: _scan(DEADLINE),
    GONE: _scan(GONE),
    DELETED: _scan(DELETED),
    RECORD: lambda e, _s: scan_writes.record_provider_data(e, [(WORKER, {"deployment": "d-1"})]),
    CLOUD_RUNNING: lambda e, _s: scan_writes.mark_cloud_running(e, [WORKER]),
    DELETE_CALLED: lambda e, _s: scan_writes.mark_delete_called(e, [WORKER]),
    CHECKED: lambda e, _s: scan_writes.mark_checked(e, [WORKER]),
    EXPIRE: lambda e, _s: scan_writes.expire_stopped(e, PROVIDER, 60.0),
    MAKE: _make,
    AMEND: _amend,
    CHECK_IN: lambda e, _s: writer.check_in(e, WORKER, "new-secret-hash", 3600.0),
    STOP: lambda e, _s: writer.stop_hand_made(e, WORKER, "removed-by-operator"),
    LAPSE: lambda e, _s: writer.stop_lapsed(e, PROVIDER),
    ADOPT_REQUESTED: _adopt(ADOPT_REQUESTED),
    ADOPT_RUNNING: _adopt(ADOPT_RUNNING),
    ADOPT_STOPPING: _adopt(ADOPT_STOPPING),
    ADOPTED_REREGISTER: _renew_imported,
}
SCAN_CHANGES = {SEEN, STARTED, LOST, DEADLINE, GONE, DELETED}
STATES: tuple[WorkerState | None, ...] = (None, *WorkerState)
CASES = [(t, s) for t in TRANSITIONS for s in STATES]


def case_id(case: Any) -> str:
    if isinstance(case, Transition):
        return case.name
    return "no-row" if case is None else case.value


def row(engine: Engine) -> dict[str, Any] | None:
    with engine.connect() as conn:
        found = conn.execute(select(workers).where(workers.c.worker_id == WORKER)).first()
    return None if found is None else dict(found._mapping)


def given(engine: Engine, state: WorkerState | None, transition: Transition) -> None:
    """A pool and, unless `state` is None, the one row in `state`, as every guard other than
    the state would let it pass: no cloud id yet, its deadline ahead, its secret known,
    nothing stamped, last changed a day ago (for LAPSE, its expiry just passed)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO worker_pools (pool_id, provider_id, min_capacity, max_capacity,"
                " scaling_ratio, registration_timeout_s, reregistration_timeout_s,"
                " queue_inactivity_timeout_s, requires_registration)"
                " VALUES (:p, :prov, 0, 10, 1, 900, 3600, 7200, true)"
            ),
            {"p": POOL, "prov": PROVIDER},
        )
        conn.execute(
            text(
                "INSERT INTO launch_configs (pool_id, launch_config_id, region,"
                " capacity_per_worker, weight) VALUES (:p, :lc, :r, 1, 1)"
            ),
            {"p": POOL, "lc": LC, "r": REGION},
        )
    if state is None:
        return
    writer.insert_intents(engine, [INTENT])
    with engine.begin() as conn:  # the test's own SQL: it sets up, it does not transition
        conn.execute(
            text(
                "UPDATE workers SET state = :s, secret_hash = :secret,"
                " should_terminate = :advised, last_modified = now() - interval '1 day',"
                " expires = CASE WHEN :lapsed THEN now() - interval '1 minute' ELSE expires END"
                " WHERE worker_id = :w"
            ),
            {
                "s": state.value,
                "secret": SECRET,
                "advised": transition is WITHDRAW_ADVICE,
                "lapsed": transition is LAPSE,
                "w": WORKER,
            },
        )
        if transition is ADOPTED_REREGISTER:  # a row `wm import` wrote: imported, no secret
            conn.execute(
                text(
                    "UPDATE workers SET secret_hash = NULL,"
                    """ provider_data = '{"importedFrom": "https://tc.example.com"}'::jsonb"""
                    " WHERE worker_id = :w"
                ),
                {"w": WORKER},
            )


def test_every_transition_has_a_driver():
    assert set(DRIVERS) == set(TRANSITIONS)


@pytest.mark.parametrize(("transition", "state"), CASES, ids=case_id)
def test_the_writer_makes_what_the_table_allows_and_refuses_the_rest(
    engine: Engine, transition: Transition, state: WorkerState | None
):
    given(engine, state, transition)
    before = row(engine)

    refused = False
    try:
        if state is None and transition in SCAN_CHANGES:
            # No row to read a version from: the change names one that is not there.
            scan_writes.apply_changes(
                engine, [RowChange(WORKER, 1, WorkerState.REQUESTED, transition)]
            )
        else:
            DRIVERS[transition](engine, state)  # type: ignore[arg-type]
    except (TransitionRefused, IntegrityError):
        refused = True
    after = row(engine)

    if not transition.allows(state):
        assert after == before, f"{transition.name} from {state} wrote the row"
        return
    assert not refused
    if transition.outcome is Outcome.DELETE:
        assert after is None
        return
    assert after is not None and after != before
    expected = transition.to_state if state is None else transition.target(state)
    assert after["state"] == expected


@pytest.mark.parametrize(
    ("transition", "state"),
    [(t, s) for t in sorted(SCAN_CHANGES, key=str) for s in WorkerState if not t.allows(s)],
    ids=case_id,
)
def test_a_scan_change_claiming_a_state_the_row_is_not_in_writes_nothing(
    engine: Engine, transition: Transition, state: WorkerState
):
    # What a scan read is stale: the row moved to a state this transition may not leave.
    given(engine, state, transition)
    before = row(engine)
    assert before is not None
    claimed = min(transition.from_states)

    changed = scan_writes.apply_changes(
        engine, [RowChange(WORKER, before["version"], claimed, transition)]
    )

    assert changed == [] and row(engine) == before


@pytest.mark.parametrize(
    ("scenario", "state", "secret", "provider_data", "renewed"),
    [
        (
            "imported, running, no secret yet",
            WorkerState.RUNNING,
            None,
            {"importedFrom": "u"},
            True,
        ),
        (
            "imported, already has wm's secret",
            WorkerState.RUNNING,
            SECRET,
            {"importedFrom": "u"},
            False,
        ),
        ("launched by wm, no secret", WorkerState.RUNNING, None, {}, False),
        ("imported, stopping", WorkerState.STOPPING, None, {"importedFrom": "u"}, False),
        # Registered with worker-manager after the import read it as requested: its
        # credentials are worker-manager's word that it did.
        ("imported, requested", WorkerState.REQUESTED, None, {"importedFrom": "u"}, True),
    ],
)
def test_an_imported_worker_gets_its_first_secret_from_wm_once(
    engine: Engine, scenario, state, secret, provider_data, renewed
):
    given(engine, state, REREGISTER)
    with engine.begin() as conn:  # the test's own SQL: it sets up, it does not transition
        conn.execute(
            text(
                "UPDATE workers SET secret_hash = :secret, provider_data = CAST(:data AS jsonb)"
                " WHERE worker_id = :w"
            ),
            {"secret": secret, "data": json.dumps(provider_data), "w": WORKER},
        )
    before = row(engine)

    expires = imported_workers.renew_imported(engine, WORKER, "new-secret-hash", 3600.0)

    after = row(engine)
    assert (expires is not None) is renewed, scenario
    if renewed:
        assert after is not None and after["secret_hash"] == "new-secret-hash"
        assert after["state"] == "running" and after["version"] == before["version"] + 1
        assert after["registered_at"] is not None
    else:
        assert after == before, scenario


def full_row(engine: Engine) -> Any:
    from wm.db.workers import worker_from_row

    with engine.connect() as conn:
        return worker_from_row(
            conn.execute(select(workers).where(workers.c.worker_id == WORKER)).one()
        )


@pytest.mark.parametrize(
    ("transition", "state"),
    [(t, s) for t in sorted(SCAN_CHANGES, key=str) for s in WorkerState if t.allows(s)],
    ids=case_id,
)
def test_a_scan_change_over_the_rows_it_read_returns_them_as_they_are_now(
    engine: Engine, transition: Transition, state: WorkerState
):
    # Scenario: the scan read the row; then writers that move no version acted on it (advice,
    # a task claim, the scan's own stamps), and the scan changes it, giving the rows it read.
    given(engine, state, transition)
    read = full_row(engine)
    writer.advise_scale_down(engine, [WORKER], [])
    with engine.begin() as conn:
        writer.note_task_claimed(conn, WORKER)
    scan_writes.mark_cloud_running(engine, [WORKER])
    scan_writes.mark_delete_called(engine, [WORKER])
    scan_writes.mark_checked(engine, [WORKER])

    changed = scan_writes.apply_changes(
        engine,
        [RowChange(WORKER, read.version, state, transition, cloud_id="i-walk", reason="why")],
        {WORKER: read},
    )

    # Outcome: the row as the database now holds it, every column.
    assert changed == [full_row(engine)]


def test_a_stamped_row_carries_every_point_a_stage_is_read_from():
    from wm.workers.stages import POINTS

    fields = {f for names in POINTS.values() for f in names}
    assert fields <= set(scan_writes.Stamped.__slots__)
