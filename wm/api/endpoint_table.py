"""Every worker-manager endpoint, one row each: what Taskcluster declares for it and where its
request names the pool it concerns.

Transcribed from `generated/references.json` → `references/worker-manager/v1/api.json`
(taskcluster/taskcluster @ 9d59eb59), in its order: the name, method, route, scope expression
and query-string parameters of each entry, and its body's schema (wm.api.request_schemas). The
query patterns are WM `src/api.js`'s and `paginateResults.query`'s (wm.api.queries). Everything
else reads it: the routers declare each route at its row's method and path
(wm/api/endpoint.py `EndpointRouter`), the one endpoint dependency checks the row's query and
scopes, the request models check the row's body schema, error bodies leave out the bodies the
row marks secret, and a take-over (wm/take_over/routes.py) routes a request by where the row
says it names its pool. tests/unit/test_take_over_routes.py compares the rows with the
reference (vendored: tests/fixtures/tc_api). Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from wm.api.queries import (
    ERROR_ID,
    INCLUDE_ARCHIVED,
    LAUNCH_CONFIG,
    PAGES,
    PROVIDER_PAGES,
    QUARANTINED,
    STATE,
    WORKER_POOL_ID,
    WORKER_STATE,
    QueryPattern,
)
from wm.api.request_schemas import (
    REGISTER_BODY,
    REPORT_ERROR_BODY,
    REREGISTER_BODY,
    WORKER_BODY,
)
from wm.pools.json_check import Schema
from wm.pools.schemas import CREATE_BODY, UPDATE_BODY
from wm.tc.scopes import ScopeExpression


class PoolIn(Enum):
    """Where a request names the worker pool it concerns (and, for some, its provider)."""

    NOWHERE = "nowhere"  # about the serving process itself: ping, version, heartbeats
    EVERY = "every"  # a list spanning every pool (or every provider)
    PATH = "path"  # <workerPoolId> in the path
    PROVISIONER_PATH = "provisioner-path"  # <provisionerId>/<workerType> in the path is its id
    QUERY = "query"  # ?workerPoolId=, every pool without it
    BODY = "body"  # the body's workerPoolId
    BODY_WITH_PROVIDER = "body-with-provider"  # the body's workerPoolId and providerId
    PATH_WITH_PROVIDER = "path-with-provider"  # the path's pool, defined for the body's provider


@dataclass(frozen=True)
class Endpoint:
    name: str
    method: str
    route: str  # references.json's, with <param> for each path parameter
    pool_in: PoolIn
    # None: the endpoint needs no scopes. Parameters come from the route unless the route lacks
    # them: reregisterWorker takes all three from the body, reportWorkerError
    # `workerGroup`/`workerId`, create/updateWorkerPool `providerId`, and workerPoolErrorStats
    # `workerPoolId` from the query (`*` when absent; WM `src/api.js`).
    scopes: ScopeExpression | None
    query: Mapping[str, QueryPattern] = field(default_factory=dict)
    body: Schema | None = None  # None: the endpoint takes no body
    # Holds proofs or secrets: never echoed in an error's requestInfo.
    secret_body: bool = False


_POOL = "/worker-pool/<workerPoolId>"
_ERRORS = "/worker-pool-errors/<workerPoolId>"
_WORKER = "/workers/<workerPoolId>/<workerGroup>/<workerId>"
_PROVISIONER_WORKERS = "/provisioners/<provisionerId>/worker-types/<workerType>/workers"
_WORKER_NAME = "<workerPoolId>/<workerGroup>/<workerId>"
_MANAGE_POOL = "worker-manager:manage-worker-pool:<workerPoolId>"
_DEFINE_POOL = {"AllOf": [_MANAGE_POOL, "worker-manager:provider:<providerId>"]}
_GET_POOL = "worker-manager:get-worker-pool:<workerPoolId>"
_LIST_POOLS = "worker-manager:list-worker-pools"
_LIST_ERRORS = "worker-manager:list-worker-pool-errors:<workerPoolId>"

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("ping", "GET", "/ping", PoolIn.NOWHERE, None),
    Endpoint("lbheartbeat", "GET", "/__lbheartbeat__", PoolIn.NOWHERE, None),
    Endpoint("version", "GET", "/__version__", PoolIn.NOWHERE, None),
    Endpoint(
        "listProviders",
        "GET",
        "/providers",
        PoolIn.EVERY,
        "worker-manager:list-providers",
        query=PROVIDER_PAGES,
    ),
    Endpoint(
        "createWorkerPool", "PUT", _POOL, PoolIn.PATH_WITH_PROVIDER, _DEFINE_POOL, body=CREATE_BODY
    ),
    Endpoint(
        "updateWorkerPool", "POST", _POOL, PoolIn.PATH_WITH_PROVIDER, _DEFINE_POOL, body=UPDATE_BODY
    ),
    Endpoint("deleteWorkerPool", "DELETE", _POOL, PoolIn.PATH, _MANAGE_POOL),
    Endpoint(
        "listWorkerPoolLaunchConfigs",
        "GET",
        f"{_POOL}/launch-configs",
        PoolIn.PATH,
        _GET_POOL,
        query={**PAGES, **INCLUDE_ARCHIVED},
    ),
    Endpoint("workerPoolStats", "GET", f"{_POOL}/stats", PoolIn.PATH, _GET_POOL),
    Endpoint("workerPool", "GET", _POOL, PoolIn.PATH, _GET_POOL),
    Endpoint("listWorkerPools", "GET", "/worker-pools", PoolIn.EVERY, _LIST_POOLS, query=PAGES),
    Endpoint(
        "listWorkerPoolsStats", "GET", "/worker-pools/stats", PoolIn.EVERY, _LIST_POOLS, query=PAGES
    ),
    Endpoint(
        "reportWorkerError",
        "POST",
        _ERRORS,
        PoolIn.PATH,
        {
            "AllOf": [
                "assume:worker-pool:<workerPoolId>",
                "assume:worker-id:<workerGroup>/<workerId>",
            ]
        },
        body=REPORT_ERROR_BODY,
    ),
    Endpoint(
        "workerPoolErrorStats",
        "GET",
        "/worker-pool-errors/stats",
        PoolIn.QUERY,
        _LIST_ERRORS,
        query=WORKER_POOL_ID,
    ),
    Endpoint(
        "listWorkerPoolErrors",
        "GET",
        _ERRORS,
        PoolIn.PATH,
        _LIST_ERRORS,
        query={**PAGES, **LAUNCH_CONFIG, **ERROR_ID},
    ),
    Endpoint(
        "listWorkersForWorkerGroup",
        "GET",
        "/workers/<workerPoolId>/<workerGroup>",
        PoolIn.PATH,
        "worker-manager:list-workers:<workerPoolId>/<workerGroup>",
        query=PAGES,
    ),
    Endpoint("worker", "GET", _WORKER, PoolIn.PATH, f"worker-manager:get-worker:{_WORKER_NAME}"),
    Endpoint(
        "createWorker",
        "PUT",
        _WORKER,
        PoolIn.PATH,
        f"worker-manager:create-worker:{_WORKER_NAME}",
        body=WORKER_BODY,
    ),
    Endpoint(
        "updateWorker",
        "POST",
        _WORKER,
        PoolIn.PATH,
        f"worker-manager:update-worker:{_WORKER_NAME}",
        body=WORKER_BODY,
    ),
    Endpoint(
        "removeWorker",
        "DELETE",
        _WORKER,
        PoolIn.PATH,
        f"worker-manager:remove-worker:{_WORKER_NAME}",
    ),
    Endpoint(
        "shouldWorkerTerminate",
        "GET",
        f"{_WORKER}/should-terminate",
        PoolIn.PATH,
        f"worker-manager:should-worker-terminate:{_WORKER_NAME}",
    ),
    Endpoint(
        "listWorkersForWorkerPool",
        "GET",
        "/workers/<workerPoolId>",
        PoolIn.PATH,
        "worker-manager:list-workers:<workerPoolId>",
        query={**PAGES, **LAUNCH_CONFIG, **STATE},
    ),
    Endpoint(
        "registerWorker",
        "POST",
        "/worker/register",
        PoolIn.BODY_WITH_PROVIDER,
        None,
        body=REGISTER_BODY,
        secret_body=True,
    ),
    Endpoint(
        "reregisterWorker",
        "POST",
        "/worker/reregister",
        PoolIn.BODY,
        f"worker-manager:reregister-worker:{_WORKER_NAME}",
        body=REREGISTER_BODY,
        secret_body=True,
    ),
    Endpoint(
        "listWorkers",
        "GET",
        _PROVISIONER_WORKERS,
        PoolIn.PROVISIONER_PATH,
        "worker-manager:list-workers:<provisionerId>/<workerType>",
        query={**PAGES, **LAUNCH_CONFIG, **QUARANTINED, **WORKER_STATE},
    ),
    Endpoint(
        "getWorker",
        "GET",
        f"{_PROVISIONER_WORKERS}/<workerGroup>/<workerId>",
        PoolIn.PROVISIONER_PATH,
        "worker-manager:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>",
    ),
    Endpoint("heartbeat", "GET", "/__heartbeat__", PoolIn.NOWHERE, None),
)

BY_NAME: Mapping[str, Endpoint] = {e.name: e for e in ENDPOINTS}
