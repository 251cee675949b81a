"""Domain records: the lifecycle of a worker row, what a provider is asked for and what it
sees, and the rows read from the database (frozen values). The bottom of wm: it imports none
of wm."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class WorkerState(StrEnum):
    """A worker row's state. What moves a row between them is wm/workers/transitions.py's
    table, and only wm/db/worker_writes.py and its siblings (scan_writes.py, imported_workers.py)
    write them."""

    REQUESTED = "requested"  # row written; the cloud may not have the instance yet, or it boots
    RUNNING = "running"
    STOPPING = "stopping"  # a delete was issued, or the cloud is shutting it down
    STOPPED = "stopped"  # nothing is left in the cloud


@dataclass(frozen=True)
class LaunchSpec:
    """What to launch, as a provider needs it: one launch config of a Taskcluster worker pool
    definition, verbatim, with the pool facts worker-manager's overrides use.

    The provider builds its create call from `launch_config` (EC2: `launchConfig` is the
    RunInstances parameters; GCE: the launch config is the instances.insert body; Azure: the VM
    body) and adds exactly worker-manager's overrides (boot data, tags/labels, names).
    """

    launch_config_id: str
    region: str  # the worker group: region on EC2, zone on GCE, location on Azure
    capacity_per_worker: int  # workerManager.capacityPerInstance (or the deprecated fallback)
    # The launch config as the definition holds it, `workerManager` included (with its
    # launchConfigId filled in). Providers read cloud fields from it and never change it.
    launch_config: Mapping[str, Any] = field(default_factory=dict)
    worker_config: Mapping[str, Any] = field(default_factory=dict)  # registerWorker returns it
    pool_owner: str = ""  # the definition's `owner` (EC2 Owner tag, GCE/Azure owner label/tag)
    pool_description: str = ""  # the definition's `description` (GCE's default description)


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
    # Provider data the worker's row is to keep from now on (top-level keys, merged over the
    # row's): what the cloud will not tell again, such as what an ARM deployment made before
    # the deployment is deleted. The scan writes it, then tells the provider (`recorded`).
    record: Mapping[str, Any] = field(default_factory=dict)
    # Made by the legacy worker-manager of a provider taking it over (its tags, not wm's):
    # matched to the row `wm import` wrote (worker_id is wm.take_over.marks.imported_worker_id), and
    # without one never deleted as an orphan, only reported until a later import takes it.
    legacy: bool = False


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
    """A worker pool as the database holds it: Taskcluster's definition, with the figures wm
    decides on read out of its `config`."""

    pool_id: str
    provider_id: str | None  # None once deleted (Taskcluster's "null-provider")
    previous_provider_ids: tuple[str, ...]  # still scanned and drained, never provisioned
    min_capacity: int
    max_capacity: int
    scaling_ratio: float
    registration_timeout_s: float  # effective: registrationTimeout, capped by the next one
    reregistration_timeout_s: float
    queue_inactivity_timeout_s: float
    requires_registration: bool = True  # the provider's `workers_register`, at apply time
    removed: bool = False
    description: str = ""
    owner: str = ""
    email_on_error: bool = False
    config: Mapping[str, Any] = field(default_factory=dict)  # the definition's, verbatim


@dataclass(frozen=True)
class LaunchConfigRecord:
    """One launch config of a pool, as `worker_pool_launch_configs` holds it in Taskcluster."""

    pool_id: str
    launch_config_id: str
    region: str  # the worker group: region (EC2), zone (GCE), location (Azure)
    capacity_per_worker: int
    weight: float  # workerManager.initialWeight
    max_capacity: int | None  # workerManager.maxCapacity
    # The launch config as the definition holds it, workerManager.launchConfigId filled in.
    configuration: Mapping[str, Any] = field(default_factory=dict)
    worker_config: Mapping[str, Any] = field(default_factory=dict)
    archived: bool = False

    def spec(self, pool: PoolRecord) -> LaunchSpec:
        """What a provider needs to launch a worker of this config."""
        return LaunchSpec(
            launch_config_id=self.launch_config_id,
            region=self.region,
            capacity_per_worker=self.capacity_per_worker,
            launch_config=self.configuration,
            worker_config=dict(self.worker_config),
            pool_owner=pool.owner,
            pool_description=pool.description,
        )


# Slotted: a scan holds every live row of its unit (100,000 at a time across its units), and
# a row's attribute dict would be half its size.
@dataclass(frozen=True, slots=True)
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
    launch_refused: str | None = None  # the class of the refusal that ended its launch

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


class SignalKind(StrEnum):
    """What a cloud publishes about an offering that the launch choice reads."""

    PRICE = "price"  # dollars per instance-hour
    AVAILABILITY = "availability"  # 0..1: placement score / 10, obtainability, High/Medium/Low
    PREEMPTION = "preemption"  # pre-emptions per instance-hour the cloud's history implies


@dataclass(frozen=True, order=True)
class Offering:
    """Where a launch config launches, as a cloud prices and runs out of it: region, zone
    (None: any zone of the region, the cloud picks), instance type and market ("spot" or
    "on-demand", wm.errors.SPOT / ON_DEMAND). Each kind reads it from a launch config
    (wm.kinds: `offering`)."""

    region: str  # EC2 region, GCE region, Azure location
    zone: str | None
    instance_type: str  # EC2 InstanceType, GCE machine type name, Azure vmSize
    market: str

    @property
    def key(self) -> str:
        return f"{self.market}:{self.instance_type}:{self.region}/{self.zone or '*'}"


@dataclass(frozen=True)
class OfferingSignal:
    """One value a signal collector read from a cloud for an offering of a provider. A signal
    with `offering.zone` None holds for every zone of the region (GCE and Azure price a
    region)."""

    provider_id: str
    offering: Offering
    kind: SignalKind
    value: float
    source: str  # the API it came from ("DescribeSpotPriceHistory", "retail-prices", ...)
    observed_at: datetime
