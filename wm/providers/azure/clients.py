"""The SDK clients of one Azure provider: how they are built, which endpoint and credential
they use, and the one HTTP session they share.

Every client goes through one pooled `requests` session with the SDK's and urllib3's retries
off, so the provider's gate is the only retry policy. With `credentials = "simulated"` the
credential is the real Entra ID client-credentials path with fixed fake credentials, against the
configured endpoint (provider.make refuses simulated credentials without one). The SDK is
imported here when a provider builds its clients, never on import.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from wm.kinds.azure import AzureProviderConfig

CALL_CONCURRENCY = 16  # SDK calls one provider method keeps in flight (the gate bounds it too)
POLLING_INTERVAL_S = 1.0  # only for a poller someone waits on; wm itself never waits
DEFAULT_ENDPOINT = "https://management.azure.com"
# Fixed fake credentials of the simulated ARM; they grant nothing anywhere else.
SIMULATED_TENANT_ID = "00000000-0000-0000-0000-000000000001"
SIMULATED_CLIENT_ID = "00000000-0000-0000-0000-000000000002"
SIMULATED_CLIENT_SECRET = "simulated-client-secret"


class AzureClients:
    """The SDK clients of one provider, built in one place; network only when needed."""

    def __init__(self, config: AzureProviderConfig) -> None:
        import requests
        from azure.mgmt.compute import ComputeManagementClient
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self._config = config
        # One pooled session for every thread; retries off, so the gate is the only policy.
        self._session = requests.Session()
        adapter = HTTPAdapter(
            pool_maxsize=CALL_CONCURRENCY + config.gate.concurrency,
            max_retries=Retry(total=False, redirect=False, raise_on_status=False),
        )
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        self.credential = _credential(config)
        self.compute = ComputeManagementClient(
            self.credential, config.subscription_id, **self._client_options()
        )
        # name -> a client built on first use (network, deployments, resources)
        self._lazy: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def network(self) -> Any:
        return self._client("network", "azure.mgmt.network", "NetworkManagementClient")

    @property
    def deployments(self) -> Any:
        """Template deployments and their operations (ARM-template launch configs only)."""
        return self._client(
            "deployments", "azure.mgmt.resource.deployments", "DeploymentsMgmtClient"
        )

    @property
    def resources(self) -> Any:
        """Resource groups (an ARM-template launch config's own group is made if missing)."""
        return self._client(
            "resources", "azure.mgmt.resource.resources", "ResourceManagementClient"
        )

    @property
    def resource_graph(self) -> Any:
        """Resource Graph (the launch choice's eviction rates); it takes no subscription."""
        with self._lock:
            client = self._lazy.get("resource_graph")
            if client is None:
                from azure.mgmt.resourcegraph import ResourceGraphClient

                client = ResourceGraphClient(self.credential, **self._client_options())
                self._lazy["resource_graph"] = client
            return client

    @property
    def recommender(self) -> Any:
        """Compute Recommender (the launch choice's Spot Placement Scores)."""
        return self._client("recommender", "azure.mgmt.computerecommender", "RecommenderMgmtClient")

    @property
    def session(self) -> Any:
        """The one HTTP session (Retail Prices, a public API with no SDK, reads through it)."""
        return self._session

    def _client(self, name: str, module: str, class_name: str) -> Any:
        """The client `name`, built once, when first used: its SDK package is imported then."""
        with self._lock:
            client = self._lazy.get(name)
            if client is None:
                make = getattr(importlib.import_module(module), class_name)
                client = make(
                    self.credential, self._config.subscription_id, **self._client_options()
                )
                self._lazy[name] = client
            return client

    def _client_options(self) -> dict[str, Any]:
        from azure.core.pipeline.transport import RequestsTransport

        config = self._config
        transport = RequestsTransport(
            session=self._session,
            session_owner=False,
            connection_timeout=config.gate.timeout_s,
            read_timeout=config.gate.timeout_s,
            connection_verify=config.ca_bundle or True,
        )
        options: dict[str, Any] = {
            "base_url": config.endpoint or DEFAULT_ENDPOINT,
            "retry_total": 0,
            "polling_interval": POLLING_INTERVAL_S,
            "transport": transport,
        }
        if config.endpoint:
            options["credential_scopes"] = [config.endpoint.rstrip("/") + "/.default"]
        return options

    def close(self) -> None:
        self.compute.close()
        with self._lock:
            built = list(self._lazy.values())
        for client in built:
            client.close()
        self.credential.close()
        self._session.close()


def _credential(config: AzureProviderConfig) -> Any:
    timeouts = {"connection_timeout": config.gate.timeout_s, "read_timeout": config.gate.timeout_s}
    if config.credentials == "simulated":
        # The real Entra ID client-credentials path, against the simulated cloud's endpoints.
        from azure.identity import ClientSecretCredential

        return ClientSecretCredential(
            SIMULATED_TENANT_ID,
            SIMULATED_CLIENT_ID,
            SIMULATED_CLIENT_SECRET,
            authority=config.authority or config.endpoint,
            disable_instance_discovery=True,
            connection_verify=config.ca_bundle or True,
            retry_total=0,
            **timeouts,
        )
    from azure.identity import DefaultAzureCredential

    extra = {"authority": config.authority} if config.authority else {}
    return DefaultAzureCredential(**extra, **timeouts)
