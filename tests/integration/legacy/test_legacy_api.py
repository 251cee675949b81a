"""The legacy worker-manager stand-in answers worker-manager's API through the real
`taskcluster.WorkerManager` client: pools, workers, paging, registration with temporary
credentials signed by the issuer client, the worker's own calls, and the refusals api.js makes.
Every answer is checked against Taskcluster's schemas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import taskcluster

from tests.support.tc_client import refused
from tests.support.tc_schemas import check
from wmsim.legacy.manager import LegacyWorkerManager

ISSUER = ("static/taskcluster/worker-manager", "issuer-token-" + "x" * 30)
ADMIN = ("admin", "admin-token-" + "y" * 32)
READER = ("reader", "reader-token-" + "z" * 31)
POOL = "proj-legacy/ci"
PROVIDERS = {"aws": "aws", "fxci-level1-gcp": "google", "azure2": "azure"}


def definition(pool_id: str, provider_id: str = "aws", **config: Any) -> dict[str, Any]:
    return {
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "description": "a legacy pool",
        "owner": "ci@example.com",
        "emailOnError": False,
        "config": {"minCapacity": 0, "maxCapacity": 4, "launchConfigs": [], **config},
    }


@pytest.fixture
def legacy() -> Iterator[LegacyWorkerManager]:
    wm = LegacyWorkerManager(None, *ISSUER, providers=PROVIDERS)
    wm.add_client(*ADMIN, ["*"])
    wm.add_client(*READER, ["worker-manager:list-worker-pools"])
    wm.start()
    yield wm
    wm.stop()


def client(legacy: LegacyWorkerManager, credentials: tuple[str, str] | dict | None = None) -> Any:
    options: dict[str, Any] = {"rootUrl": legacy.base_url}
    if isinstance(credentials, tuple):
        options["credentials"] = {"clientId": credentials[0], "accessToken": credentials[1]}
    elif credentials:
        options["credentials"] = credentials
    return taskcluster.WorkerManager(options)


def ec2_proof(instance_id: str) -> dict[str, str]:
    # The stand-in reads the instance id; it does not check the signature (see its docstring).
    return {"document": json.dumps({"instanceId": instance_id}), "signature": "unchecked"}


def register(legacy: LegacyWorkerManager, worker_id: str, proof_id: str | None = None) -> dict:
    return client(legacy).registerWorker(
        {
            "workerPoolId": POOL,
            "providerId": "aws",
            "workerGroup": "us-east-1",
            "workerId": worker_id,
            "workerIdentityProof": ec2_proof(proof_id or worker_id),
        }
    )


def test_pools_are_created_updated_listed_and_paged(legacy):
    admin = client(legacy, ADMIN)
    created = check("worker-pool-full", admin.createWorkerPool(POOL, definition(POOL)))
    for i in range(4):
        admin.createWorkerPool(f"proj-legacy/p{i}", definition(f"proj-legacy/p{i}"))
    updated = admin.updateWorkerPool(POOL, definition(POOL, "azure2", maxCapacity=9))

    assert created["providerId"] == "aws" and created["currentCapacity"] == 0
    assert check("worker-pool-full", updated)["providerId"] == "azure2"
    assert legacy.store.pools[POOL].previous_provider_ids == ["aws"]
    assert admin.workerPool(POOL)["config"]["maxCapacity"] == 9
    first = check("worker-pool-list", admin.listWorkerPools(query={"limit": 2}))
    assert len(first["workerPools"]) == 2 and first["continuationToken"]
    seen: list[str] = []
    admin.listWorkerPools(
        query={"limit": 2},
        paginationHandler=lambda page: seen.extend(p["workerPoolId"] for p in page["workerPools"]),
    )
    assert seen == sorted(legacy.store.pools)
    stats = check("worker-pool-list-stats", admin.listWorkerPoolsStats(query={"limit": 3}))
    assert len(stats["workerPoolsStats"]) == 3 and "continuationToken" in stats
    providers = check("provider-list", admin.listProviders())
    assert providers["providers"][2] == {"providerId": "azure2", "providerType": "azure"}
    assert admin.ping()["alive"] is True


def test_pool_refusals_are_worker_managers(legacy):
    admin = client(legacy, ADMIN)
    admin.createWorkerPool(POOL, definition(POOL))

    assert refused(lambda: admin.createWorkerPool(POOL, definition(POOL))) == (
        409,
        "RequestConflict",
    )
    assert refused(lambda: admin.createWorkerPool("a/b", definition("a/b", "nope"))) == (
        400,
        "InputError",
    )
    assert refused(lambda: admin.workerPool("proj-legacy/none")) == (404, "ResourceNotFound")
    assert refused(lambda: client(legacy, READER).workerPool(POOL)) == (403, "InsufficientScopes")
    assert refused(lambda: client(legacy).listWorkerPools()) == (403, "InsufficientScopes")
    assert refused(lambda: client(legacy, (ADMIN[0], "wrong" * 9)).listWorkerPools()) == (
        401,
        "AuthenticationFailed",
    )
    assert refused(lambda: admin.listWorkerPools(query={"continuationToken": "garbage!"})) == (
        400,
        "InputError",
    )
    assert refused(lambda: admin.listWorkersForWorkerPool(POOL, query={"state": "odd"})) == (
        400,
        "InvalidRequestArguments",
    )


def test_workers_are_listed_by_pool_state_and_group_with_paging(legacy):
    admin = client(legacy, ADMIN)
    admin.createWorkerPool(POOL, definition(POOL))
    for i in range(5):
        legacy.add_worker(
            POOL, "us-east-1" if i % 2 else "us-west-2", f"i-{i}", launch_config_id="lc-a"
        )
    legacy.add_worker(
        POOL, "us-east-1", "i-9", state="running", capacity=2, launch_config_id="lc-b"
    )

    everyone: list[str] = []
    admin.listWorkersForWorkerPool(
        POOL,
        query={"limit": 2},
        paginationHandler=lambda page: everyone.extend(w["workerId"] for w in page["workers"]),
    )
    running = check("worker-list", admin.listWorkersForWorkerPool(POOL, query={"state": "running"}))
    group = admin.listWorkersForWorkerGroup(POOL, "us-east-1")
    worker = check("worker-full", admin.worker(POOL, "us-east-1", "i-9"))
    for listed in running["workers"] + group["workers"]:
        check("worker-full", listed)
    pool = check("worker-pool-full", admin.workerPool(POOL))
    stats = check("worker-pool-stats", admin.workerPoolStats(POOL))

    assert sorted(everyone) == ["i-0", "i-1", "i-2", "i-3", "i-4", "i-9"]
    assert [w["workerId"] for w in running["workers"]] == ["i-9"]
    assert [w["workerId"] for w in group["workers"]] == ["i-1", "i-3", "i-9"]
    assert worker["state"] == "running" and worker["capacity"] == 2
    assert (pool["requestedCount"], pool["runningCapacity"], pool["currentCapacity"]) == (5, 2, 7)
    assert [(s["launchConfigId"], s["currentCapacity"]) for s in stats["launchConfigStats"]] == [
        ("lc-a", 5),
        ("lc-b", 2),
    ]
    assert refused(lambda: admin.worker(POOL, "us-east-1", "i-none")) == (404, "ResourceNotFound")


def test_a_worker_registers_with_credentials_the_issuer_signed_and_uses_them(legacy):
    client(legacy, ADMIN).createWorkerPool(POOL, definition(POOL))
    legacy.add_worker(POOL, "us-east-1", "i-1", provider_data={"proofIds": ["i-1"]})

    registered = check("register-worker-response", register(legacy, "i-1"))
    credentials = registered["credentials"]
    certificate = json.loads(credentials["certificate"])
    worker = client(legacy, credentials)
    again = check(
        "reregister-worker-response",
        worker.reregisterWorker(
            {
                "workerPoolId": POOL,
                "workerGroup": "us-east-1",
                "workerId": "i-1",
                "secret": registered["secret"],
            }
        ),
    )
    renewed = client(legacy, again["credentials"])
    decision = check(
        "should-worker-terminate-response", renewed.shouldWorkerTerminate(POOL, "us-east-1", "i-1")
    )
    error = check(
        "worker-pool-error",
        renewed.reportWorkerError(
            POOL,
            {
                "workerGroup": "us-east-1",
                "workerId": "i-1",
                "kind": "worker-error",
                "title": "boom",
                "description": "it broke",
                "extra": {},
            },
        ),
    )
    errors = check("worker-pool-error-list", client(legacy, ADMIN).listWorkerPoolErrors(POOL))

    client_id = credentials["clientId"]  # the client library hands it back as bytes
    assert getattr(client_id, "decode", lambda: client_id)() == f"worker/aws/{POOL}/us-east-1/i-1"
    assert certificate["issuer"] == ISSUER[0]
    assert f"worker-manager:reregister-worker:{POOL}/us-east-1/i-1" in certificate["scopes"]
    assert legacy.workers()[0].state == "running"
    assert again["secret"] != registered["secret"]
    assert decision == {"terminate": False, "reason": "none"}
    assert error["extra"] == {"workerGroup": "us-east-1", "workerId": "i-1"}
    assert [e["errorId"] for e in errors["workerPoolErrors"]] == [error["errorId"]]
    renewed.removeWorker(POOL, "us-east-1", "i-1")
    assert legacy.workers()[0].state == "stopped"


def test_registration_and_the_workers_calls_are_refused_as_worker_manager_refuses_them(legacy):
    client(legacy, ADMIN).createWorkerPool(POOL, definition(POOL))
    legacy.add_worker(POOL, "us-east-1", "i-1", provider_data={"proofIds": ["i-1"]})
    legacy.add_worker(POOL, "us-east-1", "i-2", provider_data={"proofIds": ["i-2"]})

    assert refused(lambda: register(legacy, "i-1", proof_id="i-2")) == (400, "InputError")
    assert refused(lambda: register(legacy, "i-none")) == (404, "ResourceNotFound")
    registered = register(legacy, "i-1")
    assert refused(lambda: register(legacy, "i-1")) == (400, "InputError")  # already running
    worker = client(legacy, registered["credentials"])
    body = {"workerPoolId": POOL, "workerGroup": "us-east-1", "workerId": "i-1"}
    assert refused(lambda: worker.reregisterWorker({**body, "secret": "s" * 44})) == (
        400,
        "InputError",
    )
    assert refused(lambda: worker.shouldWorkerTerminate(POOL, "us-east-1", "i-2")) == (
        403,
        "InsufficientScopes",
    )
    assert refused(lambda: worker.removeWorker(POOL, "us-east-1", "i-2")) == (
        403,
        "InsufficientScopes",
    )
    assert refused(lambda: worker.listWorkerPools()) == (403, "InsufficientScopes")


def test_a_removed_provider_is_unlisted_and_its_workers_cannot_register(legacy):
    client(legacy, ADMIN).createWorkerPool(POOL, definition(POOL))
    legacy.add_worker(POOL, "us-east-1", "i-1", provider_data={"proofIds": ["i-1"]})

    legacy.remove_provider("aws")

    providers = client(legacy, ADMIN).listProviders()["providers"]
    assert "aws" not in [p["providerId"] for p in providers]
    assert refused(lambda: register(legacy, "i-1")) == (404, "ResourceNotFound")
    assert refused(lambda: client(legacy, ADMIN).removeWorker(POOL, "us-east-1", "i-1")) == (
        404,
        "ResourceNotFound",
    )
    assert client(legacy, ADMIN).workerPool(POOL)["providerId"] == "aws"  # the pool stays


def test_it_serves_firefox_ci_and_community_tc_pools_as_loaded():
    from tests.support.real_pools import DEPLOYMENTS, definitions, provider_kinds

    loaded = [d for deployment in DEPLOYMENTS for d in definitions(deployment)]
    providers = {p: k for deployment in DEPLOYMENTS for p, k in provider_kinds(deployment).items()}
    with LegacyWorkerManager(None, *ISSUER, providers=providers) as legacy:
        legacy.add_client(*ADMIN, ["*"])
        assert legacy.load_pools(loaded) == len(loaded)
        served: list[dict] = []
        client(legacy, ADMIN).listWorkerPools(
            query={"limit": 100},
            paginationHandler=lambda page: served.extend(
                check("worker-pool-list", page)["workerPools"]
            ),
        )

    assert len(served) == len({d["workerPoolId"] for d in loaded})
    by_id = {d["workerPoolId"]: d for d in loaded}
    for pool in served:
        wanted = by_id[pool["workerPoolId"]]
        assert (pool["providerId"], pool["config"], pool["owner"]) == (
            wanted["providerId"],
            wanted["config"],
            wanted["owner"],
        )
