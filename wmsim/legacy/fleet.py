"""The legacy deployment's fleet: wmsim's simulated worker-runner (`WorkerAgent`) booted on
every running VM the stand-in made, as its image would boot it. The agent learns its boot data
and identity proof from the VM's metadata service on its simulated cloud
(`<sim endpoint>/_vm/<workerId>/`) and talks to the rootUrl written in its user data.

The builtin queue knows each such worker by `wm.take_over.marks.imported_worker_id(pool, group,
workerId)`: the name wm gives the worker's row when it imports it, so that after the move wm's
row and the agent's claims agree. An agent lives as long as its VM runs, whoever then manages
it (the stand-in, or wm after the take-over).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine

from wm.queues.builtin import BuiltinQueue
from wm.take_over.marks import imported_worker_id
from wmsim.agent import AgentSettings, WorkerAgent, run_in_thread
from wmsim.clouds import sim_cloud
from wmsim.legacy.manager import LegacyWorkerManager
from wmsim.legacy.provisioner import LegacyProvider


@dataclass
class LegacyFleet:
    manager: LegacyWorkerManager
    engine: Engine
    providers: Sequence[LegacyProvider]
    settings: AgentSettings = field(default_factory=AgentSettings)
    interval_s: float = 0.3
    agents: dict[tuple[str, str], WorkerAgent] = field(default_factory=dict)  # (provider, VM)
    booted: list[WorkerAgent] = field(default_factory=list)  # every agent started, ended or not
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def sync(self) -> int:
        """Boot an agent on every running VM of a worker the stand-in requested that has none
        yet; end the agents whose VM no longer runs (a worker dies with its VM). Returns how
        many it started."""
        queue = BuiltinQueue(self.engine)
        started = 0
        for provider in self.providers:
            running = {key for key, vm in provider.vms().items() if vm.state == "running"}
            for (provider_id, key), agent in list(self.agents.items()):
                if provider_id == provider.provider_id and key not in running:
                    agent.stop.set()
                    del self.agents[(provider_id, key)]
            for worker in self.manager.workers(state="requested"):
                vm = (provider.provider_id, worker.worker_id)
                if worker.provider_id != provider.provider_id or vm in self.agents:
                    continue
                if worker.worker_id not in running:
                    continue
                agent = WorkerAgent(
                    metadata=sim_cloud(provider.kind).metadata_reader(
                        provider.metadata_url(worker.worker_id), provider.ca_bundle
                    ),
                    queue=queue,
                    queue_worker_id=imported_worker_id(
                        worker.worker_pool_id, worker.worker_group, worker.worker_id
                    ),
                    capacity=worker.capacity,
                    settings=self.settings,
                )
                self.agents[vm] = agent
                self.booted.append(agent)
                run_in_thread(agent)
                started += 1
        return started

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="legacy-fleet")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sync()
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop booting and stop every agent (the test is over)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for agent in self.agents.values():
            agent.stop.set()
