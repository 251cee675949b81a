"""The demo's hand-made machines: a rack of workers in a worker-manager `static` pool.

An operator's steps, as the README tells them: createWorker for each machine (the real
`taskcluster` client, with the demo's operator credentials, against the web process), each
with a secret of its own; then the machine's worker-runner, configured with its static
provider (the config is written to `<out>/rack/<workerId>.yml`, as it would go on the machine),
registers with that secret. At the end of the run the operator retires them (removeWorker):
worker-manager then tells them to terminate, and they exit.

The demo reads worker rows only to learn the name the builtin queue knows each machine by
(wm's own worker id, as for the cloud workers), never to decide anything for wm.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import taskcluster
import yaml
from sqlalchemy import Engine

from wm.db.workers import list_workers
from wm.errors import WmError
from wm.queues.builtin import BuiltinQueue
from wmsim.agent import AgentSettings, WorkerAgent, run_in_thread
from wmsim.hand_made import StaticProviderConfig, hand_made_worker, new_static_secret

RACK_GROUP = "rack-1"  # the workerGroup the operator gives the machines: where they stand
EXPIRES_AFTER = timedelta(days=1)  # createWorker's expires: well past the demo


@dataclass(frozen=True)
class StaticPool:
    """A static pool of the demo and the machines it gets."""

    pool_id: str
    provider_id: str
    machines: int
    capacity: int  # tasks each machine runs at once


@dataclass
class Machine:
    pool_id: str
    worker_group: str
    worker_id: str
    agent: WorkerAgent
    thread: threading.Thread


@dataclass
class Rack:
    root_url: str
    operator: dict[str, str]  # {clientId, accessToken}: the demo's operator client
    out_dir: Path
    settings: AgentSettings = field(default_factory=AgentSettings)
    machines: list[Machine] = field(default_factory=list)
    retired: bool = False

    def _client(self) -> Any:
        return taskcluster.WorkerManager({"rootUrl": self.root_url, "credentials": self.operator})

    def join(self, engine: Engine, pool: StaticPool) -> list[Machine]:
        """createWorker for each machine of the pool, then start its worker-runner."""
        client = self._client()
        expires = datetime.now(UTC) + EXPIRES_AFTER
        joined = []
        for number in range(1, pool.machines + 1):
            worker_id = f"{pool.pool_id.rpartition('/')[2]}-{number:02d}"
            secret = new_static_secret()
            client.createWorker(
                pool.pool_id,
                RACK_GROUP,
                worker_id,
                {
                    "expires": expires.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                    "capacity": pool.capacity,
                    "providerInfo": {"staticSecret": secret},
                },
            )
            config = StaticProviderConfig(
                root_url=self.root_url,
                provider_id=pool.provider_id,
                worker_pool_id=pool.pool_id,
                worker_group=RACK_GROUP,
                worker_id=worker_id,
                static_secret=secret,
                worker_location={"rack": RACK_GROUP},
            )
            self._write_runner_config(config)
            agent = hand_made_worker(
                config,
                BuiltinQueue(engine),
                _queue_name(engine, pool.pool_id, RACK_GROUP, worker_id),
                capacity=pool.capacity,
                settings=self.settings,
            )
            machine = Machine(pool.pool_id, RACK_GROUP, worker_id, agent, run_in_thread(agent))
            self.machines.append(machine)
            joined.append(machine)
        return joined

    def _write_runner_config(self, config: StaticProviderConfig) -> None:
        directory = self.out_dir / "rack"
        directory.mkdir(parents=True, exist_ok=True)
        document = {
            "provider": config.runner_config(),
            "worker": {"implementation": "generic-worker"},
        }
        path = directory / f"{config.worker_id}.yml"
        path.touch(mode=0o600)  # it holds the machine's secret: its owner's alone
        path.write_text(
            "# worker-runner's config on this hand-made machine (written by `wmsim demo`)\n"
            + yaml.safe_dump(document, sort_keys=False)
        )

    def retire(self) -> None:
        """removeWorker for every machine, once (the operator takes them out of service)."""
        if self.retired:
            return
        self.retired = True
        client = self._client()
        for machine in self.machines:
            client.removeWorker(machine.pool_id, machine.worker_group, machine.worker_id)

    def registered(self) -> int:
        return sum(1 for m in self.machines if "registered" in m.agent.events)

    def halt(self) -> None:
        """Stop every machine's worker (the demo is over)."""
        for machine in self.machines:
            machine.agent.stop.set()


def _queue_name(engine: Engine, pool_id: str, group: str, worker_id: str) -> str:
    """wm's own id of the worker createWorker made: the name its tasks are claimed under."""
    for row in list_workers(engine, pool_id=pool_id, limit=None):
        if row.worker_group == group and worker_id in (row.tc_worker_id, row.worker_id):
            return row.worker_id
    raise WmError(f"createWorker answered, but wm has no row for {pool_id}/{group}/{worker_id}")
