"""Hand-made machines join a static pool through `wm run web`, as the demo's rack does: the
operator applies the pool and makes each worker with createWorker (the real `taskcluster`
client), each machine's simulated worker-runner registers on its static provider with
`{staticSecret}`, renews, runs builtin-queue tasks, and exits when the operator retires it,
without removeWorker of its own. A machine with another secret is refused and runs nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import taskcluster
from sqlalchemy import Engine

from tests.support.stack import Stack, WmProcess
from wm.api.authn import OPERATOR_CLIENT
from wm.db import tasks as task_store
from wm.db.engine import make_engine
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings, run_in_thread
from wmsim.demo.rack import RACK_GROUP, Rack, StaticPool
from wmsim.hand_made import StaticProviderConfig, hand_made_worker, new_static_secret
from wmsim.postgres import free_port

OPERATOR_TOKEN = "operator-token-for-the-rack-test"
PROVIDER = "static-rack"
POOL = "proj-ci/macos-rack"
RENEW_S = 4  # the pool's reregistrationTimeout: the machines renew every second
FAST = AgentSettings(should_terminate_every_s=0.2, poll_s=0.05)
WEB_START_S = 60.0


@dataclass
class Web:
    root_url: str
    engine: Engine
    process: WmProcess

    def operator(self) -> Any:
        return taskcluster.WorkerManager(
            {
                "rootUrl": self.root_url,
                "maxRetries": 0,
                "credentials": {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN},
            }
        )


@pytest.fixture
def web(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Web]:
    """`wm run web` with one static provider and nothing else; the static pool applied by the
    operator through the API."""
    port = free_port()
    root_url = f"http://127.0.0.1:{port}"
    stack = Stack.write(
        tmp_path,
        db_url,
        [{"id": PROVIDER, "kind": "static"}],
        [],
        web={"port": port},
        root_url=root_url,
    )
    monkeypatch.setenv("WM_OPERATOR_TOKEN", OPERATOR_TOKEN)  # the process's environment
    process = stack.start("web")
    engine = make_engine(db_url, application_name="rack-test")
    try:
        process.wait_for(lambda: _healthy(root_url), WEB_START_S, "the web process to answer")
        web = Web(root_url, engine, process)
        web.operator().createWorkerPool(
            POOL,
            {
                "providerId": PROVIDER,
                "description": "Mac minis in a rack",
                "owner": "ci-admins@example.com",
                "emailOnError": False,
                "config": {"lifecycle": {"reregistrationTimeout": RENEW_S}, "workerConfig": {}},
            },
        )
        yield web
    finally:
        stack.stop_all()
        engine.dispose()


def _healthy(root_url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(root_url + "/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def task_states(engine: Engine) -> set[str]:
    return {t.state for t in task_store.list_tasks(engine, limit=None)}


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def finish(thread: threading.Thread, timeout_s: float = 20) -> None:
    thread.join(timeout_s)
    assert not thread.is_alive(), "the agent did not finish"


def test_two_hand_made_machines_register_with_their_secrets_work_renew_and_retire(
    web: Web, tmp_path: Path
):
    # Scenario: six tasks waiting in the static pool; a rack of two machines, two slots each,
    # made by the operator with createWorker.
    task_store.submit_tasks(web.engine, POOL, 6, 0.3)
    rack = Rack(
        root_url=web.root_url,
        operator={"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN},
        out_dir=tmp_path,
        settings=FAST,
    )

    # Action: the machines join and work; once both have renewed, the operator retires them.
    try:
        machines = rack.join(web.engine, StaticPool(POOL, PROVIDER, machines=2, capacity=2))
        wait_until(lambda: task_states(web.engine) == {"completed"}, 20, "every task done")
        for machine in machines:
            wait_until(lambda m=machine: "reregistered" in m.agent.events, 10, "a renewal")
        rack.retire()
        for machine in machines:
            finish(machine.thread)
    finally:
        rack.halt()

    # Outcome: both registered through the web process and ran tasks under wm's own names for
    # them; retired, each was told to terminate and exited without removing itself.
    rows = {w.tc_worker_id: w for w in list_workers(web.engine, pool_id=POOL)}
    assert set(rows) == {m.worker_id for m in machines}
    for machine in machines:
        row = rows[machine.worker_id]
        assert (row.provider_id, row.worker_group) == (PROVIDER, RACK_GROUP)
        assert row.registered_at is not None and row.state == WorkerState.STOPPED
        assert machine.agent.events[0] == "registered"
        assert machine.agent.events[-1] == "exited"
        assert any(e.startswith("told-to-terminate:") for e in machine.agent.events)
        assert "removed" not in machine.agent.events
    claimed_by = {t.claimed_by for t in task_store.list_tasks(web.engine, limit=None)}
    assert claimed_by <= {row.worker_id for row in rows.values()}


def test_a_machine_with_another_secret_is_refused_and_runs_nothing(web: Web):
    # Scenario: the operator made the worker with one secret; the machine is configured with
    # another; a task waits.
    web.operator().createWorker(
        POOL,
        RACK_GROUP,
        "mac-mini-09",
        {
            "expires": taskcluster.stringDate(taskcluster.fromNow("1 day")),
            "capacity": 1,
            "providerInfo": {"staticSecret": new_static_secret()},
        },
    )
    task_store.submit_tasks(web.engine, POOL, 1, 0.3)
    (row,) = list_workers(web.engine, pool_id=POOL)
    config = StaticProviderConfig(
        root_url=web.root_url,
        provider_id=PROVIDER,
        worker_pool_id=POOL,
        worker_group=RACK_GROUP,
        worker_id="mac-mini-09",
        static_secret=new_static_secret(),
    )
    agent = hand_made_worker(config, BuiltinQueue(web.engine), row.worker_id, settings=FAST)

    finish(run_in_thread(agent))

    # Outcome: refused with worker-manager's error; the task still waits; the worker was
    # never registered.
    (event,) = agent.events
    assert event.startswith("register-refused:") and agent.answers[400] == 1, agent.events
    assert [t.state for t in task_store.list_tasks(web.engine, limit=None)] == ["pending"]
    (after,) = list_workers(web.engine, pool_id=POOL)
    assert after.registered_at is None and after.state == WorkerState.RUNNING
