"""Helpers the chaos scenarios share: sizes, per-cloud names, configs, waits, samplers, and
the figures each scenario measured.

Each scenario runs its short form in `make test`; its long form (bigger sizes, or one test per
repetition) is a `size` parameter marked `chaos_long`, which `make test` deselects and
`make chaos` selects.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.support.stack import aws_provider, azure_provider, gcp_provider
from wm.db.workers import capacity_by_pool
from wm.model import WorkerRecord
from wm.providers.azure import vm_name
from wm.providers.gcp import request_id
from wm.sim.arm import SimArm
from wm.sim.ec2 import SimEc2
from wm.sim.gce import SimGce

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
WAIT_POLL_S = 0.05
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


def create_key(kind: str, row: WorkerRecord) -> str:
    """The idempotency key the worker's create carries: what the sim journals it under."""
    if kind == "aws":
        return row.batch_token or ""  # the ClientToken (a uuid hex fits EC2's 64 characters)
    if kind == "gcp":
        return request_id(row.idempotency_token)
    return vm_name(row.worker_id).lower()


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
