"""Azure launch configs in Taskcluster's ARM-template form: one template deployment per worker.

What worker-manager does (services/worker-manager/src/providers/azure/index.js
`#provisionARMTemplateWorker`, `#checkARMDeployment`, `deprovisionResources`), and wm with it:
- The deployment body is the launch config's `armDeployment` verbatim, its parameters with
  worker-manager's own set over them (`tags`, `vmName`, `computerName`, `adminUsername`,
  `adminPassword`, `customData`; wm/kinds/azure.py). Other parameters, Key Vault references
  included, pass through untouched. The worker group is `parameters.location.value`.
- It goes into `armDeploymentResourceGroup`, created if missing (a HEAD, then a PUT of the group
  only when it is missing, once per process), else into the provider's resource group.
- The deployment is `deploy-<suffix>` of the VM `vm-<suffix>`; the VM name is the worker's
  Taskcluster workerId. wm derives the suffix from its worker id, so the one deployment PUT of
  a worker is the same PUT however often it is sent: a retry finds the deployment running
  (409 DeploymentActive, adopted) or re-runs the same body (same VM name and, within a
  process, the same generated credentials), never a second VM. (wm never sends an intent
  again after a restart: intent recovery looks it up. Sent from another process, its new
  credentials would fail the re-run on the existing VM, which ARM refuses to change.)
- The create is accepted when ARM accepts the PUT; wm never waits for the deployment. The row
  is requested, with the deployment's resource group and name in its provider data.

Where wm differs, by design:
- worker-manager checks each worker's deployment with a GET per worker; wm's scan lists the
  deployments of every resource group it deploys into, in pages, beside the VM lists. A
  deployment still running shows as a requested worker; a failed one as a stopped worker
  whose reason names the failure (`arm-deployment-failed: <code>: <message>`), whatever its
  VM does, and the scan tears it down.
- What a deployment made is recorded on the worker's row when it ends, as worker-manager
  records it (`provider_data.armDeploymentResources`: the state it ended in and the resource
  ids, VM, NICs, public IPs, disks and anything else, by id): for one that succeeded, the ids
  its outputs and `outputResources` name, read from the scan's list (no extra call); for one
  that failed, its operations' created targets too (one `DeploymentOperations_List`, once per
  process); and the OS disk its VM made from its image, which only the listed VM names
  (`osDiskId`, recorded for every listed VM: no operation, output or tag names it). The scan
  writes the record (`CloudInstance.record`), then through `recorded` wm deletes a succeeded
  deployment unless `workerManager.keepDeployment`, as worker-manager does "to avoid hitting
  the 800 deployments limit"; a failed one is kept until its worker is torn down, as
  worker-manager keeps it. Teardown deletes from the record: the VM, then every NIC and disk,
  then every public IP (other types are recorded, never deleted, as in worker-manager), then
  the deployment unless kept (404 or 204: already gone). A kept deployment is never deleted,
  not even at teardown (the schema: "instead of deleting them after success or during
  teardown").
- Rows without a record (made before records, or whose deployment has not ended) are torn
  down from the deployment as before: its operations' `targetResource`, outputs and
  `outputResources`, and the recorded OS disk. ARM prunes a group's history by itself
  (HISTORY_* below): a deployment pruned before wm recorded it loses only that record; its VM
  and OS disk are deleted by name, and what is left is found by the leftover sweep, by tags.
- Leftovers: a NIC, public IP or disk tagged with this wm deployment, attached to nothing,
  whose worker has no deployment in flight and no listed VM, is listed as an orphan; the scan's
  orphan sweep deletes it. Such leftovers are rare (the deployment record covers the rest),
  so each group is swept once per `LEFTOVER_SWEEP_S`, and a leftover is dated by the sweep
  that first saw it: the orphan grace runs from there.
- The groups a scan lists are the provider's, the ones this process deployed into and the ones
  its rows name (learnt from look-ups and terminates, listed in bulk the first time). A group
  that no live row names and this process never deployed into is not listed: an orphan there
  (a crash's leftover) waits until a row names the group again.

Pure helpers first (tested with tables in tests/unit/test_azure_arm_rules.py), then
`ArmDeployments`, the part that calls ARM through the provider's gate.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Protocol

from wm.errors import CloudError, ErrorCategory, UnknownCloudState
from wm.kinds import azure as azure_kind
from wm.model import CloudInstance, WorkerRef, WorkerState
from wm.providers.azure.names import computer_name, vm_name
from wm.providers.base import (
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_WORKER,
    LaunchBatch,
    LaunchResult,
    TerminateResult,
    owned,
)
from wm.providers.gate import Gate
from wm.providers.meter import carry
from wm.telemetry import log

ARM_DEPLOYMENT = "armDeployment"  # the launch config key of the ARM-template form
RESOURCE_GROUP_KEY = "armDeploymentResourceGroup"
DATA_KEY = "armDeployment"  # provider_data: {"resourceGroup", "name", "keepDeployment"}
LEFTOVER_KEY = "leftover"  # provider_data of a leftover orphan: its resource type
# provider_data: {"state": ARM's final provisioning state, "ids": [resource id, ...]}, what
# the deployment made, recorded when it ended (a key of its own: the create's `||` merge of
# DATA_KEY never overwrites it).
RESOURCES_KEY = "armDeploymentResources"
# provider_data of a listed VM: the managed OS disk it made from its image (no deployment
# operation or output need name it; a record adds it).
OS_DISK_KEY = "osDiskId"
VM_PREFIX = "vm-"
DEPLOYMENT_PREFIX = "deploy-"  # worker-manager's deployment names: deploy-<VM name suffix>
# A deployment's own tag saying it is to be kept (workerManager.keepDeployment): an orphan's
# teardown knows it without the launch config. Not in the `tags` parameter.
TAG_KEEP = "wm-keep-deployment"
TAG_WORKER_GROUP = "worker-group"  # worker-manager's tag: the location
VM_TYPE = "microsoft.compute/virtualmachines"
NIC_TYPE = "microsoft.network/networkinterfaces"
IP_TYPE = "microsoft.network/publicipaddresses"
DISK_TYPE = "microsoft.compute/disks"
TORN_DOWN_TYPES = frozenset({VM_TYPE, NIC_TYPE, IP_TYPE, DISK_TYPE})
# A kept (keepDeployment) failed deployment without a VM shows as a stopped worker this long
# after it ended, so its row is torn down; after that it is history, not a worker.
FAILED_REPORT_S = 900.0
# A deployment that succeeded without its VM in the list read just before: listing lag, unless
# it ended this long ago (then the VM was deleted out of band).
LIST_LAG_S = 60.0
LEFTOVER_SWEEP_S = 600.0  # least time between two leftover sweeps of one group and region
REASON_PREFIX = "arm-deployment-"  # stop reasons: arm-deployment-failed: <code>: <message>
REASON_VM_GONE = "arm-deployment-vm-gone"  # the VM went; what the deployment made may not have
REASON_LEFTOVER = "arm-deployment-leftover"
REASON_MAX_CHARS = 500
DEPLOYED_REMEMBERED = 100_000  # worker -> deployment of this process's creates, newest kept
FAILED_REMEMBERED = 10_000  # failed deployments whose operations this process read, newest kept
# ARM's deployment history of a resource group, as Microsoft documents it ("Automatic
# deletions from deployment history", learn.microsoft.com/azure/azure-resource-manager/
# templates/deployment-history-deletions): at most 800 deployments; once a deployment (or a
# what-if, or a validation) takes the history past 700, ARM deletes the oldest until 600 are
# left (a deployment given a name already in the history moves to the newest place). At 800
# the next deployment fails. Nothing is deleted while a CanNotDelete lock is on the group or
# the deploying identity may not delete deployments (Microsoft.Resources/deployments/delete),
# and a deployment still running cannot be deleted. Deleting a deployment never deletes what
# it made. A pool of a few hundred workers in one group therefore loses the deployments of its
# oldest live workers: wm tears down from the row's record, never from the deployment alone.
HISTORY_LIMIT = 800
HISTORY_PRUNE_ABOVE = 700
HISTORY_PRUNE_TO = 600
# ARM codes of a template ARM refused as a whole (nothing was deployed).
TEMPLATE_CODES = frozenset({"invalidtemplate", "invalidtemplatedeployment"})
# 409s of a deployment PUT whose deployment exists and runs: adopted if it is this worker's.
ACTIVE_CODES = frozenset({"deploymentactive", "conflict", "anotheroperationinprogress"})
# Resource deletes refused because something still holds the resource: try next time.
IN_USE_CODES = frozenset(
    {"nicinuse", "publicipaddresscannotbedeleted", "inuse", "operationnotallowed"}
)
# Error codes of a deployment that only wrap the real ones in `details`.
WRAPPER_CODES = frozenset({"deploymentfailed", "resourcedeploymentfailure"})
_RESOURCE_ID = re.compile(
    r"^/subscriptions/(?P<sub>[^/]+)/resourcegroups/(?P<group>[^/]+)/providers/"
    r"(?P<namespace>[^/]+)/(?P<type>[^/]+)/(?P<name>[^/]+)$",
    re.IGNORECASE,
)
_PARAMETER_LIST = re.compile(r"template parameters? '([^']*)'", re.IGNORECASE)


class Phase(StrEnum):
    """Where a deployment is, for wm."""

    IN_FLIGHT = "in-flight"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed or canceled: it will make nothing more
    GONE = "gone"  # being deleted, or deleted


# ARM's provisioning states of a deployment (Microsoft.Resources ProvisioningState), lower case.
DEPLOYMENT_PHASES: Mapping[str, Phase] = {
    "notspecified": Phase.IN_FLIGHT,
    "accepted": Phase.IN_FLIGHT,
    "running": Phase.IN_FLIGHT,
    "ready": Phase.IN_FLIGHT,
    "creating": Phase.IN_FLIGHT,
    "created": Phase.IN_FLIGHT,
    "updating": Phase.IN_FLIGHT,
    "succeeded": Phase.SUCCEEDED,
    "failed": Phase.FAILED,
    "canceled": Phase.FAILED,
    "deleting": Phase.GONE,
    "deleted": Phase.GONE,
}


@dataclass(frozen=True)
class DeploymentRef:
    """Where a worker's deployment is: what its row's provider data records."""

    resource_group: str
    name: str
    keep: bool = False  # workerManager.keepDeployment

    def data(self) -> dict[str, Any]:
        return {
            DATA_KEY: {
                "resourceGroup": self.resource_group,
                "name": self.name,
                "keepDeployment": self.keep,
            }
        }

    @property
    def vm_name(self) -> str:
        return VM_PREFIX + self.name.removeprefix(DEPLOYMENT_PREFIX)


def deployment_ref(provider_data: Mapping[str, Any]) -> DeploymentRef | None:
    """The deployment a row's provider data names, if it names one."""
    data = provider_data.get(DATA_KEY)
    if not isinstance(data, Mapping):
        return None
    group, name = data.get("resourceGroup"), data.get("name")
    if not isinstance(group, str) or not isinstance(name, str) or not group or not name:
        return None
    return DeploymentRef(group, name, data.get("keepDeployment") is True)


@dataclass(frozen=True)
class DeploymentView:
    """One deployment as ARM showed it (a GET or a list)."""

    ref: DeploymentRef
    phase: Phase
    state: str  # ARM's provisioning state, as it wrote it
    tags: Mapping[str, str] = field(default_factory=dict)
    ended_at: datetime | None = None  # properties.timestamp: its last change
    failure: str | None = None  # "<code>: <message>" of what failed
    resource_ids: tuple[str, ...] = ()  # named by its outputs and outputResources

    @property
    def worker_id(self) -> str | None:
        return self.tags.get(TAG_WORKER)

    @property
    def reason(self) -> str:
        text = f"{REASON_PREFIX}{self.state.lower()}: {self.failure or 'no error given'}"
        return text[:REASON_MAX_CHARS]


@dataclass(frozen=True)
class ResourceId:
    subscription: str
    resource_group: str
    type: str  # namespace/type, lower case
    name: str


@dataclass(frozen=True)
class Teardown:
    """What a deployment made that wm deletes, by resource id, in the order ARM allows."""

    vms: tuple[str, ...] = ()
    nics_and_disks: tuple[str, ...] = ()  # once the VMs are gone
    public_ips: tuple[str, ...] = ()  # once the NICs holding them are gone

    @property
    def all(self) -> tuple[str, ...]:
        return (*self.vms, *self.nics_and_disks, *self.public_ips)


@dataclass(frozen=True)
class Leftover:
    """A NIC, public IP or disk as a list showed it."""

    resource_id: str
    location: str
    tags: Mapping[str, str]
    attached: bool  # held by a VM (NIC, disk) or a NIC (public IP)


@dataclass(frozen=True)
class Made:
    """What an ended deployment made, as its worker's row records it (RESOURCES_KEY)."""

    state: str  # the provisioning state it ended in, as ARM wrote it
    ids: tuple[str, ...]  # every resource it made, its VM first

    @property
    def succeeded(self) -> bool:
        return DEPLOYMENT_PHASES.get(self.state.lower()) is Phase.SUCCEEDED

    def data(self) -> dict[str, Any]:
        return {RESOURCES_KEY: {"state": self.state, "ids": list(self.ids)}}

    def adding(self, *ids: str) -> Made:
        """The record with these ids too, each once whatever its case."""
        return Made(self.state, _unique([*self.ids, *ids]))


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    found: dict[str, str] = {}
    for resource_id in ids:
        found.setdefault(resource_id.lower(), resource_id)
    return tuple(found.values())


def made_of(provider_data: Mapping[str, Any]) -> Made | None:
    """The record of what a row's deployment made, if the row holds one."""
    data = provider_data.get(RESOURCES_KEY)
    if not isinstance(data, Mapping) or not isinstance(data.get("ids"), list):
        return None
    ids = tuple(i for i in data["ids"] if isinstance(i, str) and i)
    return Made(str(data.get("state") or ""), ids)


def made_by(
    deployment: DeploymentView, subscription: str, operations: Sequence[Mapping[str, Any]] = ()
) -> Made:
    """What an ended deployment made: its VM, its operations' created targets (of any type),
    and what its outputs and `outputResources` name; each once, whatever the case of its id."""
    ref = deployment.ref
    ids = [vm_resource_id(subscription, ref.resource_group, ref.vm_name)]
    ids += created_targets(operations)
    ids += deployment.resource_ids
    return Made(deployment.state, _unique(ids))


def created_targets(operations: Sequence[Mapping[str, Any]]) -> list[str]:
    """The resources a deployment's operations created or updated (reads of existing
    resources are not its to delete)."""
    ids = []
    for operation in operations:
        props = _mapping(operation.get("properties"))
        kind = str(props.get("provisioningOperation") or "Create").lower()
        target = _mapping(props.get("targetResource"))
        if kind == "create" and isinstance(target.get("id"), str):
            ids.append(target["id"])
    return ids


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


def os_disk_of(provider_data: Mapping[str, Any]) -> list[str]:
    """The OS disk a row's VM made, as a scan recorded it (none before any scan listed it)."""
    found = provider_data.get(OS_DISK_KEY)
    return [found] if isinstance(found, str) and found else []


# -- names and bodies --------------------------------------------------------------------------


def deployment_name(vm_name: str) -> str:
    """worker-manager's `deploy-<suffix>` for the VM `vm-<suffix>`."""
    return DEPLOYMENT_PREFIX + vm_name.removeprefix(VM_PREFIX)


def resource_group(launch_config: Mapping[str, Any], default: str) -> str:
    given = launch_config.get(RESOURCE_GROUP_KEY)
    return given if isinstance(given, str) and given else default


def keep_deployment(launch_config: Mapping[str, Any]) -> bool:
    manager = launch_config.get("workerManager")
    return isinstance(manager, Mapping) and manager.get("keepDeployment") is True


def location(launch_config: Mapping[str, Any]) -> str | None:
    """The worker group: the deployment's `location` parameter value (worker-manager's)."""
    deployment = _mapping(launch_config.get(ARM_DEPLOYMENT))
    value = _mapping(_mapping(deployment.get("parameters")).get("location")).get("value")
    return value if isinstance(value, str) and value else None


def vm_resource_id(subscription: str, group: str, vm_name: str) -> str:
    return (
        f"/subscriptions/{subscription}/resourceGroups/{group}"
        f"/providers/Microsoft.Compute/virtualMachines/{vm_name}"
    )


def parse_resource_id(resource_id: str) -> ResourceId | None:
    match = _RESOURCE_ID.match(resource_id or "")
    if match is None:
        return None
    return ResourceId(
        match["sub"],
        match["group"],
        f"{match['namespace']}/{match['type']}".lower(),
        match["name"],
    )


def deployment_body(
    arm_deployment: Mapping[str, Any],
    injected: Mapping[str, Mapping[str, Any]],
    tags: Mapping[str, str],
) -> dict[str, Any]:
    """The deployment PUT body: `armDeployment` verbatim as its properties, worker-manager's
    parameters over the launch config's, and the tags on the deployment itself."""
    properties = copy.deepcopy(dict(arm_deployment))
    parameters = dict(_mapping(properties.get("parameters")))
    properties["parameters"] = {**parameters, **copy.deepcopy(dict(injected))}
    return {"properties": properties, "tags": dict(tags)}


def undeclared_parameters(message: str) -> tuple[str, ...]:
    """Which of worker-manager's parameters ARM says the template does not declare.

    ARM: "[Deployment template validation failed: ']The template parameters 'vmName,
    customData' in the parameters file are not valid; they are not present in the original
    template ... The only supported parameters for this template are 'location, vmSize'."
    The list after "template parameters" names them; the supported ones, and a name quoted
    in any other refusal, are no evidence."""
    wanted = {name.lower(): name for name in azure_kind.ARM_INJECTED_PARAMETERS}
    head = re.split(r"only supported parameters", message, maxsplit=1, flags=re.IGNORECASE)[0]
    listed = _PARAMETER_LIST.findall(head)
    named = [part.strip().lower() for group in listed for part in group.split(",")]
    return tuple(dict.fromkeys(wanted[name] for name in named if name in wanted))


def template_error(error: CloudError, launch_config_id: str) -> CloudError:
    """ARM refused the template: a definite launch error, naming the parameters of
    worker-manager's the template lacks, when that is why."""
    missing = undeclared_parameters(error.message)
    if not missing:
        return error
    names = ", ".join(missing)
    message = (
        f"launch config {launch_config_id}: the template does not declare the parameter(s) "
        f"{names}, which worker-manager sets in every deployment (template parameters "
        f"{names}); ARM said: {error.message}"
    )
    return CloudError(
        error.provider,
        ErrorCategory.BAD_CONFIG,
        error.code,
        message,
        operation=error.operation,
        maybe_applied=error.maybe_applied,
    )


def admin_credentials(secret: bytes, worker_id: str) -> tuple[str, str]:
    """Admin user name and password of a worker's VM: random to anyone without `secret` (drawn
    once per process, never stored), and the same for every PUT of the worker in a process, so
    a deployment re-sent after it ended re-deploys the same VM instead of failing on a changed
    password. 20 characters of name, a letter first (worker-manager's length); the password's
    fixed prefix meets ARM's complexity rules."""
    digest = hmac.new(secret, worker_id.encode(), hashlib.sha256).hexdigest()
    password = hmac.new(secret, b"password:" + worker_id.encode(), hashlib.sha256).hexdigest()
    return "u" + digest[:19], "Wm-9" + password[:28]


# -- what ARM shows ----------------------------------------------------------------------------


def deployment_phase(provider_id: str, state: str) -> Phase:
    key = (state or "").lower()
    if key not in DEPLOYMENT_PHASES:
        raise UnknownCloudState(provider_id, f"Deployment/{state}")
    return DEPLOYMENT_PHASES[key]


def view(provider_id: str, resource_group: str, deployment: Mapping[str, Any]) -> DeploymentView:
    """A deployment's JSON (ARM's wire form) as wm reads it."""
    props = _mapping(deployment.get("properties"))
    state = str(props.get("provisioningState") or "NotSpecified")
    tags = {str(k): str(v) for k, v in _mapping(deployment.get("tags")).items()}
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


def teardown_plan(
    operations: Sequence[Mapping[str, Any]], extra_ids: Sequence[str] = ()
) -> Teardown:
    """The VMs, NICs, disks and public IPs a deployment made, from its operations' target
    resources (the ones it created or updated; reads of existing resources are not its to
    delete) and any more its outputs name. Each once, whatever the case of its id."""
    ids = [*created_targets(operations), *extra_ids]
    by_type: dict[str, dict[str, str]] = {t: {} for t in TORN_DOWN_TYPES}
    for resource_id in ids:
        parsed = parse_resource_id(resource_id)
        if parsed is not None and parsed.type in TORN_DOWN_TYPES:
            by_type[parsed.type].setdefault(resource_id.lower(), resource_id)
    return Teardown(
        vms=tuple(by_type[VM_TYPE].values()),
        nics_and_disks=(*by_type[NIC_TYPE].values(), *by_type[DISK_TYPE].values()),
        public_ips=tuple(by_type[IP_TYPE].values()),
    )


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
        if not _same_region(resource.location, region) or tags.get(TAG_WORKER) in busy_workers:
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


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


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


def _same_region(location_: str | None, region: str) -> bool:
    def norm(value: str) -> str:
        return value.lower().replace(" ", "")

    return norm(location_ or "") == norm(region)


# -- the calls -----------------------------------------------------------------------------------


class Deleted(StrEnum):
    """What one DELETE (or the GET before a VM's) found."""

    ABSENT = "absent"  # nothing was there (404, 204)
    DONE = "done"  # deleted now (200)
    UNDER_WAY = "under-way"  # ARM is deleting it (202, or a VM already deleting)
    IN_USE = "in-use"  # something still holds it
    NOT_OURS = "not-ours"  # a VM without this deployment's tag: never touched

    @property
    def gone(self) -> bool:
        return self in (Deleted.ABSENT, Deleted.DONE, Deleted.NOT_OURS)


class ArmHost(Protocol):
    """What the ARM form uses of the Azure provider it belongs to (provider.AzureProvider): its
    identity, gate, clients and thread pool, and the VM side's reads and deletes. Declared here
    so that this module never imports the provider, which imports it."""

    id: str
    deployment_id: str
    root_url: str
    subscription_id: str
    resource_group: str
    gate: Gate
    pool: Executor
    clients: Any  # provider.AzureClients: the SDK clients, built lazily

    def all_pages(self, operation: str, make_pager: Callable[[], Any]) -> list[Any]: ...

    def owns(self, vm: Any) -> bool: ...

    def owns_tags(self, tags: Mapping[str, str]) -> bool: ...

    def worker_tags(self, batch: LaunchBatch, worker_id: str, location: str) -> dict[str, str]: ...

    def list_groups(self, region: str, groups: Sequence[str]) -> list[CloudInstance]: ...

    def vm_instance(self, group: str, name: str, region: str) -> CloudInstance | None: ...

    def get_vm(self, name: str, expand: str | None = None, group: str | None = None) -> Any: ...

    def provisioning_state(self, vm: Any) -> str: ...

    def delete(self, kind: str, name: str, group: str | None = None) -> int: ...


class ArmDeployments:
    """The ARM-template side of one Azure provider: creates, lists, look-ups and teardowns of
    deployments, every call through the provider's gate."""

    def __init__(self, provider: ArmHost) -> None:
        self._p = provider
        self._lock = threading.Lock()
        self._groups: dict[str, str] = {}  # lower case -> name: groups ARM workers live in
        self._ready: set[str] = set()  # groups known to exist (lower case)
        # One ensuring of a group at a time (worker-manager's resourceGroupCache promise): launch
        # configs in several locations share a group, and two concurrent PUTs of it in different
        # locations would have ARM refuse the second (InvalidResourceGroupLocation).
        self._group_locks: dict[str, threading.Lock] = {}
        self._deployed: dict[str, DeploymentRef] = {}  # worker -> its deployment (creates)
        # failed deployment (group, name, end), lower case -> what its operations say it made
        self._failed: dict[tuple[str, str, str], Made] = {}
        self._swept: dict[tuple[str, str], float] = {}  # (group, region) -> last sweep
        # leftover id (lower case) -> (first sweep that saw it, its (group, region))
        self._leftover_seen: dict[str, tuple[datetime, tuple[str, str]]] = {}
        self._secret = secrets.token_bytes(32)
        self.leftover_sweep_s = LEFTOVER_SWEEP_S

    # -- groups ------------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """The resource groups ARM workers were seen in, in a stable order."""
        with self._lock:
            return sorted(self._groups.values(), key=str.lower)

    def learn(self, group: str) -> bool:
        """Remember a group ARM workers live in; True when it was new."""
        with self._lock:
            if group.lower() in self._groups:
                return False
            self._groups[group.lower()] = group
            return True

    def ref_of(self, ref: WorkerRef) -> DeploymentRef | None:
        """The deployment of a row: from its provider data, or from this process's create
        (an intent whose create answer was lost has no provider data)."""
        found = deployment_ref(ref.provider_data)
        if found is None:
            with self._lock:
                found = self._deployed.get(ref.worker_id)
        return found

    # -- create ------------------------------------------------------------------------------

    def create(self, batch: LaunchBatch) -> list[LaunchResult]:
        spec = batch.spec
        launch_config = spec.launch_config
        where = location(launch_config) or spec.region
        group = resource_group(launch_config, self._p.resource_group)
        keep = keep_deployment(launch_config)
        try:
            self._ensure_group(group, where)
        except CloudError as error:
            error = error.not_found_as_config()
            return [LaunchResult(i.worker_id, None, error=error) for i in batch.intents]
        self.learn(group)

        def create_one(worker_id: str) -> LaunchResult:
            return self._create_one(batch, worker_id, where, DeploymentRef(group, "", keep))

        return list(self._p.pool.map(carry(create_one), [i.worker_id for i in batch.intents]))

    def _create_one(
        self, batch: LaunchBatch, worker_id: str, where: str, target: DeploymentRef
    ) -> LaunchResult:
        vm = vm_name(worker_id)
        ref = replace(target, name=deployment_name(vm))
        with self._lock:
            if len(self._deployed) >= DEPLOYED_REMEMBERED:
                self._deployed.pop(next(iter(self._deployed)))
            self._deployed[worker_id] = ref
        tags = self._p.worker_tags(batch, worker_id, where)
        username, password = admin_credentials(self._secret, worker_id)
        injected = azure_kind.azure_arm_parameters(
            tags=tags,
            vm_name=vm,
            computer_name=computer_name(worker_id),
            admin_username=username,
            admin_password=password,
            custom_data=azure_kind.azure_custom_data(
                root_url=self._p.root_url,
                pool_id=batch.pool_id,
                provider_id=self._p.id,
                location=where,
            ),
        )
        deployment_tags = {**tags, **({TAG_KEEP: "true"} if ref.keep else {})}
        body = deployment_body(batch.spec.launch_config[ARM_DEPLOYMENT], injected, deployment_tags)
        try:
            self._p.gate.call("Deployments_CreateOrUpdate", self._put, ref, body)
        except CloudError as error:
            return self._refused(batch, worker_id, ref, error)
        return self._accepted(worker_id, ref)

    def _refused(
        self, batch: LaunchBatch, worker_id: str, ref: DeploymentRef, error: CloudError
    ) -> LaunchResult:
        code = error.code.lower()
        if code in ACTIVE_CODES:
            # The deployment exists and runs: a retried PUT. It is the answer, if it is ours.
            return self._adopt(worker_id, ref, error)
        if code == "resourcegroupnotfound":
            with self._lock:  # deleted since this process made sure of it: again next time
                self._ready.discard(ref.resource_group.lower())
        if code in TEMPLATE_CODES:
            error = template_error(error, batch.spec.launch_config_id)
        error = error.not_found_as_config()
        if error.nothing_applied:
            with self._lock:  # no deployment of it exists: nothing to look for later
                self._deployed.pop(worker_id, None)
        return LaunchResult(worker_id, None, error=error)

    def _adopt(self, worker_id: str, ref: DeploymentRef, conflict: CloudError) -> LaunchResult:
        try:
            found = self._get(ref)
        except CloudError as error:
            error.maybe_applied = True  # ARM said the deployment exists: it may be this one
            return LaunchResult(worker_id, None, error=error)
        tags = found.tags if found is not None else {}
        ours = self._p.owns_tags(tags)
        if found is None or not ours or tags.get(TAG_WORKER) != worker_id:
            return LaunchResult(worker_id, None, error=conflict)
        return self._accepted(worker_id, ref)

    def _accepted(self, worker_id: str, ref: DeploymentRef) -> LaunchResult:
        return LaunchResult(
            worker_id,
            vm_resource_id(self._p.subscription_id, ref.resource_group, ref.vm_name),
            provider_data=ref.data(),
            tc_worker_id=ref.vm_name,
        )

    def _ensure_group(self, group: str, where: str) -> None:
        """Create the launch config's resource group if it is missing, once per process.
        The provider's own group is the operator's to create (as worker-manager assumes)."""
        key = group.lower()
        if key == self._p.resource_group.lower():
            return
        with self._lock:
            if key in self._ready:
                return
            group_lock = self._group_locks.setdefault(key, threading.Lock())
        with group_lock:
            with self._lock:
                if key in self._ready:
                    return
            groups = self._p.clients.resources.resource_groups
            exists = self._p.gate.call(
                "ResourceGroups_CheckExistence", groups.check_existence, group
            )
            if not exists:
                self._p.gate.call(
                    "ResourceGroups_CreateOrUpdate",
                    groups.create_or_update,
                    group,
                    {"location": where},
                )
                log(
                    "azure-resource-group-created", provider=self._p.id, group=group, location=where
                )
            with self._lock:
                self._ready.add(key)

    def _put(self, ref: DeploymentRef, body: dict[str, Any]) -> Any:
        deployments = self._p.clients.deployments.deployments
        return deployments.begin_create_or_update(
            ref.resource_group, ref.name, body, polling=False
        ).result()

    # -- list --------------------------------------------------------------------------------

    def instances(
        self,
        region: str,
        vms: Sequence[CloudInstance],
        groups: Sequence[str] | None = None,
        *,
        sweep: bool = True,
    ) -> list[CloudInstance]:
        """The scan unit's workers: its VMs joined with the deployments of every ARM group
        (or of `groups`), and the leftovers a sweep due now finds."""
        groups = self.groups() if groups is None else list(groups)
        if not groups:
            return list(vms)
        deployments = [
            d
            for group in groups
            for d in self._list(group)
            if _same_region(d.tags.get(TAG_WORKER_GROUP), region)
        ]
        now = datetime.now(UTC)
        found = join(
            self._with_group_data(vms),
            deployments,
            subscription=self._p.subscription_id,
            region=region,
            now=now,
        )
        by_worker = {d.worker_id: d for d in deployments if d.worker_id}
        found = [self._with_record(i, by_worker.get(i.worker_id or "")) for i in found]
        busy = {d.worker_id for d in deployments if d.phase is Phase.IN_FLIGHT and d.worker_id}
        busy |= {v.worker_id for v in vms if v.worker_id}
        return found + (self._sweep(groups, region, busy) if sweep else [])

    def _with_record(
        self, instance: CloudInstance, deployment: DeploymentView | None
    ) -> CloudInstance:
        """A worker whose deployment ended carries what it made, and a listed VM the OS disk
        it made, for its row to keep."""
        record: dict[str, Any] = {}
        os_disk = instance.provider_data.get(OS_DISK_KEY)
        if isinstance(os_disk, str) and os_disk:
            # Named by no operation, output or tag: only the listed VM says which it is.
            record[OS_DISK_KEY] = os_disk
        if deployment is not None and deployment.phase in (Phase.SUCCEEDED, Phase.FAILED):
            made = self._made(deployment)
            if made is not None:
                record.update(made.adding(*record.values()).data())
        return replace(instance, record=record) if record else instance

    def _made(self, deployment: DeploymentView) -> Made | None:
        subscription = self._p.subscription_id
        if deployment.phase is Phase.SUCCEEDED:
            return made_by(deployment, subscription)
        ref = deployment.ref
        ended = deployment.ended_at.isoformat() if deployment.ended_at else ""
        key = (ref.resource_group.lower(), ref.name.lower(), ended)
        with self._lock:
            known = self._failed.get(key)
        if known is not None:
            return known
        try:
            operations = self._operations(ref)
        except CloudError as error:
            # Not recorded this time: the deployment is kept until teardown, which reads it.
            log("arm-operations-unread", provider=self._p.id, deployment=ref.name, error=str(error))
            return None
        made = made_by(deployment, subscription, operations)
        with self._lock:
            if len(self._failed) >= FAILED_REMEMBERED:
                self._failed.pop(next(iter(self._failed)))
            self._failed[key] = made
        return made

    def _operations(self, ref: DeploymentRef) -> list[Mapping[str, Any]]:
        operations = self._p.all_pages(
            "DeploymentOperations_List",
            lambda: self._p.clients.deployments.deployment_operations.list(
                ref.resource_group, ref.name
            ),
        )
        return [o.as_dict() if hasattr(o, "as_dict") else dict(o) for o in operations]

    # -- recorded ----------------------------------------------------------------------------

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        """Rows now hold what these deployments made: delete each that succeeded unless it is
        kept, as worker-manager does once a deployment succeeded (ARM keeps 800 per group and
        prunes the oldest itself). A failed one stays until its worker is torn down."""
        doomed = []
        for instance in instances:
            ref, made = deployment_ref(instance.provider_data), made_of(instance.record)
            if ref is not None and made is not None and made.succeeded and not ref.keep:
                doomed.append(ref)
        list(self._p.pool.map(carry(self._delete_after_success), doomed))

    def _delete_after_success(self, ref: DeploymentRef) -> None:
        try:
            self._delete_deployment(ref)
        except CloudError as error:
            # Listed again at the next scan, and deleted then.
            log(
                "arm-deployment-delete-failed",
                provider=self._p.id,
                deployment=ref.name,
                error=str(error),
            )

    def _with_group_data(self, vms: Sequence[CloudInstance]) -> list[CloudInstance]:
        """A VM in an ARM group outside the provider's carries where its deployment would be,
        so an orphan's teardown looks there."""
        own = self._p.resource_group.lower()
        out = []
        for vm in vms:
            parsed = parse_resource_id(vm.cloud_id)
            if parsed is None or parsed.resource_group.lower() == own or not vm.worker_id:
                out.append(vm)
                continue
            ref = DeploymentRef(parsed.resource_group, deployment_name(parsed.name))
            out.append(replace(vm, provider_data={**vm.provider_data, **ref.data()}))
        return out

    def _list(self, group: str) -> list[DeploymentView]:
        deployments = self._p.clients.deployments.deployments
        items = self._p.all_pages(
            "Deployments_ListByResourceGroup",
            lambda: deployments.list_by_resource_group(group),
        )
        views = []
        for item in items:
            raw = item.as_dict() if hasattr(item, "as_dict") else dict(item)
            if not self._p.owns_tags(_mapping(raw.get("tags"))):
                continue
            views.append(view(self._p.id, group, raw))
        return views

    def _sweep(self, groups: Sequence[str], region: str, busy: set[str]) -> list[CloudInstance]:
        found: list[CloudInstance] = []
        for group in groups:
            key = (group.lower(), region.lower())
            with self._lock:
                last = self._swept.get(key)
                due = last is None or time.monotonic() - last >= self.leftover_sweep_s
                if due:
                    self._swept[key] = time.monotonic()
            if due:
                found += self._sweep_group(group, region, busy)
        return found

    def _sweep_group(self, group: str, region: str, busy: set[str]) -> list[CloudInstance]:
        clients = self._p.clients
        nics = self._p.all_pages(
            "NetworkInterfaces_List", lambda: clients.network.network_interfaces.list(group)
        )
        ips = self._p.all_pages(
            "PublicIPAddresses_List", lambda: clients.network.public_ip_addresses.list(group)
        )
        disks = self._p.all_pages(
            "Disks_ListByResourceGroup",
            lambda: clients.compute.disks.list_by_resource_group(group),
        )
        resources = [
            *(_leftover(n, n.virtual_machine is not None) for n in nics),
            *(_leftover(i, i.ip_configuration is not None) for i in ips),
            *(_leftover(d, bool(d.managed_by)) for d in disks),
        ]
        found = leftovers(
            resources,
            deployment_id=self._p.deployment_id,
            provider_id=self._p.id,
            region=region,
            busy_workers=busy,
            first_seen={},
        )
        return self._date(found, (group.lower(), region.lower()))

    def _date(self, found: Sequence[CloudInstance], unit: tuple[str, str]) -> list[CloudInstance]:
        """Date leftovers by the sweep of their group and region that first saw them; one no
        longer found there is forgotten."""
        now = datetime.now(UTC)
        ids = {i.cloud_id.lower() for i in found}
        with self._lock:
            for key in [k for k, (_, u) in self._leftover_seen.items() if u == unit]:
                if key not in ids:
                    del self._leftover_seen[key]
            for key in ids:
                self._leftover_seen.setdefault(key, (now, unit))
            seen = {key: self._leftover_seen[key][0] for key in ids}
        return [replace(i, launched_at=seen[i.cloud_id.lower()]) for i in found]

    # -- lookup ------------------------------------------------------------------------------

    def lookup(self, refs: Sequence[tuple[WorkerRef, DeploymentRef]]) -> dict[str, CloudInstance]:
        """Rows of ARM workers the lists did not show. Those in groups this process had not
        seen are first found in bulk (their groups listed once, then every scan); the rest
        with a GET of the deployment, and of the VM where the deployment does not decide."""
        new = {ref.resource_group.lower(): ref.resource_group for _, ref in refs}
        new = {key: group for key, group in new.items() if self.learn(group)}
        found: dict[str, CloudInstance] = {}
        if new:
            in_new = [(w, r) for w, r in refs if r.resource_group.lower() in new]
            found = self._bulk(sorted(new.values()), in_new)
        rest = [(w, r) for w, r in refs if w.worker_id not in found]
        answers = self._p.pool.map(carry(lambda pair: self._lookup_one(*pair)), rest)
        for (worker, _), instance in zip(rest, answers, strict=True):
            if instance is not None:
                found[worker.worker_id] = instance
        return found

    def find_unrecorded(
        self, refs: Sequence[WorkerRef], vm_names: Mapping[str, str]
    ) -> dict[str, CloudInstance]:
        """Intents whose create answer was lost, with no deployment on their rows nor in this
        process's memory (a restart), and no VM in the provider's group: their deployments
        may be in a launch config's own group. Every group of the subscription is listed once
        for deployments of this wm deployment named after them; found ones are looked up as
        recorded ones. Only unresolved intents pay for this, and they are rare."""
        wanted = {deployment_name(vm_names[r.worker_id]).lower(): r for r in refs}
        groups = self._p.all_pages(
            "ResourceGroups_List", lambda: self._p.clients.resources.resource_groups.list()
        )
        own = self._p.resource_group.lower()
        pairs: list[tuple[WorkerRef, DeploymentRef]] = []
        for group in groups:
            name = getattr(group, "name", None) or _mapping(group).get("name")
            if not name or str(name).lower() == own:
                continue
            for deployment in self._list(str(name)):
                worker = wanted.pop(deployment.ref.name.lower(), None)
                if worker is not None:
                    pairs.append((worker, deployment.ref))
            if not wanted:
                break
        return self.lookup(pairs) if pairs else {}

    def _bulk(
        self, groups: Sequence[str], refs: Sequence[tuple[WorkerRef, DeploymentRef]]
    ) -> dict[str, CloudInstance]:
        found = {}
        for region in sorted({w.region for w, _ in refs}):
            vms = self._p.list_groups(region, groups)
            listed = self.instances(region, vms, groups, sweep=False)
            by_worker = {i.worker_id: i for i in listed if i.worker_id}
            for worker, _ in refs:
                if worker.region == region and worker.worker_id in by_worker:
                    found[worker.worker_id] = by_worker[worker.worker_id]
        return found

    def _lookup_one(self, worker: WorkerRef, ref: DeploymentRef) -> CloudInstance | None:
        made = made_of(worker.provider_data)
        if made is not None:
            # The row knows what the deployment made: the deployment itself may be gone.
            vm = self._p.vm_instance(ref.resource_group, ref.vm_name, worker.region)
            if vm is not None:
                return replace(vm, provider_data={**vm.provider_data, **ref.data()})
            return gone_instance(worker, ref, self._p.subscription_id)
        deployment = self._get(ref)
        if deployment is not None and deployment.phase is Phase.FAILED:
            return self._stands_for(deployment, worker)
        vm = self._p.vm_instance(ref.resource_group, ref.vm_name, worker.region)
        if vm is not None:
            if deployment is not None and deployment.ref.keep:
                ref = replace(ref, keep=True)
            return replace(vm, provider_data={**vm.provider_data, **ref.data()})
        if deployment is None or deployment.phase is Phase.GONE:
            # Its OS disk may be left (a template that keeps it): the teardown deletes it.
            left = os_disk_of(worker.provider_data)
            return gone_instance(worker, ref, self._p.subscription_id) if left else None
        return self._stands_for(deployment, worker)

    def _stands_for(self, deployment: DeploymentView, worker: WorkerRef) -> CloudInstance | None:
        return deployment_instance(
            deployment,
            subscription=self._p.subscription_id,
            region=worker.region,
            now=datetime.now(UTC),
            listing=False,
        )

    def _get(self, ref: DeploymentRef) -> DeploymentView | None:
        deployments = self._p.clients.deployments.deployments
        try:
            item = self._p.gate.call(
                "Deployments_Get", deployments.get, ref.resource_group, ref.name
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return None
            raise
        found = view(self._p.id, ref.resource_group, item.as_dict())
        if not self._p.owns_tags(found.tags):
            return None  # a deployment of that name that is not this wm's: never touched
        return found

    # -- terminate ---------------------------------------------------------------------------

    def terminate(self, worker: WorkerRef, ref: DeploymentRef) -> TerminateResult:
        """Delete what the worker's deployment made, VM first, then the deployment unless
        it is kept; gone once ARM shows none of it. A deployment still running is left to
        end first (ARM refuses to delete it, and it may still create)."""
        self.learn(ref.resource_group)
        made = made_of(worker.provider_data)
        if made is not None:
            return self._terminate_recorded(worker, ref, made)
        try:
            deployment = self._get(ref)
            if deployment is not None and deployment.phase is Phase.IN_FLIGHT:
                return TerminateResult(worker.worker_id, gone=False, nothing_sent=True)
            gone, results = self._delete_plan(self._plan(worker, ref, deployment))
            keep = ref.keep or (deployment is not None and deployment.ref.keep)
            if gone and deployment is not None and deployment.phase is not Phase.GONE and not keep:
                results.append(self._delete_deployment(ref))
            sent = any(r in (Deleted.DONE, Deleted.UNDER_WAY) for r in results)
            return TerminateResult(worker.worker_id, gone=gone, nothing_sent=not sent)
        except CloudError as error:
            return TerminateResult(worker.worker_id, gone=False, error=error)

    def _terminate_recorded(
        self, worker: WorkerRef, ref: DeploymentRef, made: Made
    ) -> TerminateResult:
        """Tear down from the row's record, without reading the deployment (wm deleted it
        after success, or ARM pruned it); then delete the deployment unless it is kept (gone
        already: a 404 or a 204)."""
        try:
            extra = os_disk_of(worker.provider_data)
            plan = teardown_plan([], [self._vm_id(worker, ref), *made.ids, *extra])
            gone, results = self._delete_plan(plan)
            if gone and not ref.keep:
                results.append(self._delete_deployment(ref))
            sent = any(r in (Deleted.DONE, Deleted.UNDER_WAY) for r in results)
            return TerminateResult(worker.worker_id, gone=gone, nothing_sent=not sent)
        except CloudError as error:
            return TerminateResult(worker.worker_id, gone=False, error=error)

    def _delete_plan(self, plan: Teardown) -> tuple[bool, list[Deleted]]:
        """Delete a plan's VMs; once they are gone, its NICs and disks, then its public IPs.
        Whether all of it is gone, and what each delete found."""
        results = [self._delete_vm(vm_id) for vm_id in plan.vms]
        if all(r.gone for r in results):
            results += [self._delete_by_id(i) for i in plan.nics_and_disks]
            results += [self._delete_by_id(i) for i in plan.public_ips]
        return all(r.gone for r in results) and len(results) == len(plan.all), results

    def _vm_id(self, worker: WorkerRef, ref: DeploymentRef) -> str:
        """The worker's VM: the id the cloud named, else the one wm's names give."""
        vm_id = worker.cloud_id or ""
        parsed = parse_resource_id(vm_id)
        if parsed is None or parsed.type != VM_TYPE:
            vm_id = vm_resource_id(self._p.subscription_id, ref.resource_group, ref.vm_name)
        return vm_id

    def _plan(
        self, worker: WorkerRef, ref: DeploymentRef, deployment: DeploymentView | None
    ) -> Teardown:
        known = [self._vm_id(worker, ref), *os_disk_of(worker.provider_data)]
        if deployment is None or deployment.phase is Phase.GONE:
            return teardown_plan([], known)  # what else it made is found by its tags
        return teardown_plan(self._operations(ref), [*known, *deployment.resource_ids])

    def _delete_vm(self, vm_id: str) -> Deleted:
        parsed = parse_resource_id(vm_id)
        assert parsed is not None
        vm = self._p.get_vm(parsed.name, group=parsed.resource_group)
        if vm is None:
            return Deleted.ABSENT
        if not self._p.owns(vm):
            log("azure-vm-not-owned", provider=self._p.id, vm=vm_id)
            return Deleted.NOT_OURS
        if self._p.provisioning_state(vm) == "deleting":
            return Deleted.UNDER_WAY
        return self._delete_by_id(vm_id)

    def delete_leftover(self, worker: WorkerRef) -> TerminateResult:
        """An orphan NIC, public IP or disk (a leftover): delete it."""
        try:
            result = self._delete_by_id(worker.cloud_id or "")
        except CloudError as error:
            return TerminateResult(worker.worker_id, gone=False, error=error)
        if result.gone:
            with self._lock:
                self._leftover_seen.pop((worker.cloud_id or "").lower(), None)
        return TerminateResult(
            worker.worker_id, gone=result.gone, nothing_sent=result is Deleted.ABSENT
        )

    def _delete_by_id(self, resource_id: str) -> Deleted:
        parsed = parse_resource_id(resource_id)
        if parsed is None:
            return Deleted.ABSENT
        kind = {VM_TYPE: "vm", NIC_TYPE: "nic", IP_TYPE: "ip", DISK_TYPE: "disk"}[parsed.type]
        operation = {
            "vm": "VirtualMachines_Delete",
            "nic": "NetworkInterfaces_Delete",
            "ip": "PublicIPAddresses_Delete",
            "disk": "Disks_Delete",
        }[kind]
        try:
            status = self._p.gate.call(
                operation, self._p.delete, kind, parsed.name, parsed.resource_group
            )
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return Deleted.ABSENT
            if error.code.lower() in IN_USE_CODES:
                return Deleted.IN_USE
            raise
        return _deleted(status)

    def _delete_deployment(self, ref: DeploymentRef) -> Deleted:
        deployments = self._p.clients.deployments.deployments

        def delete() -> int:
            poller = deployments.begin_delete(
                ref.resource_group, ref.name, polling=False, cls=_status_code
            )
            return poller.result()

        try:
            status = self._p.gate.call("Deployments_Delete", delete)
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return Deleted.ABSENT
            raise
        # 202: ARM deletes the record; nothing of the worker depends on it any more.
        return Deleted.DONE if status in (200, 202) else Deleted.ABSENT


def _deleted(status: int) -> Deleted:
    # 200: deleted at once; 202: ARM is deleting it; 204: there was nothing.
    return {200: Deleted.DONE, 202: Deleted.UNDER_WAY}.get(status, Deleted.ABSENT)


def _leftover(model: Any, attached: bool) -> Leftover:
    return Leftover(
        resource_id=str(model.id),
        location=str(model.location or ""),
        tags=dict(model.tags or {}),
        attached=attached,
    )


def _status_code(pipeline_response: Any, deserialized: Any, headers: Any) -> int:
    return pipeline_response.http_response.status_code
