"""The worker transitions table: where each change may start and where it leads."""

from __future__ import annotations

import pytest

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
    SCAN_SIGHTINGS,
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
    scan_sighting,
)

R, U, S, X = WorkerState.REQUESTED, WorkerState.RUNNING, WorkerState.STOPPING, WorkerState.STOPPED
GONE_ROW = "row deleted"
EVERY = {R: R, U: U, S: S, X: X}

# The lifecycle as written in DESIGN.md and the issue, one line per transition: from -> to.
EXPECTED: dict[Transition, dict[WorkerState | None, WorkerState | str]] = {
    CREATE: {None: R},
    ACCEPT: {R: R},
    UNANSWERED: {R: R},
    REFUSE: {R: X},
    WITHDRAW: {R: GONE_ROW},
    REGISTER: {R: U},
    REREGISTER: {U: U},
    REMOVE: {R: S, U: S},
    TASK_CLAIMED: EVERY,
    ADVISE_STOP: {U: U},
    WITHDRAW_ADVICE: {U: U},
    SEEN: {R: R, U: U, S: S},
    STARTED: {R: U},
    LOST: {R: S, U: S},
    DEADLINE: {R: S, U: S},
    GONE: {R: X, U: X, S: X},
    DELETED: {S: X},
    RECORD: {R: R, U: U, S: S},
    CLOUD_RUNNING: EVERY,
    DELETE_CALLED: EVERY,
    CHECKED: EVERY,
    EXPIRE: {X: GONE_ROW},
    # Workers no cloud launches (static): running from createWorker, stopped at once.
    MAKE: {None: U},
    AMEND: EVERY,
    CHECK_IN: {U: U},
    STOP: {R: X, U: X},
    LAPSE: {R: X, U: X},
    # Workers a legacy worker-manager launched (`wm import`): new rows in the state it gave.
    ADOPT_REQUESTED: {None: R},
    ADOPT_RUNNING: {None: U},
    ADOPT_STOPPING: {None: S},
    ADOPTED_REREGISTER: {R: U, U: U},
}
STATES: tuple[WorkerState | None, ...] = (None, *WorkerState)


def test_the_table_is_exactly_the_expected_transitions_with_distinct_names():
    assert set(TRANSITIONS) == set(EXPECTED)
    assert len({t.name for t in TRANSITIONS}) == len(TRANSITIONS)


@pytest.mark.parametrize(
    ("transition", "state"),
    [(t, s) for t in TRANSITIONS for s in STATES],
    ids=lambda c: c.name if isinstance(c, Transition) else str(c),
)
def test_each_transition_leads_where_the_table_says_and_nowhere_else(transition, state):
    expected = EXPECTED[transition]
    assert transition.allows(state) == (state in expected)
    if state is None:
        return  # no row: only CREATE, which `allows` covers
    if state not in expected:
        with pytest.raises(TransitionRefused, match=transition.name):
            transition.target(state)
        return
    after = transition.target(state)
    assert (GONE_ROW if after is None else after) == expected[state]


@pytest.mark.parametrize("transition", TRANSITIONS, ids=str)
def test_the_sql_guard_lists_exactly_the_allowed_from_states(transition):
    allowed = {s.value for s in EXPECTED[transition] if s is not None}
    assert set(transition.from_values) == allowed


def test_only_create_make_and_the_adoptions_insert_and_only_withdraw_and_expire_delete():
    inserts = [t for t in TRANSITIONS if t.outcome is Outcome.INSERT]
    assert inserts == [CREATE, MAKE, ADOPT_REQUESTED, ADOPT_RUNNING, ADOPT_STOPPING]
    assert [t for t in TRANSITIONS if t.outcome is Outcome.DELETE] == [WITHDRAW, EXPIRE]


# The scan's (row state, cloud state) -> new row state, as scan_diff held it before the table.
SCAN_BEFORE = {
    (R, R): R,
    (R, U): R,
    (R, S): S,
    (R, X): S,
    (U, R): U,
    (U, U): U,
    (U, S): S,
    (U, X): S,
    (S, R): S,
    (S, U): S,
    (S, S): S,
    (S, X): S,
}


@pytest.mark.parametrize(("states", "after"), SCAN_BEFORE.items(), ids=str)
def test_a_scan_sighting_leads_where_the_scan_always_led(states, after):
    row_state, cloud_state = states
    assert SCAN_SIGHTINGS[states].target(row_state) == after
    assert scan_sighting(row_state, cloud_state, requires_registration=True).target(row_state) == (
        after
    )


@pytest.mark.parametrize(
    ("row_state", "cloud_state", "registration", "transition"),
    [
        (R, U, False, STARTED),  # no registration: the cloud's word makes it running
        (R, U, True, SEEN),  # registration moves it, not the cloud
        (U, X, False, LOST),
        (S, U, False, SEEN),
    ],
)
def test_registration_decides_whether_a_running_vm_starts_its_row(
    row_state, cloud_state, registration, transition
):
    assert scan_sighting(row_state, cloud_state, registration) is transition


def test_a_stopped_rows_vm_is_no_sighting():
    with pytest.raises(KeyError):
        scan_sighting(X, U, True)


@pytest.mark.parametrize(
    ("transition", "state", "message"),
    [
        (REGISTER, X, "worker transition register is not allowed from a stopped row"),
        (DELETED, U, "worker transition deleted is not allowed from a running row"),
        (REFUSE, None, "worker transition refuse is not allowed from no row"),
    ],
    ids=str,
)
def test_a_refused_transition_says_which_and_from_where(transition, state, message):
    with pytest.raises(TransitionRefused) as refused:
        transition.target(state)
    assert str(refused.value) == message
    assert (refused.value.transition, refused.value.state) == (transition, state)
    assert isinstance(refused.value, ValueError)  # the writer's callers catch it as bad input


def test_a_transition_reads_as_its_name_and_says_why():
    assert [str(t) for t in (CREATE, SEEN, EXPIRE)] == ["create", "seen", "expire"]
    assert all(t.why for t in TRANSITIONS)


@pytest.mark.parametrize(
    ("from_state", "transition", "to_state"),
    [
        (WorkerState.REQUESTED, STARTED, WorkerState.RUNNING),
        (WorkerState.RUNNING, LOST, WorkerState.STOPPING),
        (WorkerState.REQUESTED, SEEN, WorkerState.REQUESTED),
        (WorkerState.RUNNING, SEEN, WorkerState.RUNNING),
    ],
)
def test_a_row_change_goes_where_the_table_leads_its_transition(from_state, transition, to_state):
    change = RowChange("w1", 3, from_state, transition, cloud_id="c1")
    assert change.to_state is to_state


def test_a_row_change_the_table_does_not_allow_is_refused_naming_both():
    change = RowChange("w1", 3, WorkerState.STOPPED, STARTED)
    with pytest.raises(TransitionRefused, match="started is not allowed from a stopped row"):
        _ = change.to_state
