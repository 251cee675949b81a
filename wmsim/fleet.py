"""Boot simulated workers on the simulated clouds' VMs, as the VMs' images would.

`Fleet.sync()` looks at every worker row that has a cloud id and whose VM the cloud shows
running, and starts one `WorkerAgent` for it, pointed at that VM's metadata service on its
simulated cloud (`<sim endpoint>/_vm/<vm key>`): the agent learns everything else there, as
worker-runner does. An agent whose VM stops running ends with it.
The fleet reads worker rows only to know which VMs exist and the name the builtin queue knows
each worker by (wm's intent key; a Taskcluster queue would know it by workerGroup/workerId),
never to decide anything for wm.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from sqlalchemy import Engine

from wm.config.loader import Config, ProviderConfig
from wm.db.workers import list_workers
from wm.model import WorkerState
from wm.providers.base import TAG_PROVIDER
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings, WorkerAgent, run_in_thread
from wmsim.bootdata import CloudMetadata, read_retrying
from wmsim.clouds import sim_cloud
from wmsim.control import metadata_base_url

PROOF_GIVE_UP_S = 60.0


def vm_metadata(provider: ProviderConfig, cloud_id: str) -> CloudMetadata:
    """The metadata service of the VM with this cloud id, on the provider's simulated cloud."""
    base = metadata_base_url(provider.kind, provider.endpoint or "", cloud_id)
    return sim_cloud(provider.kind).metadata_reader(base, getattr(provider, "ca_bundle", None))


def vm_provider(kind: str, tags: Mapping[str, str]) -> str | None:
    """The provider id a VM's tags (labels) name: as written on EC2 and Azure, read back from
    its escaped form on GCE (wm/config/provider_ids.py); None where no provider tag is."""
    value = tags.get(TAG_PROVIDER)
    return None if value is None else sim_cloud(kind).provider_tag(value)


def proof_fetcher(
    provider: ProviderConfig, worker_id: str, zone: str, cloud_id: str, audience: str
) -> Callable[[], dict[str, str]]:
    """How a test that posts proofs itself gets a VM's genuine one: from the VM's metadata
    service, in worker-runner's shape (AWS {document, signature}, GCE {token} for `audience`,
    Azure {document}, no nonce). `worker_id` and `zone` are no longer needed (kept so that
    callers written before per-VM metadata keep working). A read the service does not answer
    is read again, as worker-runner's does, up to PROOF_GIVE_UP_S."""
    return lambda: read_retrying(
        lambda: vm_metadata(provider, cloud_id).identity_proof(audience), PROOF_GIVE_UP_S
    )


@dataclass
class Fleet:
    config: Config
    engine: Engine
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
                metadata=vm_metadata(provider, row.cloud_id),
                queue=queue,
                queue_worker_id=row.worker_id,
                capacity=row.capacity,
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
