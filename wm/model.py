"""Domain records: the lifecycle of a worker row, what a provider is asked for and what it
sees, and the rows read from the database (frozen values). The bottom of wm: it imports only
the config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from wm.config import LaunchConfig, PoolConfig


class WorkerState(StrEnum):
    REQUESTED = "requested"  # row written; the cloud may not have the instance yet, or it boots
    RUNNING = "running"
    STOPPING = "stopping"  # a delete was issued, or the cloud is shutting it down
    STOPPED = "stopped"  # nothing is left in the cloud


@dataclass(frozen=True)
class LaunchSpec:
    """What to launch, as a provider needs it (from a pool's launch config)."""

    launch_config_id: str
    region: str  # region on EC2/Azure, zone on GCE
    machine_type: str
    image: str
    capacity_per_worker: int
    public_ip: bool = False  # Azure: attach a public IP
    spot: bool = False
    worker_config: Mapping[str, Any] = field(default_factory=dict)  # passed to the VM as user data


@dataclass(frozen=True)
class CloudInstance:
    """One instance as a list or look-up saw it."""

    worker_id: str | None  # from the worker tag or name; None where the cloud has only a batch tag
    cloud_id: str
    region: str  # the scan unit it was found in
    state: WorkerState
    pool_id: str | None = None
    launch_config_id: str | None = None
    launched_at: datetime | None = None
    reason: str | None = None  # why it stopped, when the cloud says (pre-emption, spot eviction)
    preempted: bool = False  # the cloud took it back (spot interruption, pre-emption, eviction)
    # EC2 tags a whole RunInstances call at once: its batch tag and the instance's launch index
    # map it to its row where no per-instance worker tag exists.
    batch_token: str | None = None
    launch_index: int | None = None
    provider_data: Mapping[str, Any] = field(default_factory=dict)
    # Taskcluster's workerId for this VM (EC2 instance id, GCE numeric id, Azure VM name).
    tc_worker_id: str | None = None


@dataclass(frozen=True)
class WorkerRef:
    """Enough about a worker row to find its instance again."""

    worker_id: str
    region: str
    cloud_id: str | None = None  # None for an intent whose create never returned
    batch_token: str | None = None
    launch_index: int | None = None  # position of the intent in its batch
    provider_data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolRecord:
    pool_id: str
    provider_id: str | None  # None once removed from the config
    previous_provider_ids: tuple[str, ...]  # still scanned and drained, never provisioned
    min_capacity: int
    max_capacity: int
    scaling_ratio: float
    registration_timeout_s: float
    reregistration_timeout_s: float
    queue_inactivity_timeout_s: float
    requires_registration: bool
    removed: bool = False

    @classmethod
    def from_config(cls, pool: PoolConfig, previous: tuple[str, ...] = ()) -> PoolRecord:
        return cls(
            pool_id=pool.id,
            provider_id=pool.provider,
            previous_provider_ids=previous,
            min_capacity=pool.min_capacity,
            max_capacity=pool.max_capacity,
            scaling_ratio=pool.scaling_ratio,
            registration_timeout_s=pool.registration_timeout_s,
            reregistration_timeout_s=pool.reregistration_timeout_s,
            queue_inactivity_timeout_s=pool.queue_inactivity_timeout_s,
            requires_registration=pool.requires_registration,
        )


@dataclass(frozen=True)
class LaunchConfigRecord:
    pool_id: str
    launch_config_id: str
    region: str
    machine_type: str
    image: str
    capacity_per_worker: int
    public_ip: bool
    spot: bool
    worker_config: Mapping[str, Any]
    weight: float
    max_capacity: int | None
    archived: bool = False

    @classmethod
    def from_config(cls, pool_id: str, lc: LaunchConfig) -> LaunchConfigRecord:
        return cls(
            pool_id=pool_id,
            launch_config_id=lc.id,
            region=lc.region,
            machine_type=lc.machine_type,
            image=lc.image,
            capacity_per_worker=lc.capacity_per_worker,
            public_ip=lc.public_ip,
            spot=lc.spot,
            worker_config=dict(lc.worker_config),
            weight=lc.weight,
            max_capacity=lc.max_capacity,
        )

    def spec(self) -> LaunchSpec:
        """What a provider needs to launch a worker of this config."""
        return LaunchSpec(
            launch_config_id=self.launch_config_id,
            region=self.region,
            machine_type=self.machine_type,
            image=self.image,
            capacity_per_worker=self.capacity_per_worker,
            public_ip=self.public_ip,
            spot=self.spot,
            worker_config=dict(self.worker_config),
        )


@dataclass(frozen=True)
class WorkerRecord:
    worker_id: str
    pool_id: str
    worker_group: str
    provider_id: str
    state: WorkerState
    capacity: int
    launch_config_id: str
    created: datetime
    last_modified: datetime
    idempotency_token: str
    last_checked: datetime | None = None
    expires: datetime | None = None
    registered_at: datetime | None = None
    cloud_id: str | None = None
    batch_token: str | None = None
    launch_index: int | None = None
    provider_data: Mapping[str, Any] = field(default_factory=dict)
    stop_reason: str | None = None
    version: int = 1
    last_active: datetime | None = None
    should_terminate: bool = False
    # When it passed each stage of its life (None: not yet, or not known).
    demand_at: datetime | None = None
    accepted_at: datetime | None = None
    cloud_running_at: datetime | None = None
    first_claimed_at: datetime | None = None
    stopping_at: datetime | None = None
    delete_called_at: datetime | None = None
    stopped_at: datetime | None = None
    preempted_at: datetime | None = None
    # The pass that sent its create gave up waiting for the answer (the VM may exist).
    unanswered_at: datetime | None = None
    # Taskcluster's workerId: EC2 instance id, GCE numeric instance id, Azure VM name.
    tc_worker_id: str | None = None
    booted_at: datetime | None = None  # its VM's boot, as its worker reported (systemBootTime)

    @property
    def unresolved_intent(self) -> bool:
        """Requested, and no create has told wm its cloud id yet."""
        return self.state == WorkerState.REQUESTED and self.cloud_id is None

    def ref(self) -> WorkerRef:
        """What a provider needs to find this worker's VM."""
        return WorkerRef(
            self.worker_id,
            self.worker_group,
            self.cloud_id,
            self.batch_token,
            self.launch_index,
            dict(self.provider_data),
        )


@dataclass(frozen=True)
class PoolError:
    error_id: int
    pool_id: str
    provider_id: str | None
    launch_config_id: str | None
    kind: str
    title: str
    description: str
    reported: datetime
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    task_id: int
    pool_id: str
    state: str
    duration_s: float
    created: datetime
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    completed_at: datetime | None = None
    requeued_at: datetime | None = None  # when its worker was lost and it went back to pending


@dataclass(frozen=True)
class PoolStatus:
    """One row of `wm status`."""

    pool_id: str
    provider_id: str | None
    pending: int
    claimed: int
    requested: int  # capacity, not worker counts
    running: int
    stopping: int
    errors_last_hour: int
