"""`wm run web` as the platform runs it, called by the real `taskcluster` client as worker-runner
and Taskcluster's tools call worker-manager: on $PORT, every endpoint of the worker-manager API,
Hawk-signed with the credentials registerWorker returned, answers checked against Taskcluster's
schemas; forged, re-used, foreign and wrongly-scoped credentials and proofs refused with
Taskcluster's codes, changing nothing.

Workers are VMs the simulated clouds really launched; their proofs come from the clouds'
(simulated) metadata services, as each worker fetches them.
"""

from __future__ import annotations

import importlib.metadata
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import taskcluster

from tests.support.api_stack import OPERATOR_TOKEN, ApiStack, module_api, secret_hash
from tests.support.stack import REPO, Stack, aws_provider, pool
from tests.support.tc_client import expired_worker_credentials, refused
from tests.support.tc_schemas import check
from wm.tc.credentials import IssuerCredentials
from wmsim.postgres import free_port

KINDS = ("aws", "gcp", "azure")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_the_web_process_serves_on_port_and_stops_on_sigterm(tmp_path, db_url, engine, sim_ec2):
    aws = aws_provider(sim_ec2)
    stack = Stack.write(tmp_path, db_url, [aws], [pool("proj/web", aws)])
    stack.sync_pools(engine)
    port = free_port()
    env = {
        **os.environ,
        "WM_CONFIG": str(stack.path),
        "DATABASE_URL": db_url,
        "PORT": str(port),
        "WM_OPERATOR_TOKEN": "op-token",
    }
    web = subprocess.Popen(
        [sys.executable, "-m", "wm", "run", "web"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if get(base + "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.1)
        assert get(base + "/healthz") == (200, '{"status":"ok"}')
        assert "wm_api_requests_total" in get(base + "/metrics")[1]
        anonymous = taskcluster.WorkerManager({"rootUrl": base, "maxRetries": 0})
        assert refused(anonymous.listWorkerPools) == (403, "InsufficientScopes")
        operator = taskcluster.WorkerManager(
            {
                "rootUrl": base,
                "maxRetries": 0,
                "credentials": {"clientId": "static/wm-operator", "accessToken": "op-token"},
            }
        )
        pools = check("worker-pool-list", operator.listWorkerPools())
        assert [p["workerPoolId"] for p in pools["workerPools"]] == ["proj/web"]
        web.send_signal(signal.SIGTERM)
        assert web.wait(timeout=10) == 0
        output = web.stdout.read()
        assert "op-token" not in output
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
        web.stdout.close()


@pytest.fixture(scope="module")
def api(pg_server, template_db, sim_arm_server, tmp_path_factory) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("web-api")
    with module_api(pg_server.url, template_db, sim_arm_server, tmp) as stack:
        yield stack


@pytest.mark.parametrize("kind", KINDS)
def test_a_worker_lives_its_life_through_the_taskcluster_client(api: ApiStack, kind: str):
    worker, other = api.launch(kind, 2)
    pool_id, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    body = api.register_body(worker, api.proof(worker))

    registered = check("register-worker-response", api.client().registerWorker(body))
    assert registered["credentials"]["clientId"] == (
        f"worker/{worker.provider_id}/{pool_id}/{group}/{name}"
    )
    assert api.row(worker.worker_id)["secret_hash"] == secret_hash(registered["secret"])
    # The same proof again: one registration per instance.
    assert refused(lambda: api.client().registerWorker(body)) == (400, "InputError")
    # Another worker's genuine proof does not register this one.
    stolen = api.register_body(other, api.proof(worker))
    assert refused(lambda: api.client().registerWorker(stolen)) == (400, "InputError")
    assert api.row(other.worker_id)["state"] == "requested"

    mine = api.client(registered["credentials"])
    assert check(
        "should-worker-terminate-response", mine.shouldWorkerTerminate(pool_id, group, name)
    ) == {"terminate": False, "reason": "none"}
    ids = {"workerPoolId": pool_id, "workerGroup": group, "workerId": name}
    renewed = check(
        "reregister-worker-response",
        mine.reregisterWorker({**ids, "secret": registered["secret"]}),
    )
    reused = {**ids, "secret": registered["secret"]}
    assert refused(lambda: mine.reregisterWorker(reused)) == (400, "InputError")
    mine = api.client(renewed["credentials"])
    report = {
        "workerGroup": group,
        "workerId": name,
        "kind": "worker-error",
        "title": "disk full",
        "description": "/ is at 100%",
        "extra": {},
    }
    check("worker-pool-error", mine.reportWorkerError(pool_id, report))
    # Wrongly scoped: this worker's credentials on the other worker, and on operator reads.
    assert refused(lambda: mine.removeWorker(pool_id, other.worker_group, other.tc_worker_id)) == (
        403,
        "InsufficientScopes",
    )
    assert refused(lambda: mine.workerPool(pool_id)) == (403, "InsufficientScopes")
    forged = {**renewed["credentials"], "accessToken": "A" * 43}
    assert refused(lambda: api.client(forged).removeWorker(pool_id, group, name)) == (
        401,
        "AuthenticationFailed",
    )
    foreign = {"clientId": "static/wm-operator", "accessToken": "not-" + OPERATOR_TOKEN}
    assert refused(lambda: api.client(foreign).listWorkerPools()) == (401, "AuthenticationFailed")
    assert api.row(other.worker_id)["state"] == "requested"

    operator = api.operator()
    assert check("worker-full", operator.worker(pool_id, group, name))["state"] == "running"
    check("worker-list", operator.listWorkersForWorkerPool(pool_id))
    check("worker-list", operator.listWorkersForWorkerGroup(pool_id, group))
    check("worker-pool-full", operator.workerPool(pool_id))
    check("worker-pool-list", operator.listWorkerPools())
    check("worker-pool-stats", operator.workerPoolStats(pool_id))
    check("worker-pool-list-stats", operator.listWorkerPoolsStats())
    check("provider-list", operator.listProviders())
    errors = check("worker-pool-error-list", operator.listWorkerPoolErrors(pool_id))
    assert any(e["title"] == "disk full" for e in errors["workerPoolErrors"])

    assert mine.removeWorker(pool_id, group, name) == {}
    assert api.row(worker.worker_id)["state"] == "stopping"
    terminate = mine.shouldWorkerTerminate(pool_id, group, name)
    assert terminate["terminate"] is True


def test_health_routes_answer_anyone(api: ApiStack):
    client = api.client()
    assert client.ping()["alive"] is True
    assert client.lbheartbeat() == {} and client.heartbeat() == {}
    assert api.call("GET", "/api/v1/pools").status == 404


def test_version_answers_the_dockerflow_object_through_the_client(api: ApiStack):
    version = api.client().version()

    assert version == {
        "source": "wm",
        "version": importlib.metadata.version("wm"),
        "commit": "",
        "build": "",
    }


def test_expired_worker_credentials_are_refused_and_change_nothing(api: ApiStack):
    (worker,) = api.launch("aws", 1)
    registered = api.client().registerWorker(api.register_body(worker, api.proof(worker)))
    pool, group, name = worker.pool_id, worker.worker_group, worker.tc_worker_id
    # As wm issues them, signed with its deployment key, but their expiry an hour gone.
    with api.engine.connect() as conn:
        (key,) = conn.exec_driver_sql("SELECT secret FROM deployment_keys").one()
    expired = expired_worker_credentials(
        IssuerCredentials("static/wm", key), worker.provider_id, pool, group, name
    )
    before = api.row(worker.worker_id)
    late = api.client(expired)

    assert refused(lambda: late.removeWorker(pool, group, name)) == (401, "AuthenticationFailed")
    ids = {"workerPoolId": pool, "workerGroup": group, "workerId": name}
    renewal = {**ids, "secret": registered["secret"]}
    assert refused(lambda: late.reregisterWorker(renewal)) == (401, "AuthenticationFailed")
    assert refused(lambda: late.shouldWorkerTerminate(pool, group, name)) == (
        401,
        "AuthenticationFailed",
    )

    assert api.row(worker.worker_id) == before
    # The same credentials before their expiry work: it is the expiry that was refused.
    assert api.client(registered["credentials"]).shouldWorkerTerminate(pool, group, name)
