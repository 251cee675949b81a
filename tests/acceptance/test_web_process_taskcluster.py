"""`wm run web` behind a Taskcluster deployment, end to end: TASKCLUSTER_ROOT_URL points at a
small deployment running in the test (tests/support/fake_tc_deployment.py: the auth service's
`authenticateHawk`, really checking Hawk for the clients it knows, and `/api/worker-manager/`
routed to wm as an operator routes it), TASKCLUSTER_CLIENT_ID / _ACCESS_TOKEN are wm's client,
and WM_OPERATOR_TOKEN is unset. Every call goes through the real `taskcluster` client at the
deployment's root URL.

- A worker registers; its certificate's issuer is wm's client and its signature verifies with
  that client's access token (recomputed here with hmac, as Taskcluster computes it).
- The worker's own calls are checked by wm alone: the auth service never hears of them.
- Any other client is asked about, and gets what the auth service says: its scopes, its 401.
- Requests without credentials hold what the deployment's `anonymous` role grants, nothing more.
- Expired credentials are refused (401) and change nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.metadata
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import mohawk
import pytest
import taskcluster

from tests.support.api_stack import PREFIX, ApiStack, http_call, module_api, secret_hash
from tests.support.fake_tc_deployment import FakeClient, FakeTaskcluster
from tests.support.tc_client import expired_worker_credentials, refused
from tests.support.tc_schemas import check
from wm.tc.credentials import IssuerCredentials

ISSUER = "static/taskcluster/worker-manager"
ISSUER_TOKEN = "worker-manager-access-token-of-the-deployment-0123456789"
ADMIN = {"clientId": "project/admin", "accessToken": "admin-token"}
READER = {"clientId": "project/reader", "accessToken": "reader-token"}
# A client of the deployment that happens to bear wm's standalone operator name.
NAMESAKE = {"clientId": "static/wm-operator", "accessToken": "namesake-token"}
# What community-tc's `anonymous` role grants on worker-manager (mozilla/community-tc-config
# config/grants.yml): reads only.
ANONYMOUS_ROLE = [
    "worker-manager:get-worker-pool:*",
    "worker-manager:get-worker:*",
    "worker-manager:list-providers",
    "worker-manager:list-worker-pool-errors:*",
    "worker-manager:list-worker-pools",
    "worker-manager:list-workers:*",
]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def deployment() -> Iterator[FakeTaskcluster]:
    clients = {
        ADMIN["clientId"]: FakeClient(ADMIN["accessToken"], ("worker-manager:*",)),
        READER["clientId"]: FakeClient(READER["accessToken"], ("worker-manager:list-providers",)),
        NAMESAKE["clientId"]: FakeClient(
            NAMESAKE["accessToken"], ("worker-manager:list-worker-pools",)
        ),
    }
    with FakeTaskcluster(clients, roles={"anonymous": ANONYMOUS_ROLE}) as tc:
        yield tc


@pytest.fixture(scope="module")
def api(
    deployment: FakeTaskcluster, pg_server, template_db, sim_arm_server, tmp_path_factory
) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("web-taskcluster")
    env = {
        "TASKCLUSTER_ROOT_URL": deployment.root_url,
        "TASKCLUSTER_CLIENT_ID": ISSUER,
        "TASKCLUSTER_ACCESS_TOKEN": ISSUER_TOKEN,
        "WM_OPERATOR_TOKEN": "",  # unset: wm knows no operator of its own
    }
    with module_api(pg_server.url, template_db, sim_arm_server, tmp, env=env) as stack:
        deployment.upstream = stack.base_url
        yield stack
        deployment.upstream = None


# A pool definition anyone may try to create: the refusals below are about scopes alone.
EMPTY_DEFINITION = {
    "providerId": "aws-sim",
    "description": "",
    "config": {},
    "owner": "a@b.c",
    "emailOnError": False,
}


def client(deployment: FakeTaskcluster, credentials: dict[str, str] | None = None) -> Any:
    """The real client, at the deployment's root URL (routed to wm), no retries."""
    options: dict[str, Any] = {"rootUrl": deployment.root_url, "maxRetries": 0}
    if credentials:
        options["credentials"] = dict(credentials)
    return taskcluster.WorkerManager(options)


def registered(api: ApiStack, deployment: FakeTaskcluster) -> tuple[Any, dict[str, Any]]:
    (worker,) = api.launch("aws", 1)
    body = api.register_body(worker, api.proof(worker))
    answer = check("register-worker-response", client(deployment).registerWorker(body))
    return worker, answer


def test_the_web_process_says_it_runs_behind_the_deployment(api, deployment):
    (started,) = api.events("process-started")
    assert (started["mode"], started["issuer"]) == ("taskcluster", ISSUER)
    version = client(deployment).version()
    assert version["version"] == importlib.metadata.version("wm")


def test_a_worker_gets_credentials_signed_with_wms_client(api, deployment):
    asked = len(deployment.auth_requests)
    worker, answer = registered(api, deployment)
    assert len(deployment.auth_requests) == asked  # registerWorker is public: nobody is asked
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id

    credentials = answer["credentials"]
    certificate = json.loads(credentials["certificate"])
    assert credentials["clientId"] == f"worker/{worker.provider_id}/{pool}/{group}/{name}"
    assert certificate["issuer"] == ISSUER
    signed = "\n".join(
        [
            "version:1",
            f"clientId:{credentials['clientId']}",
            f"issuer:{ISSUER}",
            f"seed:{certificate['seed']}",
            f"start:{certificate['start']}",
            f"expiry:{certificate['expiry']}",
            "scopes:",
            *certificate["scopes"],
        ]
    )
    mac = hmac.new(ISSUER_TOKEN.encode(), signed.encode(), hashlib.sha256).digest()
    assert certificate["signature"] == base64.b64encode(mac).decode()
    token = hmac.new(ISSUER_TOKEN.encode(), certificate["seed"].encode(), hashlib.sha256).digest()
    assert credentials["accessToken"] == base64.urlsafe_b64encode(token).decode().rstrip("=")
    assert certificate["scopes"] == [
        f"assume:worker-type:{pool}",
        f"assume:worker-pool:{pool}",
        f"assume:worker-id:{group}/{name}",
        f"queue:worker-id:{group}/{name}",
        f"secrets:get:worker-type:{pool}",
        f"secrets:get:worker-pool:{pool}",
        f"queue:claim-work:{pool}",
        f"worker-manager:remove-worker:{pool}/{group}/{name}",
        f"worker-manager:reregister-worker:{pool}/{group}/{name}",
        f"worker-manager:should-worker-terminate:{pool}/{group}/{name}",
    ]
    expires = datetime.fromisoformat(answer["expires"].replace("Z", "+00:00"))
    assert certificate["expiry"] == round((expires - EPOCH).total_seconds() * 1000)


def test_a_workers_own_calls_never_reach_the_auth_service(api, deployment):
    worker, answer = registered(api, deployment)
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    asked, routed = len(deployment.auth_requests), len(deployment.routed)
    mine = client(deployment, answer["credentials"])

    assert mine.shouldWorkerTerminate(pool, group, name) == {"terminate": False, "reason": "none"}
    ids = {"workerPoolId": pool, "workerGroup": group, "workerId": name}
    renewed = check(
        "reregister-worker-response", mine.reregisterWorker({**ids, "secret": answer["secret"]})
    )
    mine = client(deployment, renewed["credentials"])
    report = {
        "workerGroup": group,
        "workerId": name,
        "kind": "worker-error",
        "title": "disk full",
        "description": "",
        "extra": {},
    }
    check("worker-pool-error", mine.reportWorkerError(pool, report))
    # Refusals are decided here too: too few scopes, a forged token, a re-used secret.
    assert refused(lambda: mine.workerPool(pool)) == (403, "InsufficientScopes")
    forged = {**renewed["credentials"], "accessToken": "A" * 43}
    assert refused(lambda: client(deployment, forged).removeWorker(pool, group, name)) == (
        401,
        "AuthenticationFailed",
    )
    stale = {**ids, "secret": answer["secret"]}
    assert refused(lambda: mine.reregisterWorker(stale)) == (400, "InputError")
    assert mine.removeWorker(pool, group, name) == {}

    assert len(deployment.auth_requests) == asked
    assert len(deployment.routed) == routed + 7  # every call went through the deployment
    assert api.row(worker.worker_id)["state"] == "stopping"


def test_other_clients_are_asked_about_and_get_what_the_auth_service_grants(api, deployment):
    worker, _ = registered(api, deployment)
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    asked = len(deployment.auth_requests)
    admin = client(deployment, ADMIN)

    check("worker-pool-list", admin.listWorkerPools())
    check("worker-full", admin.worker(pool, group, name))
    (first, second) = deployment.auth_requests[asked:]
    port = int(deployment.root_url.rsplit(":", 1)[1])
    assert (first["method"], first["resource"]) == ("get", f"{PREFIX}/worker-pools")
    assert (first["host"], first["port"]) == ("127.0.0.1", port)  # as the client signed it
    assert 'id="project/admin"' in first["authorization"]
    assert second["resource"].startswith(f"{PREFIX}/workers/chaos%2Faws/")

    reader = client(deployment, READER)
    check("provider-list", reader.listProviders())
    assert refused(lambda: reader.removeWorker(pool, group, name)) == (403, "InsufficientScopes")
    wrong = {**ADMIN, "accessToken": "not-the-admin-token"}
    assert refused(lambda: client(deployment, wrong).listWorkerPools()) == (
        401,
        "AuthenticationFailed",
    )
    stranger = {"clientId": "someone/else", "accessToken": "x"}
    assert refused(lambda: client(deployment, stranger).listWorkerPools()) == (
        401,
        "AuthenticationFailed",
    )
    assert api.row(worker.worker_id)["state"] == "running"
    assert [a["status"] for a in deployment.auth_answers[asked:]] == [
        "auth-success",
        "auth-success",
        "auth-success",
        "auth-success",
        "auth-failed",
        "auth-failed",
    ]


def test_the_auth_service_message_is_the_401s_message(api, deployment):
    wrong = {**ADMIN, "accessToken": "not-the-admin-token"}
    with pytest.raises(taskcluster.exceptions.TaskclusterAuthFailure) as failure:
        client(deployment, wrong).listWorkerPools()
    assert failure.value.body["message"].startswith("Unauthorized: Bad mac")


def test_a_body_other_than_the_one_signed_is_refused_after_the_auth_service_said_yes(
    api, deployment
):
    """authenticateHawk sees the header only; wm checks the body against its signed hash."""
    path = f"{PREFIX}/worker-pool/defs%2Fswapped"
    signed_body = json.dumps({"description": "what the admin signed"}).encode()
    sender = mohawk.Sender(
        {"id": ADMIN["clientId"], "key": ADMIN["accessToken"], "algorithm": "sha256"},
        deployment.root_url + path,
        "PUT",
        content=signed_body,
        content_type="application/json",
    )
    definition = {**EMPTY_DEFINITION, "description": "swapped"}
    reply = http_call(
        deployment.root_url,
        "PUT",
        path,
        definition,
        headers={"Authorization": sender.request_header},
    )
    assert reply.refusal()[:2] == (401, "AuthenticationFailed")
    assert deployment.auth_answers[-1]["status"] == "auth-success"
    assert "hash" in deployment.auth_answers[-1]
    admin = client(deployment, ADMIN)
    assert refused(lambda: admin.workerPool("defs/swapped")) == (404, "ResourceNotFound")


def test_wms_standalone_operator_name_is_just_another_client_of_the_deployment(api, deployment):
    asked = len(deployment.auth_requests)
    namesake = client(deployment, NAMESAKE)

    check("worker-pool-list", namesake.listWorkerPools())
    assert refused(lambda: namesake.createWorkerPool("defs/namesake", EMPTY_DEFINITION)) == (
        403,
        "InsufficientScopes",
    )

    assert len(deployment.auth_requests) == asked + 2
    assert all(
        'id="static/wm-operator"' in a["authorization"] for a in deployment.auth_requests[asked:]
    )


def test_requests_without_credentials_hold_what_the_anonymous_role_grants(api, deployment):
    worker, answer = registered(api, deployment)
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    anonymous = client(deployment)
    asked = len(deployment.auth_requests)

    check("worker-pool-list", anonymous.listWorkerPools())
    check("worker-full", anonymous.worker(pool, group, name))
    assert refused(lambda: anonymous.removeWorker(pool, group, name)) == (
        403,
        "InsufficientScopes",
    )
    ids = {"workerPoolId": pool, "workerGroup": group, "workerId": name}
    secret = {**ids, "secret": answer["secret"]}
    assert refused(lambda: anonymous.reregisterWorker(secret)) == (403, "InsufficientScopes")
    assert refused(lambda: anonymous.createWorkerPool("defs/anonymous", EMPTY_DEFINITION)) == (
        403,
        "InsufficientScopes",
    )

    answers = deployment.auth_answers[asked:]
    assert [a["status"] for a in answers] == ["no-auth"] * 5
    assert all("authorization" not in r for r in deployment.auth_requests[asked:])
    assert api.row(worker.worker_id)["state"] == "running"
    assert api.row(worker.worker_id)["secret_hash"] == secret_hash(answer["secret"])
    assert refused(lambda: client(deployment, ADMIN).workerPool("defs/anonymous")) == (
        404,
        "ResourceNotFound",
    )


def test_a_deployment_whose_anonymous_role_grants_nothing_shows_anonymous_nothing(api, deployment):
    deployment.roles["anonymous"] = []
    try:
        anonymous = client(deployment)
        assert refused(anonymous.listWorkerPools) == (403, "InsufficientScopes")
        assert refused(anonymous.listProviders) == (403, "InsufficientScopes")
        assert anonymous.ping()["alive"] is True  # public: nobody is asked
    finally:
        deployment.roles["anonymous"] = ANONYMOUS_ROLE


def test_expired_worker_credentials_are_refused_locally_and_change_nothing(api, deployment):
    worker, answer = registered(api, deployment)
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    # As wm issues them, signed with wm's client, but their expiry an hour gone.
    expired = expired_worker_credentials(
        IssuerCredentials(ISSUER, ISSUER_TOKEN), worker.provider_id, pool, group, name
    )
    before = api.row(worker.worker_id)
    asked = len(deployment.auth_requests)
    late = client(deployment, expired)

    assert refused(lambda: late.removeWorker(pool, group, name)) == (401, "AuthenticationFailed")
    assert refused(lambda: late.shouldWorkerTerminate(pool, group, name)) == (
        401,
        "AuthenticationFailed",
    )
    ids = {"workerPoolId": pool, "workerGroup": group, "workerId": name}
    assert refused(lambda: late.reregisterWorker({**ids, "secret": answer["secret"]})) == (
        401,
        "AuthenticationFailed",
    )

    assert api.row(worker.worker_id) == before
    assert len(deployment.auth_requests) == asked
