import select
import time

import pytest

from tests.support.configs import build, raw
from tests.support.definitions import apply_pools
from tests.support.fake_taskcluster import FakeQueue
from wm.db import tasks as task_store
from wm.errors import QueueUnavailable
from wm.queues import QueueCounts, build_queue
from wm.queues.builtin import BuiltinQueue
from wm.queues.taskcluster import TaskclusterQueue

POOLS = ["proj/linux", "proj/gce"]


def taskcluster_queue(fake: FakeQueue, **env) -> TaskclusterQueue:
    config = build(
        raw(queue={"source": "taskcluster", "task_queue_prefix": "wm-"}),
        environ={"TASKCLUSTER_ROOT_URL": fake.root_url, **env},
    )
    return TaskclusterQueue.from_config(config)


def test_builtin_counts_pending_and_claimed_per_pool(engine):
    queue = BuiltinQueue(engine)
    task_store.submit_tasks(engine, "proj/linux", 5, 1.0)
    queue.claim("proj/linux", "w1", limit=2)

    counts = queue.counts(POOLS)

    first = task_store.list_tasks(engine, pool_id="proj/linux")[0]
    assert counts == {
        "proj/linux": QueueCounts(3, 2, first.created),
        "proj/gce": QueueCounts(0, 0),
    }


def test_builtin_release_puts_a_lost_workers_tasks_back_and_wakes_provisioners(engine):
    queue = BuiltinQueue(engine)
    task_store.submit_tasks(engine, "proj/linux", 4, 1.0)
    queue.claim("proj/linux", "lost", limit=2)
    queue.claim("proj/linux", "alive", limit=1)
    raw_conn = engine.raw_connection()
    try:
        raw_conn.set_isolation_level(0)
        raw_conn.cursor().execute(f"LISTEN {task_store.TASKS_CHANNEL}")

        assert queue.release(["lost", "never-existed"]) == 2

        deadline = time.monotonic() + 5
        while not raw_conn.notifies and time.monotonic() < deadline:
            select.select([raw_conn.driver_connection], [], [], 0.1)
            raw_conn.driver_connection.poll()
        assert [n.payload for n in raw_conn.notifies] == ["proj/linux"]
    finally:
        raw_conn.close()
    counts = queue.counts(["proj/linux"])["proj/linux"]
    assert (counts.pending, counts.claimed) == (3, 1)
    assert {t.claimed_by for t in task_store.list_tasks(engine, state="claimed")} == {"alive"}
    assert queue.release([]) == 0


def test_builtin_claims_never_hand_one_task_to_two_workers(engine):
    queue = BuiltinQueue(engine)
    task_store.submit_tasks(engine, "proj/linux", 3, 1.0)
    first = queue.claim("proj/linux", "w1", limit=2)
    second = queue.claim("proj/linux", "w2", limit=2)
    assert len(first) == 2 and len(second) == 1
    assert not {t.task_id for t in first} & {t.task_id for t in second}
    assert queue.complete(first[0].task_id, "w1") is True
    assert queue.complete(second[0].task_id, "w1") is False  # not w1's task


def test_submitting_tasks_notifies_listeners(engine):
    raw_conn = engine.raw_connection()
    try:
        raw_conn.set_isolation_level(0)
        cursor = raw_conn.cursor()
        cursor.execute(f"LISTEN {task_store.TASKS_CHANNEL}")
        task_store.submit_tasks(engine, "proj/gce", 1, 0.0)
        deadline = time.monotonic() + 5
        while not raw_conn.notifies and time.monotonic() < deadline:
            select.select([raw_conn.driver_connection], [], [], 0.1)
            raw_conn.driver_connection.poll()
        assert [n.payload for n in raw_conn.notifies] == ["proj/gce"]
    finally:
        raw_conn.close()


def test_build_queue_picks_the_configured_source(engine):
    assert isinstance(build_queue(build(), engine), BuiltinQueue)
    with FakeQueue() as fake:
        config = build(
            raw(queue={"source": "taskcluster"}), environ={"TASKCLUSTER_ROOT_URL": fake.root_url}
        )
        assert isinstance(build_queue(config, engine), TaskclusterQueue)


def test_taskcluster_counts_every_pool_in_one_batch_call():
    with FakeQueue() as fake:
        fake.counts = {"wm-proj/linux": (12, 3)}
        counts = taskcluster_queue(fake).counts(POOLS)
    assert counts == {"proj/linux": QueueCounts(12, 3), "proj/gce": QueueCounts(0, 0)}
    assert fake.requests == ["POST /api/queue/v1/task-queues/counts"]


def test_taskcluster_falls_back_to_one_call_per_pool_without_the_batch_endpoint():
    with FakeQueue(batch_supported=False) as fake:
        fake.counts = {"wm-proj/gce": (4, 1)}
        queue = taskcluster_queue(fake)
        first = queue.counts(POOLS)
        queue.counts(POOLS)
    assert first == {"proj/linux": QueueCounts(0, 0), "proj/gce": QueueCounts(4, 1)}
    posts = [r for r in fake.requests if r.startswith("POST")]
    assert len(posts) == 1  # the batch is not tried again
    assert len(fake.requests) == 1 + 2 * len(POOLS)


def test_taskcluster_sends_credentials_from_the_environment():
    with FakeQueue() as fake:
        taskcluster_queue(
            fake, TASKCLUSTER_CLIENT_ID="wm/ci", TASKCLUSTER_ACCESS_TOKEN="very-secret"
        ).counts(POOLS)
    (header,) = fake.auth_headers
    assert header.startswith("Hawk ") and 'id="wm/ci"' in header
    assert "very-secret" not in header


def test_an_unreadable_queue_is_an_error_not_an_empty_queue():
    with FakeQueue(fail_with=500) as fake:
        queue = taskcluster_queue(fake)
        with pytest.raises(QueueUnavailable) as caught:
            queue.counts(POOLS)
    assert "very-secret" not in str(caught.value)


def test_taskcluster_without_root_url_is_a_clear_error():
    config = build(raw(queue={"source": "taskcluster"}))
    with pytest.raises(QueueUnavailable, match="TASKCLUSTER_ROOT_URL"):
        TaskclusterQueue.from_config(config)


@pytest.fixture(autouse=True)
def synced_pools(engine):
    apply_pools(engine, build(), raw()["pools"])
