"""The scope expression each worker-manager endpoint declares, by endpoint name.

Copied as data from TC `generated/references.json` → `references/worker-manager/v1/api.json`
(taskcluster/taskcluster @ 9d59eb59); `None` means the endpoint needs no scopes. Parameters come
from the route unless noted: reregisterWorker takes all three from the body, reportWorkerError
takes `workerGroup`/`workerId` from the body, create/updateWorkerPool take `providerId` from the
body, and workerPoolErrorStats takes `workerPoolId` from the query (`*` when absent; WM
`src/api.js`).
"""

from __future__ import annotations

from collections.abc import Mapping

from wm.tc.scopes import ScopeExpression

_WORKER = "<workerPoolId>/<workerGroup>/<workerId>"

ENDPOINT_SCOPES: Mapping[str, ScopeExpression | None] = {
    "ping": None,
    "lbheartbeat": None,
    "version": None,
    "heartbeat": None,
    "listProviders": "worker-manager:list-providers",
    "createWorkerPool": {
        "AllOf": [
            "worker-manager:manage-worker-pool:<workerPoolId>",
            "worker-manager:provider:<providerId>",
        ]
    },
    "updateWorkerPool": {
        "AllOf": [
            "worker-manager:manage-worker-pool:<workerPoolId>",
            "worker-manager:provider:<providerId>",
        ]
    },
    "deleteWorkerPool": "worker-manager:manage-worker-pool:<workerPoolId>",
    "listWorkerPoolLaunchConfigs": "worker-manager:get-worker-pool:<workerPoolId>",
    "workerPoolStats": "worker-manager:get-worker-pool:<workerPoolId>",
    "workerPool": "worker-manager:get-worker-pool:<workerPoolId>",
    "listWorkerPools": "worker-manager:list-worker-pools",
    "listWorkerPoolsStats": "worker-manager:list-worker-pools",
    "reportWorkerError": {
        "AllOf": [
            "assume:worker-pool:<workerPoolId>",
            "assume:worker-id:<workerGroup>/<workerId>",
        ]
    },
    "workerPoolErrorStats": "worker-manager:list-worker-pool-errors:<workerPoolId>",
    "listWorkerPoolErrors": "worker-manager:list-worker-pool-errors:<workerPoolId>",
    "listWorkersForWorkerGroup": "worker-manager:list-workers:<workerPoolId>/<workerGroup>",
    "worker": f"worker-manager:get-worker:{_WORKER}",
    "createWorker": f"worker-manager:create-worker:{_WORKER}",
    "updateWorker": f"worker-manager:update-worker:{_WORKER}",
    "removeWorker": f"worker-manager:remove-worker:{_WORKER}",
    "shouldWorkerTerminate": f"worker-manager:should-worker-terminate:{_WORKER}",
    "listWorkersForWorkerPool": "worker-manager:list-workers:<workerPoolId>",
    "registerWorker": None,
    "reregisterWorker": f"worker-manager:reregister-worker:{_WORKER}",
    "listWorkers": "worker-manager:list-workers:<provisionerId>/<workerType>",
    "getWorker": "worker-manager:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>",
}
