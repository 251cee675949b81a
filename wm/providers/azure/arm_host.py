"""What the ARM-template form uses of the Azure provider it belongs to (provider.AzureProvider),
declared apart so that no module of the form imports the provider, which imports them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from typing import Any, Protocol

from wm.model import CloudInstance
from wm.providers.base import LaunchBatch
from wm.providers.gate import Gate


class ArmHost(Protocol):
    """The provider's identity, gate, clients and thread pool, and the VM side's reads and
    deletes."""

    id: str
    deployment_id: str
    root_url: str
    subscription_id: str
    resource_group: str
    gate: Gate
    pool: Executor
    clients: Any  # clients.AzureClients: the SDK clients, built lazily

    def all_pages(self, operation: str, make_pager: Callable[[], Any]) -> list[Any]: ...

    def owns(self, vm: Any) -> bool: ...

    def may_delete(self, vm: Any) -> bool: ...

    def owns_tags(self, tags: Mapping[str, str]) -> bool: ...

    def worker_tags(self, batch: LaunchBatch, worker_id: str, location: str) -> dict[str, str]: ...

    def vm_instance(self, group: str, name: str, region: str) -> CloudInstance | None: ...

    def get_vm(self, name: str, expand: str | None = None, group: str | None = None) -> Any: ...

    def provisioning_state(self, vm: Any) -> str: ...

    def delete(self, kind: str, name: str, group: str | None = None) -> int: ...
