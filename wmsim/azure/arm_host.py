"""What Microsoft.Resources (deployments.py and the modules it is made of) takes of the SimArm
it runs in: arm.py imports them, so they reach it only through this protocol and imports
point one way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from werkzeug.wrappers import Response

from wmsim.azure.resources import _Resource, _Vm, _Vnet

if TYPE_CHECKING:
    import threading

    from werkzeug.wrappers import Request


class ArmHost(Protocol):
    """Its lock, its resources, its request in hand, how it stores VMs and NICs and pages
    a list."""

    endpoint: str
    delete_missing_status: int
    _lock: threading.RLock
    _request: Request
    _vms: dict[str, _Vm]
    _resources: dict[str, _Resource]
    _vnets: dict[str, _Vnet]
    _images: dict[str, dict[str, Any]]

    def _sweep(self) -> None: ...

    def _body(self) -> dict[str, Any]: ...

    def _api_version(self) -> str: ...

    def _store_vm(
        self, rid: str, body: dict[str, Any], *, check: bool = True
    ) -> tuple[_Vm, int]: ...

    # A deployment's validation against the market (wmsim/azure/vms.py).
    def _market_preflight(self, name: str, resources: list[tuple[str, dict[str, Any]]]) -> None: ...

    def _store_child(self, rid: str, rtype: str, body: dict[str, Any]) -> tuple[_Resource, int]: ...

    def _page(
        self, items: Iterable[Any], render: Callable[[Any], dict[str, Any]], extra: dict[str, str]
    ) -> Response: ...
