from datetime import UTC, datetime, timedelta

import pytest

from wm.model import CloudInstance, WorkerRecord, WorkerState
from wm.scan_diff import diff

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
OLD = NOW - timedelta(hours=1)
R, U, S, X = WorkerState.REQUESTED, WorkerState.RUNNING, WorkerState.STOPPING, WorkerState.STOPPED


def row(worker_id="w1", state=R, created=OLD, cloud_id="c1", pool="p", **kw) -> WorkerRecord:
    return WorkerRecord(
        worker_id=worker_id,
        pool_id=pool,
        worker_group="r",
        provider_id="prov",
        state=state,
        capacity=1,
        launch_config_id="lc",
        created=created,
        last_modified=created,
        idempotency_token="t",
        cloud_id=cloud_id,
        **kw,
    )


def vm(worker_id="w1", state=U, cloud_id="c1", **kw) -> CloudInstance:
    return CloudInstance(worker_id=worker_id, cloud_id=cloud_id, region="r", state=state, **kw)


def run(instances, rows, registration=True, **kw):
    return diff(instances, rows, now=NOW, requires_registration={"p": registration}, **kw)


@pytest.mark.parametrize(
    ("scenario", "row_state", "cloud_state", "registration", "to_state"),
    [
        ("booting stays requested", R, R, True, None),
        ("running cloud waits for registration", R, U, True, None),
        ("running cloud is running without registration", R, U, False, U),
        ("pre-empted while booting", R, X, True, S),
        ("died while running", U, X, True, S),
        ("cloud shutting it down", U, S, True, S),
        ("we are deleting it; the cloud still runs it", S, U, True, None),
        ("running stays running", U, U, True, None),
    ],
)
def test_state_changes(scenario, row_state, cloud_state, registration, to_state):
    result = run([vm(state=cloud_state, reason="preempted")], [row(state=row_state)], registration)
    changed = [(c.from_state, c.to_state) for c in result.changes]
    assert changed == ([] if to_state is None else [(row_state, to_state)]), scenario
    assert result.seen == ("w1",)


def test_a_stopped_cloud_state_is_deleted_and_keeps_the_clouds_reason():
    result = run([vm(state=X, reason="preempted")], [row(state=U)])
    assert [c.reason for c in result.changes] == ["preempted"]
    assert [r.worker_id for r in result.to_terminate] == ["w1"]


def test_rows_being_deleted_are_deleted_again_until_gone():
    result = run([vm(state=U)], [row(state=S)])
    assert [r.worker_id for r in result.to_terminate] == ["w1"]


def test_an_intent_learns_its_cloud_id_from_the_list():
    result = run([vm(state=R, cloud_id="c9")], [row(cloud_id=None)])
    assert [(c.worker_id, c.cloud_id) for c in result.changes] == [("w1", "c9")]


def test_ec2_instances_match_by_batch_and_launch_index():
    rows = [
        row("w1", cloud_id=None, batch_token="b", launch_index=0),
        row("w2", cloud_id=None, batch_token="b", launch_index=1),
    ]
    instances = [vm(None, R, "i-2", batch_token="b", launch_index=1)]
    # Both intents were seen long ago with no pass running: their creates are surely sent.
    result = run(instances, rows, intents_free_since={"w1": OLD, "w2": OLD})
    assert [(c.worker_id, c.cloud_id) for c in result.changes] == [("w2", "i-2")]
    assert [r.worker_id for r in result.missing] == ["w1"]


def test_a_row_missing_from_the_list_is_looked_up_only_past_the_grace():
    fresh = row("w2", created=NOW - timedelta(seconds=5))
    result = run([], [row("w1"), fresh], missing_grace=timedelta(seconds=30))
    assert [r.worker_id for r in result.missing] == ["w1"]


def test_a_row_being_deleted_and_no_longer_listed_is_looked_up_at_once():
    just_removed = row("w1", state=S, created=NOW - timedelta(seconds=5))
    result = run([], [just_removed], missing_grace=timedelta(seconds=30))
    assert [r.worker_id for r in result.missing] == ["w1"]


def test_a_young_row_an_earlier_scan_saw_is_looked_up_at_once():
    seen = row("w1", created=NOW - timedelta(seconds=5), last_checked=NOW - timedelta(seconds=1))
    never_listed = row("w2", created=NOW - timedelta(seconds=5))
    result = run([], [seen, never_listed], missing_grace=timedelta(seconds=30))
    assert [r.worker_id for r in result.missing] == ["w1"]


def test_stopped_rows_are_never_missing():
    assert run([], [row(state=X)]).missing == ()


def test_orphans_are_instances_without_a_live_row_past_the_grace():
    old_orphan = vm("w-old", cloud_id="c-old", launched_at=NOW - timedelta(minutes=10))
    young_orphan = vm("w-young", cloud_id="c-young", launched_at=NOW - timedelta(seconds=10))
    stopped_row = vm("w-stopped", cloud_id="c-s", launched_at=OLD)
    result = run(
        [old_orphan, young_orphan, stopped_row],
        [row("w-stopped", state=X, cloud_id="c-s")],
        orphan_grace=timedelta(minutes=5),
    )
    assert sorted(o.cloud_id for o in result.orphans) == ["c-old", "c-s"]


def test_an_orphan_without_a_launch_time_waits_from_when_it_was_first_seen():
    instance = vm("w-x", cloud_id="c-x")
    young = run([instance], [], first_seen={"c-x": NOW - timedelta(seconds=1)})
    old = run([instance], [], first_seen={"c-x": NOW - timedelta(hours=1)})
    assert (young.orphans, [o.cloud_id for o in old.orphans]) == ((), ["c-x"])


def test_a_pre_emption_is_marked_on_the_change_that_stops_the_worker():
    result = run(
        [vm("w1", X, "c1", reason="spot", preempted=True), vm("w2", X, "c2", reason="died")],
        [row("w1", U, cloud_id="c1"), row("w2", U, cloud_id="c2")],
    )
    assert {(c.worker_id, c.preempted) for c in result.changes} == {("w1", True), ("w2", False)}


def test_a_row_already_stopping_is_not_pre_empted_again():
    result = run([vm(state=X, preempted=True)], [row(state=S)])
    assert result.changes == ()


@pytest.mark.parametrize(
    ("scenario", "row_state", "cloud_state", "already", "first_seen_running"),
    [
        ("booted, waiting for registration", R, U, False, True),
        ("registered before any scan saw it", U, U, False, True),
        ("seen running before", R, U, True, False),
        ("still booting", R, R, False, False),
        ("being deleted", S, U, False, False),
    ],
)
def test_the_first_scan_that_sees_a_vm_run_says_so(
    scenario, row_state, cloud_state, already, first_seen_running
):
    stamped = {"cloud_running_at": OLD} if already else {}
    result = run([vm(state=cloud_state)], [row(state=row_state, **stamped)])
    assert bool(result.cloud_running) is first_seen_running, scenario


GRACE = timedelta(minutes=2)  # the gate's longest retry sequence


@pytest.mark.parametrize(
    ("scenario", "written_ago", "unanswered_ago", "free_ago", "in_flight", "looked_up"),
    [
        ("its pass ended longer ago than any retry sequence", 3, None, 3, False, True),
        ("its pass still runs, however old", 3, None, 3, True, False),
        ("its pass ended less than a retry sequence ago", 1, None, 1, False, False),
        ("old, but its answer was given up on a moment ago", 3, 1, 3, False, False),
        ("given up on longer ago than a retry sequence", 5, 3, 3, False, True),
        # A pass that waited its turn (rate limit, budget) before sending, then died: the row
        # is old, but the create may have left just before the claim was seen free.
        ("written long ago, its pool first seen free a moment ago", 5, None, 1, False, False),
        ("never yet seen with its pool free", 5, None, None, False, False),
    ],
)
def test_an_intent_whose_create_may_be_in_flight_is_never_looked_up(
    scenario, written_ago, unanswered_ago, free_ago, in_flight, looked_up
):
    unanswered = None if unanswered_ago is None else NOW - timedelta(minutes=unanswered_ago)
    intent = row(
        created=NOW - timedelta(minutes=written_ago), cloud_id=None, unanswered_at=unanswered
    )
    free_since = {} if free_ago is None else {"w1": NOW - timedelta(minutes=free_ago)}
    found = run(
        [],
        [intent],
        missing_grace=timedelta(0),
        intent_grace=GRACE,
        in_flight_pools={"p"} if in_flight else set(),
        intents_free_since=free_since,
    )
    assert (found.missing == (intent,)) is looked_up, scenario
    # Until it is looked up its create may be in flight, and no deadline may end it.
    assert found.in_flight == (() if looked_up else ("w1",)), scenario


def test_a_listed_intent_is_not_in_flight_its_vm_is_there():
    intent = row(cloud_id=None)
    found = run([vm()], [intent], in_flight_pools={"p"})
    assert (found.in_flight, found.seen) == ((), ("w1",))


def test_the_intent_grace_holds_back_only_intents():
    # A row with a cloud id that the list no longer shows is looked up past the missing grace.
    launched = row(created=NOW - timedelta(minutes=1), cloud_id="c1")
    found = run([], [launched], missing_grace=timedelta(0), intent_grace=GRACE)
    assert found.missing == (launched,)
