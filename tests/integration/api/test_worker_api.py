"""The worker-manager API's rules, served by uvicorn in process on real Postgres, called with the
real `taskcluster` client (Hawk-signed with the credentials registerWorker returned) and plain
HTTP where a client would not send what is tested. Answers are checked against Taskcluster's
rendered schemas (tests/fixtures/tc_schemas).

Proof checking here is a stand-in verifier (accepts {"token": "valid:<wm id>"}, a proof of the
google form, as registerWorker's schema asks for one of the providers' forms); the real
verifiers are tested against the simulated clouds in tests/integration/identity/, and the whole
flow with genuine proofs against `wm run web` in tests/acceptance/test_web_process.py.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import taskcluster
from fastapi import FastAPI, Request
from sqlalchemy import text

from tests.support.api_stack import http_call, in_parallel, serving
from tests.support.configs import build, raw
from tests.support.definitions import apply_pools
from tests.support.tc_client import expired_worker_credentials, refused
from tests.support.tc_schemas import check
from wm.api.app import create_app
from wm.api.authn import OPERATOR_CLIENT, Authenticator, AuthService, IssuerSource
from wm.api.routers.errors import WORKER_REPORTS_PER_HOUR
from wm.db import pools as pool_store
from wm.db.pool_errors import list_errors
from wm.db.worker_writes import insert_intents
from wm.db.workers import NewWorker, list_workers
from wm.model import WorkerState
from wm.tc.credentials import IssuerCredentials
from wm.workers import stages
from wm.workers.identity import IdentityRejected

POOL, PROVIDER, GROUP = "proj/linux", "aws-a", "us-east-1"
OPERATOR_TOKEN = "operator-token-for-tests"
ISSUER_CLIENT = "static/taskcluster/worker-manager"
PREFIX = "/api/worker-manager/v1"


class AcceptsValid:
    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def verify(self, proof, expected) -> None:
        with self._lock:
            self.calls += 1
        if proof != stand_in_proof(expected.worker_id):
            raise IdentityRejected("stand-in verifier: not the expected proof")


def stand_in_proof(worker_id: str) -> dict[str, str]:
    return {"token": f"valid:{worker_id}"}


@pytest.fixture
def verifier():
    return AcceptsValid()


def make_app(engine, verifier, auth_service=None, issuer=None):
    apply_pools(engine, build(), raw()["pools"])
    issuer = issuer or IssuerSource(engine)
    return create_app(
        engine,
        {PROVIDER: verifier, "gcp-a": verifier},
        provider_kinds={"aws-a": "aws", "gcp-a": "gcp", "azure-a": "azure"},
        deployment_id="test-deploy",
        root_url="http://wm.test",
        authenticator=Authenticator(
            issuer, operator_token=OPERATOR_TOKEN, auth_service=auth_service
        ),
        issuer=issuer,
    )


@pytest.fixture
def base(engine, verifier):
    with serving(make_app(engine, verifier)) as url:
        yield url


def manager(base: str, credentials: dict | None = None) -> taskcluster.WorkerManager:
    options = {"rootUrl": base, "maxRetries": 0}
    if credentials:
        options["credentials"] = dict(credentials)  # the client encodes it in place
    return taskcluster.WorkerManager(options)


def operator(base: str) -> taskcluster.WorkerManager:
    return manager(base, {"clientId": OPERATOR_CLIENT, "accessToken": OPERATOR_TOKEN})


def intent(engine, expires_in_s: float = 600, group: str = GROUP) -> tuple[str, str]:
    """A requested worker whose cloud named it: (wm's key, Taskcluster's workerId)."""
    lc = next(
        lc
        for lc in pool_store.load_launch_configs(engine)
        if lc.pool_id == POOL and lc.region == group
    )
    worker_id = "w" + uuid.uuid4().hex[:14]
    row = NewWorker(
        worker_id, POOL, group, PROVIDER, 1, lc.launch_config_id, str(uuid.uuid4()), "b", 0,
        expires_in_s,
    )  # fmt: skip
    insert_intents(engine, [row])
    tc_id = "i-" + uuid.uuid4().hex[:17]
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE workers SET tc_worker_id = :t WHERE worker_id = :w"),
            {"t": tc_id, "w": worker_id},
        )
    return worker_id, tc_id


def register_body(key: str, tc_id: str, **changes) -> dict:
    body = {
        "workerPoolId": POOL,
        "providerId": PROVIDER,
        "workerGroup": GROUP,
        "workerId": tc_id,
        "workerIdentityProof": stand_in_proof(key),
    }
    body.update(changes)
    return body


def row(engine, worker_id):
    return next(w for w in list_workers(engine) if w.worker_id == worker_id)


def stored_secret_hash(engine, worker_id):
    with engine.connect() as conn:
        return conn.execute(
            text("SELECT secret_hash FROM workers WHERE worker_id = :w"), {"w": worker_id}
        ).scalar_one()


def registered(base, engine) -> tuple[str, str, dict]:
    key, tc_id = intent(engine)
    return key, tc_id, manager(base).registerWorker(register_body(key, tc_id))


def test_registration_answers_taskcluster_credentials_and_makes_the_worker_running(base, engine):
    key, tc_id = intent(engine)
    answer = check(
        "register-worker-response", manager(base).registerWorker(register_body(key, tc_id))
    )
    assert answer["credentials"]["clientId"] == f"worker/{PROVIDER}/{POOL}/{GROUP}/{tc_id}"
    certificate = json.loads(answer["credentials"]["certificate"])
    assert certificate["issuer"] == "static/wm" and len(certificate["scopes"]) == 10
    after = row(engine, key)
    assert after.state == WorkerState.RUNNING and after.registered_at is not None
    stored = stored_secret_hash(engine, key)
    assert stored == hashlib.sha256(answer["secret"].encode()).hexdigest()


def test_the_certificate_verifies_with_the_deployment_key_alone(base, engine):
    """Recomputed here from the stored key, with Taskcluster's algorithm, not wm's code."""
    _, tc_id, answer = registered(base, engine)
    with engine.connect() as conn:
        key = conn.execute(text("SELECT secret FROM deployment_keys")).scalar_one()
    cert = json.loads(answer["credentials"]["certificate"])
    lines = [
        "version:1",
        f"clientId:{answer['credentials']['clientId']}",
        "issuer:static/wm",
        f"seed:{cert['seed']}",
        f"start:{cert['start']}",
        f"expiry:{cert['expiry']}",
        "scopes:",
        *cert["scopes"],
    ]
    mac = hmac.new(key.encode(), "\n".join(lines).encode(), hashlib.sha256).digest()
    assert cert["signature"] == base64.b64encode(mac).decode()
    token = hmac.new(key.encode(), cert["seed"].encode(), hashlib.sha256).digest()
    assert answer["credentials"]["accessToken"] == base64.urlsafe_b64encode(token).decode().rstrip(
        "="
    )
    expires = datetime.fromisoformat(answer["expires"].replace("Z", "+00:00"))
    assert cert["expiry"] == int(expires.timestamp() * 1000)
    start = datetime.fromtimestamp(cert["start"] / 1000, UTC)
    assert timedelta(minutes=14) < datetime.now(UTC) - start < timedelta(minutes=16)
    assert f"worker-manager:reregister-worker:{POOL}/{GROUP}/{tc_id}" in cert["scopes"]


@pytest.mark.parametrize(
    ("scenario", "changes", "status", "code"),
    [
        ("unknown pool", {"workerPoolId": "no/such"}, 404, "ResourceNotFound"),
        ("unknown provider", {"providerId": "nope"}, 404, "ResourceNotFound"),
        ("provider not the pool's", {"providerId": "gcp-a"}, 400, "InputError"),
        ("wrong group", {"workerGroup": "us-west-2"}, 404, "ResourceNotFound"),
        ("bad proof", {"workerIdentityProof": {"token": "forged"}}, 400, "InputError"),
        (
            "proof of no provider's form",
            {"workerIdentityProof": {"valid": True}},
            400,
            "InputValidationError",
        ),
        ("unknown worker", {"workerId": "i-doesnotexist"}, 404, "ResourceNotFound"),
        ("extra property", {"nonce": "x"}, 400, "InputValidationError"),
    ],
)
def test_every_refused_registration_changes_nothing(base, engine, scenario, changes, status, code):
    key, tc_id = intent(engine)
    before = row(engine, key)
    body = register_body(key, tc_id, **changes)
    assert refused(lambda: manager(base).registerWorker(body)) == (status, code), scenario
    assert row(engine, key) == before and stored_secret_hash(engine, key) is None


def test_a_replayed_proof_and_a_late_registration_are_refused(base, engine):
    key, tc_id, _ = registered(base, engine)
    stored = stored_secret_hash(engine, key)
    body = register_body(key, tc_id)
    assert refused(lambda: manager(base).registerWorker(body)) == (400, "InputError")
    assert stored_secret_hash(engine, key) == stored
    late_key, late_id = intent(engine, expires_in_s=-1)
    late = register_body(late_key, late_id)
    assert refused(lambda: manager(base).registerWorker(late)) == (400, "InputError")
    assert row(engine, late_key).state == WorkerState.REQUESTED


def test_fifty_parallel_registrations_of_one_worker_succeed_exactly_once(base, engine):
    key, tc_id = intent(engine)
    body = register_body(key, tc_id)
    answers = in_parallel(
        50, lambda _: http_call(base, "POST", f"{PREFIX}/worker/register", body).status
    )
    assert answers.count(200) == 1
    assert set(answers) <= {200, 400, 429}


def test_a_worker_uses_its_credentials_and_nothing_else(base, engine):
    key, tc_id, answer = registered(base, engine)
    mine = manager(base, answer["credentials"])
    assert check(
        "should-worker-terminate-response", mine.shouldWorkerTerminate(POOL, GROUP, tc_id)
    ) == {"terminate": False, "reason": "none"}
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE workers SET should_terminate = true WHERE worker_id = :w"), {"w": key}
        )
    assert mine.shouldWorkerTerminate(POOL, GROUP, tc_id)["terminate"] is True

    other_key, other_id, _ = registered(base, engine)
    assert refused(lambda: mine.shouldWorkerTerminate(POOL, GROUP, other_id)) == (
        403,
        "InsufficientScopes",
    )
    assert refused(lambda: mine.removeWorker(POOL, GROUP, other_id)) == (403, "InsufficientScopes")
    assert refused(lambda: mine.listWorkerPools()) == (403, "InsufficientScopes")
    assert row(engine, other_key).state == WorkerState.RUNNING

    assert mine.removeWorker(POOL, GROUP, tc_id) == {}
    gone = row(engine, key)
    assert (gone.state, gone.stop_reason) == (WorkerState.STOPPING, "removed-by-worker")


def test_reregistration_rotates_secret_and_credentials_and_an_old_secret_is_refused(base, engine):
    key, tc_id, first = registered(base, engine)
    mine = manager(base, first["credentials"])
    ids = {"workerPoolId": POOL, "workerGroup": GROUP, "workerId": tc_id}
    wrong = {**ids, "secret": "x" * 44}
    assert refused(lambda: mine.reregisterWorker(wrong)) == (400, "InputError")
    short = {**ids, "secret": "short"}
    assert refused(lambda: mine.reregisterWorker(short)) == (400, "InputValidationError")
    rotated = check(
        "reregister-worker-response", mine.reregisterWorker({**ids, "secret": first["secret"]})
    )
    assert rotated["secret"] != first["secret"]
    assert rotated["credentials"]["clientId"] == first["credentials"]["clientId"]
    stale = {**ids, "secret": first["secret"]}
    assert refused(lambda: mine.reregisterWorker(stale)) == (400, "InputError")
    again = manager(base, rotated["credentials"]).reregisterWorker(
        {**ids, "secret": rotated["secret"]}
    )
    assert again["secret"] != rotated["secret"]
    assert stored_secret_hash(engine, key) == hashlib.sha256(again["secret"].encode()).hexdigest()


def test_forged_expired_and_absent_credentials_are_refused_and_change_nothing(base, engine):
    key, tc_id, answer = registered(base, engine)
    forged = {**answer["credentials"], "accessToken": "A" * 43}
    assert refused(lambda: manager(base, forged).removeWorker(POOL, GROUP, tc_id)) == (
        401,
        "AuthenticationFailed",
    )
    foreign = {"clientId": "someone/else", "accessToken": "whatever"}
    assert refused(lambda: manager(base, foreign).removeWorker(POOL, GROUP, tc_id)) == (
        401,
        "AuthenticationFailed",
    )
    with engine.connect() as conn:
        issuer_key = conn.execute(text("SELECT secret FROM deployment_keys")).scalar_one()
    expired = expired_worker_credentials(
        IssuerCredentials("static/wm", issuer_key), PROVIDER, POOL, GROUP, tc_id
    )
    assert refused(lambda: manager(base, expired).removeWorker(POOL, GROUP, tc_id)) == (
        401,
        "AuthenticationFailed",
    )
    assert refused(lambda: manager(base).removeWorker(POOL, GROUP, tc_id)) == (
        403,
        "InsufficientScopes",
    )
    reply = http_call(base, "DELETE", f"{PREFIX}/workers/proj%2Flinux/{GROUP}/{tc_id}")
    assert reply.status == 403
    unsigned = http_call(
        base, "DELETE", f"{PREFIX}/workers/proj%2Flinux/{GROUP}/{tc_id}",
        headers={"Authorization": "Hawk id=\"x\""},
    )  # fmt: skip
    assert unsigned.status == 401 and unsigned.headers["www-authenticate"] == "hawk"
    assert row(engine, key).state == WorkerState.RUNNING


def test_error_reports_are_public_and_limited_per_worker(base, engine):
    looping_key, looping, first = registered(base, engine)
    _, other, second = registered(base, engine)

    def report(credentials, tc_id: str, n: int):
        return manager(base, credentials).reportWorkerError(
            POOL,
            {
                "workerGroup": GROUP,
                "workerId": tc_id,
                "kind": "worker-error",
                "title": f"crash {n}",
                "description": "again",
                "extra": {"n": n},
            },
        )

    stored = check("worker-pool-error", report(first["credentials"], looping, 0))
    assert stored["extra"] == {"n": 0, "workerGroup": GROUP, "workerId": looping}
    for n in range(1, WORKER_REPORTS_PER_HOUR):
        report(first["credentials"], looping, n)
    assert refused(lambda: report(first["credentials"], looping, 99)) == (429, "TooManyRequests")
    report(second["credentials"], other, 0)
    as_other = {
        "workerGroup": GROUP,
        "workerId": looping,
        "kind": "x",
        "title": "t",
        "description": "",
        "extra": {},
    }
    assert refused(
        lambda: manager(base, second["credentials"]).reportWorkerError(POOL, as_other)
    ) == (403, "InsufficientScopes")
    titles = [e.title for e in list_errors(engine, POOL)]
    assert len(titles) == WORKER_REPORTS_PER_HOUR + 1 and "crash 99" not in titles
    listed = check("worker-pool-error-list", operator(base).listWorkerPoolErrors(POOL))
    assert len(listed["workerPoolErrors"]) == WORKER_REPORTS_PER_HOUR + 1
    one = listed["workerPoolErrors"][0]
    by_id = operator(base).listWorkerPoolErrors(POOL, query={"errorId": one["errorId"]})
    assert by_id["workerPoolErrors"] == [one]
    assert looping_key


def test_the_operator_reads_everything_in_taskclusters_shapes(base, engine):
    _, tc_id, _ = registered(base, engine)
    intent(engine)
    admin = operator(base)
    worker = check("worker-full", admin.worker(POOL, GROUP, tc_id))
    assert (worker["workerId"], worker["state"]) == (tc_id, "running")
    listed = check("worker-list", admin.listWorkersForWorkerPool(POOL))
    assert {w["state"] for w in listed["workers"]} == {"requested", "running"}
    running = admin.listWorkersForWorkerPool(POOL, query={"state": "running"})
    assert [w["workerId"] for w in running["workers"]] == [tc_id]
    check("worker-list", admin.listWorkersForWorkerGroup(POOL, GROUP))
    pool = check("worker-pool-full", admin.workerPool(POOL))
    assert (pool["requestedCount"], pool["runningCount"]) == (1, 1)
    pools = check("worker-pool-list", admin.listWorkerPools())
    assert {p["workerPoolId"] for p in pools["workerPools"]} == {"proj/linux", "proj/gce"}
    stats = check("worker-pool-stats", admin.workerPoolStats(POOL))
    assert sum(s["runningCount"] for s in stats["launchConfigStats"]) == 1
    check("worker-pool-list-stats", admin.listWorkerPoolsStats())
    providers = check("provider-list", admin.listProviders())
    assert {"providerId": "gcp-a", "providerType": "google"} in providers["providers"]
    assert refused(lambda: admin.worker(POOL, GROUP, "i-nope")) == (404, "ResourceNotFound")
    assert refused(lambda: admin.workerPool("no/such")) == (404, "ResourceNotFound")


def test_pages_follow_continuation_tokens_without_repeats(base, engine):
    for _ in range(5):
        intent(engine)
    admin = operator(base)
    seen, token = [], None
    while True:
        query = {"limit": "2", **({"continuationToken": token} if token else {})}
        page = check("worker-list", admin.listWorkersForWorkerPool(POOL, query=query))
        seen += [w["workerId"] for w in page["workers"]]
        token = page.get("continuationToken")
        if not token:
            break
    assert len(seen) == len(set(seen)) == 5
    junk = {"continuationToken": "junk"}
    assert refused(lambda: admin.listWorkersForWorkerPool(POOL, query=junk)) == (400, "InputError")


def _operator_header(base: str, resource: str, method: str = "GET") -> dict[str, str]:
    import mohawk

    sender = mohawk.Sender(
        {"id": OPERATOR_CLIENT, "key": OPERATOR_TOKEN, "algorithm": "sha256"},
        base + resource,
        method,
        content="",
        content_type="application/json",  # what http_call sends
        always_hash_content=False,
    )
    return {"Authorization": sender.request_header}


def test_pool_ids_arrive_escaped_or_with_a_literal_slash(base, engine):
    _, tc_id, _ = registered(base, engine)
    for path in (f"/workers/proj%2Flinux/{GROUP}/{tc_id}", f"/workers/proj/linux/{GROUP}/{tc_id}"):
        reply = http_call(base, "GET", PREFIX + path, headers=_operator_header(base, PREFIX + path))
        assert reply.status == 200, (path, reply.body)
        assert reply.json()["workerId"] == tc_id, path
    bad = f"{PREFIX}/workers/proj%2Flinux/{GROUP}/bad%2Fid"
    reply = http_call(base, "GET", bad, headers=_operator_header(base, bad))
    assert (reply.status, reply.json()["code"]) == (400, "InvalidRequestArguments")


def test_health_routes_answer_without_credentials(base):
    client = manager(base)
    assert client.ping()["alive"] is True
    assert client.lbheartbeat() == {} and client.heartbeat() == {}
    assert "version" in client.version()
    assert http_call(base, "GET", "/healthz").json() == {"status": "ok"}
    assert b"wm_api_requests_total" in http_call(base, "GET", "/metrics").body
    paths = http_call(base, "GET", "/api/openapi.json").json()["paths"]
    assert f"{PREFIX}/worker/register" in paths and "/api/v1/workers/register" not in paths


def test_bad_bodies_are_taskcluster_400s_that_do_not_echo_values(base, engine, verifier):
    reply = http_call(
        base, "POST", f"{PREFIX}/worker/register", {"workerPoolId": POOL, "secret": "hunter2"}
    )
    body = reply.json()
    assert (reply.status, body["code"]) == (400, "InputValidationError")
    assert "workerId" in body["message"] and "hunter2" not in reply.body.decode()
    assert body["requestInfo"]["method"] == "registerWorker"
    junk = http_call(base, "POST", f"{PREFIX}/worker/register", raw=b"{not json")
    assert (junk.status, junk.json()["code"]) == (400, "MalformedPayload")
    key, tc_id = intent(engine)
    huge = register_body(key, tc_id, workerIdentityProof={"blob": "x" * 100_000})
    reply = http_call(base, "POST", f"{PREFIX}/worker/register", huge)
    assert (reply.status, reply.json()["code"]) == (413, "InputTooLarge")
    assert verifier.calls == 0


def test_an_incomplete_definition_is_refused_naming_what_it_lacks(base):
    admin = operator(base)
    definition = {
        "providerId": PROVIDER,
        "description": "",
        "config": {},
        "owner": "a@b.c",
        "emailOnError": False,
    }
    status, code = refused(lambda: admin.createWorkerPool(POOL, definition))
    assert (status, code) == (400, "InputValidationError")
    with pytest.raises(taskcluster.TaskclusterRestFailure) as caught:
        admin.createWorkerPool(POOL, definition)
    assert "config.launchConfigs: required" in caught.value.body["message"]


def test_foreign_credentials_are_checked_by_the_auth_service(engine, verifier):
    """Behind Taskcluster: credentials wm did not issue go to authenticateHawk."""
    asked: list[dict] = []
    auth = FastAPI()

    @auth.post("/api/auth/v1/authenticate-hawk")
    async def authenticate_hawk(request: Request) -> dict:
        body = await request.json()
        asked.append(body)
        if "authorization" not in body:
            return {"status": "no-auth", "scheme": "none", "scopes": [], "expires": _later()}
        for client_id in ("tc-admin", ISSUER_CLIENT):
            if f'id="{client_id}"' in body["authorization"]:
                return {
                    "status": "auth-success",
                    "scheme": "hawk",
                    "scopes": ["worker-manager:list-worker-pools"],
                    "clientId": client_id,
                    "expires": _later(),
                }
        return {"status": "auth-failed", "message": "Client not found"}

    with serving(auth) as auth_url:
        service = AuthService(auth_url, ISSUER_CLIENT, "token")
        issuer = IssuerSource(engine, ISSUER_CLIENT, "token")
        with serving(make_app(engine, verifier, service, issuer)) as base:
            admin = manager(base, {"clientId": "tc-admin", "accessToken": "irrelevant"})
            check("worker-pool-list", admin.listWorkerPools())
            assert refused(lambda: admin.listProviders()) == (403, "InsufficientScopes")
            stranger = manager(base, {"clientId": "stranger", "accessToken": "x"})
            assert refused(lambda: stranger.listWorkerPools()) == (401, "AuthenticationFailed")
            assert refused(lambda: manager(base).listWorkerPools()) == (403, "InsufficientScopes")
            # wm's own client signing directly holds what the deployment gives it.
            own = manager(base, {"clientId": ISSUER_CLIENT, "accessToken": "token"})
            check("worker-pool-list", own.listWorkerPools())
            assert 'id="static/taskcluster/worker-manager"' in asked[-1]["authorization"]
            # wm's own workers never need the auth service.
            key, tc_id = intent(engine)
            answer = manager(base).registerWorker(register_body(key, tc_id))
            before = len(asked)
            manager(base, answer["credentials"]).shouldWorkerTerminate(POOL, GROUP, tc_id)
            assert len(asked) == before
    first = asked[0]
    assert first["method"] == "get" and first["resource"] == f"{PREFIX}/worker-pools"
    assert first["host"] == "127.0.0.1"


def _later() -> str:
    return (datetime.now(UTC) + timedelta(minutes=15)).isoformat().replace("+00:00", "Z")


@pytest.mark.parametrize(
    ("scenario", "boot_offset_s", "kept"),
    [
        ("booted a minute after wm asked for it", +60.0, "as said"),
        ("claims a boot before wm asked for it", -3600.0, "the request"),
        ("claims a boot in the future", +7200.0, "the registration"),
    ],
)
def test_the_reported_boot_time_marks_when_the_vm_ran_within_what_wm_knows(
    base, engine, scenario, boot_offset_s, kept
):
    key, tc_id = intent(engine)
    with engine.begin() as conn:  # asked for ten minutes ago
        conn.execute(
            text(
                "UPDATE workers SET created = created - interval '10 minutes' WHERE worker_id = :w"
            ),
            {"w": key},
        )
    before = row(engine, key)
    said = before.created + timedelta(seconds=boot_offset_s)
    body = register_body(key, tc_id, systemBootTime=said.isoformat())

    manager(base).registerWorker(body)

    after = row(engine, key)
    expected = {"as said": said, "the request": before.created, "the registration": None}[kept]
    if expected is None:  # clamped to the moment of registration
        assert before.created < after.booted_at <= after.registered_at, scenario
    else:
        assert after.booted_at == expected, scenario
    # The stage "cloud accepted -> running" now ends at the boot, not at a later scan.
    assert stages.point(after, "cloud_running") == after.booted_at
