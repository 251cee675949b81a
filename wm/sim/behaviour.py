"""Behaviour knobs shared by the simulated clouds: latency, faults, boot and delete times.

Each simulated cloud holds one `Faults` object. Every cloud API request (not the `/_sim`
control requests) is counted per operation and passed through `Faults.before`, which sleeps
the simulated latency and decides the request's fate. Tests and benchmarks change behaviour
at run time through `Behaviour.update` or the `/_sim/behaviour` control endpoint.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from enum import StrEnum
from typing import Any

from wm.config import SimCloudConfig


@dataclass
class Behaviour:
    latency_ms: float = 0.0  # mean per-call latency
    latency_jitter_ms: float = 0.0  # latency is uniform in mean +- jitter
    boot_s: float = 0.0  # created to running
    delete_s: float = 0.0  # delete issued to gone
    failure_rate: float = 0.0  # share of calls answered with the cloud's 5xx
    throttle_rate: float = 0.0  # share of calls answered with the cloud's throttling error
    retry_after_s: float | None = (
        None  # Retry-After sent with throttling answers, where the cloud does
    )
    quota_instances: int | None = None  # creates beyond this many live instances fail with quota
    page_size_max: int | None = None  # lists never return more than this per page
    hang_rate: float = 0.0  # share of calls that do not answer for hang_s
    hang_s: float = 0.0
    # Operations faults apply to; empty means all. Latency applies to every operation.
    fault_operations: tuple[str, ...] = ()
    # "random": each call draws its fate; "even": the draws follow a low-discrepancy sequence,
    # so the rates hold exactly over any run of calls and a scenario repeats call for call.
    fault_spread: str = "random"
    preempt_share: float = 0.0  # share of spot VMs the cloud pre-empts (EC2/GCE) or evicts
    preempt_within_s: float = 60.0  # ... at a uniform moment this long after they boot

    @classmethod
    def from_config(cls, config: SimCloudConfig) -> Behaviour:
        data = config.model_dump(exclude={"port"})
        return cls(**data)

    def update(self, **changes: Any) -> None:
        known = {f.name for f in fields(self)}
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown behaviour keys: {sorted(unknown)}")
        if changes.get("fault_spread", "random") not in FAULT_SPREADS:
            raise ValueError(f"fault_spread must be one of {list(FAULT_SPREADS)}")
        for key, value in changes.items():
            setattr(self, key, tuple(value) if key == "fault_operations" else value)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SimVm:
    """One VM a simulated cloud holds, as tests and leak checks see it."""

    cloud_id: str  # the cloud's own id (EC2 instance id, GCE numeric id, ARM resource id)
    name: str
    region: str  # region, or zone on GCE
    state: str  # pending | running | stopping | stopped | gone
    tags: Mapping[str, str]  # tags / labels as the cloud stores them
    spot: bool


FAULT_SPREADS = ("random", "even")
WEYL_FATE = (5**0.5 - 1) / 2  # the golden ratio's fraction
WEYL_HANG = 2**0.5 - 1


class Preemptions:
    """The spot VMs a simulated cloud will pre-empt, and when: each sim schedules its new spot
    VMs here and, before answering any request, pre-empts those whose time has come, so what
    a client sees never depends on a background thread's timing."""

    def __init__(self, faults: Faults) -> None:
        self._faults = faults
        self._due: dict[str, float] = {}  # VM key -> monotonic time
        self._lock = threading.Lock()

    def schedule(self, key: str, booted_at: float) -> None:
        at = self._faults.preempt_at(booted_at)
        if at is not None:
            with self._lock:
                self._due[key] = at

    def due(self, now: float | None = None) -> list[str]:
        """Keys whose pre-emption is due, each returned once."""
        now = time.monotonic() if now is None else now
        with self._lock:
            ready = [key for key, at in self._due.items() if at <= now]
            for key in ready:
                del self._due[key]
        return ready

    def clear(self) -> None:
        with self._lock:
            self._due.clear()


class Outcome(StrEnum):
    OK = "ok"
    THROTTLE = "throttle"
    FAIL = "fail"  # a 5xx


class Faults:
    """Counts requests per operation, sleeps their latency and decides their outcome."""

    def __init__(self, behaviour: Behaviour | None = None, seed: int | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._calls = 0  # position in the "even" sequence

    def before(self, operation: str) -> Outcome:
        b = self.behaviour
        with self._lock:
            self._counts[operation] += 1
            if b.fault_spread == "even":
                # Weyl sequences: evenly spread in [0, 1), starting at 0 (a fault first).
                draw = (self._calls * WEYL_FATE) % 1.0
                hang = (self._calls * WEYL_HANG) % 1.0 < b.hang_rate
                self._calls += 1
            else:
                draw = self._rng.random()
                hang = self._rng.random() < b.hang_rate
            latency_s = max(0.0, b.latency_ms + (self._rng.random() * 2 - 1) * b.latency_jitter_ms)
        time.sleep(latency_s / 1000)
        if b.fault_operations and operation not in b.fault_operations:
            return Outcome.OK
        if hang and b.hang_s > 0:
            time.sleep(b.hang_s)
        if draw < b.throttle_rate:
            return Outcome.THROTTLE
        if draw < b.throttle_rate + b.failure_rate:
            return Outcome.FAIL
        return Outcome.OK

    def preempt_at(self, booted_at: float) -> float | None:
        """When a new spot VM that boots at `booted_at` (monotonic) will be pre-empted; None
        for the VMs the cloud leaves alone. Draws from the faults' generator, so a seeded
        sim pre-empts the same VMs every run."""
        b = self.behaviour
        if b.preempt_share <= 0:
            return None
        with self._lock:
            chosen = self._rng.random() < b.preempt_share
            after_s = self._rng.random() * b.preempt_within_s
        return booted_at + after_s if chosen else None

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)

    def reset_counts(self) -> None:
        """Zero the request counts and restart the "even" fault sequence."""
        with self._lock:
            self._counts.clear()
            self._calls = 0


def lifecycle_state(
    now: float, created_at: float, boot_s: float, deleted_at: float | None, delete_s: float
) -> str:
    """The simulated state of an instance: pending, running, stopping or gone."""
    if deleted_at is not None:
        return "gone" if now >= deleted_at + delete_s else "stopping"
    return "running" if now >= created_at + boot_s else "pending"
