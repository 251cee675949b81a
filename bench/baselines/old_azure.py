"""The old way to make an Azure worker: public IP, then NIC, then VM, one step per scan loop.

What it reproduces (DESIGN.md: "Azure needs several resources per VM (public IP, NIC, VM,
disks). Driven one resource per scan loop, 296 VMs needed 3+ loops just for their IP"), after
Taskcluster's `services/worker-manager/src/providers/azure/index.js`:

- The provisioner makes no cloud call: it writes the worker (here its row, state requested,
  and the names of its IP, NIC and VM). Everything else is the scanner's.
- Each scan loop checks every worker still being made, two at a time, in order:
  `queryInstance` reads the VM's instance view (404 while there is no VM); then, until the
  worker is complete, `provisionResource` for the IP, then the NIC, then the VM: a resource
  without an id is looked up by name; found, its id is kept and the next resource is looked
  at in the same check; not found, it is created (one PUT) and the check ends there. So a
  worker needs a loop for its IP, one for its NIC, one for its VM, and one that finds the VM,
  before the VM's boot even counts. The NIC names the IP by id, the VM names the NIC by id.
- Each check ends with a database write (`worker.update`: here last_checked, or the state
  when the instance view says the VM runs).
- The loop waits `wait_s` after it ends before the next begins (taskcluster-lib-iterate's
  waitTime), and takes as long as its calls do: the work of a loop grows with the workers.
- A worker counts as running once a loop sees PowerState/running in its instance view
  (the point where wm's scanner moves a row of a pool without registration to running).

What it leaves out, in the old design's favour: the polls of each create's async operation
(the simulated ARM finishes IP and NIC creates at once, so the next loop always finds them),
error handling and resource teardown, data disks. Calls go through the same SDKs, the same
gate (same rate limit) and the same simulated ARM as wm's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine

from wm.calls import CallClass
from wm.db import scan_writes, scans
from wm.errors import CloudError, ErrorCategory
from wm.kinds.azure import AzureProviderConfig
from wm.model import LaunchSpec, WorkerState
from wm.providers.azure.clients import AzureClients
from wm.providers.azure.errors import classify
from wm.providers.azure.names import vm_name
from wm.providers.azure.provider import CALL_CLASSES
from wm.providers.azure.states import read_statuses
from wm.providers.azure.vm_body import vm_body
from wm.providers.base import TAG_DEPLOYMENT, TAG_POOL, TAG_WORKER
from wm.providers.gate import provider_gate
from wm.workers.transitions import STARTED, RowChange

OLD_SCANNER_CONCURRENCY = 2
ADMIN_PASSWORD_PREFIX = "Wm-9old-"


@dataclass
class OldWorker:
    """One worker being made the old way: what the old providerData held."""

    worker_id: str
    ip_id: str | None = None
    nic_id: str | None = None
    vm_id: str | None = None
    complete: bool = False  # every resource found (providerData.provisioningComplete)
    running: bool = False  # a loop saw PowerState/running

    @property
    def names(self) -> dict[str, str]:
        return {kind: vm_name(self.worker_id, f"{kind}-") for kind in ("ip", "nic", "vm")}


@dataclass(frozen=True)
class LoopReport:
    started: float  # time.monotonic()
    ended: float
    checked: int
    newly_running: tuple[str, ...]


# The old design's calls, classed as wm's Azure provider classes its own (CALL_CLASSES).
OLD_CALL_CLASSES: Mapping[str, tuple[CallClass, ...]] = {
    "PublicIPAddresses_Get": (CallClass.READ,),
    "PublicIPAddresses_CreateOrUpdate": (CallClass.WRITE,),
    "NetworkInterfaces_Get": (CallClass.READ,),
    "NetworkInterfaces_CreateOrUpdate": (CallClass.WRITE,),
    "VirtualMachines_Get": CALL_CLASSES["VirtualMachines_Get"],
    "VirtualMachines_CreateOrUpdate": CALL_CLASSES["VirtualMachines_CreateOrUpdate"],
    "VirtualMachines_InstanceView": CALL_CLASSES["VirtualMachines_Get"],
}


@dataclass
class OldAzureScanner:
    engine: Engine
    config: AzureProviderConfig
    deployment_id: str
    pool_id: str
    spec: LaunchSpec
    concurrency: int = OLD_SCANNER_CONCURRENCY
    workers: dict[str, OldWorker] = field(default_factory=dict)
    errors: int = 0  # checks that met a cloud error
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # Paced as wm's own Azure gate is: by ARM's and Compute's buckets, class by class.
        self.gate = provider_gate(self.config, classify, OLD_CALL_CLASSES)
        self.clients = AzureClients(self.config)
        self._rg = self.config.resource_group
        self._versions: dict[str, int] = {}

    def close(self) -> None:
        self.gate.close()
        self.clients.close()

    # -- the provisioner: rows only -----------------------------------------------------------

    def requested(self, worker_ids: Sequence[str]) -> None:
        """Workers the provisioner wrote (their rows exist); the scanner makes them."""
        with self._lock:
            for worker_id in worker_ids:
                self.workers[worker_id] = OldWorker(worker_id)

    # -- the scanner ----------------------------------------------------------------------------

    def loop(self) -> LoopReport:
        """Check every worker not yet seen running, `concurrency` at a time."""
        started = time.monotonic()
        pending = [w for w in self.workers.values() if not w.running]
        live = {
            r.worker_id: r
            for r in scans.live_workers(self.engine, self.config.id, self.spec.region)
        }
        self._versions = {worker_id: row.version for worker_id, row in live.items()}
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="old-azure") as pool:
            seen_running = list(pool.map(self._check, pending))
        newly = tuple(
            w.worker_id for w, running in zip(pending, seen_running, strict=True) if running
        )
        return LoopReport(started, time.monotonic(), len(pending), newly)

    def _check(self, worker: OldWorker) -> bool:
        try:
            power = self._instance_power(worker)
            if power is not None and power.lower() == "running":
                worker.running = True
                version = self._versions.get(worker.worker_id, 0)
                change = RowChange(worker.worker_id, version, WorkerState.REQUESTED, STARTED)
                scan_writes.apply_changes(self.engine, [change])
                return True
            self._provision(worker)
        except CloudError:
            with self._lock:  # the old scanner reported it and tried again next loop
                self.errors += 1
        scan_writes.mark_checked(self.engine, [worker.worker_id])
        return False

    def _instance_power(self, worker: OldWorker) -> str | None:
        """The VM's power state from its instance view; None while there is no VM."""
        try:
            view = self.gate.call(
                "VirtualMachines_InstanceView",
                self.clients.compute.virtual_machines.instance_view,
                self._rg,
                worker.names["vm"],
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return None
            raise
        _provisioning, power, _failure = read_statuses(view.statuses)
        return power

    def _provision(self, worker: OldWorker) -> None:
        """provisionResources: advance the first resource without an id by one step."""
        if worker.complete:
            return
        steps: list[tuple[str, Callable[[OldWorker], dict[str, Any]]]] = [
            ("ip", self._ip_body),
            ("nic", self._nic_body),
            ("vm", self._vm_body),
        ]
        for kind, body in steps:
            if getattr(worker, f"{kind}_id") is None and not self._found_or_created(
                worker, kind, body
            ):
                return
        worker.complete = True

    def _found_or_created(
        self, worker: OldWorker, kind: str, body: Callable[[OldWorker], dict[str, Any]]
    ) -> bool:
        """Look the resource up by name: found, keep its id (True); else create it (False)."""
        client, get_op, put_op = self._client(kind)
        name = worker.names[kind]
        try:
            resource = self.gate.call(get_op, client.get, self._rg, name)
        except CloudError as error:
            if error.category is not ErrorCategory.NOT_FOUND:
                raise
            self.gate.call(put_op, _put, client, self._rg, name, body(worker))
            return False
        setattr(worker, f"{kind}_id", resource.id)
        return True

    def _client(self, kind: str) -> tuple[Any, str, str]:
        if kind == "ip":
            client, prefix = self.clients.network.public_ip_addresses, "PublicIPAddresses"
        elif kind == "nic":
            client, prefix = self.clients.network.network_interfaces, "NetworkInterfaces"
        else:
            client, prefix = self.clients.compute.virtual_machines, "VirtualMachines"
        return client, f"{prefix}_Get", f"{prefix}_CreateOrUpdate"

    # -- resource bodies ----------------------------------------------------------------------

    def _tags(self, worker: OldWorker) -> dict[str, str]:
        return {
            TAG_DEPLOYMENT: self.deployment_id,
            TAG_POOL: self.pool_id,
            TAG_WORKER: worker.worker_id,
        }

    def _ip_body(self, worker: OldWorker) -> dict[str, Any]:
        return {
            "location": self.spec.region,
            "tags": self._tags(worker),
            "properties": {"publicIPAllocationMethod": "Dynamic"},
        }

    def _nic_body(self, worker: OldWorker) -> dict[str, Any]:
        ip_config = {
            "name": worker.names["nic"],
            "properties": {
                "privateIPAllocationMethod": "Dynamic",
                "publicIPAddress": {"id": worker.ip_id},
            },
        }
        return {
            "location": self.spec.region,
            "tags": self._tags(worker),
            "properties": {"ipConfigurations": [ip_config]},
        }

    def _vm_body(self, worker: OldWorker) -> dict[str, Any]:
        body = vm_body(
            launch_config=self.spec.launch_config,
            location=self.spec.region,
            worker_id=worker.worker_id,
            tags=self._tags(worker),
            admin_username="wmold",
            admin_password=ADMIN_PASSWORD_PREFIX + worker.worker_id,
        )
        # The NIC made in an earlier loop, by id, instead of one inline.
        body["properties"]["networkProfile"] = {
            "networkInterfaces": [{"id": worker.nic_id, "properties": {"primary": True}}]
        }
        return body


def _put(client: Any, group: str, name: str, body: dict[str, Any]) -> Any:
    # The initial answer is all the old code kept (the operation's URL); nothing is awaited.
    return client.begin_create_or_update(group, name, body, polling=False).result()
