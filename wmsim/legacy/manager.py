"""`LegacyWorkerManager`: one live worker-manager deployment as a stand-in, its HTTP service
(wmsim.legacy.service, served by wmsim.legacy.server) plus, once started with launchers, its
provisioner and worker scanner (wmsim.legacy.provisioner)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from typing import Any

from wmsim.legacy.auth import PermanentClient
from wmsim.legacy.server import serve
from wmsim.legacy.service import Deployment
from wmsim.legacy.store import Pool, Store, Worker

WORKER_LIFETIME = timedelta(days=4)  # a worker's `expires` when a test adds one by hand


class LegacyWorkerManager:
    """A worker-manager deployment at `root_url` (the rootUrl workers are told; the ingress'
    address, or the stand-in's own when None) whose workers' credentials the issuer client
    signs. `providers`: providerId -> Taskcluster providerType (aws, google, azure, static).
    `clients`: permanent clients (clientId -> access token and scopes); `issuer_scopes`, when
    given, makes the issuer client one of them too. `auth_url`: the deployment's auth service
    (`authenticateHawk`), which then says who every caller but the stand-in's workers is."""

    def __init__(
        self,
        root_url: str | None,
        issuer_client_id: str,
        issuer_access_token: str,
        *,
        providers: Mapping[str, str],
        clients: Mapping[str, PermanentClient] | None = None,
        issuer_scopes: Iterable[str] | None = None,
        auth_url: str | None = None,
    ) -> None:
        self.deployment = Deployment(
            root_url=root_url or "",
            issuer_client_id=issuer_client_id,
            issuer_access_token=issuer_access_token,
            providers=dict(providers),
            clients=dict(clients or {}),
            auth_url=auth_url,
        )
        if issuer_scopes is not None:
            # The issuer client calling the API itself (wm's web reads the legacy lists signed
            # as its own client, the same one): with these scopes.
            self.add_client(issuer_client_id, issuer_access_token, issuer_scopes)
        self._server: ThreadingHTTPServer | None = None

    @property
    def store(self) -> Store:
        return self.deployment.store

    @property
    def root_url(self) -> str:
        return self.deployment.root_url or self.base_url

    @property
    def base_url(self) -> str:
        """Where the stand-in itself answers (what wm's `[take_over] legacy_url` names)."""
        assert self._server is not None, "start() it first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> str:
        if self._server is None:
            self._server = serve(self.deployment)
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LegacyWorkerManager:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_client(self, client_id: str, access_token: str, scopes: Iterable[str]) -> None:
        self.deployment.clients[client_id] = PermanentClient(access_token, tuple(scopes))

    def load_pools(self, definitions: Iterable[Mapping[str, Any]]) -> int:
        """Pools from definitions as tc-admin applies them (`{workerPoolId, providerId,
        description, owner, emailOnError, config}`); an existing pool is updated, as
        tc-admin's apply does. Any providerId is accepted: a deployment's pools may name
        providers it no longer runs. Returns how many were loaded."""
        now = datetime.now(UTC)
        loaded = 0
        with self.store.lock:
            for definition in definitions:
                existing = self.store.pools.get(definition["workerPoolId"])
                if existing is None:
                    pool = Pool.from_definition(definition, now)
                    self.store.pools[pool.worker_pool_id] = pool
                else:
                    self.deployment.update_pool(existing, definition)
                loaded += 1
        return loaded

    def add_worker(
        self,
        pool_id: str,
        worker_group: str,
        worker_id: str,
        *,
        provider_id: str | None = None,
        state: str = "requested",
        capacity: int = 1,
        launch_config_id: str | None = None,
        expires: datetime | None = None,
        provider_data: Mapping[str, Any] | None = None,
        secret: str | None = None,
    ) -> Worker:
        """A worker row as a provider writes it on launch (or later states, for a test)."""
        now = datetime.now(UTC)
        with self.store.lock:
            pool = self.store.pools[pool_id]
            worker = Worker(
                worker_pool_id=pool_id,
                worker_group=worker_group,
                worker_id=worker_id,
                provider_id=provider_id or pool.provider_id,
                state=state,
                capacity=capacity,
                created=now,
                expires=expires or now + WORKER_LIFETIME,
                last_modified=now,
                last_checked=now,
                launch_config_id=launch_config_id,
                secret=secret,
                provider_data=dict(provider_data or {}),
            )
            self.store.workers[worker.key] = worker
        return worker

    def workers(self, *, state: str | None = None) -> list[Worker]:
        with self.store.lock:
            return [w for w in self.store.workers.values() if state in (None, w.state)]

    def remove_provider(self, provider_id: str) -> None:
        """worker-manager restarted without this providerId in its config: it no longer lists
        it, the provisioner skips its pools with a warning, the scanner ignores its workers
        (extending their expiry), registerWorker and removeWorker refuse it (api.js)."""
        self.deployment.removed_providers.add(provider_id)
