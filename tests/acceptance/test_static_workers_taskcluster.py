"""Static workers, end to end: machines no cloud launches join a pool of a `static` provider
through `wm run web`, driven by the real `taskcluster` client at a Taskcluster deployment's
root URL (tests/support/fake_tc_deployment.py routes /api/worker-manager/ to wm, as in
test_web_process_taskcluster.py).

An operator defines the pool (createWorkerPool), makes each machine known with createWorker
(its expiry, capacity and a 44-character secret), and the machine's worker-runner registers
with `{staticSecret}`, gets credentials and a secret, renews them, reports errors and leaves.
Every refusal is worker-manager's: a cloud pool (400), a second create (409), a wrong or
missing secret (400), an expired or removed worker (400), too few scopes (403); none changes
anything.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import taskcluster

from tests.support.api_stack import POOLS, ApiStack, module_api, secret_hash
from tests.support.fake_tc_deployment import FakeClient, FakeTaskcluster
from tests.support.stack import REPO
from tests.support.tc_client import refused
from tests.support.tc_schemas import check

ISSUER = "static/taskcluster/worker-manager"
ISSUER_TOKEN = "worker-manager-access-token-of-the-deployment-0123456789"
ADMIN = {"clientId": "project/admin", "accessToken": "admin-token"}
# May create pools and list, but not create or update workers.
POOL_ADMIN = {"clientId": "project/pool-admin", "accessToken": "pool-admin-token"}
# community-tc's anonymous role on worker-manager: reads only.
ANONYMOUS_ROLE = [
    "worker-manager:get-worker-pool:*",
    "worker-manager:get-worker:*",
    "worker-manager:list-providers",
    "worker-manager:list-workers:*",
]
PROVIDER = "rack"  # the static provider's id, as a deployment might name it
POOL = "proj-hw/macos"
WORKER_CONFIG = {"genericWorker": {"config": {"osGroups": ["admin"]}}}
DEFINITION = {
    "providerId": PROVIDER,
    "description": "mac minis in the rack",
    "config": {"lifecycle": {"reregistrationTimeout": 3600}, "workerConfig": WORKER_CONFIG},
    "owner": "hw@example.com",
    "emailOnError": False,
}


@pytest.fixture(scope="module")
def deployment() -> Iterator[FakeTaskcluster]:
    clients = {
        ADMIN["clientId"]: FakeClient(ADMIN["accessToken"], ("worker-manager:*",)),
        POOL_ADMIN["clientId"]: FakeClient(
            POOL_ADMIN["accessToken"],
            ("worker-manager:list-workers:*", "worker-manager:get-worker:*"),
        ),
    }
    with FakeTaskcluster(clients, roles={"anonymous": ANONYMOUS_ROLE}) as tc:
        yield tc


@pytest.fixture(scope="module")
def api(
    deployment: FakeTaskcluster, pg_server, template_db, sim_arm_server, tmp_path_factory
) -> Iterator[ApiStack]:
    tmp = tmp_path_factory.mktemp("web-static")
    env = {
        "TASKCLUSTER_ROOT_URL": deployment.root_url,
        "TASKCLUSTER_CLIENT_ID": ISSUER,
        "TASKCLUSTER_ACCESS_TOKEN": ISSUER_TOKEN,
        "WM_OPERATOR_TOKEN": "",
    }
    static = [{"id": PROVIDER, "kind": "static"}]
    with module_api(
        pg_server.url, template_db, sim_arm_server, tmp, env=env, extra_providers=static
    ) as stack:
        deployment.upstream = stack.base_url
        client(deployment, ADMIN).createWorkerPool(POOL, DEFINITION)
        yield stack
        deployment.upstream = None


def client(deployment: FakeTaskcluster, credentials: dict[str, str] | None = None) -> Any:
    options: dict[str, Any] = {"rootUrl": deployment.root_url, "maxRetries": 0}
    if credentials:
        options["credentials"] = dict(credentials)
    return taskcluster.WorkerManager(options)


def new_secret() -> str:
    """As worker-manager advises: slugid() + slugid(), 44 characters."""
    return taskcluster.slugid.nice() + taskcluster.slugid.nice()


def later(**delta: float) -> str:
    return (datetime.now(UTC) + timedelta(**delta)).isoformat(timespec="milliseconds")


def made(deployment: FakeTaskcluster, **body: Any) -> tuple[str, str, str]:
    """A worker createWorker made (worker-full checked); its group, id and secret."""
    group, name, secret = "rack-a", f"mac-{secrets.token_hex(4)}", new_secret()
    asked = {"expires": later(hours=1), "providerInfo": {"staticSecret": secret}, **body}
    answer = client(deployment, ADMIN).createWorker(POOL, group, name, asked)
    check("worker-full", answer)
    return group, name, secret


def registration(group: str, name: str, proof: Any) -> dict[str, Any]:
    return {
        "workerPoolId": POOL,
        "providerId": PROVIDER,
        "workerGroup": group,
        "workerId": name,
        "workerIdentityProof": proof,
    }


def row(api: ApiStack, group: str, name: str) -> dict[str, Any]:
    return api.row(f"{POOL}/{group}/{name}")


# -- the pool and the provider -------------------------------------------------------------------


def test_the_static_provider_is_listed_with_its_type_and_its_pool_is_worker_managers(
    api, deployment
):
    providers = client(deployment).listProviders()["providers"]
    pool = client(deployment).workerPool(POOL)

    assert {"providerId": PROVIDER, "providerType": "static"} in providers
    assert (pool["providerId"], pool["config"]) == (PROVIDER, DEFINITION["config"])


def test_a_static_pool_with_a_cloud_pools_config_is_refused(api, deployment):
    cloud_config = {**DEFINITION, "config": {"minCapacity": 0, "maxCapacity": 1}}

    assert refused(
        lambda: client(deployment, ADMIN).createWorkerPool("proj-hw/other", cloud_config)
    ) == (400, "InputValidationError")


# -- createWorker and updateWorker ---------------------------------------------------------------


def test_create_worker_answers_a_running_worker_and_stores_only_its_secrets_hash(api, deployment):
    group, name, secret = made(deployment, capacity=4)

    shown = client(deployment).worker(POOL, group, name)
    stored = row(api, group, name)
    assert (shown["state"], shown["capacity"], shown["providerId"]) == ("running", 4, PROVIDER)
    assert "launchConfigId" not in shown  # as worker-manager's static workers
    assert stored["provider_data"] == {"staticSecretSha256": secret_hash(secret)}
    assert secret not in api.all_stored_text()


def test_a_second_create_of_the_same_worker_is_a_conflict_and_changes_nothing(api, deployment):
    group, name, _ = made(deployment)
    before = row(api, group, name)
    again = {"expires": later(hours=5), "providerInfo": {"staticSecret": new_secret()}}

    assert refused(lambda: client(deployment, ADMIN).createWorker(POOL, group, name, again)) == (
        409,
        "RequestConflict",
    )
    assert row(api, group, name) == before


@pytest.mark.parametrize(
    ("scenario", "pool", "body", "answer"),
    [
        (
            "a cloud pool",
            POOLS["aws"],
            {"expires": "in an hour", "providerInfo": {"staticSecret": "x" * 44}},
            (400, "InputError"),
        ),
        ("no secret", POOL, {"expires": "in an hour"}, (400, "InputError")),
        (
            "an expiry in the past",
            POOL,
            {"expires": "an hour ago", "providerInfo": {"staticSecret": "x" * 44}},
            (400, "InputError"),
        ),
        (
            "a secret of 43 characters",
            POOL,
            {"expires": "in an hour", "providerInfo": {"staticSecret": "x" * 43}},
            (400, "InputValidationError"),
        ),
        (
            "no such pool",
            "proj-hw/nowhere",
            {"expires": "in an hour", "providerInfo": {"staticSecret": "x" * 44}},
            (404, "ResourceNotFound"),
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_create_worker_refusals_are_worker_managers_and_make_nothing(
    api, deployment, scenario, pool, body, answer
):
    when = {"in an hour": later(hours=1), "an hour ago": later(hours=-1)}
    body = {**body, "expires": when[body["expires"]]}
    name = f"refused-{secrets.token_hex(4)}"

    assert refused(lambda: client(deployment, ADMIN).createWorker(pool, "g", name, body)) == (
        answer
    ), scenario
    assert client(deployment).listWorkersForWorkerGroup(POOL, "g")["workers"] == []


def test_without_the_scopes_nobody_creates_or_updates_a_worker(api, deployment):
    group, name, _ = made(deployment)
    before = row(api, group, name)
    body = {"expires": later(hours=2), "providerInfo": {"staticSecret": new_secret()}}
    pool_admin = client(deployment, POOL_ADMIN)

    assert refused(lambda: pool_admin.createWorker(POOL, group, "other", body)) == (
        403,
        "InsufficientScopes",
    )
    assert refused(lambda: pool_admin.updateWorker(POOL, group, name, body)) == (
        403,
        "InsufficientScopes",
    )
    assert refused(lambda: client(deployment).createWorker(POOL, group, "other", body)) == (
        403,
        "InsufficientScopes",
    )
    assert row(api, group, name) == before


def test_update_worker_changes_capacity_expiry_and_secret(api, deployment):
    group, name, old = made(deployment)
    new = new_secret()
    expires = later(hours=6)

    answer = client(deployment, ADMIN).updateWorker(
        POOL,
        group,
        name,
        {"expires": expires, "capacity": 3, "providerInfo": {"staticSecret": new}},
    )

    check("worker-full", answer)
    assert answer["capacity"] == 3
    assert datetime.fromisoformat(answer["expires"]) == datetime.fromisoformat(expires)
    assert refused(
        lambda: client(deployment).registerWorker(registration(group, name, {"staticSecret": old}))
    ) == (400, "InputError")
    client(deployment).registerWorker(registration(group, name, {"staticSecret": new}))


def test_update_worker_of_a_cloud_pools_worker_is_refused(api, deployment):
    (worker,) = api.launch("aws", 1)
    body = {"expires": later(hours=1), "capacity": 2}

    assert refused(
        lambda: client(deployment, ADMIN).updateWorker(
            worker.pool_id, worker.worker_group, worker.tc_worker_id, body
        )
    ) == (400, "InputError")
    assert api.row(worker.worker_id)["capacity"] == worker.capacity


# -- the worker's own calls ----------------------------------------------------------------------


def test_a_static_worker_registers_renews_reports_and_leaves(api, deployment):
    group, name, secret = made(deployment)
    public = client(deployment)

    answer = check(
        "register-worker-response",
        public.registerWorker(registration(group, name, {"staticSecret": secret})),
    )
    credentials = answer["credentials"]
    assert credentials["clientId"] == f"worker/{PROVIDER}/{POOL}/{group}/{name}"
    assert answer["workerConfig"] == WORKER_CONFIG
    lifetime = datetime.fromisoformat(answer["expires"]) - datetime.now(UTC)
    assert timedelta(minutes=50) < lifetime <= timedelta(hours=1)  # reregistrationTimeout
    # A rack machine restarts: it registers again with the same static secret.
    again = public.registerWorker(registration(group, name, {"staticSecret": secret}))
    mine = client(deployment, again["credentials"])
    assert mine.shouldWorkerTerminate(POOL, group, name) == {"terminate": False, "reason": "none"}
    ids = {"workerPoolId": POOL, "workerGroup": group, "workerId": name}
    renewed = check(
        "reregister-worker-response", mine.reregisterWorker({**ids, "secret": again["secret"]})
    )
    # Renewed for worker-manager's flat 96 hours: static records no reregistrationTimeout.
    renewed_for = datetime.fromisoformat(renewed["expires"]) - datetime.now(UTC)
    assert timedelta(hours=95) < renewed_for <= timedelta(hours=96)
    mine = client(deployment, renewed["credentials"])
    report = {
        "workerGroup": group,
        "workerId": name,
        "kind": "worker-error",
        "title": "disk full",
        "description": "",
        "extra": {},
    }
    check("worker-pool-error", mine.reportWorkerError(POOL, report))
    # The secret of the first registration and the one renewed away are spent.
    for spent in (answer["secret"], again["secret"]):
        assert refused(lambda s=spent: mine.reregisterWorker({**ids, "secret": s})) == (
            400,
            "InputError",
        )
    listed = public.listWorkersForWorkerPool(POOL)["workers"]
    assert name in [w["workerId"] for w in listed]
    stored = row(api, group, name)
    expires_before = stored["expires"]

    assert mine.removeWorker(POOL, group, name) == {}

    assert row(api, group, name)["state"] == "stopped"  # at once: no cloud, no scanner
    assert row(api, group, name)["expires"] == expires_before
    assert mine.shouldWorkerTerminate(POOL, group, name)["terminate"] is True
    assert refused(
        lambda: public.registerWorker(registration(group, name, {"staticSecret": secret}))
    ) == (400, "InputError")


@pytest.mark.parametrize(
    ("scenario", "proof", "words"),
    [
        ("a wrong secret", {"staticSecret": "w" * 44}, "bad staticSecret in workerIdentityProof"),
        # worker-manager's static registerWorker names a missing secret apart.
        (
            "another provider's proof",
            {"token": "eyJ.eyJ.sig"},
            "missing staticSecret in workerIdentityProof",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and " " in value else "",
)
def test_a_wrong_or_missing_secret_is_refused_and_changes_nothing(
    api, deployment, scenario, proof, words
):
    group, name, _ = made(deployment)
    before = row(api, group, name)

    with pytest.raises(taskcluster.exceptions.TaskclusterRestFailure) as failure:
        client(deployment).registerWorker(registration(group, name, proof))

    assert (failure.value.status_code, failure.value.body["code"]) == (400, "InputError")
    assert words in failure.value.body["message"], scenario
    assert row(api, group, name) == before


def test_an_expired_worker_is_stopped_and_cannot_register(api, deployment):
    group, name, secret = made(deployment)

    client(deployment, ADMIN).updateWorker(
        POOL, group, name, {"expires": later(minutes=-1), "providerInfo": {"staticSecret": secret}}
    )

    assert row(api, group, name)["state"] == "stopped"
    assert refused(
        lambda: client(deployment).registerWorker(
            registration(group, name, {"staticSecret": secret})
        )
    ) == (400, "InputError")


def test_a_new_worker_config_reaches_running_workers_without_stopping_them(api, deployment):
    group, name, secret = made(deployment)
    admin = client(deployment, ADMIN)
    changed_config = {**DEFINITION["config"], "workerConfig": {"changed": True}}

    try:
        admin.updateWorkerPool(POOL, {**DEFINITION, "config": changed_config})
        answer = client(deployment).registerWorker(
            registration(group, name, {"staticSecret": secret})
        )
    finally:
        admin.updateWorkerPool(POOL, DEFINITION)

    assert answer["workerConfig"] == {"changed": True}
    mine = client(deployment, answer["credentials"])
    assert mine.shouldWorkerTerminate(POOL, group, name) == {"terminate": False, "reason": "none"}


# -- the operator's view -------------------------------------------------------------------------


def wm(api: ApiStack, *args: str) -> subprocess.CompletedProcess[str]:
    """The `wm` command as the operator runs it, on the web process's config and database."""
    env = {**os.environ, "DATABASE_URL": api.stack.db_url, "WM_CONFIG": str(api.stack.path)}
    return subprocess.run(
        [sys.executable, "-m", "wm", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )


def test_wm_workers_list_status_and_the_stats_count_static_workers(api, deployment):
    group, name, _ = made(deployment, capacity=2)
    running = client(deployment).listWorkersForWorkerPool(POOL, query={"state": "running"})
    capacity = sum(w["capacity"] for w in running["workers"])

    listed = wm(api, "workers", "list", "--pool", POOL)
    status = wm(api, "status", "--json")
    stats = client(deployment).workerPool(POOL)  # its counts, as the stats endpoints count

    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows[name][:6] == [name, group, POOL, PROVIDER, "running", "2"]
    assert status.returncode == 0, status.stderr
    (mine,) = [s for s in json.loads(status.stdout) if s["pool_id"] == POOL]
    assert (mine["provider_id"], mine["running"]) == (PROVIDER, capacity)
    assert (stats["runningCount"], stats["runningCapacity"]) == (len(running["workers"]), capacity)
    (by_launch_config,) = client(deployment, ADMIN).workerPoolStats(POOL)["launchConfigStats"]
    assert (by_launch_config["launchConfigId"], by_launch_config["runningCapacity"]) == (
        "unknown",
        capacity,
    )
    launch_configs = client(deployment, ADMIN).listWorkerPoolLaunchConfigs(POOL)
    assert launch_configs["workerPoolLaunchConfigs"] == []


def test_the_provisioner_process_stops_a_static_worker_at_its_expires(api, deployment):
    group, name, secret = made(deployment, expires=later(seconds=2))
    registered = client(deployment).registerWorker(
        registration(group, name, {"staticSecret": secret})
    )
    provisioner = api.stack.start("provisioner")
    try:
        provisioner.wait_for(
            lambda: provisioner_events(provisioner) and row(api, group, name)["state"] == "stopped",
            60,
            "the provisioner to stop the expired static worker and say so",
        )
    finally:
        provisioner.kill()

    stored = row(api, group, name)
    assert (stored["stop_reason"], stored["secret_hash"]) == ("expired", None)
    ids = {"workerPoolId": POOL, "workerGroup": group, "workerId": name}
    mine = client(deployment, registered["credentials"])
    assert mine.shouldWorkerTerminate(POOL, group, name)["terminate"] is True
    assert refused(lambda: mine.reregisterWorker({**ids, "secret": registered["secret"]})) == (
        400,
        "InputError",
    )
    assert [e["worker"] for e in provisioner_events(provisioner)] == [f"{POOL}/{group}/{name}"]


def provisioner_events(process: Any) -> list[dict[str, Any]]:
    return [line for line in process.lines if line.get("event") == "worker-expired"]
