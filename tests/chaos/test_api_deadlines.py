"""Registration racing its deadline and the scanner, against the real web process (issue 9,
item 12).

The race that matters: the scanner reads a worker as `requested` and, by the time it compares
deadlines, the deadline has passed; meanwhile the worker registered, just before its deadline.
The scanner must then leave it alone: its terminate is a conditional update on the version it
read. The interleaving is made exact with Postgres's own lock queue, not with timing: a test
transaction holds the worker's row lock, the registration (started before the deadline) queues
for it first, the scanner (started after the deadline, having read the stale row) queues behind
it, and only then is the lock released.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import Engine, text

from tests.support.api_stack import (
    ApiStack,
    Reply,
    module_api,
    secret_hash,
)
from wm.db.engine import make_engine
from wm.model import WorkerState
from wm.scanning.scanner import Scanner

SCANNER_APP = "chaos-scanner"
LOCK_WAIT_S = 20.0  # how long a statement may take to show up as waiting for a lock
DEADLINE_MARGIN_S = 2.0  # from setting a deadline to the registration that must beat it


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("deadlines")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


@pytest.fixture
def scanner(api: ApiStack) -> Iterator[tuple[Scanner, Engine]]:
    engine = make_engine(api.stack.db_url, application_name=SCANNER_APP)
    providers = {p.id: p for p in api.providers.values()}
    yield Scanner(engine, providers, missing_grace_s=0, orphan_grace_s=0), engine
    engine.dispose()


def set_deadline(api: ApiStack, worker_id: str, seconds_from_now: float) -> datetime:
    with api.engine.begin() as conn:
        return conn.execute(
            text(
                "UPDATE workers SET expires = clock_timestamp() + make_interval(secs => :s) "
                "WHERE worker_id = :w RETURNING expires"
            ),
            {"s": seconds_from_now, "w": worker_id},
        ).scalar_one()


def lock_waiters(api: ApiStack, application: str) -> list[dict[str, Any]]:
    """Backends of `application` waiting for a lock, with when their transaction started."""
    with api.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT pid, xact_start, query FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = :a "
                "AND wait_event_type = 'Lock'"
            ),
            {"a": application},
        ).mappings()
        return [dict(r) for r in rows]


def wait_for(predicate, what: str, timeout_s: float = LOCK_WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def database_clock_past(api: ApiStack, moment: datetime) -> bool:
    with api.engine.connect() as conn:
        return conn.execute(text("SELECT clock_timestamp() > :m"), {"m": moment}).scalar_one()


def in_thread(action) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(action()), daemon=True)
    thread.start()
    return thread, result


def test_a_worker_that_registers_just_before_the_scanners_terminate_is_left_running(
    api: ApiStack, scanner
):
    scan, _engine = scanner
    (worker,) = api.launch("aws", 1)
    provider_id, region = worker.provider_id, worker.worker_group
    proof = api.proof(worker)
    deadline = set_deadline(api, worker.worker_id, DEADLINE_MARGIN_S)

    with api.engine.connect() as holder:
        holder.execute(
            text("SELECT 1 FROM workers WHERE worker_id = :w FOR UPDATE"),
            {"w": worker.worker_id},
        )
        # 1. The registration, before the deadline, passes its checks and queues for the row.
        registering, replies = in_thread(lambda: api.register(worker, proof))
        (waiting,) = wait_for(lambda: lock_waiters(api, "wm-web"), "the registration to queue")
        assert waiting["query"].lstrip().upper().startswith("UPDATE WORKERS")
        assert waiting["xact_start"] < deadline, "the registration started after the deadline"
        # 2. The deadline passes; the scanner reads the row (requested, past its deadline) and
        #    queues behind the registration for the same row.
        wait_for(lambda: database_clock_past(api, deadline), "the deadline to pass", 30)
        scanning, reports = in_thread(lambda: scan.scan(provider_id, region))
        wait_for(lambda: lock_waiters(api, SCANNER_APP), "the scanner to queue")
        holder.rollback()  # 3. Release: the lock queue decides the order, first come first.
    registering.join(timeout=30)
    scanning.join(timeout=60)

    (reply,) = replies
    assert isinstance(reply, Reply) and reply.status == 200, reply
    (report,) = reports
    assert report is not None and report.terminated == 0
    row = api.row(worker.worker_id)
    assert row["state"] == WorkerState.RUNNING and row["stop_reason"] is None
    assert row["secret_hash"] == secret_hash(reply.json()["secret"])
    assert row["expires"] > deadline  # the re-registration deadline now
    (vm,) = [vm for vm in api.sims["aws"].instances() if vm.cloud_id == worker.cloud_id]
    assert vm.state == "running"


@pytest.mark.parametrize("kind", ["aws", "gcp", "azure"])
def test_a_late_registration_is_refused_and_the_scanner_terminates_the_worker(
    api: ApiStack, scanner, kind: str
):
    scan, _engine = scanner
    (worker,) = api.launch(kind, 1)
    proof = api.proof(worker)  # genuine and fresh: only the deadline is wrong
    set_deadline(api, worker.worker_id, -1)

    late = api.register(worker, proof)
    assert (late.status, late.json()["code"]) == (400, "InputError")
    assert api.row(worker.worker_id)["state"] == WorkerState.REQUESTED

    assert scan.scan(worker.provider_id, worker.worker_group) is not None
    row = api.row(worker.worker_id)  # stopping, or stopped once the cloud confirms the delete
    assert row["state"] in (WorkerState.STOPPING, WorkerState.STOPPED)
    assert row["stop_reason"] == "registration-timeout"
    again = api.register(worker, proof)
    assert (again.status, again.json()["code"]) == (400, "InputError")
    assert api.row(worker.worker_id)["secret_hash"] is None


def test_a_registration_queued_behind_the_scanners_terminate_is_refused(api: ApiStack, scanner):
    """The other order of the same race: the scanner's terminate gets the row first (the
    deadline had passed before the registration began), so the registration must fail, and
    no secret is handed out for a worker being deleted."""
    scan, _engine = scanner
    (worker,) = api.launch("aws", 1)
    proof = api.proof(worker)
    deadline = set_deadline(api, worker.worker_id, -0.5)
    assert database_clock_past(api, deadline)

    report = scan.scan(worker.provider_id, worker.worker_group)
    assert report is not None
    reply = api.register(worker, proof)
    assert reply.status == 400 and "secret" not in reply.json()
    row = api.row(worker.worker_id)
    assert row["state"] != WorkerState.RUNNING and row["secret_hash"] is None
