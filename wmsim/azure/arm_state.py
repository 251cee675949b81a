"""The state a SimArm holds and the request it has in hand.

SimArm (arm.py) is made of mixins of one job each: its routes (arm_routes.py), VMs (vms.py),
the NICs, public IPs and disks made with them or on their own (attached.py), virtual networks
(networks.py), images (images.py), long-running operations (operations.py), each VM's metadata
service (vm_metadata.py) and the /_sim control routes (control.py). They share the state
declared here (and the few stores each declares beside its methods), run under `_lock`, and
call each other through `self`, as methods of the one object they are.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from werkzeug.wrappers import Request, Response

from wmsim.azure.deployments import ArmDeployments
from wmsim.azure.errors import ArmError
from wmsim.azure.resources import _json, _key, _Resource, _Vm

if TYPE_CHECKING:
    import threading

    from wmsim.signals import SignalFates, SignalValues
from wmsim.behaviour import Faults, Preemptions

# ARM chooses VM list page sizes itself (no $top on VM lists); the sim uses this unless
# behaviour.page_size_max is smaller.
DEFAULT_PAGE_SIZE = 1000


class ArmState:
    """What every part of the SimArm reads and writes (set up by SimArm.__init__)."""

    endpoint: str
    faults: Faults
    preemptions: Preemptions
    delete_missing_status: int
    deployments: ArmDeployments  # Microsoft.Resources: deployments, template specs, groups
    signals: SignalValues  # what the signal APIs serve (wmsim/azure/signals.py)
    signal_fates: SignalFates
    # Compute Recommender's Spot Placement Score, by location (wmsim/azure/signals.py)
    _spot_placement_scores: Callable[[str], Response]

    _lock: threading.RLock
    _vms: dict[str, _Vm]
    _resources: dict[str, _Resource]  # NICs, public IPs and disks
    # Handlers run under self._lock, one request at a time, so the current request can live
    # on the instance.
    _request: Request

    def _api_version(self) -> str:
        return self._request.args.get("api-version", "")

    def _body(self) -> dict[str, Any]:
        try:
            body = json.loads(self._request.get_data() or b"{}")
        except ValueError:
            raise ArmError(400, "InvalidRequestContent", "The request body is not JSON.") from None
        if not isinstance(body, dict):
            raise ArmError(400, "InvalidRequestContent", "The request body must be an object.")
        return body

    def _page(
        self, items: Iterable[Any], render: Callable[[Any], dict[str, Any]], extra: dict[str, str]
    ) -> Response:
        """A page of a list, in id order, with ARM's nextLink ($skiptoken) when more follow."""
        size = DEFAULT_PAGE_SIZE
        if self.faults.behaviour.page_size_max:
            size = min(size, self.faults.behaviour.page_size_max)
        after = self._request.args.get("$skiptoken", "").lower()
        ordered = sorted((_key(i.id), i) for i in items)
        remaining = [item for key, item in ordered if key > after]
        page, more = remaining[:size], len(remaining) > size
        body: dict[str, Any] = {"value": [render(item) for item in page]}
        if more:
            query = [f"api-version={quote(self._api_version())}"]
            query += [f"{k}={quote(v)}" for k, v in extra.items()]
            query.append(f"$skiptoken={quote(_key(page[-1].id), safe='')}")
            body["nextLink"] = f"{self.endpoint}{self._request.path}?{'&'.join(query)}"
        return _json(body)
