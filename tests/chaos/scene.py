"""Helpers the chaos scenarios share: sizes, per-cloud names, configs, waits, samplers, and
the figures each scenario measured.

Each scenario runs its short form in `make test`; its long form (bigger sizes, or one test per
repetition) is a `size` parameter marked `chaos_long`, which `make test` deselects and
`make chaos` selects.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests
from sqlalchemy import Engine
from werkzeug.test import Client

from tests.support.stack import (
    AZURE_SUBSCRIPTION,
    FAST_GATE,
    MACHINES,
    WmProcess,
    aws_provider,
    azure_provider,
    gcp_provider,
)
from wm.db.workers import capacity_by_pool
from wm.model import WorkerRecord
from wm.providers.azure.names import vm_name
from wm.providers.azure.vm_body import vm_body
from wm.providers.gcp.insert_body import request_id
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.azure.launch_configs import example_launch_config, image_reference
from wmsim.gcp.gce import SimGce

KINDS = ("aws", "gcp", "azure")
# The operation each simulated cloud journals for a create and a delete.
CREATE_OPERATION = {
    "aws": "RunInstances",
    "gcp": "instances.insert",
    "azure": "VirtualMachines_CreateOrUpdate",
}
DELETE_OPERATION = {
    "aws": "TerminateInstances",
    "gcp": "instances.delete",
    "azure": "VirtualMachines_Delete",
}
PROVIDER_IDS = {"aws": "aws-sim", "gcp": "gcp-sim", "azure": "azure-sim"}
# EC2 launches one batch per launch config: three configs give three RunInstances.
AWS_MACHINES = ("m5.large", "m5.xlarge", "c5.large")
GCE_PROJECT = "wm-test"  # tests.support.stack's GCE project and Azure resource group
AZURE_GROUP = "wm-test"
WAIT_POLL_S = 0.05
# A worker row's stamps, in the order of its life (worker_history).
HISTORY_STAMPS = (
    "created",
    "expires",
    "accepted_at",
    "unanswered_at",
    "cloud_running_at",
    "registered_at",
    "stopping_at",
    "delete_called_at",
    "stopped_at",
)
LONG = pytest.mark.chaos_long


def sizes(short: object, *longs: object) -> list:
    """A scenario's `size` parameter: the short form, then the long ones (bigger sizes, or one
    per repetition) marked `chaos_long`."""
    return [
        pytest.param(short, id="short"),
        *(
            pytest.param(long, id="long" if len(longs) == 1 else f"long-{i}", marks=LONG)
            for i, long in enumerate(longs)
        ),
    ]


@dataclass
class Clouds:
    """The three simulated clouds of one test."""

    ec2: SimEc2
    gce: SimGce
    arm: SimArm

    @property
    def sims(self) -> tuple[SimEc2, SimGce, SimArm]:
        return (self.ec2, self.gce, self.arm)

    def of(self, kind: str) -> SimEc2 | SimGce | SimArm:
        return {"aws": self.ec2, "gcp": self.gce, "azure": self.arm}[kind]


@dataclass
class Figures:
    """What the scenarios measured, per test: printed in the run's summary."""

    rows: dict[str, dict[str, object]] = field(default_factory=lambda: defaultdict(dict))
    _name: str = ""

    def for_test(self, node: pytest.Item) -> Figures:
        scenario = node.module.__name__.rsplit(".", 1)[1].removeprefix("test_")
        return Figures(self.rows, f"{scenario}: {node.name.removeprefix('test_')}")

    def record(self, **values: object) -> None:
        self.rows[self._name].update(values)

    def add(self, **values: int) -> None:
        """Add to counted figures (repetitions inside one test)."""
        row = self.rows[self._name]
        for key, value in values.items():
            row[key] = int(row.get(key, 0)) + value  # type: ignore[call-overload]

    def lines(self) -> Iterator[str]:
        for name, values in sorted(self.rows.items()):
            yield f"{name}: " + ", ".join(f"{k}={v}" for k, v in values.items())


FIGURES = Figures()


def provider_config(kind: str, sim: Any, **changes: Any) -> dict[str, Any]:
    build = {"aws": aws_provider, "gcp": gcp_provider, "azure": azure_provider}[kind]
    return build(sim, **changes)


def launch_configs(kind: str) -> list[dict]:
    """A pool's launch configs on one cloud; on EC2 three, so that a pass makes three batches."""
    region, machine, image = MACHINES[kind]
    machines = AWS_MACHINES if kind == "aws" else (machine,)
    return [{"region": region, "machine_type": m, "image": image} for m in machines]


def held_gate(kind: str) -> dict:
    """A rate limit that lets exactly two creates of a pass reach the cloud and holds the
    others in the process, for as long as the test likes."""
    # A create is one call on every cloud (EC2's RunInstances for a whole batch).
    return {**FAST_GATE, "calls_per_s": 0.001, "burst": 2, "timeout_s": 30.0}


def plant_vm(kind: str, sim: Any, name: str, tags: dict[str, str]) -> str:
    """Make a VM in a simulated cloud by hand, as someone at the console would (no row, no
    wm call); return its cloud id."""
    region, machine, image = MACHINES[kind]
    if kind == "aws":
        (instance_id,) = sim.seed_instances(1, region=region, tags={"Name": name, **tags})
        return instance_id
    if kind == "gcp":
        body = {
            "name": name,
            "machineType": f"zones/{region}/machineTypes/{machine}",
            "disks": [{"boot": True, "initializeParams": {"sourceImage": image}}],
            # GCE label values allow [a-z0-9_-] only: wm writes the pool's label that way too.
            "labels": {k: re.sub(r"[^a-z0-9_-]", "_", v.lower()) for k, v in tags.items()},
        }
        path = f"/compute/v1/projects/{GCE_PROJECT}/zones/{region}/instances"
        answer = Client(sim).post(path, json=body)
        assert answer.status_code == 200, answer.get_data(as_text=True)
        return next(vm.cloud_id for vm in sim.instances() if vm.name == name)
    body = vm_body(
        launch_config=example_launch_config(region, vm_size=machine, image=image),
        location=region,
        worker_id=name,
        tags=tags,
        admin_username="byhand",
        admin_password="By-hand-1x",
    )
    resource_id = (
        f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_GROUP}/providers"
        f"/Microsoft.Compute/virtualMachines/{name}"
    )
    sim.preload(resource_id, body)
    return resource_id


def plant_old_style_azure_vm(sim: SimArm, name: str, tags: dict[str, str]) -> dict[str, str]:
    """Make a VM the old multi-step way, over ARM's API: a public IP, a NIC holding it, a VM
    using the NIC and a named OS disk, none of which goes with the VM (Detach, ARM's default).
    Returns the resource names: {"vm", "nic", "ip", "disk"}."""
    region, machine, image = MACHINES["azure"]
    names = {"vm": name, "nic": f"{name}-nic", "ip": f"{name}-ip", "disk": f"{name}-disk"}
    group = f"/subscriptions/{AZURE_SUBSCRIPTION}/resourceGroups/{AZURE_GROUP}/providers"
    ip_id = f"{group}/Microsoft.Network/publicIPAddresses/{names['ip']}"
    nic_id = f"{group}/Microsoft.Network/networkInterfaces/{names['nic']}"
    bodies = [
        (ip_id, {"location": region, "properties": {}}),
        (
            nic_id,
            {
                "location": region,
                "properties": {
                    "ipConfigurations": [
                        {"name": "ipconfig1", "properties": {"publicIPAddress": {"id": ip_id}}}
                    ]
                },
            },
        ),
        (
            f"{group}/Microsoft.Compute/virtualMachines/{name}",
            {
                "location": region,
                "tags": tags,
                "properties": {
                    "hardwareProfile": {"vmSize": machine},
                    "storageProfile": {
                        "imageReference": image_reference(image),
                        "osDisk": {"name": names["disk"], "createOption": "FromImage"},
                    },
                    "osProfile": {
                        "computerName": name[:15],
                        "adminUsername": "wm",
                        "adminPassword": "Old-style-1x",
                    },
                    "networkProfile": {"networkInterfaces": [{"id": nic_id}]},
                },
            },
        ),
    ]
    for resource_id, body in bodies:
        answer = requests.put(
            f"{sim.endpoint}{resource_id}",
            params={"api-version": "2024-03-01"},
            json=body,
            headers={"Authorization": "Bearer sim-arm.by-hand"},
            verify=str(sim.cert_path),
            timeout=10,
        )
        assert answer.status_code in (200, 201), answer.text
    return names


def create_key(kind: str, row: WorkerRecord) -> str:
    """The idempotency key the worker's create carries: what the sim journals it under."""
    if kind == "aws":
        return row.batch_token or ""  # the ClientToken (a uuid hex fits EC2's 64 characters)
    if kind == "gcp":
        return request_id(row.idempotency_token)
    return vm_name(row.worker_id).lower()


def worker_history(
    rows: Sequence[WorkerRecord], worker_ids: Iterable[str], *processes: WmProcess
) -> str:
    """What a failed assertion about some workers needs to say why: each one's row (state,
    stop reason, cloud id, the stamps of its life) and the last events that name it."""
    by_id = {r.worker_id: r for r in rows}
    lines = []
    for worker_id in sorted(worker_ids):
        row = by_id[worker_id]
        stamps = ", ".join(
            f"{name}={stamp:%H:%M:%S.%f}"
            for name in HISTORY_STAMPS
            if (stamp := getattr(row, name)) is not None
        )
        lines.append(
            f"{worker_id} {row.pool_id} {row.state.value} stop_reason={row.stop_reason!r} "
            f"cloud_id={row.cloud_id} {stamps}"
        )
        names = {worker_id, *([row.cloud_id] if row.cloud_id else [])}
        events = [
            event
            for process in processes
            for event in list(process.lines)
            if any(name in json.dumps(event) for name in names)
        ]
        lines += [f"    {json.dumps(e)}" for e in sorted(events, key=lambda e: e["ts"])[-5:]]
    return "\n".join(lines)


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(WAIT_POLL_S)


@dataclass
class CapacitySampler:
    """Samples each pool's requested + running + stopping capacity from the database in the
    background, as often as it can, and remembers the worst sample per pool."""

    engine: Engine
    max_capacity: dict[str, int]  # pool id -> its max capacity
    samples: int = 0
    worst: dict[str, int] = field(default_factory=dict)
    over: list[tuple[float, str, int]] = field(default_factory=list)  # (when, pool, capacity)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> CapacitySampler:
        self._thread = threading.Thread(target=self._run, daemon=True, name="capacity-sampler")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        pools = list(self.max_capacity)
        while not self._stop.is_set():
            self.sample(pools)
            self._stop.wait(0.01)

    def sample(self, pools: list[str] | None = None) -> None:
        by_pool = capacity_by_pool(self.engine, pools or list(self.max_capacity))
        self.samples += 1
        for pool_id, capacity in by_pool.items():
            total = capacity.requested + capacity.running + capacity.stopping
            self.worst[pool_id] = max(self.worst.get(pool_id, 0), total)
            if total > self.max_capacity[pool_id]:
                self.over.append((time.time(), pool_id, total))
