"""The legacy deployment's background loops, as worker-manager runs them: its provisioner
(provisioner.js + estimator.js: demand from the queue, capacity from its own workers, VMs made
through each provider) and its worker scanner (worker-scanner.js + the providers' checkWorker:
VMs gone make workers stopped, a passed `terminateAfter` removes the worker, expiry).

The queue is wm's builtin queue over wm's Postgres: it stands in for the Taskcluster queue for
both services. VMs are made and deleted by the launchers of wmsim/<kind>/legacy.py (through the
sim's `SimCloud.legacy_launch` / `legacy_terminate`), exactly as worker-manager makes them.

A provider removed from the deployment (`LegacyWorkerManager.remove_provider`) is, as in
worker-manager once its config no longer names it: its pools are skipped with a warning
("has unknown providerId"), its workers are not checked but their `expires` still extended
(worker-scanner.js), and its VMs are left running.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine

from wm.queues.builtin import BuiltinQueue
from wmsim import metadata
from wmsim.behaviour import SimVm
from wmsim.cloud import LegacyLaunch, LegacyVm
from wmsim.clouds import sim_cloud
from wmsim.control import LIVE_VM_STATES, SimClient
from wmsim.legacy.manager import LegacyWorkerManager
from wmsim.legacy.proofs import proof_vm_id
from wmsim.legacy.store import Pool, Worker, launch_config_id

log = logging.getLogger(__name__)

WORKER_EXPIRES = timedelta(weeks=1)  # providers' Worker.create: expires fromNow('1 week')
EXTEND_BELOW = timedelta(weeks=1)  # worker-scanner.js: expires < fromNow('1 week') ...
EXTEND_TO = timedelta(days=8)  # ... becomes fromNow('8 days')
MAX_LAUNCHES_PER_POOL = 10  # a bound per loop, so one loop stays short


@dataclass(frozen=True)
class LegacyProvider:
    """One provider of the deployment on a simulated cloud: its providerId, its Taskcluster
    providerType (aws, google, azure: what listProviders answers), the wmsim cloud kind it runs
    on, and the launcher settings (wmsim.cloud.LegacyLaunch.settings: `endpoint`, `ca_bundle`,
    and GCE's `project`, Azure's `subscription_id`, `resource_group`...)."""

    provider_id: str
    provider_type: str
    kind: str
    settings: Mapping[str, Any]

    @property
    def endpoint(self) -> str:
        return str(self.settings["endpoint"])

    @property
    def ca_bundle(self) -> str | None:
        value = self.settings.get("ca_bundle")
        return str(value) if value else None

    def vms(self) -> dict[str, SimVm]:
        """The cloud's VMs by their metadata key (= worker-manager's workerId for them)."""
        cloud = sim_cloud(self.kind)
        return {
            cloud.vm_key(vm.cloud_id): vm
            for vm in SimClient(self.kind, self.endpoint, self.ca_bundle).instances()
        }

    def metadata_url(self, worker_id: str) -> str:
        return metadata.base_url(self.endpoint, worker_id)

    def launch(self, launch: LegacyLaunch) -> LegacyVm:
        launcher = sim_cloud(self.kind).legacy_launch
        assert launcher is not None, f"no legacy launcher for {self.kind}"
        return launcher(launch)

    def terminate(self, worker: Worker) -> None:
        terminator = sim_cloud(self.kind).legacy_terminate
        assert terminator is not None, f"no legacy terminator for {self.kind}"
        vm = LegacyVm(
            worker_id=worker.worker_id,
            worker_group=worker.worker_group,
            capacity=worker.capacity,
            provider_data=worker.provider_data,
        )
        terminator(self.settings, vm)

    def attested_id(self, worker: Worker, audience: str) -> str | None:
        """The VM id the VM's own identity proof names (its metadata service): what a proof
        sent for this worker must name. worker-manager knows it from the cloud's API (EC2 and
        GCE: the workerId; Azure: the VM's vmId)."""
        reader = sim_cloud(self.kind).metadata_reader(
            self.metadata_url(worker.worker_id), self.ca_bundle
        )
        return proof_vm_id(reader.identity_proof(audience))


def to_spawn(
    *,
    pending: int,
    claimed: int,
    existing: int,
    stopping: int,
    requested: int,
    min_capacity: int,
    max_capacity: int,
    scaling_ratio: float = 1.0,
) -> int:
    """estimator.js `simple`: the capacity to launch (existing = requested + running)."""
    idle = max(0, existing - claimed)
    adjusted_pending = max(0, pending - idle)
    non_stopped = existing + stopping
    desired = max(min_capacity, min(adjusted_pending * scaling_ratio + non_stopped, max_capacity))
    spawn = max(0, desired - non_stopped)
    return max(math.ceil(spawn - requested), 0)


def _seconds(lifecycle: Mapping[str, Any], key: str) -> float | None:
    value = lifecycle.get(key)
    return float(value) if value else None


@dataclass
class LegacyProvisioner:
    manager: LegacyWorkerManager
    engine: Engine
    providers: Sequence[LegacyProvider]
    interval_s: float = 0.5
    warnings: list[str] = field(default_factory=list)
    launched: int = 0
    loops: int = 0  # loops run to the end (tests wait for loops, not for time)
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _next_config: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        deployment = self.manager.deployment
        for provider in self.providers:
            deployment.remove_hooks[provider.provider_id] = provider.terminate
            deployment.proof_readers[provider.provider_id] = self._reader(provider)

    def _reader(self, provider: LegacyProvider) -> Callable[[Worker], str | None]:
        return lambda worker: provider.attested_id(worker, self.manager.root_url)

    # -- the loops -------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True, name="legacy-provisioner")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as error:  # a loop that fails is logged and run again, as in TC
                log.exception("legacy worker-manager loop failed")
                self.failures.append(repr(error))
            self._stop.wait(self.interval_s)

    def run_once(self) -> None:
        vms = {p.provider_id: p.vms() for p in self.providers if self._present(p.provider_id)}
        self.scan(vms)
        self.provision()
        self.loops += 1

    def _present(self, provider_id: str) -> bool:
        deployment = self.manager.deployment
        return (
            provider_id in deployment.providers and provider_id not in deployment.removed_providers
        )

    def _provider(self, provider_id: str) -> LegacyProvider | None:
        if not self._present(provider_id):
            return None
        return next((p for p in self.providers if p.provider_id == provider_id), None)

    # -- provisioner.js --------------------------------------------------------------------------

    def provision(self) -> None:
        store = self.manager.store
        with store.lock:
            pools = store.sorted_pools()
        counts = BuiltinQueue(self.engine).counts([p.worker_pool_id for p in pools])
        for pool in pools:
            provider = self._provider(pool.provider_id)
            if provider is None:
                warning = (
                    f"Worker pool {pool.worker_pool_id} has unknown providerId {pool.provider_id}"
                )
                if warning not in self.warnings:
                    self.warnings.append(warning)
                    log.warning(warning)
                continue
            queued = counts.get(pool.worker_pool_id)
            with store.lock:
                workers = store.pool_workers(pool.worker_pool_id)
            capacity = {
                s: sum(w.capacity for w in workers if w.state == s)
                for s in ("requested", "running", "stopping")
            }
            spawn = to_spawn(
                pending=queued.pending if queued else 0,
                claimed=queued.claimed if queued else 0,
                existing=capacity["requested"] + capacity["running"],
                stopping=capacity["stopping"],
                requested=capacity["requested"],
                min_capacity=int(pool.config.get("minCapacity", 0)),
                max_capacity=int(pool.config.get("maxCapacity", 0)),
                scaling_ratio=float(pool.config.get("scalingRatio", 1.0)),
            )
            launched = 0
            while spawn > 0 and launched < MAX_LAUNCHES_PER_POOL and pool.launch_configs():
                if not self._present(provider.provider_id):
                    break  # removed meanwhile: worker-manager restarted without it
                made = self._launch(provider, pool)
                if made is None:
                    break
                spawn -= made.capacity
                launched += 1

    def _launch(self, provider: LegacyProvider, pool: Pool) -> Worker | None:
        """One VM of the pool's next launch config, and its worker row (requested)."""
        configs = pool.launch_configs()
        index = self._next_config.get(pool.worker_pool_id, 0) % len(configs)
        self._next_config[pool.worker_pool_id] = index + 1
        config = configs[index]
        lc_id = launch_config_id(self.engine, pool.worker_pool_id, config)
        try:
            vm = provider.launch(
                LegacyLaunch(
                    settings=provider.settings,
                    provider_id=provider.provider_id,
                    root_url=self.manager.root_url,
                    pool_id=pool.worker_pool_id,
                    owner=pool.owner,
                    launch_config_id=lc_id,
                    launch_config=config,
                    description=pool.description,
                )
            )
        except Exception as error:  # worker-manager reports a launch error on the pool
            self.failures.append(f"{pool.worker_pool_id}: {error!r}")
            log.warning("legacy launch in %s failed: %r", pool.worker_pool_id, error)
            return None
        now = datetime.now(UTC)
        lifecycle = pool.config.get("lifecycle") or {}
        registration = _seconds(lifecycle, "registrationTimeout")
        reregistration = _seconds(lifecycle, "reregistrationTimeout")
        provider_data: dict[str, Any] = {
            **vm.provider_data,
            "workerConfig": vm.provider_data.get("workerConfig")
            or config.get("workerConfig")
            or {},
            "reregistrationTimeout": (reregistration or 96 * 3600) * 1000,
        }
        if registration:
            provider_data["terminateAfter"] = (now.timestamp() + registration) * 1000
        self.launched += 1
        return self.manager.add_worker(
            pool.worker_pool_id,
            vm.worker_group,
            vm.worker_id,
            provider_id=provider.provider_id,
            capacity=vm.capacity,
            launch_config_id=lc_id,
            expires=now + WORKER_EXPIRES,
            provider_data=provider_data,
        )

    # -- worker-scanner.js -----------------------------------------------------------------------

    def scan(self, vms: Mapping[str, Mapping[str, SimVm]]) -> None:
        now = datetime.now(UTC)
        store = self.manager.store
        with store.lock:
            workers = [w for w in store.workers.values() if w.state != "stopped"]
        for worker in workers:
            provider = self._provider(worker.provider_id)
            if provider is not None:
                self._check(provider, worker, vms.get(provider.provider_id, {}), now)
            with store.lock:
                if worker.expires < now + EXTEND_BELOW:
                    worker.expires = now + EXTEND_TO
        with store.lock:
            for key in [k for k, w in store.workers.items() if w.expires < now]:
                del store.workers[key]  # the expire-workers job

    def _check(
        self, provider: LegacyProvider, worker: Worker, vms: Mapping[str, SimVm], now: datetime
    ) -> None:
        """A provider's checkWorker: the VM gone or ended makes the worker stopped; a passed
        terminateAfter (registration or reregistration timeout) removes it."""
        vm = vms.get(worker.worker_id)
        store = self.manager.store
        if vm is None or vm.state not in LIVE_VM_STATES:
            with store.lock:
                worker.state = "stopped"
                worker.last_modified = worker.last_checked = now
            return
        terminate_after = worker.provider_data.get("terminateAfter")
        if (
            worker.state != "stopping"
            and terminate_after
            and terminate_after < now.timestamp() * 1000
        ):
            self.manager.deployment.remove_worker(worker)
        with store.lock:
            worker.last_checked = now
