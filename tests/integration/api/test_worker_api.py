"""The worker API's rules, in process against real Postgres.

Proof checking here is a stand-in verifier (accepts {"valid": true}); the real verifiers are
tested against the simulated clouds in tests/integration/identity/, and the whole lifecycle
through them in the end-to-end tests.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from tests.support.configs import build
from wm.api.app import WORKER_REPORTS_PER_HOUR, create_app
from wm.db import pools as pool_store
from wm.db.pool_errors import list_errors
from wm.db.workers import NewWorker, insert_intents, list_workers
from wm.identity import IdentityRejected
from wm.model import WorkerState
from wm.pool_sync import plan_sync

POOL, PROVIDER, GROUP = "proj/linux", "aws-a", "us-east-1"
OPERATOR = "operator-token-for-tests"


class AcceptsValid:
    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def verify(self, proof, expected) -> None:
        with self._lock:
            self.calls += 1
        if proof != {"valid": True, "worker": expected.worker_id}:
            raise IdentityRejected("stand-in verifier: not the expected proof")


@pytest.fixture
def verifier():
    return AcceptsValid()


@pytest.fixture
def client(engine, verifier):
    pool_store.apply_sync(engine, plan_sync(build(), [], []))
    app = create_app(
        engine,
        {PROVIDER: verifier, "gcp-a": verifier},
        deployment_id="test-deploy",
        audience="http://wm.test",
        operator_token=OPERATOR,
    )
    with TestClient(app) as test_client:
        yield test_client


def intent(engine, expires_in_s: float = 600, group: str = GROUP) -> str:
    lc = next(
        lc
        for lc in pool_store.load_launch_configs(engine)
        if lc.pool_id == POOL and lc.region == group
    )
    worker_id = "w" + uuid.uuid4().hex[:14]
    insert_intents(
        engine,
        [
            NewWorker(
                worker_id,
                POOL,
                group,
                PROVIDER,
                1,
                lc.launch_config_id,
                str(uuid.uuid4()),
                "b",
                0,
                expires_in_s,
            )
        ],
    )
    return worker_id


def register_body(worker: str, **changes) -> dict:
    body = {
        "pool_id": POOL,
        "provider_id": PROVIDER,
        "worker_group": GROUP,
        "worker_id": worker,
        "identity_proof": {"valid": True, "worker": worker},
    }
    body.update(changes)
    return body


def row(engine, worker_id):
    return next(w for w in list_workers(engine) if w.worker_id == worker_id)


def secret_hash_of(engine, worker_id):
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT secret_hash FROM workers WHERE worker_id = :w"), {"w": worker_id}
        ).scalar_one()


def test_a_valid_registration_makes_the_worker_running_and_returns_a_secret(client, engine):
    worker_id = intent(engine)
    reply = client.post("/api/v1/workers/register", json=register_body(worker_id))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert set(body) == {"worker_id", "secret", "expires", "worker_config"}
    after = row(engine, worker_id)
    assert after.state == WorkerState.RUNNING and after.registered_at is not None
    stored = secret_hash_of(engine, worker_id)
    assert stored and stored != body["secret"] and body["secret"] not in stored


@pytest.mark.parametrize(
    ("scenario", "changes", "status", "code"),
    [
        ("unknown pool", {"pool_id": "no/such"}, 404, "unknown-pool"),
        ("provider mismatch", {"provider_id": "gcp-a"}, 400, "provider-mismatch"),
        ("wrong group", {"worker_group": "us-west-2"}, 400, "group-mismatch"),
        ("bad proof", {"identity_proof": {"valid": False}}, 403, "identity-rejected"),
        ("unknown worker", {"worker_id": "wdoesnotexist00"}, 404, "unknown-worker"),
    ],
)
def test_every_rejection_is_4xx_and_leaves_the_row_unchanged(
    client, engine, scenario, changes, status, code
):
    worker_id = intent(engine)
    before = row(engine, worker_id)
    reply = client.post("/api/v1/workers/register", json=register_body(worker_id, **changes))
    assert (reply.status_code, reply.json()["code"]) == (status, code), scenario
    assert row(engine, worker_id) == before
    assert secret_hash_of(engine, worker_id) is None


def test_a_replayed_proof_for_a_running_worker_is_rejected(client, engine):
    worker_id = intent(engine)
    assert client.post("/api/v1/workers/register", json=register_body(worker_id)).status_code == 200
    stored = secret_hash_of(engine, worker_id)
    again = client.post("/api/v1/workers/register", json=register_body(worker_id))
    assert (again.status_code, again.json()["code"]) == (409, "not-requested")
    assert secret_hash_of(engine, worker_id) == stored


def test_a_registration_after_the_deadline_is_refused(client, engine):
    worker_id = intent(engine, expires_in_s=-1)
    reply = client.post("/api/v1/workers/register", json=register_body(worker_id))
    assert (reply.status_code, reply.json()["code"]) == (409, "deadline-passed")
    assert row(engine, worker_id).state == WorkerState.REQUESTED


def test_fifty_parallel_registrations_of_one_worker_succeed_exactly_once(client, engine):
    worker_id = intent(engine)
    statuses: list[int] = []
    lock = threading.Lock()

    def attempt():
        status = client.post("/api/v1/workers/register", json=register_body(worker_id)).status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=attempt) for _ in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(200) == 1
    assert set(statuses) <= {200, 409, 429}


def test_reregistration_rotates_the_secret_and_a_wrong_or_old_one_changes_nothing(client, engine):
    worker_id = intent(engine)
    first = client.post("/api/v1/workers/register", json=register_body(worker_id)).json()
    body = {"pool_id": POOL, "worker_group": GROUP, "worker_id": worker_id}
    wrong = client.post("/api/v1/workers/reregister", json={**body, "secret": "nope"})
    assert wrong.status_code == 403
    rotated = client.post("/api/v1/workers/reregister", json={**body, "secret": first["secret"]})
    assert rotated.status_code == 200 and rotated.json()["secret"] != first["secret"]
    assert rotated.json()["expires"] >= first["expires"]
    stale = client.post("/api/v1/workers/reregister", json={**body, "secret": first["secret"]})
    assert stale.status_code == 403


def test_should_terminate_follows_scale_down_advice_with_the_workers_secret(client, engine):
    worker_id = intent(engine)
    secret = client.post("/api/v1/workers/register", json=register_body(worker_id)).json()["secret"]
    url = f"/api/v1/workers/{POOL}/{GROUP}/{worker_id}/should-terminate"
    assert client.get(url).status_code == 403
    assert client.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 403
    auth = {"Authorization": f"Bearer {secret}"}
    assert client.get(url, headers=auth).json() == {"should_terminate": False, "reason": None}
    with engine.begin() as conn:
        conn.execute(text("UPDATE workers SET should_terminate = true"))
    assert client.get(url, headers=auth).json() == {
        "should_terminate": True,
        "reason": "scale-down",
    }


def test_a_worker_removes_itself_and_an_operator_can_remove_any(client, engine):
    mine, other = intent(engine), intent(engine)
    secret = client.post("/api/v1/workers/register", json=register_body(mine)).json()["secret"]
    gone = client.delete(
        f"/api/v1/workers/{POOL}/{GROUP}/{mine}", headers={"Authorization": f"Bearer {secret}"}
    )
    assert gone.status_code == 202
    assert (row(engine, mine).state, row(engine, mine).stop_reason) == (
        WorkerState.STOPPING,
        "removed-by-worker",
    )
    refused = client.delete(
        f"/api/v1/workers/{POOL}/{GROUP}/{other}", headers={"Authorization": f"Bearer {secret}"}
    )
    assert refused.status_code == 403 and row(engine, other).state == WorkerState.REQUESTED
    by_operator = client.delete(
        f"/api/v1/workers/{POOL}/{GROUP}/{other}", headers={"Authorization": f"Bearer {OPERATOR}"}
    )
    assert (
        by_operator.status_code == 202 and row(engine, other).stop_reason == "removed-by-operator"
    )


def test_a_worker_reports_an_error_that_shows_in_the_pools_errors(client, engine):
    worker_id = intent(engine)
    secret = client.post("/api/v1/workers/register", json=register_body(worker_id)).json()["secret"]
    report = {"worker_id": worker_id, "title": "disk full", "description": "/ is at 100%"}
    refused = client.post(f"/api/v1/pools/{POOL}/errors", json=report)
    assert refused.status_code == 403
    done = client.post(
        f"/api/v1/pools/{POOL}/errors", json=report, headers={"Authorization": f"Bearer {secret}"}
    )
    assert done.status_code == 201
    assert [(e.kind, e.title) for e in list_errors(engine, POOL)] == [
        ("worker-report", "disk full")
    ]


def test_a_worker_looping_on_error_reports_is_refused_past_its_hourly_share(client, engine):
    looping, other = intent(engine), intent(engine)
    secrets = {
        w: client.post("/api/v1/workers/register", json=register_body(w)).json()["secret"]
        for w in (looping, other)
    }

    def report(worker_id: str, n: int):
        return client.post(
            f"/api/v1/pools/{POOL}/errors",
            json={"worker_id": worker_id, "title": f"crash {n}", "description": "again"},
            headers={"Authorization": f"Bearer {secrets[worker_id]}"},
        )

    answers = [report(looping, n) for n in range(WORKER_REPORTS_PER_HOUR + 3)]
    from_the_other = report(other, 0)

    assert [a.status_code for a in answers] == [201] * WORKER_REPORTS_PER_HOUR + [429] * 3
    assert answers[-1].json()["code"] == "too-many-reports"
    assert int(answers[-1].headers["retry-after"]) > 0
    assert from_the_other.status_code == 201
    titles = [e.title for e in list_errors(engine, POOL)]
    assert len(titles) == WORKER_REPORTS_PER_HOUR + 1
    assert f"crash {WORKER_REPORTS_PER_HOUR}" not in titles


def test_operator_views_need_the_token(client, engine):
    intent(engine)
    for url in ("/api/v1/pools", f"/api/v1/pools/{POOL}/workers", f"/api/v1/pools/{POOL}/errors"):
        assert client.get(url).status_code == 401
        assert client.get(url, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert client.get(url, headers={"Authorization": f"Bearer {OPERATOR}"}).status_code == 200
    workers = client.get(
        f"/api/v1/pools/{POOL}/workers", headers={"Authorization": f"Bearer {OPERATOR}"}
    )
    assert "secret_hash" not in workers.text and "idempotency_token" not in workers.text
    unknown = client.get(
        "/api/v1/pools/no/such/workers", headers={"Authorization": f"Bearer {OPERATOR}"}
    )
    assert unknown.status_code == 404


def test_health_metrics_and_openapi_answer(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    assert "wm_api_requests_total" in client.get("/metrics").text
    paths = client.get("/api/openapi.json").json()["paths"]
    assert "/api/v1/workers/register" in paths


def test_bad_bodies_are_clear_400s_that_do_not_echo_values(client, engine):
    reply = client.post("/api/v1/workers/register", json={"pool_id": POOL, "secret": "hunter2"})
    assert reply.status_code == 400 and "worker_id" in reply.json()["message"]
    assert "hunter2" not in reply.text
    junk = client.post(
        "/api/v1/workers/register",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert junk.status_code == 400


def test_oversized_bodies_are_refused_before_reading(client, engine, verifier):
    huge = {"identity_proof": {"blob": "x" * 100_000}}
    reply = client.post("/api/v1/workers/register", json=register_body(intent(engine), **huge))
    assert reply.status_code == 413 and verifier.calls == 0
