"""A live Taskcluster worker-manager deployment's API, as a stand-in: a threaded HTTP server
answering at `<base>/api/worker-manager/v1/` with worker-manager's paths, bodies, error shape
(`{code, message, requestInfo}`, libraries/api), offset paging (`limit`, `continuationToken`)
and scopes (services/worker-manager/src/api.js), Hawk checked with mohawk.

Who may call: the permanent clients it is given (an operator, an admin: clientId -> access
token and scopes), and the workers it registered, with the temporary credentials it issued them
through the real `taskcluster.createTemporaryCredentials`, signed by the deployment's
worker-manager (issuer) client, with worker-manager's clientId and scopes (util.js
createCredentials). It knows every token it handed out, so it checks a worker's request against
them instead of verifying the certificate as the auth service would.

Behaviour follows api.js route by route; where a provider decides (registerWorker's proof,
removeWorker), the stand-in asks the provider's launcher (wmsim.legacy.provisioner).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import mohawk
import mohawk.exc
import mohawk.util
import taskcluster

from wmsim.legacy.proofs import proof_vm_id
from wmsim.legacy.store import (
    STATES,
    BadToken,
    Pool,
    PoolError,
    Store,
    Worker,
    capacity_counts,
    js_time,
    page,
    pool_api,
)

PREFIX = "/api/worker-manager/v1/"
REREGISTRATION_DEFAULT = timedelta(hours=96)  # Provider.interpretLifecycle's default
CREDENTIALS_BACKDATE = timedelta(minutes=15)  # createCredentials: start fromNow('-15 minutes')
SECRET_LENGTH = 44  # two slug.nice() (22 characters each)
ERROR_STATUS = {
    "MalformedPayload": 400,
    "InvalidRequestArguments": 400,
    "InputValidationError": 400,
    "InputError": 400,
    "AuthenticationFailed": 401,
    "InsufficientScopes": 403,
    "ResourceNotFound": 404,
    "RequestConflict": 409,
    "ProviderSetupFailed": 503,
}


class ApiError(Exception):
    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})


@dataclass(frozen=True)
class PermanentClient:
    access_token: str
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class Issued:
    """Temporary credentials this deployment's worker-manager issued."""

    access_token: str
    scopes: tuple[str, ...]
    expires: datetime


def worker_client_id(provider_id: str, pool_id: str, group: str, worker_id: str) -> str:
    return f"worker/{provider_id}/{pool_id}/{group}/{worker_id}"


def worker_scopes(pool_id: str, group: str, worker_id: str) -> tuple[str, ...]:
    """createCredentials' scopes (services/worker-manager/src/util.js), in its order."""
    worker = f"{pool_id}/{group}/{worker_id}"
    return (
        f"assume:worker-type:{pool_id}",
        f"assume:worker-pool:{pool_id}",
        f"assume:worker-id:{group}/{worker_id}",
        f"queue:worker-id:{group}/{worker_id}",
        f"secrets:get:worker-type:{pool_id}",
        f"secrets:get:worker-pool:{pool_id}",
        f"queue:claim-work:{pool_id}",
        f"worker-manager:remove-worker:{worker}",
        f"worker-manager:reregister-worker:{worker}",
        f"worker-manager:should-worker-terminate:{worker}",
    )


def satisfies(held: Iterable[str], required: str) -> bool:
    """Taskcluster's scope satisfaction for one required scope: equal, or a held scope ending
    in `*` that prefixes it."""
    return any(h == required or (h.endswith("*") and required.startswith(h[:-1])) for h in held)


def slug() -> str:
    """A v4 'nice' slugid, as slugid.nice() makes them."""
    made = taskcluster.slugId()
    return made.decode() if isinstance(made, bytes) else str(made)


def new_secret() -> str:
    """`${slug.nice()}${slug.nice()}`: 44 characters."""
    return slug() + slug()


class RegistrationRefused(Exception):
    """A provider's refusal of a registration (api.js answers it as InputError)."""


# The VM id a worker's VM attests, as the provider learns it from its cloud.
ProofReader = Callable[[Worker], "str | None"]
# A provider's part of removeWorker: stop the worker's VM and everything made for it.
RemoveHook = Callable[[Worker], None]


@dataclass
class Deployment:
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

    # -- who is calling --------------------------------------------------------------------------

    def authenticate(
        self, method: str, url: str, authorization: str | None, body: bytes, content_type: str
    ) -> tuple[str | None, tuple[str, ...]]:
        """(clientId, scopes) of a request; (None, anonymous scopes) without credentials."""
        if not authorization:
            return None, self._ask_auth(method, url, None) if self.auth_url else ()
        try:
            client_id = mohawk.util.parse_authorization_header(authorization)["id"]
        except (mohawk.exc.HawkFail, KeyError) as error:
            message = f"Bad Request: Invalid header syntax: {error}"
            raise ApiError("AuthenticationFailed", message) from None
        if self.auth_url and client_id not in self.issued:
            return client_id, self._ask_auth(method, url, authorization)
        candidates: list[tuple[str, tuple[str, ...]]] = []
        permanent = self.clients.get(client_id)
        if permanent is not None:
            candidates.append((permanent.access_token, permanent.scopes))
        now = datetime.now(UTC)
        with self.store.lock:
            for issued in self.issued.get(client_id, []):
                if issued.expires > now:
                    candidates.append((issued.access_token, issued.scopes))
        if not candidates:
            raise ApiError(
                "AuthenticationFailed", f"Client with clientId '{client_id}' not found (or expired)"
            )
        for token, scopes in candidates:
            try:
                mohawk.Receiver(
                    lambda _id, token=token: {"id": client_id, "key": token, "algorithm": "sha256"},
                    authorization,
                    url,
                    method,
                    content=body.decode(),
                    content_type=content_type,
                )
            except mohawk.exc.HawkFail:
                continue
            return client_id, scopes
        raise ApiError("AuthenticationFailed", "Unauthorized: Bad mac")

    def _ask_auth(self, method: str, url: str, authorization: str | None) -> tuple[str, ...]:
        """The scopes the auth service answers for a request (libraries/api
        remoteAuthentication: the method, the resource and the host and port signed)."""
        parts = urllib.parse.urlsplit(url)
        request: dict[str, Any] = {
            "method": method.lower(),
            "resource": parts.path + (f"?{parts.query}" if parts.query else ""),
            "host": parts.hostname or "",
            "port": parts.port or 80,
        }
        if authorization:
            request["authorization"] = authorization
        auth = taskcluster.Auth({"rootUrl": self.auth_url, "maxRetries": 0})
        answer = auth.authenticateHawk(request)
        if answer.get("status") == "auth-failed":
            raise ApiError("AuthenticationFailed", str(answer.get("message", "")))
        return tuple(answer.get("scopes", ()))

    @staticmethod
    def authorize(client_id: str | None, scopes: Sequence[str], required: Sequence[str]) -> None:
        """All of `required` (api.js's AllOf) or InsufficientScopes, worded as libraries/api."""
        missing = [r for r in required if not satisfies(scopes, r)]
        if not missing:
            return
        expression = required[0] if len(required) == 1 else {"AllOf": list(required)}
        who = (
            f"Client ID {client_id} does not have sufficient scopes and is missing the "
            f"following scopes:\n\n```\n{json.dumps(missing)}\n```\n\n"
            if client_id
            else ""
        )
        raise ApiError(
            "InsufficientScopes",
            f"{who}This request requires Taskcluster credentials that satisfy the following "
            f"scope expression:\n\n```\n{json.dumps(expression)}\n```",
            {"required": expression},
        )

    # -- credentials -----------------------------------------------------------------------------

    def credentials_for(self, worker: Worker, expires: datetime) -> dict[str, str]:
        """createCredentials: temporary credentials signed by the issuer client."""
        client_id = worker_client_id(
            worker.provider_id, worker.worker_pool_id, worker.worker_group, worker.worker_id
        )
        scopes = worker_scopes(worker.worker_pool_id, worker.worker_group, worker.worker_id)
        credentials = taskcluster.createTemporaryCredentials(
            self.issuer_client_id,
            self.issuer_access_token,
            datetime.now(UTC) - CREDENTIALS_BACKDATE,
            expires,
            list(scopes),
            name=client_id,
        )
        with self.store.lock:
            self.issued.setdefault(client_id, []).append(
                Issued(credentials["accessToken"], scopes, expires)
            )
        return {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in credentials.items()}

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

    def valid_provider_ids(self) -> list[str]:
        return [p for p in self.providers if p not in self.removed_providers]

    def _createWorkerPool(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        require_keys(body, ("providerId", "description", "config", "owner", "emailOnError"))
        self._check_provider(body["providerId"])
        pool_id = params["workerPoolId"]
        if pool_id in self.store.pools:
            raise ApiError("RequestConflict", "Worker pool already exists")
        pool = Pool.from_definition({**body, "workerPoolId": pool_id}, datetime.now(UTC))
        self.store.pools[pool_id] = pool
        return pool_api(pool, [])

    def _updateWorkerPool(
        self, params: dict[str, str], query: Mapping[str, str], body: Any
    ) -> dict[str, Any]:
        require_keys(body, ("providerId", "description", "config", "owner", "emailOnError"))
        self._check_provider(body["providerId"])
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


def require_keys(body: Any, keys: Sequence[str]) -> None:
    if not isinstance(body, dict):
        raise ApiError("InputValidationError", "the request body must be a JSON object")
    missing = [k for k in keys if k not in body]
    if missing:
        raise ApiError(
            "InputValidationError", f"data must have required properties {', '.join(missing)}"
        )


def paged(items: Sequence[Any], query: Mapping[str, str], key: str) -> dict[str, Any]:
    try:
        return page(items, query.get("limit"), query.get("continuationToken"), key)
    except BadToken as bad:
        raise ApiError("InputError", str(bad)) from None


def fill(template: str, context: Mapping[str, Any]) -> str:
    for name, value in context.items():
        if isinstance(value, str):
            template = template.replace(f"<{name}>", value)
    return template


# (method, path shape) -> (route name, scopes): `P` is a worker pool id (two path segments when
# the slash arrives unescaped), `*` one segment.
ROUTES: list[tuple[str, tuple[str, ...], str, tuple[str, ...]]] = [
    ("GET", ("ping",), "ping", ()),
    ("GET", ("providers",), "listProviders", ("worker-manager:list-providers",)),
    ("GET", ("worker-pools",), "listWorkerPools", ("worker-manager:list-worker-pools",)),
    (
        "GET",
        ("worker-pools", "stats"),
        "listWorkerPoolsStats",
        ("worker-manager:list-worker-pools",),
    ),
    (
        "GET",
        ("worker-pool", "P", "stats"),
        "workerPoolStats",
        ("worker-manager:get-worker-pool:<workerPoolId>",),
    ),
    ("GET", ("worker-pool", "P"), "workerPool", ("worker-manager:get-worker-pool:<workerPoolId>",)),
    (
        "PUT",
        ("worker-pool", "P"),
        "createWorkerPool",
        (
            "worker-manager:manage-worker-pool:<workerPoolId>",
            "worker-manager:provider:<providerId>",
        ),
    ),
    (
        "POST",
        ("worker-pool", "P"),
        "updateWorkerPool",
        (
            "worker-manager:manage-worker-pool:<workerPoolId>",
            "worker-manager:provider:<providerId>",
        ),
    ),
    (
        "GET",
        ("workers", "P", "*", "*", "should-terminate"),
        "shouldWorkerTerminate",
        ("worker-manager:should-worker-terminate:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "GET",
        ("workers", "P", "*", "*"),
        "worker",
        ("worker-manager:get-worker:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "DELETE",
        ("workers", "P", "*", "*"),
        "removeWorker",
        ("worker-manager:remove-worker:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "GET",
        ("workers", "P", "*"),
        "listWorkersForWorkerGroup",
        ("worker-manager:list-workers:<workerPoolId>/<workerGroup>",),
    ),
    (
        "GET",
        ("workers", "P"),
        "listWorkersForWorkerPool",
        ("worker-manager:list-workers:<workerPoolId>",),
    ),
    ("POST", ("worker", "register"), "registerWorker", ()),
    (
        "POST",
        ("worker", "reregister"),
        "reregisterWorker",
        ("worker-manager:reregister-worker:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "POST",
        ("worker-pool-errors", "P"),
        "reportWorkerError",
        ("assume:worker-pool:<workerPoolId>", "assume:worker-id:<workerGroup>/<workerId>"),
    ),
    (
        "GET",
        ("worker-pool-errors", "P"),
        "listWorkerPoolErrors",
        ("worker-manager:list-worker-pool-errors:<workerPoolId>",),
    ),
]
UNLOCKED = {"removeWorker"}  # takes the store's lock itself, around its cloud calls
PARAM_NAMES = ("workerGroup", "workerId")
QUERY_PATTERNS = {
    "limit": r"[0-9]+",
    "state": r"requested|running|stopping|stopped|standalone",
    "continuationToken": r".+",
}


def _match(shape: tuple[str, ...], parts: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    stars = iter(PARAM_NAMES)
    i = 0
    for element in shape:
        if i >= len(parts):
            return None
        if element == "P":
            if "/" in parts[i]:
                params["workerPoolId"] = parts[i]
                i += 1
            elif i + 1 < len(parts):
                params["workerPoolId"] = f"{parts[i]}/{parts[i + 1]}"
                i += 2
            else:
                return None
        elif element == "*":
            params[next(stars)] = parts[i]
            i += 1
        elif element == parts[i]:
            i += 1
        else:
            return None
    return params if i == len(parts) else None


def route(method: str, parts: list[str], body: Any) -> tuple[str, dict[str, str], tuple[str, ...]]:
    for verb, shape, name, scopes in ROUTES:
        if verb != method:
            continue
        params = _match(shape, parts)
        if params is not None:
            return name, params, scopes
    raise ApiError("ResourceNotFound", f"no such API method: {method} /{'/'.join(parts)}")


def check_query(query: Mapping[str, str]) -> None:
    errors = [
        f"{key}: {value!r} does not match {pattern}"
        for key, pattern in QUERY_PATTERNS.items()
        if (value := query.get(key)) is not None and not re.fullmatch(pattern, value)
    ]
    if errors:
        raise ApiError("InvalidRequestArguments", "\n".join(errors), {"errors": errors})


def serve(deployment: Deployment) -> ThreadingHTTPServer:
    """A started threaded HTTP server for the deployment on 127.0.0.1 (a free port)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                answer = self._answer(method, raw)
                status = 200
            except Exception as failure:  # every failure answers, as express does
                error = (
                    failure
                    if isinstance(failure, ApiError)
                    else ApiError("InternalServerError", f"Internal Server Error: {failure!r}")
                )
                status = ERROR_STATUS.get(error.code, 500)
                answer = {
                    "code": error.code,
                    "message": error.message,
                    "requestInfo": {
                        "method": method,
                        "params": {},
                        "payload": {},
                        "time": js_time(datetime.now(UTC)),
                        **({"details": error.details} if error.details else {}),
                    },
                }
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, method: str, raw: bytes) -> dict[str, Any]:
            path, _, query_string = self.path.partition("?")
            if not path.startswith(PREFIX):
                raise ApiError("ResourceNotFound", f"no such API: {path}")
            parts = [urllib.parse.unquote(p) for p in path[len(PREFIX) :].split("/")]
            query = dict(urllib.parse.parse_qsl(query_string, keep_blank_values=True))
            check_query(query)
            host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
            client_id, scopes = deployment.authenticate(
                method,
                f"http://{host}{self.path}",
                self.headers.get("Authorization"),
                raw,
                self.headers.get("Content-Type", ""),
            )
            try:
                body = json.loads(raw) if raw else None
            except ValueError as error:
                raise ApiError("MalformedPayload", f"Failed to parse JSON: {error}") from None
            return deployment.handle(method, parts, query, body, client_id, scopes)

    logging.getLogger("mohawk").setLevel(logging.ERROR)  # nonces are not tracked here
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="legacy-wm-http").start()
    return server


__all__ = [
    "STATES",
    "ApiError",
    "Deployment",
    "Issued",
    "PermanentClient",
    "RegistrationRefused",
    "serve",
    "worker_client_id",
    "worker_scopes",
]
