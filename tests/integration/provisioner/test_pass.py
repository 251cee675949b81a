"""The provisioning pass against real Postgres, with an in-memory provider."""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import replace

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import event, text

from tests.support.configs import build, raw
from tests.support.definitions import apply_pools
from tests.support.memory_provider import MemoryProvider, capacity_error, quota_error
from wm.config.launch_choice import LaunchChoiceConfig
from wm.db import claims, pool_errors, tasks
from wm.db import pools as pool_store
from wm.db.claims import pool_claim_key
from wm.db.workers import list_workers
from wm.errors import CloudError
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wm.scanning.scanner import Scanner
from wm.workers import stages

POOL = "proj/linux"


def sync(engine, data) -> None:
    apply_pools(engine, build(data), data["pools"], prune=True)


@pytest.fixture
def aws(engine):
    data = raw()
    data["pools"][0].update(max_capacity=100)
    sync(engine, data)
    return MemoryProvider("aws-a", ("us-east-1", "us-west-2"))


def provisioner(engine, *providers) -> Provisioner:
    return Provisioner(engine, BuiltinQueue(engine), {p.id: p for p in providers})


def test_fifty_pending_tasks_launch_fifty_workers_and_later_passes_launch_nothing(engine, aws):
    tasks.submit_tasks(engine, POOL, 50, 1.0)
    p = provisioner(engine, aws)
    (first,) = p.run_pass("aws-a")
    later = [p.run_pass("aws-a")[0] for _ in range(9)]
    assert (first.to_add, first.launched) == (50, 50)
    assert [r.launched for r in later] == [0] * 9
    assert len(aws.instances) == 50
    assert len(list_workers(engine, pool_id=POOL)) == 50


def test_intents_are_committed_before_the_cloud_is_called(engine, aws):
    tasks.submit_tasks(engine, POOL, 3, 1.0)
    seen_rows: list[int] = []
    original = aws.create

    def create_and_look(batch, answered):
        seen_rows.append(len(list_workers(engine, pool_id=POOL)))
        return original(batch, answered)

    aws.create = create_and_look
    provisioner(engine, aws).run_pass("aws-a")
    assert seen_rows and all(n == 3 for n in seen_rows)


def test_launch_configs_split_by_weight_and_record_cloud_ids(engine, aws):
    data = raw()
    data["pools"][0].update(max_capacity=100)
    data["pools"][0]["launch_configs"][0]["weight"] = 3.0
    sync(engine, data)
    tasks.submit_tasks(engine, POOL, 40, 1.0)
    provisioner(engine, aws).run_pass("aws-a")
    rows = list_workers(engine, pool_id=POOL)
    by_region = {g: sum(1 for w in rows if w.worker_group == g) for g in ("us-east-1", "us-west-2")}
    assert by_region == {"us-east-1": 30, "us-west-2": 10}
    assert all(w.cloud_id == f"i-{w.worker_id}" for w in rows)


def test_quota_failures_become_pool_errors_and_stopped_rows_not_a_crash(engine, aws):
    tasks.submit_tasks(engine, POOL, 10, 1.0)
    failing = next(lc for lc in pool_store.load_launch_configs(engine) if lc.region == "us-east-1")
    aws.fail_launch_configs[failing.launch_config_id] = quota_error("aws-a")
    (report,) = provisioner(engine, aws).run_pass("aws-a")
    assert report.failed == 5 and report.launched == 5
    errors = pool_errors.list_errors(engine, POOL)
    assert [(e.kind, e.launch_config_id) for e in errors] == [("quota", failing.launch_config_id)]
    stopped = [w for w in list_workers(engine, pool_id=POOL) if w.stop_reason]
    assert {w.stop_reason for w in stopped} == {"launch failed: quota InstanceLimitExceeded"}


def test_capacity_failures_are_filed_apart_from_quota_and_stop_their_rows(engine, aws):
    # Scenario: the cloud has none of one launch config's offering to spare.
    tasks.submit_tasks(engine, POOL, 10, 1.0)
    failing = next(lc for lc in pool_store.load_launch_configs(engine) if lc.region == "us-east-1")
    aws.fail_launch_configs[failing.launch_config_id] = capacity_error("aws-a")

    (report,) = provisioner(engine, aws).run_pass("aws-a")

    # A definite refusal, as a quota one: nothing made, the rows stopped, one pool error.
    assert report.failed == 5 and report.launched == 5
    errors = pool_errors.list_errors(engine, POOL)
    assert [(e.kind, e.launch_config_id) for e in errors] == [
        ("capacity", failing.launch_config_id)
    ]
    stopped = [w for w in list_workers(engine, pool_id=POOL) if w.stop_reason]
    assert {(w.stop_reason, w.launch_refused) for w in stopped} == {
        ("launch failed: capacity InsufficientInstanceCapacity", "capacity")
    }


def test_a_failing_config_gets_less_traffic_on_the_next_pass(engine, aws):
    failing = next(lc for lc in pool_store.load_launch_configs(engine) if lc.region == "us-east-1")
    aws.fail_launch_configs[failing.launch_config_id] = quota_error("aws-a")
    p = provisioner(engine, aws)
    tasks.submit_tasks(engine, POOL, 10, 1.0)
    p.run_pass("aws-a")
    tasks.submit_tasks(engine, POOL, 20, 1.0)
    p.run_pass("aws-a")
    second = aws.create_calls[2:]
    to_failing = sum(
        len(b.intents) for b in second if b.spec.launch_config_id == failing.launch_config_id
    )
    assert 0 < to_failing < 10


@pytest.mark.parametrize(("clock_speed", "demoted"), [(1.0, True), (60.0, False)])
def test_recent_errors_are_an_hour_of_the_clouds_time(engine, aws, clock_speed, demoted):
    # Scenario: a launch config's creates were refused two minutes ago; on a market running
    # 60 times faster, that is two hours of its time: no longer recent.
    failing = next(lc for lc in pool_store.load_launch_configs(engine) if lc.region == "us-east-1")
    aws.fail_launch_configs[failing.launch_config_id] = quota_error("aws-a")
    choice = LaunchChoiceConfig(clock_speed=clock_speed)
    p = Provisioner(engine, BuiltinQueue(engine), {aws.id: aws}, launch_choice=choice)
    tasks.submit_tasks(engine, POOL, 10, 1.0)
    p.run_pass("aws-a")
    with engine.begin() as conn:
        conn.execute(text("UPDATE worker_pool_errors SET reported = now() - interval '2 min'"))

    tasks.submit_tasks(engine, POOL, 20, 1.0)
    p.run_pass("aws-a")

    second = aws.create_calls[2:]
    to_failing = sum(
        len(b.intents) for b in second if b.spec.launch_config_id == failing.launch_config_id
    )
    assert (to_failing < 10) is demoted


def test_only_a_pass_that_launches_reads_the_recent_errors_and_pre_emptions(engine, aws):
    p = provisioner(engine, aws)
    read: list[str] = []

    def seen(conn, cursor, statement: str, *args) -> None:
        if "worker_pool_errors" in statement or "preempted_at >" in statement:
            read.append(statement.split()[0])

    event.listen(engine, "before_cursor_execute", seen)
    tasks.submit_tasks(engine, POOL, 2, 1.0)
    p.run_pass("aws-a")
    launching = len(read)
    p.run_pass("aws-a")  # the two workers meet the demand: nothing to launch

    assert launching == 2 and len(read) == 2  # errors, then pre-emptions; then nothing


def test_a_provider_that_raises_is_contained(engine, aws):
    aws.raise_on_create = RuntimeError("bug")
    tasks.submit_tasks(engine, POOL, 2, 1.0)
    (report,) = provisioner(engine, aws).run_pass("aws-a")
    assert report.failed == 2
    # Unclear failures keep the intent for recovery instead of guessing.
    assert {w.state.value for w in list_workers(engine, pool_id=POOL)} == {"requested"}


def test_intents_whose_creates_the_stopping_process_never_sent_are_withdrawn(engine, aws):
    # SIGTERM lands between the intents' commit and their creates: nothing is sent, and the
    # rows go with their intents instead of ending stopped as failed launches (the never-
    # registers scenario saw those stop before their registration deadline).
    tasks.submit_tasks(engine, POOL, 4, 1.0)
    p = provisioner(engine, aws)

    def stop_once_committed(conn, cursor, statement: str, *args) -> None:
        if statement.startswith("INSERT INTO workers"):
            p.stop.set()

    event.listen(engine, "after_cursor_execute", stop_once_committed)
    try:
        (report,) = p.run_pass("aws-a")
    finally:
        event.remove(engine, "after_cursor_execute", stop_once_committed)

    assert aws.create_calls == []
    assert (report.to_add, report.launched, report.failed, report.withdrawn) == (4, 0, 0, 4)
    assert list_workers(engine, pool_id=POOL) == []
    assert pool_errors.list_errors(engine, POOL) == []


def test_max_and_min_capacity_are_respected(engine):
    data = raw()
    data["pools"][0].update(max_capacity=7, min_capacity=2)
    sync(engine, data)
    aws = MemoryProvider("aws-a")
    p = provisioner(engine, aws)
    (idle,) = p.run_pass("aws-a")
    assert idle.launched == 2
    tasks.submit_tasks(engine, POOL, 100, 1.0)
    for _ in range(3):
        p.run_pass("aws-a")
        with engine.begin() as conn:  # the workers boot and register
            conn.execute(text("UPDATE workers SET state = 'running'"))
    assert len(aws.instances) == 7
    (full,) = p.run_pass("aws-a")
    assert (full.existing, full.launched) == (7, 0)


def test_a_pool_being_provisioned_elsewhere_is_skipped(engine, aws, db_url):
    tasks.submit_tasks(engine, POOL, 5, 1.0)
    with engine.connect() as other:
        other.execute(text("SELECT pg_advisory_lock(:k)"), {"k": pool_claim_key(POOL)})
        assert provisioner(engine, aws).run_pass("aws-a") == []
        other.execute(text("SELECT pg_advisory_unlock_all()"))
    assert aws.create_calls == []


def test_stale_intents_are_adopted_or_stopped(engine, aws):
    tasks.submit_tasks(engine, POOL, 4, 1.0)
    aws.raise_on_create = TimeoutError("the process died here")
    p = provisioner(engine, aws)
    p.run_pass("aws-a")
    # The cloud did make two of them before the "crash".
    made = [b for b in aws.create_calls]
    aws.raise_on_create = None
    for intent in made[0].intents[:2]:
        aws.create(type(made[0])(made[0].pool_id, made[0].spec, (intent,), made[0].batch_token))
    # The rows are old, but the dead process may have waited its turn (a rate limit, the
    # budget) and sent its create just before dying: a restarted process counts the gate's
    # longest retry sequence from its own first sight of them, under its own claim.
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE workers SET created = created - interval '2 minutes', "
                "unanswered_at = unanswered_at - interval '2 minutes'"
            )
        )
    aws.create_calls.clear()
    restarted = provisioner(engine, aws)
    # Read before the pass that first sees them: its sighting is no earlier than this.
    seen_at = time.monotonic()
    (first,) = restarted.run_pass("aws-a")
    assert first.recovered == 0
    report = first
    while report.recovered == 0 and time.monotonic() - seen_at < 10:
        (report,) = restarted.run_pass("aws-a")
    assert time.monotonic() - seen_at >= aws.gate.longest_call_s()
    p = restarted
    rows = {w.worker_id: w for w in list_workers(engine, pool_id=POOL)}
    adopted = [w for w in rows.values() if w.cloud_id]
    assert report.recovered == 4
    assert len(adopted) == 2 and all(w.state.value == "requested" for w in adopted)
    never = [w for w in rows.values() if w.stop_reason == "never created"]
    assert len(never) == 2
    # Once the adopted two run, the two that were never created are replaced, nothing more.
    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET state = 'running' WHERE cloud_id IS NOT NULL"))
    p.run_pass("aws-a")
    p.run_pass("aws-a")
    assert sum(len(b.intents) for b in aws.create_calls) == 2
    assert len(aws.instances) == 4


def test_a_moved_pool_drops_its_old_provider_once_drained(engine, aws):
    tasks.submit_tasks(engine, POOL, 1, 1.0)
    provisioner(engine, aws).run_pass("aws-a")
    data = raw()
    data["pools"][0]["provider"] = "gcp-a"
    data["pools"][0]["launch_configs"] = [
        {"region": "us-central1-a", "machine_type": "e2", "image": "i"}
    ]
    sync(engine, data)
    p = provisioner(engine, aws, MemoryProvider("gcp-a", ("us-central1-a",)))
    assert p.run_pass("aws-a") == []  # draining: no launches on the old provider
    pool = next(x for x in pool_store.load_pools(engine) if x.pool_id == POOL)
    assert pool.previous_provider_ids == ("aws-a",)
    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET state = 'stopped'"))
    p.run_pass("aws-a")
    pool = next(x for x in pool_store.load_pools(engine) if x.pool_id == POOL)
    assert pool.previous_provider_ids == ()


def test_two_replicas_at_once_launch_exactly_the_demand(engine, aws):
    tasks.submit_tasks(engine, POOL, 60, 1.0)
    barrier = threading.Barrier(2)
    reports = []

    def replica():
        barrier.wait()
        for _ in range(5):
            reports.extend(provisioner(engine, aws).run_pass("aws-a"))

    threads = [threading.Thread(target=replica) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(aws.instances) == 60
    assert sum(r.launched for r in reports) == 60


def test_tasks_that_arrive_while_a_pass_waits_on_its_creates_launch_in_that_pass(engine):
    data = raw()
    data["pools"] = [
        {**data["pools"][0], "id": pool_id, "max_capacity": 10} for pool_id in ("proj/a", "proj/b")
    ]
    sync(engine, data)
    aws = MemoryProvider("aws-a", ("us-east-1", "us-west-2"))
    a_out, release, b_created = threading.Event(), threading.Event(), threading.Event()
    original = aws.create

    def create(batch, answered):
        if batch.pool_id == "proj/a":
            a_out.set()
            assert release.wait(30), "the test never released proj/a's creates"
        else:
            b_created.set()
        return original(batch, answered)

    aws.create = create
    p = provisioner(engine, aws)
    tasks.submit_tasks(engine, "proj/a", 4, 1.0)
    reports: list = []
    passing = threading.Thread(target=lambda: reports.extend(p.run_pass("aws-a")))
    passing.start()
    try:
        assert a_out.wait(30), "proj/a's create was never sent"
        # proj/b's tasks come while proj/a's creates are out; the listener tells the pass.
        tasks.submit_tasks(engine, "proj/b", 3, 1.0)
        p.news("aws-a")
        assert b_created.wait(30), "proj/b waited for proj/a's creates"
    finally:
        release.set()
        passing.join(30)
    launched = {r.pool_id: (r.to_add, r.launched) for r in reports}
    assert launched == {"proj/a": (4, 4), "proj/b": (3, 3)}
    assert len(aws.instances) == 7
    # The next pass finds the demand met: nothing launched twice.
    assert sum(r.launched for r in p.run_pass("aws-a")) == 0


def test_a_vm_the_cloud_took_is_recorded_while_the_rest_of_its_batch_is_out(engine):
    # A batch of inserts or PUTs answers call by call (GCE, Azure): its first VM boots, and its
    # worker registers, while the batch's last call is still out (a budget wait, a slow cloud).
    # Its row must hold its cloud id and launch data by then, or the proof is refused.
    data = raw()
    data["pools"][0]["launch_configs"] = data["pools"][0]["launch_configs"][:1]
    sync(engine, data)
    aws = MemoryProvider("aws-a", ("us-east-1",))
    told, release = threading.Event(), threading.Event()
    original = aws.create
    first: list[str] = []

    def create(batch, answered):
        results = original(batch)
        first.append(results[0].worker_id)
        answered(results[0])  # the first call answered; the others are still out
        told.set()
        assert release.wait(30), "the test never let the batch's other calls answer"
        return results

    aws.create = create
    tasks.submit_tasks(engine, POOL, 3, 1.0)
    p = provisioner(engine, aws)
    passing = threading.Thread(target=lambda: p.run_pass("aws-a"))
    passing.start()
    try:
        assert told.wait(30), "the batch was never sent"

        def recorded() -> dict[str, str | None]:
            return {w.worker_id: w.cloud_id for w in list_workers(engine, pool_id=POOL)}

        deadline = time.monotonic() + 30
        while not recorded()[first[0]] and time.monotonic() < deadline:
            time.sleep(0.02)
        during = recorded()
    finally:
        release.set()
        passing.join(30)
    assert during[first[0]] == aws.instances[first[0]].cloud_id
    assert [cloud_id for w, cloud_id in during.items() if w != first[0]] == [None, None]
    assert all(recorded().values())  # and the rest once they answered


def test_news_while_a_pass_has_no_creates_out_is_left_to_the_next_pass(engine, aws):
    p = provisioner(engine, aws)
    p.news("aws-a")  # before the pass: its own read covers it
    tasks.submit_tasks(engine, POOL, 2, 1.0)
    (report,) = p.run_pass("aws-a")
    assert (report.to_add, report.launched) == (2, 2)
    p.news("aws-a")
    (report,) = p.run_pass("aws-a")
    assert (report.to_add, report.launched) == (0, 0)


def test_scale_down_advice_for_many_pools_is_written_in_at_most_two_statements(engine):
    data = raw()
    data["pools"] = [
        {**data["pools"][0], "id": f"proj/linux-{n}", "max_capacity": 10} for n in range(20)
    ]
    sync(engine, data)
    aws = MemoryProvider("aws-a", ("us-east-1", "us-west-2"))
    p = provisioner(engine, aws)
    for pool in data["pools"]:
        tasks.submit_tasks(engine, pool["id"], 3, 1.0)
    p.run_pass("aws-a")
    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET state = 'running'"))
        conn.execute(text("DELETE FROM tasks"))  # the demand is gone: every worker is surplus
    writes = AdviceWrites(engine)

    writes.during(lambda: p.run_pass("aws-a"))
    flagged = [w for w in list_workers(engine) if w.should_terminate]
    writes.during(lambda: p.run_pass("aws-a"))  # the advice stands
    for pool in data["pools"]:
        tasks.submit_tasks(engine, pool["id"], 3, 1.0)  # the demand is back
    writes.during(lambda: p.run_pass("aws-a"))

    assert len(flagged) == 60
    assert not any(w.should_terminate for w in list_workers(engine))
    assert writes.per_pass == [1, 0, 1]


class AdviceWrites:
    """UPDATE statements that set should_terminate, counted per provisioning pass."""

    def __init__(self, engine) -> None:
        self.per_pass: list[int] = []
        self._count = 0
        event.listen(engine, "before_cursor_execute", self._seen)

    def during(self, run_pass) -> None:
        self._count = 0
        run_pass()
        self.per_pass.append(self._count)

    def _seen(self, conn, cursor, statement: str, *args) -> None:
        if statement.startswith("UPDATE workers SET should_terminate"):
            self._count += 1


def test_a_held_pool_claim_is_visible_to_others_without_taking_it(engine, aws):
    with claims.claim_provider_pools(engine, "aws-a") as claim:
        assert claim.pool_ids == (POOL,)
        assert claims.held_pool_claims(engine, [POOL, "proj/other"]) == {POOL}
        # Looking did not take it: the holder keeps it, and a peer still finds it busy.
        with claims.claim_provider_pools(engine, "aws-a") as peer:
            assert peer.pool_ids == ()
    assert claims.held_pool_claims(engine, [POOL]) == set()


def test_a_scan_leaves_alone_an_intent_whose_pass_is_still_running(engine, aws):
    tasks.submit_tasks(engine, POOL, 1, 1.0)
    aws.raise_on_create = TimeoutError("no answer")
    provisioner(engine, aws).run_pass("aws-a")
    (intent,) = list_workers(engine, pool_id=POOL)
    assert intent.unanswered_at is not None and intent.state.value == "requested"
    with engine.begin() as conn:  # long past any retry sequence
        conn.execute(
            text(
                "UPDATE workers SET created = created - interval '1 hour', "
                "unanswered_at = unanswered_at - interval '1 hour'"
            )
        )
    scanner = Scanner(engine, {aws.id: aws}, missing_grace_s=0)
    region = intent.worker_group
    with claims.claim_provider_pools(engine, "aws-a"):  # a pass of the pool runs meanwhile
        scanner.scan(aws.id, region)
    (row,) = list_workers(engine, pool_id=POOL)
    assert row.state.value == "requested"
    # The pass is over: from the first scan that sees its claim free, the gate's longest
    # retry sequence later, its create surely went nowhere.
    seen_free = time.monotonic()
    scanner.scan(aws.id, region)
    while (row := list_workers(engine, pool_id=POOL)[0]).state.value == "requested":
        assert time.monotonic() - seen_free < 10, "the intent was never looked up"
        scanner.scan(aws.id, region)
    assert time.monotonic() - seen_free >= aws.gate.longest_call_s()
    assert (row.state.value, row.stop_reason) == ("stopped", "gone-from-cloud")


def test_a_scan_writes_what_a_listing_asks_a_row_to_keep_before_telling_the_provider(engine, aws):
    # Scenario: two workers; the cloud's listing asks one row to keep something (as Azure's
    # asks a row to keep what an ARM deployment made, before the deployment is deleted).
    tasks.submit_tasks(engine, POOL, 2, 1.0)
    provisioner(engine, aws).run_pass("aws-a")
    keeper, other = sorted(aws.instances)
    region = aws.instances[keeper].region
    aws.instances[keeper] = replace(
        aws.instances[keeper], record={"made": ["disk-1"], "vmId": "v-1"}
    )
    held_when_told: list[dict[str, object]] = []

    def told(instances) -> None:
        rows = {w.worker_id: w for w in list_workers(engine, pool_id=POOL)}
        held_when_told.append({i.worker_id: rows[i.worker_id].provider_data for i in instances})

    aws.on_recorded = told
    scanner = Scanner(engine, {aws.id: aws}, missing_grace_s=0)

    scanner.scan(aws.id, region)
    scanner.scan(aws.id, region)

    # Outcome: merged over the row's own data; the provider told only once the row held it,
    # at every scan (what it could not act on at one, it acts on at the next); the other row
    # untouched.
    rows = {w.worker_id: w for w in list_workers(engine, pool_id=POOL)}
    assert rows[keeper].provider_data["made"] == ["disk-1"]
    assert rows[keeper].provider_data["vmId"] == "v-1"
    assert "made" not in rows[other].provider_data
    assert [list(h) for h in held_when_told] == [[keeper], [keeper]]
    assert all(h[keeper]["made"] == ["disk-1"] for h in held_when_told)
    # A stopped row is never written.
    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET state = 'stopped'"))
    aws.instances[keeper] = replace(aws.instances[keeper], record={"made": ["disk-2"]})
    scanner.scan(aws.id, region)
    (row,) = [w for w in list_workers(engine, pool_id=POOL) if w.worker_id == keeper]
    assert row.provider_data["made"] == ["disk-1"]


def test_an_intent_past_its_deadline_waits_for_its_create_before_it_is_deleted(engine, aws):
    # A create slower than the registration timeout (a loaded machine, a slow cloud): a scan
    # meanwhile must not "delete" a VM that does not exist yet and stop the row, leaving the
    # VM the create then makes running with nothing to own it.
    tasks.submit_tasks(engine, POOL, 1, 1.0)
    scanner = Scanner(engine, {aws.id: aws})
    create = aws.create
    during = []

    def slow_create(batch, answered):
        with engine.begin() as conn:  # its registration deadline passes during the create
            conn.execute(text("UPDATE workers SET expires = now() - interval '1 second'"))
        for region in aws.regions:
            scanner.scan(aws.id, region)
        during.extend((w.state.value, w.stop_reason) for w in list_workers(engine, pool_id=POOL))
        return create(batch, answered)

    aws.create = slow_create
    provisioner(engine, aws).run_pass("aws-a")
    assert during == [("requested", None)]
    (launched,) = list_workers(engine, pool_id=POOL)
    assert launched.cloud_id is not None and launched.worker_id in aws.instances

    for region in aws.regions:  # the create answered: its deadline applies at once
        scanner.scan(aws.id, region)
    (row,) = list_workers(engine, pool_id=POOL)
    assert (row.state.value, row.stop_reason) == ("stopped", "registration-timeout")
    assert aws.instances == {}


def test_launch_latencies_in_the_metrics_are_the_rows_stages(engine, aws):
    # Scenario: tasks wait, then one pass launches a worker per task.
    def observed(stage: str) -> tuple[float, float]:
        labels = {"pool": POOL, "provider": "aws-a", "stage": stage}
        count = REGISTRY.get_sample_value("wm_worker_stage_seconds_count", labels) or 0.0
        total = REGISTRY.get_sample_value("wm_worker_stage_seconds_sum", labels) or 0.0
        return count, total

    tasks.submit_tasks(engine, POOL, 3, 1.0)
    before = {s: observed(s) for s in ("pending_to_requested", "requested_to_accepted")}

    provisioner(engine, aws).run_pass("aws-a")

    # Outcome: what /metrics observed is what wm/workers/stages.py computes from the rows (which
    # `wm status` summarises): every intent's wait, and the acceptance of every launched one.
    rows = list_workers(engine, pool_id=POOL)
    for stage, (count, total) in before.items():
        expected = [stages.durations(r, [stage]).get(stage) for r in rows]
        expected = [s for s in expected if s is not None]
        after_count, after_total = observed(stage)
        assert after_count - count == len(expected) == 3, stage
        assert after_total - total == pytest.approx(sum(expected)), stage


def test_a_paused_provider_gets_no_new_intents(engine, aws):
    tasks.submit_tasks(engine, POOL, 3, 1.0)

    def no_answer() -> None:
        raise TimeoutError("the cloud keeps failing")

    # The cloud keeps failing until the gate pauses the provider.
    while not aws.gate.paused:
        with contextlib.suppress(CloudError):
            aws.gate.call("DescribeInstances", no_answer)

    (report,) = provisioner(engine, aws).run_pass("aws-a")

    assert report.to_add == 3 and report.launched == 0
    assert list_workers(engine, pool_id=POOL) == []  # no rows written only to be stopped
    assert aws.create_calls == []
