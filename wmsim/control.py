"""A client of the simulated clouds' control endpoints (`/_sim/...`), for other processes, and
where each VM's metadata service is.

The demo runs the clouds in a process of their own (`wmsim serve`) and asks them over HTTP
what a leak check or a live view needs: the VMs they hold, the requests they counted. Control
requests are neither counted nor faulted by the sims.

A VM's metadata service (what a worker on it reads its boot data and identity proof from) is
at `metadata_base_url(kind, endpoint, cloud_id)`: `<sim endpoint>/_vm/<vm key>`, the key being
the EC2 instance id, the GCE numeric instance id, or the Azure VM name (the last segment of
its resource id); below it, each cloud's own paths (wmsim/metadata.py).
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from dataclasses import dataclass
from typing import Any

from wmsim import metadata
from wmsim.behaviour import SimVm
from wmsim.clouds import sim_cloud

HTTP_TIMEOUT_S = 10.0
LIVE_VM_STATES = frozenset({"pending", "running", "stopping"})  # anything but stopped or gone


def get_json(url: str, ca_bundle: str | None = None, method: str = "GET", body: Any = None) -> Any:
    context = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else None
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S, context=context) as response:
        return json.loads(response.read() or b"null")


def vm_key(kind: str, cloud_id: str) -> str:
    """How the sim of this cloud kind addresses a VM's metadata: the workerId worker-runner
    reports there (EC2 instance id, GCE numeric id, Azure VM name)."""
    return sim_cloud(kind).vm_key(cloud_id)


def metadata_base_url(kind: str, endpoint: str, cloud_id: str) -> str:
    """The metadata base URL of the VM with this cloud id (wm's `cloud_id`) on the sim at
    `endpoint`: EC2 `<it>/latest/...`, GCE `<it>/computeMetadata/v1/...`, Azure
    `<it>/metadata/...`."""
    return metadata.base_url(endpoint, vm_key(kind, cloud_id))


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

    def use_market(
        self, scenario: str | None, *, seed: int = 1, speed: float = 1.0, start_s: float = 0.0
    ) -> dict[str, Any]:
        """Make the sim obey this market scenario from now on (None: no market), on a clock
        `speed` times real time (wmsim/market_sim.py); the market's state as the sim holds it."""
        body = {"scenario": scenario, "seed": seed, "speed": speed, "start_s": start_s}
        return dict(self._call("POST", "/_sim/market", body))

    def market(self) -> dict[str, Any]:
        """The market the sim obeys: scenario, seed, speed and the market's time (`now_s`)."""
        return dict(self._call("GET", "/_sim/market"))

    def ledger(self) -> dict[str, Any]:
        """What the sim has billed under its market: `total` dollars, `by_pool`,
        `by_launch_config` ("pool/launch config") and per instance; zero without a market."""
        return dict(self._call("GET", "/_sim/ledger"))

    def resources(self) -> list[str]:
        """Simulated ARM: the ids of every VM, NIC, public IP and disk it holds."""
        return [str(r) for r in self._call("GET", "/_sim/resources")]

    def control(self, path: str, body: Any) -> Any:
        """POST to one of the sim's /_sim/ control endpoints (seeding what an operator made)."""
        return self._call("POST", "/_sim/" + path.lstrip("/"), body)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        return get_json(self.endpoint.rstrip("/") + path, self.ca_bundle, method, body)
