"""Which workers ARM's answers stand for (pure; arm.py's rules, the scan's side): a deployment's
JSON read as a DeploymentView, a scan unit's VMs joined with their deployments (a failed one
stops its worker, one without a listed VM stands for one), a row whose VM is gone, and the
leftovers among NICs, public IPs and disks. Tested with tables in
tests/unit/test_azure_arm_rules.py; deployments.py makes the calls."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from wm.errors import UnknownCloudState
from wm.model import CloudInstance, WorkerRef, WorkerState
from wm.providers.azure.arm import (
    DEPLOYMENT_PHASES,
    REASON_MAX_CHARS,
    TAG_KEEP,
    TORN_DOWN_TYPES,
    VM_TYPE,
    DeploymentRef,
    DeploymentView,
    Phase,
    as_mapping,
    parse_resource_id,
    same_region,
    vm_resource_id,
)
from wm.providers.base import TAG_LAUNCH_CONFIG, TAG_POOL, TAG_WORKER, owned

LEFTOVER_KEY = "leftover"  # provider_data of a leftover orphan: its resource type
# A kept (keepDeployment) failed deployment without a VM shows as a stopped worker this long
# after it ended, so its row is torn down; after that it is history, not a worker.
FAILED_REPORT_S = 900.0
# A deployment that succeeded without its VM in the list read just before: listing lag, unless
# it ended this long ago (then the VM was deleted out of band).
LIST_LAG_S = 60.0
REASON_VM_GONE = "arm-deployment-vm-gone"  # the VM went; what the deployment made may not have
REASON_LEFTOVER = "arm-deployment-leftover"
# Error codes of a deployment that only wrap the real ones in `details`.
WRAPPER_CODES = frozenset({"deploymentfailed", "resourcedeploymentfailure"})


@dataclass(frozen=True)
class Leftover:
    """A NIC, public IP or disk as a list showed it."""

    resource_id: str
    location: str
    tags: Mapping[str, str]
    attached: bool  # held by a VM (NIC, disk) or a NIC (public IP)


def gone_instance(worker: WorkerRef, ref: DeploymentRef, subscription: str) -> CloudInstance:
    """A worker whose VM is gone while its row still names what else it made: stopped, so
    the scan deletes that (what is gone already costs a 404)."""
    return CloudInstance(
        worker_id=worker.worker_id,
        cloud_id=worker.cloud_id or vm_resource_id(subscription, ref.resource_group, ref.vm_name),
        region=worker.region,
        state=WorkerState.STOPPED,
        reason=REASON_VM_GONE,
        provider_data=ref.data(),
        tc_worker_id=ref.vm_name,
    )


def deployment_phase(provider_id: str, state: str) -> Phase:
    key = (state or "").lower()
    if key not in DEPLOYMENT_PHASES:
        raise UnknownCloudState(provider_id, f"Deployment/{state}")
    return DEPLOYMENT_PHASES[key]


def view(provider_id: str, resource_group: str, deployment: Mapping[str, Any]) -> DeploymentView:
    """A deployment's JSON (ARM's wire form) as wm reads it."""
    props = as_mapping(deployment.get("properties"))
    state = str(props.get("provisioningState") or "NotSpecified")
    tags = {str(k): str(v) for k, v in as_mapping(deployment.get("tags")).items()}
    ids = resource_ids_in(props.get("outputs"))
    ids += [
        str(r["id"])
        for r in props.get("outputResources") or []
        if isinstance(r, Mapping) and r.get("id")
    ]
    return DeploymentView(
        ref=DeploymentRef(
            resource_group, str(deployment.get("name") or ""), tags.get(TAG_KEEP) == "true"
        ),
        phase=deployment_phase(provider_id, state),
        state=state,
        tags=tags,
        ended_at=_timestamp(props.get("timestamp")),
        failure=failure_text(props.get("error")),
        resource_ids=tuple(dict.fromkeys(ids)),
    )


def failure_text(error: Any) -> str | None:
    """ "<code>: <message>" of the errors that say what failed: the innermost ones, past
    ARM's wrappers (DeploymentFailed, ResourceDeploymentFailure)."""
    if not isinstance(error, Mapping):
        return None
    leaves = list(_leaf_errors(error))
    if not leaves:
        return None
    return "; ".join(f"{code}: {message}" for code, message in leaves)[:REASON_MAX_CHARS]


def _leaf_errors(error: Mapping[str, Any]) -> Iterable[tuple[str, str]]:
    details = [d for d in error.get("details") or [] if isinstance(d, Mapping)]
    code = str(error.get("code") or "")
    if details and (code.lower() in WRAPPER_CODES or not error.get("message")):
        for detail in details:
            yield from _leaf_errors(detail)
        return
    if code or error.get("message"):
        yield code or "Error", str(error.get("message") or "")


def resource_ids_in(value: Any) -> list[str]:
    """Resource ids of torn-down types anywhere in a deployment's outputs."""
    found: list[str] = []
    if isinstance(value, str):
        parsed = parse_resource_id(value)
        if parsed is not None and parsed.type in TORN_DOWN_TYPES:
            found.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            found += resource_ids_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            found += resource_ids_in(item)
    return found


def deployment_instance(
    deployment: DeploymentView,
    *,
    subscription: str,
    region: str,
    now: datetime,
    listing: bool,
) -> CloudInstance | None:
    """The worker a deployment stands for when its VM was not seen (None: it stands for none).

    In a scan's list (`listing`), a deployment ending a moment ago may have a VM the list
    missed, and a kept one long past is history: those stand for nothing. A look-up is of a
    row the lists no longer show, so any deployment that is there says the worker is not gone.
    """
    phase = deployment.phase
    age = now - (deployment.ended_at or now)
    if phase is Phase.IN_FLIGHT:
        return _deployment_worker(deployment, subscription, region, WorkerState.REQUESTED)
    if phase is Phase.FAILED:
        stale = deployment.ref.keep and age >= timedelta(seconds=FAILED_REPORT_S)
        if listing and stale:
            return None
        return _deployment_worker(
            deployment, subscription, region, WorkerState.STOPPED, deployment.reason
        )
    if phase is Phase.SUCCEEDED:
        fresh = age < timedelta(seconds=LIST_LAG_S)
        if listing and (deployment.ref.keep or fresh):
            return None
        return _deployment_worker(
            deployment, subscription, region, WorkerState.STOPPED, REASON_VM_GONE
        )
    return None


def _deployment_worker(
    deployment: DeploymentView,
    subscription: str,
    region: str,
    state: WorkerState,
    reason: str | None = None,
) -> CloudInstance:
    ref = deployment.ref
    return CloudInstance(
        worker_id=deployment.worker_id,
        cloud_id=vm_resource_id(subscription, ref.resource_group, ref.vm_name),
        region=region,
        state=state,
        pool_id=deployment.tags.get(TAG_POOL),
        launch_config_id=deployment.tags.get(TAG_LAUNCH_CONFIG),
        launched_at=deployment.ended_at,
        reason=reason,
        provider_data=ref.data(),
        tc_worker_id=ref.vm_name,
    )


def join(
    vms: Sequence[CloudInstance],
    deployments: Sequence[DeploymentView],
    *,
    subscription: str,
    region: str,
    now: datetime,
) -> list[CloudInstance]:
    """A scan unit's workers: its listed VMs, each with its deployment (a failed deployment
    stops its worker, whatever the VM does), and the deployments without a listed VM."""
    by_worker = {d.worker_id: d for d in deployments if d.worker_id}
    found: list[CloudInstance] = []
    for vm in vms:
        deployment = by_worker.pop(vm.worker_id, None) if vm.worker_id else None
        if deployment is None:
            found.append(vm)
            continue
        data = {**vm.provider_data, **deployment.ref.data()}
        if deployment.phase is Phase.FAILED:
            found.append(
                replace(
                    vm,
                    state=WorkerState.STOPPED,
                    reason=deployment.reason,
                    preempted=False,
                    provider_data=data,
                )
            )
        else:
            found.append(replace(vm, provider_data=data))
    for deployment in by_worker.values():
        instance = deployment_instance(
            deployment, subscription=subscription, region=region, now=now, listing=True
        )
        if instance is not None:
            found.append(instance)
    return found


def leftovers(
    resources: Sequence[Leftover],
    *,
    deployment_id: str,
    provider_id: str,
    region: str,
    busy_workers: set[str],
    first_seen: Mapping[str, datetime],
) -> list[CloudInstance]:
    """Orphans among NICs, public IPs and disks: this wm deployment's, attached to nothing, of
    a worker with no deployment in flight and no listed VM. Dated by `first_seen` (by id,
    lower case), so the orphan grace runs from the first sweep that saw them."""
    found = []
    for resource in resources:
        tags = resource.tags
        if not owned(tags, deployment_id, provider_id) or resource.attached:
            continue
        if not same_region(resource.location, region) or tags.get(TAG_WORKER) in busy_workers:
            continue
        parsed = parse_resource_id(resource.resource_id)
        if parsed is None or parsed.type not in TORN_DOWN_TYPES - {VM_TYPE}:
            continue
        found.append(
            CloudInstance(
                worker_id=None,
                cloud_id=resource.resource_id,
                region=region,
                state=WorkerState.STOPPED,
                pool_id=tags.get(TAG_POOL),
                launch_config_id=tags.get(TAG_LAUNCH_CONFIG),
                launched_at=first_seen.get(resource.resource_id.lower()),
                reason=REASON_LEFTOVER,
                provider_data={LEFTOVER_KEY: parsed.type},
            )
        )
    return found


def _timestamp(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value:
        return None
    text = value.replace("Z", "+00:00")
    # ARM writes up to 7 fractional digits; Python reads 6.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
