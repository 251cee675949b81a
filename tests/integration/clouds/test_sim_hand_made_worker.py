"""The simulated worker on a hand-made machine, as worker-runner's static provider lives it: its
config is its boot data (no metadata service), it registers with `{staticSecret}` through the
real taskcluster client (a stand-in worker-manager answers, checking Hawk), renews, runs
builtin-queue tasks in Postgres, waits while idle, and stops when worker-manager says so,
without removeWorker (worker-runner's exit manager: "Host is not dynamically provisioned")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import Engine

from tests.support.fake_worker_manager import FakeWorkerManager
from wm.db import tasks as task_store
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings, run_in_thread
from wmsim.hand_made import StaticProviderConfig, hand_made_worker, new_static_secret

POOL = "proj-ci/macos-rack"
QUEUE_NAME = "rack-1/mac-mini-01"  # the name the builtin queue knows the machine by
FAST = AgentSettings(idle_timeout_s=0.5, should_terminate_every_s=0.2, poll_s=0.05)


@pytest.fixture
def fake_wm() -> Iterator[FakeWorkerManager]:
    fake = FakeWorkerManager(lifetime_s=2.0).start()
    yield fake
    fake.stop()


def runner_config(root_url: str, secret: str) -> StaticProviderConfig:
    return StaticProviderConfig.from_runner_config(
        {
            "providerType": "static",
            "rootURL": root_url + "/",
            "providerID": "static-rack",
            "workerPoolID": POOL,
            "workerGroup": "rack-1",
            "workerID": "mac-mini-01",
            "staticSecret": secret,
            "workerLocation": {"rack": "r1"},
        }
    )


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def finish(thread: threading.Thread, timeout_s: float = 20) -> None:
    thread.join(timeout_s)
    assert not thread.is_alive(), "the agent did not finish"


def test_a_hand_made_worker_registers_with_its_secret_works_and_stops_when_told(
    engine: Engine, fake_wm: FakeWorkerManager
):
    # Scenario: a machine configured with worker-runner's static provider, two tasks waiting,
    # credentials that live 2 s (so it must renew), an idle timeout shorter than its wait.
    secret = new_static_secret()
    task_store.submit_tasks(engine, POOL, 2, 0.2)
    agent = hand_made_worker(
        runner_config(fake_wm.root_url, secret),
        BuiltinQueue(engine),
        QUEUE_NAME,
        capacity=2,
        settings=FAST,
    )

    # Action: it runs, works, idles past its idle timeout, renews; then worker-manager says
    # it should terminate.
    thread = run_in_thread(agent)
    wait_until(lambda: agent.events.count("task-done") == 2, 10, "both tasks done")
    wait_until(lambda: "reregistered" in agent.events, 10, "a renewal")
    assert thread.is_alive() and "idle" not in agent.events  # a machine in a rack waits
    fake_wm.terminate = True
    finish(thread)

    # Outcome: registered as the config says, with the secret as its whole proof; renewed
    # with the credentials it was given; told to stop, it exits without removeWorker.
    register = fake_wm.calls[0]
    assert register.name == "registerWorker" and register.client_id is None
    assert register.body["workerIdentityProof"] == {"staticSecret": secret}
    assert (register.body["providerId"], register.body["workerPoolId"]) == ("static-rack", POOL)
    assert (register.body["workerGroup"], register.body["workerId"]) == ("rack-1", "mac-mini-01")
    names = fake_wm.names()
    assert "reregisterWorker" in names and "shouldWorkerTerminate" in names
    assert "removeWorker" not in names
    assert agent.events[0] == "registered"
    assert agent.events[-2:] == ["told-to-terminate:launch config archived", "exited"]
    tasks = task_store.list_tasks(engine, limit=None)
    assert {t.state for t in tasks} == {"completed"}
    assert {t.claimed_by for t in tasks} == {QUEUE_NAME}


def test_a_hand_made_worker_refused_at_registration_does_not_start(
    engine: Engine, fake_wm: FakeWorkerManager
):
    # Scenario: worker-manager refuses the secret (worker-manager's 400 for a bad secret).
    fake_wm.refuse_register = (400, "InputError")
    task_store.submit_tasks(engine, POOL, 1, 0.2)
    agent = hand_made_worker(
        runner_config(fake_wm.root_url, new_static_secret()),
        BuiltinQueue(engine),
        QUEUE_NAME,
        settings=FAST,
    )

    finish(run_in_thread(agent))

    # Outcome: one registration, no task claimed, nothing else called.
    assert agent.events == ["register-refused:InputError"]
    assert fake_wm.names() == ["registerWorker"]
    assert [t.state for t in task_store.list_tasks(engine, limit=None)] == ["pending"]
