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
- The groups whose deployments a scan lists come from the config and the database, never from
  what the process did (the scanner launches nothing; a restarted one has done nothing yet):
  each ARM-template launch config's group in the unit's region (`armDeploymentResourceGroup`,
  else the provider's own group) and each group a live row's deployment is in
  (`deployment_groups`). worker-manager reads each row's deployment from the row itself; wm
  lists the same groups instead, by pages.

This module holds the rules, pure: the records, names and bodies, teardown plans; arm_workers.py
the workers ARM's answers stand for (both tested with tables in
tests/unit/test_azure_arm_rules.py); deployments.py, `ArmDeployments`, makes the calls through
the provider's gate.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from wm.errors import CloudError, ErrorCategory
from wm.kinds import azure as azure_kind
from wm.providers.base import TAG_WORKER

ARM_DEPLOYMENT = "armDeployment"  # the launch config key of the ARM-template form
RESOURCE_GROUP_KEY = "armDeploymentResourceGroup"
DATA_KEY = "armDeployment"  # provider_data: {"resourceGroup", "name", "keepDeployment"}
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
LEFTOVER_SWEEP_S = 600.0  # least time between two leftover sweeps of one group and region
REASON_PREFIX = "arm-deployment-"  # stop reasons: arm-deployment-failed: <code>: <message>
REASON_MAX_CHARS = 500
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
        props = as_mapping(operation.get("properties"))
        kind = str(props.get("provisioningOperation") or "Create").lower()
        target = as_mapping(props.get("targetResource"))
        if kind == "create" and isinstance(target.get("id"), str):
            ids.append(target["id"])
    return ids


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


def arm_deployment(launch_config: Mapping[str, Any]) -> bool:
    """The launch config is in the ARM-template form (worker-manager tests `armDeployment`
    for JavaScript truthiness: any object, even empty, counts)."""
    return launch_config.get(ARM_DEPLOYMENT) not in (None, False, 0, "")


def deployment_groups(
    own_group: str,
    region: str,
    launch_configs: Iterable[Mapping[str, Any]],
    provider_data: Iterable[Mapping[str, Any]],
) -> list[str]:
    """The resource groups whose deployments a scan of `region` lists, from the config and the
    database alone: the group of each ARM-template launch config of the provider's pools in
    that region (its `armDeploymentResourceGroup`, else the provider's own `own_group`), and
    each group a live row's deployment is in (a launch config since changed or removed, a
    worker imported from worker-manager). None when no pool or row deploys templates."""
    found: dict[str, str] = {}
    for launch_config in launch_configs:
        where = location(launch_config) or launch_config.get("location")
        if not arm_deployment(launch_config):
            continue
        if isinstance(where, str) and not same_region(where, region):
            continue
        group = resource_group(launch_config, own_group)
        found.setdefault(group.lower(), group)
    for data in provider_data:
        ref = deployment_ref(data)
        if ref is not None:
            found.setdefault(ref.resource_group.lower(), ref.resource_group)
    return sorted(found.values(), key=str.lower)


def keep_deployment(launch_config: Mapping[str, Any]) -> bool:
    manager = launch_config.get("workerManager")
    return isinstance(manager, Mapping) and manager.get("keepDeployment") is True


def location(launch_config: Mapping[str, Any]) -> str | None:
    """The worker group: the deployment's `location` parameter value (worker-manager's)."""
    deployment = as_mapping(launch_config.get(ARM_DEPLOYMENT))
    value = as_mapping(as_mapping(deployment.get("parameters")).get("location")).get("value")
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
    parameters = dict(as_mapping(properties.get("parameters")))
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


def as_mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def same_region(location_: str | None, region: str) -> bool:
    def norm(value: str) -> str:
        return value.lower().replace(" ", "")

    return norm(location_ or "") == norm(region)
