"""Boot simulated worker agents on the simulated clouds' VMs, as the VMs' images would.

`Fleet.sync()` looks at every worker row that has a cloud id and whose VM the cloud shows
running, and starts one `WorkerAgent` for it, with a proof fetcher that asks that VM's
simulated cloud for its identity proof over HTTP (as a worker asks its metadata service); an
agent whose VM stops running ends with it.
The fleet reads worker rows only to know which worker a VM is — what a real VM learns from its
own metadata (name, tags, or EC2's launch index) — never to decide anything for wm.
"""

from __future__ import annotations

import secrets
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from wm.config import Config, ProviderConfig
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers.azure import vm_name
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentIdentity, AgentSettings, WorkerAgent, run_in_thread
from wmsim.control import get_json


def proof_fetcher(
    provider: ProviderConfig, worker_id: str, zone: str, cloud_id: str, audience: str
) -> Callable[[], dict[str, Any]]:
    """How the VM asks its (simulated) metadata service for its identity proof."""
    base = (provider.endpoint or "").rstrip("/")
    quote = urllib.parse.quote
    if provider.kind == "aws":
        return lambda: get_json(f"{base}/_sim/identity/{quote(cloud_id)}")
    if provider.kind == "gcp":
        query = urllib.parse.urlencode({"audience": audience})
        return lambda: get_json(f"{base}/_sim/identity/{quote(zone)}/{quote(worker_id)}?{query}")

    def attested() -> dict[str, Any]:
        nonce = secrets.token_hex(8)
        url = f"{base}/_sim/attested/{quote(vm_name(worker_id))}?nonce={nonce}"
        return get_json(url, getattr(provider, "ca_bundle", None))

    return attested


@dataclass
class Fleet:
    config: Config
    engine: Engine
    api_url: str
    settings: AgentSettings = field(default_factory=AgentSettings)
    # provider id -> ids of the VMs that run (booted): from the simulated clouds
    running_vms: Callable[[], Mapping[str, set[str]]] = lambda: {}
    agents: dict[str, WorkerAgent] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    _vms: dict[str, tuple[str, str]] = field(default_factory=dict)  # worker -> (provider, VM)

    def sync(self) -> int:
        """Start an agent for every booted VM that has none yet, and end the agents whose VM
        no longer runs (pre-empted, killed: a worker dies with its VM, mid-task, without a
        goodbye); return how many started."""
        booted = self.running_vms()
        if self.stop.is_set():
            self.halt()
            return 0
        for worker_id, (provider_id, cloud_id) in list(self._vms.items()):
            if cloud_id not in booted.get(provider_id, set()):
                self.agents[worker_id].stop.set()
                del self._vms[worker_id]
        started = 0
        queue = BuiltinQueue(self.engine)
        for row in list_workers(self.engine, state=WorkerState.REQUESTED):
            if row.worker_id in self.agents or not row.cloud_id:
                continue
            if row.cloud_id not in booted.get(row.provider_id, set()):
                continue
            provider = self.config.provider(row.provider_id)
            agent = WorkerAgent(
                api_url=self.api_url,
                identity=AgentIdentity(
                    row.pool_id, row.provider_id, row.worker_group, row.worker_id, row.capacity
                ),
                fetch_proof=proof_fetcher(
                    provider,
                    row.worker_id,
                    row.worker_group,
                    row.cloud_id,
                    self.config.root_url,
                ),
                queue=queue,
                settings=self.settings,
            )
            self.agents[row.worker_id] = agent
            self._vms[row.worker_id] = (row.provider_id, row.cloud_id)
            run_in_thread(agent)
            started += 1
        return started

    def halt(self) -> None:
        """Stop every agent (the demo is over)."""
        self.stop.set()
        for agent in self.agents.values():
            agent.stop.set()
