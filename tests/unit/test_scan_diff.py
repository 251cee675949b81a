from datetime import UTC, datetime, timedelta

import pytest

from wm.model import CloudInstance, WorkerRecord, WorkerState
from wm.scanning.scan_diff import MISSING_GRACE, ORPHAN_GRACE, RowIndex, diff
from wm.workers.transitions import LOST, SEEN, STARTED

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


@pytest.mark.parametrize(
    ("scenario", "first"),
    [
        ("a legacy VM with no row", vm("p/r/i-9", U, "i-9", legacy=True)),
        ("a legacy VM the cloud already ended", vm("p/r/i-9", X, "i-9", legacy=True)),
        ("a VM with no row, past the orphan grace", vm("w-x", U, "c-x", launched_at=OLD)),
        ("a VM with no row, within the orphan grace", vm("w-x", U, "c-x", launched_at=NOW)),
    ],
)
def test_a_vm_without_a_row_listed_first_leaves_the_rest_of_the_listing_read(scenario, first):
    result = run([first, vm("w1", X, "c1", reason="died")], [row("w1", U, cloud_id="c1")])
    assert result.seen == ("w1",), scenario
    assert [(c.worker_id, c.to_state) for c in result.changes] == [("w1", S)], scenario


@pytest.mark.parametrize(
    ("scenario", "instance", "rows", "unadopted", "orphans"),
    [
        ("a live legacy VM with no row is reported, not deleted", U, [], ["i-9"], []),
        ("one a legacy manager already ended is no news", X, [], [], []),
        ("one whose imported row is done is reported again", U, [row("p/r/i-9", X)], ["i-9"], []),
    ],
)
def test_legacy_vms_are_never_orphans(scenario, instance, rows, unadopted, orphans):
    legacy_vm = vm("p/r/i-9", instance, "i-9", legacy=True, launched_at=OLD)
    result = run([legacy_vm], rows)
    assert [i.cloud_id for i in result.unadopted] == unadopted, scenario
    assert [i.cloud_id for i in result.orphans] == orphans, scenario


def test_the_graces_given_are_the_ones_applied():
    vm_two_minutes_old = vm("w-x", U, "c-x", launched_at=NOW - timedelta(minutes=2))
    row_ten_seconds_old = row("w-new", cloud_id="c-new", created=NOW - timedelta(seconds=10))
    by_default = run([vm_two_minutes_old], [row_ten_seconds_old])
    assert (by_default.orphans, by_default.missing) == ((), ())
    shorter = run(
        [vm_two_minutes_old],
        [row_ten_seconds_old],
        orphan_grace=timedelta(minutes=1),
        missing_grace=timedelta(seconds=5),
    )
    assert ([o.cloud_id for o in shorter.orphans], shorter.missing) == (
        ["c-x"],
        (row_ten_seconds_old,),
    )


def test_each_grace_ends_at_its_instant():
    orphan = vm("w-x", U, "c-x", launched_at=NOW - ORPHAN_GRACE)
    fresh = row("w-new", cloud_id="c-new", created=NOW - MISSING_GRACE)
    result = run([orphan], [fresh])
    assert ([o.cloud_id for o in result.orphans], result.missing) == (["c-x"], (fresh,))


def test_an_intent_is_looked_up_once_the_intent_grace_has_passed_exactly():
    intent = row(created=NOW - GRACE, cloud_id=None)
    found = run(
        [],
        [intent],
        missing_grace=timedelta(0),
        intent_grace=GRACE,
        intents_free_since={"w1": NOW - GRACE},
    )
    assert (found.missing, found.in_flight) == ((intent,), ())


def test_a_vm_known_only_by_its_cloud_id_matches_its_row():
    result = run([vm(None, X, "c1", reason="died")], [row("w1", U, cloud_id="c1")])
    assert result.seen == ("w1",)
    assert [(c.worker_id, c.transition) for c in result.changes] == [("w1", LOST)]


def test_a_pool_not_in_the_registration_map_requires_registration():
    result = diff([vm(state=U)], [row(state=R)], now=NOW, requires_registration={})
    assert result.changes == ()


@pytest.mark.parametrize(
    ("scenario", "known", "listed", "learns"),
    [
        ("the row learns the workerId the cloud shows", None, "tc-1", True),
        ("a workerId the row has already is no change", "tc-1", "tc-1", False),
        ("the cloud showing none is no change", None, None, False),
    ],
)
def test_a_row_learns_its_taskcluster_worker_id_from_the_list(scenario, known, listed, learns):
    result = run([vm(state=R, tc_worker_id=listed)], [row(state=R, tc_worker_id=known)])
    changes = [(c.transition, c.to_state, c.tc_worker_id, c.reason) for c in result.changes]
    assert changes == ([(SEEN, R, "tc-1", None)] if learns else []), scenario


def test_a_change_says_which_transition_makes_it_and_only_a_loss_keeps_the_reason():
    result = run(
        [vm("w1", U, "c1", reason="ignored"), vm("w2", X, "c2", reason="evicted")],
        [row("w1", R, cloud_id="c1"), row("w2", U, cloud_id="c2")],
        registration=False,
    )
    assert [(c.worker_id, c.transition, c.reason) for c in result.changes] == [
        ("w1", STARTED, None),
        ("w2", LOST, "evicted"),
    ]


def test_the_row_first_seen_running_is_the_one_reported():
    booted = row("w1", R, cloud_id="c1")
    assert run([vm("w1", U, "c1")], [booted]).cloud_running == (booted,)


def test_a_diff_once_applied_lets_go_of_its_changes_and_stamps_the_rows_as_they_are_now():
    read = row(state=R)
    found = run([vm(state=U, launched_at=OLD)], [read], registration=False)
    assert found.changes and found.cloud_running == (read,)
    now_running = row(state=U, version=read.version + 1)

    applied = found.applied({"w1": now_running})

    assert applied.changes == ()
    assert applied.cloud_running == (now_running,)
    assert (applied.seen, applied.missing, applied.orphans) == (found.seen, (), ())


def test_an_index_built_again_holds_the_rows_as_they_are_now():
    read, now = row(state=R), row(state=U, cloud_id="c2")
    index = RowIndex.of([read]).now_holding([now])
    assert (index.by_worker, index.by_cloud) == ({"w1": now}, {"c2": now})
