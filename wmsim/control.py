"""A client of the simulated clouds' control endpoints (`/_sim/...`), for other processes.

The demo runs the clouds in a process of their own (`wmsim serve`) and asks them over HTTP
what a leak check, a live view or a worker agent needs: the VMs they hold, the requests they
counted, a VM's identity proof. Control requests are neither counted nor faulted by the sims.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any

from wmsim.behaviour import SimVm

HTTP_TIMEOUT_S = 10.0
LIVE_VM_STATES = frozenset({"pending", "running", "stopping"})  # anything but stopped or gone


def get_json(url: str, ca_bundle: str | None = None, method: str = "GET", body: Any = None) -> Any:
    context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=context) as response:
        return json.loads(response.read() or b"null")


@dataclass(frozen=True)
class SimClient:
    kind: str  # aws, gcp or azure
    endpoint: str
    ca_bundle: str | None = None  # the certificate of a sim served over https

    def instances(self) -> list[SimVm]:
        return [
            SimVm(
                cloud_id=str(vm["cloud_id"]),
                name=vm["name"],
                region=vm["region"],
                state=vm["state"],
                tags=vm["tags"],
                spot=bool(vm.get("spot")),
                launch_index=vm.get("launch_index"),
            )
            for vm in self._call("GET", "/_sim/instances")
        ]

    def request_counts(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in self._call("GET", "/_sim/requests").items()}

    def update_behaviour(self, **changes: Any) -> None:
        self._call("POST", "/_sim/behaviour", changes)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        return get_json(self.endpoint.rstrip("/") + path, self.ca_bundle, method, body)
