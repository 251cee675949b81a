"""A live Taskcluster worker-manager deployment's API, as a stand-in: the `Deployment`, its
state and what each route of worker-manager's API does (services/worker-manager/src/api.js),
apart from HTTP.

Around it: the routes' paths, scopes, paging and error shape (wmsim/legacy/routes.py), who may
call and the workers' temporary credentials (wmsim/legacy/auth.py), and the threaded HTTP
server answering at `<base>/api/worker-manager/v1/` (wmsim/legacy/server.py).

Behaviour follows api.js route by route; where a provider decides (registerWorker's proof,
removeWorker), the stand-in asks the provider's launcher (wmsim.legacy.provisioner).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from wmsim.legacy.auth import (
    SECRET_LENGTH,
    DeploymentAuth,
    Issued,
    PermanentClient,
    new_secret,
    slug,
)
from wmsim.legacy.proofs import proof_vm_id
from wmsim.legacy.routes import UNLOCKED, ApiError, fill, paged, require_keys, route
from wmsim.legacy.store import (
    Pool,
    PoolError,
    Store,
    Worker,
    capacity_counts,
    js_time,
    pool_api,
)

REREGISTRATION_DEFAULT = timedelta(hours=96)  # Provider.interpretLifecycle's default


class RegistrationRefused(Exception):
    """A provider's refusal of a registration (api.js answers it as InputError)."""


# The VM id a worker's VM attests, as the provider learns it from its cloud.
ProofReader = Callable[[Worker], "str | None"]
# A provider's part of removeWorker: stop the worker's VM and everything made for it.
RemoveHook = Callable[[Worker], None]


@dataclass
class Deployment(DeploymentAuth):
    """The service's state and behaviour, apart from HTTP: tests and the provisioner call it
    directly, the HTTP handler calls `handle`."""

    root_url: str
    issuer_client_id: str
    issuer_access_token: str = field(repr=False)
    providers: dict[str, str]  # providerId -> providerType (listProviders)
    clients: dict[str, PermanentClient] = field(default_factory=dict)
    store: Store = field(default_factory=Store)
    removed_providers: set[str] = field(default_factory=set)
    remove_hooks: dict[str, RemoveHook] = field(default_factory=dict)  # providerId -> hook
    # providerId -> the VM id a worker's VM attests (its proof must name it); without one,
    # the worker's providerData `proofIds` lists the ids accepted.
    proof_readers: dict[str, ProofReader] = field(default_factory=dict)
    issued: dict[str, list[Issued]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    calls: list[tuple[str, str | None]] = field(default_factory=list)  # (route name, clientId)
    # The deployment's auth service (a rootUrl serving `authenticateHawk`): when set, it says
    # who every caller is and what it holds, the deployment's `anonymous` role for a request
    # without credentials, as at a real worker-manager; only the workers' credentials this
    # stand-in issued are still checked here. None: `clients` alone, no anonymous scopes.
    auth_url: str | None = None

    # -- the routes ------------------------------------------------------------------------------

    def handle(
        self,
        method: str,
        parts: list[str],
        query: Mapping[str, str],
        body: Any,
        client_id: str | None,
        scopes: tuple[str, ...],
    ) -> dict[str, Any]:
        """The answer to one request, or ApiError."""
        name, params, required = route(method, parts, body)
        self.calls.append((name, client_id))
        context = {**params, **(body if isinstance(body, dict) else {})}
        self.authorize(client_id, scopes, [fill(r, context) for r in required])
        if name in UNLOCKED:
            return getattr(self, f"_{name}")(params, query, body)
        with self.store.lock:
            return getattr(self, f"_{name}")(params, query, body)

    def _ping(self, params: dict[str, str], query: Mapping[str, str], body: Any) -> dict[str, Any]:
        return {"alive": True, "uptime": time.monotonic() - self.started}

    def _listProviders(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        providers = [
            {"providerId": p, "providerType": t}
            for p, t in self.providers.items()
            if p not in self.removed_providers
        ]
        return paged(providers, query, "providers")

    def _listWorkerPools(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        pools = [
            pool_api(p, self.store.pool_workers(p.worker_pool_id))
            for p in self.store.sorted_pools()
        ]
        return paged(pools, query, "workerPools")

    def _listWorkerPoolsStats(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        stats = [
            {
                "workerPoolId": p.worker_pool_id,
                **capacity_counts(self.store.pool_workers(p.worker_pool_id)),
            }
            for p in self.store.sorted_pools()
        ]
        return paged(stats, query, "workerPoolsStats")

    def _pool(self, pool_id: str, message: str = "Worker pool does not exist") -> Pool:
        pool = self.store.pools.get(pool_id)
        if pool is None:
            raise ApiError("ResourceNotFound", message)
        return pool

    def _workerPool(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        pool = self._pool(params["workerPoolId"])
        return pool_api(pool, self.store.pool_workers(pool.worker_pool_id))

    def _workerPoolStats(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        pool = self._pool(params["workerPoolId"])
        workers = self.store.pool_workers(pool.worker_pool_id)
        ids = sorted({w.launch_config_id for w in workers if w.launch_config_id})
        return {
            "launchConfigStats": [
                {
                    "workerPoolId": pool.worker_pool_id,
                    "launchConfigId": lc,
                    **capacity_counts(w for w in workers if w.launch_config_id == lc),
                }
                for lc in ids
            ]
        }

    def _check_provider(self, provider_id: str) -> None:
        if provider_id not in self.providers or provider_id in self.removed_providers:
            raise ApiError(
                "InputError",
                "Invalid Provider",
                {"providerId": provider_id, "validProviderIds": self.valid_provider_ids()},
            )

    def _check_definition(self, body: Any) -> None:
        """A pool definition as createWorkerPool and updateWorkerPool take it: its keys, and
        a provider the deployment has."""
        require_keys(body, ("providerId", "description", "config", "owner", "emailOnError"))
        self._check_provider(body["providerId"])

    def valid_provider_ids(self) -> list[str]:
        return [p for p in self.providers if p not in self.removed_providers]

    def _createWorkerPool(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        self._check_definition(body)
        pool_id = params["workerPoolId"]
        if pool_id in self.store.pools:
            raise ApiError("RequestConflict", "Worker pool already exists")
        pool = Pool.from_definition({**body, "workerPoolId": pool_id}, datetime.now(UTC))
        self.store.pools[pool_id] = pool
        return pool_api(pool, [])

    def _updateWorkerPool(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        self._check_definition(body)
        pool_id = params["workerPoolId"]
        if body.get("workerPoolId") not in (None, pool_id):
            raise ApiError("InputError", "Incorrect workerPoolId in request body")
        pool = self._pool(pool_id)
        self.update_pool(pool, body)
        return pool_api(pool, self.store.pool_workers(pool_id))

    def update_pool(self, pool: Pool, definition: Mapping[str, Any]) -> None:
        """update_worker_pool_with_launch_configs: a provider change keeps the old one in
        previousProviderIds (its workers are still to be cleaned up by it)."""
        if definition["providerId"] != pool.provider_id:
            if pool.provider_id not in pool.previous_provider_ids:
                pool.previous_provider_ids.append(pool.provider_id)
            pool.previous_provider_ids = [
                p for p in pool.previous_provider_ids if p != definition["providerId"]
            ]
            pool.provider_id = definition["providerId"]
        pool.description = definition.get("description", pool.description)
        pool.config = dict(definition.get("config") or {})
        pool.owner = definition.get("owner", pool.owner)
        pool.email_on_error = bool(definition.get("emailOnError", pool.email_on_error))
        pool.last_modified = datetime.now(UTC)

    def _listWorkersForWorkerPool(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        pool = self._pool(params["workerPoolId"], "Worker Pool does not exist")
        state = query.get("state")
        launch_config = query.get("launchConfigId")
        workers = self.store.pool_workers(
            pool.worker_pool_id,
            lambda w: (
                (state is None or w.state == state)
                and (launch_config is None or w.launch_config_id == launch_config)
            ),
        )
        return paged([w.as_api() for w in workers], query, "workers")

    def _listWorkersForWorkerGroup(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        group = params["workerGroup"]
        workers = self.store.pool_workers(params["workerPoolId"], lambda w: w.worker_group == group)
        return paged([w.as_api() for w in workers], query, "workers")

    def _worker_at(self, params: Mapping[str, str]) -> Worker:
        key = (params["workerPoolId"], params["workerGroup"], params["workerId"])
        worker = self.store.workers.get(key)
        if worker is None:
            raise ApiError("ResourceNotFound", "Worker not found")
        return worker

    def _worker(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        return self._worker_at(params).as_api()

    def _shouldWorkerTerminate(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        decision = self._worker_at(params).provider_data.get("shouldTerminate")
        if decision:
            return {"terminate": bool(decision["terminate"]), "reason": str(decision["reason"])}
        return {"terminate": False, "reason": "none"}

    def _removeWorker(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        with self.store.lock:
            worker = self._worker_at(params)
        if worker.provider_id not in self.providers or worker.provider_id in self.removed_providers:
            raise ApiError(
                "ResourceNotFound", f"Provider {worker.provider_id} for this worker does not exist"
            )
        self.remove_worker(worker)
        return {}

    def remove_worker(self, worker: Worker) -> None:
        """The provider's removeWorker: the worker stops; its VM and everything made for it go."""
        hook = self.remove_hooks.get(worker.provider_id)
        with self.store.lock:
            # With a cloud behind it the worker is stopping until the scanner sees its VM gone.
            # Marked before the cloud calls: the scanner may see the VM gone while they run
            # (ARM deletes the VM before its NIC, IP and disk) and make the worker stopped, and
            # the provisioner then launch in its place; a worker stopped must stay stopped, or
            # the pool counts it again and is over its maximum.
            if worker.state != "stopped":
                worker.state = "stopping" if hook is not None else "stopped"
                worker.last_modified = datetime.now(UTC)
        if hook is not None:
            hook(worker)  # cloud calls: not under the store's lock

    def _reportWorkerError(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        require_keys(body, ("workerGroup", "workerId", "kind", "title", "description", "extra"))
        pool = self._pool(params["workerPoolId"])
        if pool.provider_id not in self.providers or pool.provider_id in self.removed_providers:
            raise ApiError("InputError", "Invalid Provider", {"providerId": pool.provider_id})
        worker = self.store.workers.get(
            (pool.worker_pool_id, body["workerGroup"], body["workerId"])
        )
        error = PoolError(
            worker_pool_id=pool.worker_pool_id,
            error_id=slug(),
            reported=datetime.now(UTC),
            kind=body["kind"],
            title=body["title"],
            description=body["description"],
            extra={
                **body["extra"],
                "workerGroup": body["workerGroup"],
                "workerId": body["workerId"],
            },
            launch_config_id=worker.launch_config_id if worker else None,
        )
        self.store.errors.append(error)
        return error.as_api()

    def _listWorkerPoolErrors(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        pool_id = params["workerPoolId"]
        errors = [
            e.as_api()
            for e in sorted(self.store.errors, key=lambda e: e.reported, reverse=True)
            if e.worker_pool_id == pool_id
            and query.get("launchConfigId") in (None, e.launch_config_id)
            and query.get("errorId") in (None, e.error_id)
        ]
        return paged(errors, query, "workerPoolErrors")

    def _registerWorker(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        require_keys(
            body, ("workerPoolId", "providerId", "workerGroup", "workerId", "workerIdentityProof")
        )
        pool_id, provider_id = body["workerPoolId"], body["providerId"]
        group, worker_id = body["workerGroup"], body["workerId"]
        pool = self.store.pools.get(pool_id)
        if pool is None:
            raise ApiError("ResourceNotFound", f"Worker pool {pool_id} does not exist")
        if provider_id not in self.providers or provider_id in self.removed_providers:
            raise ApiError("ResourceNotFound", f"Provider {provider_id} does not exist")
        if pool.provider_id != provider_id and provider_id not in pool.previous_provider_ids:
            raise ApiError(
                "InputError", f"Worker pool {pool_id} not associated with provider {provider_id}"
            )
        worker = self.store.workers.get((pool_id, group, worker_id))
        if worker is None:
            raise ApiError(
                "ResourceNotFound",
                f"Worker {group}/{worker_id} in worker pool {pool_id} does not exist",
            )
        now = datetime.now(UTC)
        if worker.expires < now:
            raise ApiError("InputError", f"Worker {group}/{worker_id} has expired")
        if worker.provider_id != provider_id:
            raise ApiError(
                "InputError", f"Worker {group}/{worker_id} does not have provider {provider_id}"
            )
        try:
            expires = self.register(worker, body["workerIdentityProof"], now)
        except RegistrationRefused as refused:
            raise ApiError("InputError", str(refused)) from None
        secret = new_secret()
        worker.secret = secret
        return {
            "expires": js_time(expires),
            "credentials": self.credentials_for(worker, expires),
            "workerConfig": worker.provider_data.get("workerConfig") or {},
            "secret": secret,
        }

    def register(self, worker: Worker, proof: Mapping[str, Any], now: datetime) -> datetime:
        """The cloud providers' registerWorker: only a requested worker, only with a proof that
        names its VM (see wmsim.legacy.proofs); it then runs, with credentials until its
        reregistration deadline."""
        if worker.state != "requested":
            raise RegistrationRefused("This worker is either stopped or running")
        named = proof_vm_id(proof if isinstance(proof, Mapping) else {})
        reader = self.proof_readers.get(worker.provider_id)
        accepted = {reader(worker)} if reader else set(worker.provider_data.get("proofIds", ()))
        if named is None or named not in accepted:
            raise RegistrationRefused("Token validation error")
        timeout = worker.provider_data.get("reregistrationTimeout")  # milliseconds, as stored
        expires = now + (timedelta(milliseconds=timeout) if timeout else REREGISTRATION_DEFAULT)
        worker.state = "running"
        worker.last_modified = now
        worker.provider_data["terminateAfter"] = expires.timestamp() * 1000
        return expires

    def _reregisterWorker(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        require_keys(body, ("workerPoolId", "workerGroup", "workerId", "secret"))
        if len(body["secret"]) != SECRET_LENGTH:
            raise ApiError("InputValidationError", "secret must be 44 characters")
        key = (body["workerPoolId"], body["workerGroup"], body["workerId"])
        worker = self.store.workers.get(key)
        refused = "Could not generate credentials for this secret"
        if worker is None or not worker.secret or worker.secret != body["secret"]:
            raise ApiError("InputError", refused)
        label = f"Worker {worker.worker_group}/{worker.worker_id}"
        if worker.state != "running":
            raise ApiError("InputError", f"{label} is not running")
        now = datetime.now(UTC)
        if worker.expires < now:
            raise ApiError("InputError", f"{label} has expired")
        timeout = worker.provider_data.get("reregistrationTimeout")
        expires = now + (timedelta(milliseconds=timeout) if timeout else REREGISTRATION_DEFAULT)
        credentials = self.credentials_for(worker, expires)
        worker.secret = new_secret()
        if worker.provider_data.get("terminateAfter"):
            worker.provider_data["terminateAfter"] = expires.timestamp() * 1000
        return {"expires": js_time(expires), "credentials": credentials, "secret": worker.secret}
