"""What a VM is to wm, read from what ARM lists: pure, no I/O.

Azure's provisioning and power states map to wm's worker states by two literal tables
(`worker_state`); a stopped VM's reason comes from its statuses (`stop_reason`: a deallocated
Spot VM was evicted). A listed VM's fields (listing.py's `VmFields`) become the CloudInstance a
scan sees short of its state (`model_of`), and its instance view's statuses complete it
(`joined`), whether those came from the subscription's status list or a VM's GET.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from wm.errors import UnknownCloudState
from wm.model import CloudInstance, WorkerState
from wm.providers.azure.arm import OS_DISK_KEY
from wm.providers.azure.listing import VmFields
from wm.providers.base import TAG_LAUNCH_CONFIG, TAG_POOL, TAG_WORKER

VM_ID = "vmId"
REASON_SPOT_EVICTED = "spot-eviction"
PROVISIONING_FAILED = "ProvisioningState/failed/"  # a stop reason: the failure code follows

# Provisioning state -> worker state; None means the power state decides.
PROVISIONING_STATES: dict[str, WorkerState | None] = {
    "creating": WorkerState.REQUESTED,
    "updating": None,
    "migrating": None,
    "succeeded": None,
    "deleting": WorkerState.STOPPING,
    # A VM whose provisioning failed will never run; it still holds resources, and the scan
    # terminates stopped VMs it still lists.
    "failed": WorkerState.STOPPED,
}
POWER_STATES: dict[str, WorkerState] = {
    "starting": WorkerState.REQUESTED,
    "running": WorkerState.RUNNING,
    "stopping": WorkerState.STOPPING,
    "deallocating": WorkerState.STOPPING,
    # Stopped or deallocated VMs keep their disks (and a Spot VM its quota) until deleted; wm
    # never stops VMs itself, so these died out of band and the scan terminates them.
    "stopped": WorkerState.STOPPED,
    "deallocated": WorkerState.STOPPED,
}


@dataclass(frozen=True)
class Listed:
    """A listed VM model as a scan keeps it until its status comes: the instance it is, short
    of its state, and what that state is read from besides the instance view."""

    instance: CloudInstance  # state, reason and preempted come from the instance view
    provisioning_state: str
    spot: bool


def model_of(vm: VmFields, region: str) -> Listed:
    tags = vm.tags
    data = {VM_ID: vm.vm_id} if vm.vm_id else {}
    # The managed OS disk a VM made from its image (one it attached is not its own).
    if vm.os_disk_id and vm.os_disk_create_option.lower() == "fromimage":
        data[OS_DISK_KEY] = vm.os_disk_id
    instance = CloudInstance(
        worker_id=tags.get(TAG_WORKER),
        cloud_id=vm.id,
        region=region,
        state=WorkerState.REQUESTED,
        pool_id=tags.get(TAG_POOL),
        launch_config_id=tags.get(TAG_LAUNCH_CONFIG),
        launched_at=vm.time_created,
        provider_data=data,
        tc_worker_id=vm.name,
    )
    return Listed(instance, vm.provisioning_state, vm.priority.lower() == "spot")


def worker_state(provider_id: str, provisioning: str, power: str | None) -> WorkerState:
    key = provisioning.lower()
    if key not in PROVISIONING_STATES:
        raise UnknownCloudState(provider_id, f"ProvisioningState/{provisioning}")
    state = PROVISIONING_STATES[key]
    if state is not None:
        return state
    if power is None or power.lower() not in POWER_STATES:
        raise UnknownCloudState(provider_id, f"ProvisioningState/{provisioning} PowerState/{power}")
    return POWER_STATES[power.lower()]


def view_statuses(instance_view: Any) -> Iterable[Any] | None:
    """An instance view's statuses. The SDK's models deserialize a field when it is first read,
    and once, on lookups run in parallel in a fresh process, handed back the raw JSON instead
    (bench.scale's old scanner: `'dict' object has no attribute 'statuses'`): read both."""
    if instance_view is None:
        return None
    if isinstance(instance_view, Mapping):
        return instance_view.get("statuses") or []
    return instance_view.statuses


def read_statuses(statuses: Iterable[Any] | None) -> tuple[str | None, str | None, str | None]:
    """(provisioning state, power state, failure code) from instance-view statuses."""
    provisioning = power = failure = None
    for status in statuses or ():
        code = str(status.get("code") if isinstance(status, Mapping) else status.code or "")
        kind, _, rest = code.partition("/")
        if kind == "ProvisioningState":
            provisioning, _, failure_code = rest.partition("/")
            failure = failure_code or None
        elif kind == "PowerState":
            power = rest
    return provisioning, power, failure


def stop_reason(
    state: WorkerState, power: str | None, failure: str | None, spot: bool
) -> str | None:
    # ARM shows no eviction status: an evicted Spot VM (Deallocate policy) is just
    # deallocated. wm never deallocates VMs, so a deallocated Spot VM was evicted.
    if failure:
        return f"{PROVISIONING_FAILED}{failure}"
    if state is WorkerState.STOPPED or (power or "").lower() == "deallocating":
        if spot and (power or "").lower() in ("deallocated", "deallocating"):
            return REASON_SPOT_EVICTED
        if power:
            return f"PowerState/{power}"
    return None


def joined(provider_id: str, listed: Listed, statuses: Iterable[Any] | None) -> CloudInstance:
    """The listed VM with its state, read from its instance view's statuses."""
    provisioning, power, failure = read_statuses(statuses)
    provisioning = provisioning or listed.provisioning_state
    state = worker_state(provider_id, provisioning, power)
    reason = stop_reason(state, power, failure, listed.spot)
    return replace(
        listed.instance, state=state, reason=reason, preempted=reason == REASON_SPOT_EVICTED
    )
