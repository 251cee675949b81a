"""Microsoft.Resources in the simulated ARM: resource groups, template specs, deployments.

The REST surface is ARM's own, as azure-mgmt-resource (ResourceManagementClient,
api-version 2025-04-01), azure-mgmt-resource-deployments (DeploymentsMgmtClient, 2026-06-01)
and azure-mgmt-resource-templatespecs (TemplateSpecsClient, 2022-02-01) send it:
- /subscriptions/{s}/resourcegroups[/{rg}]: list; PUT (201 created, 200 updated), GET,
  HEAD (204 / 404). A group exists once created, and so do the sim's default group
  (`default_resource_groups`) and any group already holding a resource (the VM, NIC, IP and
  disk routes take any group, as they always have).
- .../resourceGroups/{rg}/providers/Microsoft.Resources/templateSpecs/{name}[/versions/{v}]:
  PUT and GET (a version's body holds `mainTemplate`); the parent spec must exist.
- .../resourcegroups/{rg}/providers/Microsoft.Resources/deployments[/{name}]: list (with
  `$filter=provisioningState eq '...'` and `$top`), PUT, GET, HEAD, DELETE; the operations at
  .../resourcegroups/{rg}/deployments/{name}/operations[/{id}] (ARM's path, no provider).

A deployment PUT is checked at once, as ARM validates before it answers: a template error
is 400 InvalidTemplate, a resource ARM's preflight refuses (a bad name, a Windows computer
name over 15 characters) 400 InvalidTemplateDeployment with the inner errors, an unknown
template spec 400 InvalidTemplateSpec, an unreachable template URI 400 InvalidContentLink, a
missing resource group 404 ResourceGroupNotFound, a Key Vault reference to an unknown vault
or secret ARM's KeyVaultParameterReference* errors. Otherwise it answers 201 (200 when it
redeploys a finished deployment of that name) with provisioningState Accepted and an
`Azure-AsyncOperation` header the SDK's poller follows to Succeeded or Failed. A PUT or
DELETE of a deployment still Accepted or Running is 409 DeploymentActive, as on ARM.

The deployment then runs as ARM runs it, moved on whenever the sim is looked at (any
request, or the in-process accessors): Accepted -> Running, each resource started once
everything it dependsOn succeeded, one deployment operation per resource (targetResource id,
resourceType, resourceName; its own provisioningState, statusCode, and on failure
statusMessage.error). VMs, NICs, public IPs and disks are created by the same code as the
direct PUTs, so the sim's checks (image, subnet, VM size, quota), faults, boot time, Spot
pre-emption and IMDS apply to them alike; a VM's operation runs until the VM has booted
(Behaviour.boot_s). Any other resource type is recorded only: its operation succeeds, no
resource is made. A resource that fails fails the deployment (DeploymentFailed, with the
resource's error in details and in its operation); resources depending on it are not
started, and everything created before the failure stays, as ARM leaves it. On success the
template's outputs are evaluated (reference() reads the deployed resources) and
outputResources names every resource deployed. Complete mode is accepted and run as
Incremental: nothing is ever deleted by a deployment.

A DELETE removes the deployment record only (202 + Location, then 204), never its
resources. A redeploy of a finished name runs the template again: resources that exist are
updated in place (a VM PUT with the same osProfile changes only tags), none is duplicated.

A group's deployment history is pruned as ARM prunes it (Microsoft's "Automatic deletions from
deployment history", learn.microsoft.com/azure/azure-resource-manager/templates/
deployment-history-deletions): at most 800 deployments per group; a deployment PUT that takes
the history past 700 deletes the oldest (by their latest run: a redeploy moves a name to the
newest place) until 600 are left; a deployment still running is never deleted (ARM cannot
delete one); a new name PUT into a group already holding 800 fails with 400
DeploymentQuotaExceeded. Pruning deletes the records only, never what they made. (ARM also
prunes on what-if and validate, which the sim does not serve, and skips groups under a
CanNotDelete lock, which it does not model.) `pruned` names what was pruned, oldest first.
The three figures are settings (`history_limit`, `history_prune_above`, `history_prune_to`;
POST /_sim/deployments/behaviour takes them too), ARM's by default: a test that fills a group
many times over may scale them down, saying why.

Test knobs (all reset by SimArm.reset):
- `put_secret(vault_id, name, value)` (POST /_sim/keyvault/secrets {"vault", "name",
  "value"}) holds a Key Vault secret that `{"reference": ...}` parameters resolve to;
- `fail_halfway(count)` (POST /_sim/deployments/fail-halfway {"count"}) and
  `halfway_failure_rate` (POST /_sim/deployments/behaviour {"halfway_failure_rate"}): the
  next deployments (or that share of them) create their VM, then its provisioning fails
  (OSProvisioningTimedOut) once it has booted and the deployment ends Failed, the VM, NIC,
  IP and disks left behind;
- `create_resource_group(...)` (POST /_sim/resource-groups {"subscription", "name",
  "location"}) makes a group as a PUT would, `put_template_spec(version_id, template)`
  (POST /_sim/template-specs {"id", "mainTemplate"}) a template spec version;
- `puts(name)` (GET /_sim/deployment-puts[?name=]) records every deployment PUT, body as
  sent (secrets included: it is a test double), with its answer's status and error code;
  GET /_sim/deployments lists the deployments with their state and resources.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import itertools
import json
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from werkzeug.wrappers import Response

from wmsim.azure import arm_templates
from wmsim.azure.arm_templates import Plan, PlannedResource, Scope, TemplateError
from wmsim.azure.resources import (
    DEFAULT_RESOURCE_GROUP,
    DISK_TYPE,
    IP_TYPE,
    NIC_TYPE,
    VM_TYPE,
    ArmError,
    RecordedPut,
    _child_view,
    _json,
    _key,
    _now_iso,
    _Resource,
    _Vm,
    _Vnet,
)

if TYPE_CHECKING:
    import threading

    from werkzeug.wrappers import Request


class ArmHost(Protocol):
    """What the deployments take of the SimArm they run in (arm.py, which imports this module):
    its lock, its resources, its request in hand, and how it stores and shows VMs and NICs."""

    endpoint: str
    delete_missing_status: int
    _lock: threading.RLock
    _request: Request
    _vms: dict[str, _Vm]
    _resources: dict[str, _Resource]
    _vnets: dict[str, _Vnet]
    _images: dict[str, dict[str, Any]]

    def _sweep(self) -> None: ...

    def _body(self) -> dict[str, Any]: ...

    def _api_version(self) -> str: ...

    def _store_vm(
        self, rid: str, body: dict[str, Any], *, check: bool = True
    ) -> tuple[_Vm, int]: ...

    def _store_child(self, rid: str, rtype: str, body: dict[str, Any]) -> tuple[_Resource, int]: ...

    def _phase(self, vm: _Vm) -> str: ...

    def _vm_model(
        self, vm: _Vm, *, instance_view: bool = False, user_data: bool = False
    ) -> dict[str, Any]: ...

    def _page(
        self, items: Iterable[Any], render: Callable[[Any], dict[str, Any]], extra: dict[str, str]
    ) -> Response: ...


RESOURCES = "microsoft.resources"
DEPLOYMENT_TYPE = "Microsoft.Resources/deployments"
RESOURCE_GROUP_TYPE = "Microsoft.Resources/resourceGroups"
TEMPLATE_SPEC_TYPE = "Microsoft.Resources/templateSpecs"
TEMPLATE_SPEC_VERSION_TYPE = "Microsoft.Resources/templateSpecs/versions"
DEPLOYMENT_NAME_MAX = 64
RESOURCE_NAME_MAX = 80
WINDOWS_COMPUTER_NAME_MAX = 15
DEFAULT_GROUP_LOCATION = "eastus"
TEMPLATE_FETCH_TIMEOUT_S = 5.0
# templateLink.uri is fetched only from these hosts: tests serve templates from 127.0.0.1.
TEMPLATE_URI_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
DEPLOYMENT_PUTS_KEPT = 10_000
# ARM's deployment history of a group (module docstring).
HISTORY_LIMIT = 800
HISTORY_PRUNE_ABOVE = 700
HISTORY_PRUNE_TO = 600
MODES = {"incremental": "Incremental", "complete": "Complete"}
ACTIVE = frozenset({"Accepted", "Running"})
HALFWAY_CODE = "OSProvisioningTimedOut"
HALFWAY_MESSAGE = (
    "OS Provisioning for VM '{name}' did not finish in the allotted time. The VM may still "
    "finish provisioning successfully. Please check provisioning state later."
)
DEPLOYMENT_FAILED = (
    "At least one resource deployment operation failed. Please list deployment operations for "
    "details. Please see https://aka.ms/arm-deployment-operations for usage details."
)
TERMINAL_FAILED = (
    "The resource write operation failed to complete successfully, because it reached "
    "terminal provisioning state 'Failed'."
)
ARM_DEPLOY_HELP = "Please see https://aka.ms/arm-deploy for usage details."
KEYVAULT_HELP = "Please see https://aka.ms/arm-keyvault for usage details."
HTTP_REASONS = {
    200: "OK",
    201: "Created",
    400: "BadRequest",
    404: "NotFound",
    409: "Conflict",
    429: "TooManyRequests",
    500: "InternalServerError",
}
CREATED_TYPES = {t.lower(): t for t in (VM_TYPE, NIC_TYPE, IP_TYPE, DISK_TYPE)}

Handler = Callable[[], Response]


@dataclass
class _Group:
    id: str
    name: str
    location: str
    tags: dict[str, str]


@dataclass
class _Op:
    """One deployment operation: the create of one resource."""

    operation_id: str
    resource: PlannedResource
    started_at: float
    state: str = "Running"  # Running | Succeeded | Failed
    status_code: str | None = None
    error: dict[str, Any] | None = None
    finished_at: float | None = None
    vm_key: str | None = None  # a VM whose boot the operation waits for
    halfway: bool = False  # the VM fails its provisioning once booted


@dataclass
class _Deployment:
    """One run of a deployment (a redeploy is a new run under the same name)."""

    id: str
    name: str
    body: dict[str, Any]
    template: dict[str, Any]
    plan: Plan
    scope: Scope
    mode: str
    template_link: dict[str, Any] | None
    created_at: float
    halfway: bool
    state: str = "Accepted"
    pending: list[PlannedResource] = field(default_factory=list)
    ops: list[_Op] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)  # keys of resources never started
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    finished_at: float | None = None
    correlation_id: str = field(default_factory=lambda: str(uuid.uuid4()))


class ArmDeployments:
    """Resource groups, template specs and deployments of one SimArm. Every method runs
    under the SimArm's lock (handlers are called holding it; the accessors take it)."""

    def __init__(self, arm: ArmHost, *, seed: int | None = None) -> None:
        self._arm = arm
        self._rng = random.Random(seed)
        self._sequence = itertools.count(1)
        self._groups: dict[str, _Group] = {}  # lower-case id -> group
        self._specs: dict[str, dict[str, Any]] = {}  # lower-case id -> model
        self._versions: dict[str, dict[str, Any]] = {}  # lower-case id -> model
        self._deployments: dict[str, _Deployment] = {}  # lower-case id -> latest run
        self._statuses: dict[str, _Deployment] = {}  # async operation id -> its run
        self._delete_results: set[str] = set()  # finished deletes (Location tokens)
        self._secrets: dict[tuple[str, str], dict[str | None, str]] = {}
        self._puts: collections.deque[RecordedPut] = collections.deque(maxlen=DEPLOYMENT_PUTS_KEPT)
        self.default_resource_groups: tuple[str, ...] = (DEFAULT_RESOURCE_GROUP,)
        self.halfway_failure_rate = 0.0
        self._halfway_forced = 0
        self.pruned: list[str] = []  # ids of the deployments the history pruning deleted
        self.history_limit = HISTORY_LIMIT
        self.history_prune_above = HISTORY_PRUNE_ABOVE
        self.history_prune_to = HISTORY_PRUNE_TO

    # -- test accessors ------------------------------------------------------------------------

    def reset(self) -> None:
        with self._arm._lock:
            self._groups.clear()
            self._specs.clear()
            self._versions.clear()
            self._deployments.clear()
            self._statuses.clear()
            self._delete_results.clear()
            self._secrets.clear()
            self._puts.clear()
            self.default_resource_groups = (DEFAULT_RESOURCE_GROUP,)
            self.halfway_failure_rate = 0.0
            self._halfway_forced = 0
            self.pruned.clear()
            self.history_limit = HISTORY_LIMIT
            self.history_prune_above = HISTORY_PRUNE_ABOVE
            self.history_prune_to = HISTORY_PRUNE_TO

    def history(self, subscription: str, group: str) -> list[str]:
        """The names in a group's deployment history, oldest first (ARM's pruning order)."""
        with self._arm._lock:
            return [d.name for d in self._history(subscription, group)]

    def puts(self, name: str | None = None) -> list[RecordedPut]:
        """The deployment PUTs handled, oldest first; only those of deployment `name`."""
        with self._arm._lock:
            found = list(self._puts)
        return [p for p in found if name is None or p.name.lower() == name.lower()]

    def put_secret(self, vault_id: str, name: str, value: str, version: str | None = None) -> None:
        """A Key Vault secret `{"reference": {"keyVault": {"id"}, "secretName"}}` parameters
        resolve to (the latest one put, or `version` when a reference names one)."""
        with self._arm._lock:
            held = self._secrets.setdefault((_key(vault_id.rstrip("/")), name.lower()), {})
            held[None] = value
            if version:
                held[version.lower()] = value

    def create_resource_group(
        self,
        subscription_id: str,
        name: str,
        location: str = DEFAULT_GROUP_LOCATION,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        with self._arm._lock:
            gid = f"/subscriptions/{subscription_id}/resourceGroups/{name}"
            self._groups[_key(gid)] = _Group(gid, name, _location(location), dict(tags or {}))

    def put_template_spec(
        self,
        version_id: str,
        main_template: Mapping[str, Any],
        location: str = DEFAULT_GROUP_LOCATION,
    ) -> None:
        """Hold a template spec version (its group and spec made as needed), as if created by
        the SDK: a fast set-up for tests and the demo."""
        parts = version_id.strip("/").split("/")
        if len(parts) != 10 or [p.lower() for p in parts[6:9:2]] != ["templatespecs", "versions"]:
            raise ValueError(f"not a template spec version id: {version_id!r}")
        sub, group, spec, version = parts[1], parts[3], parts[7], parts[9]
        spec_id = (
            f"/subscriptions/{sub}/resourceGroups/{group}/providers/{TEMPLATE_SPEC_TYPE}/{spec}"
        )
        with self._arm._lock:
            if self._find_group(sub, group) is None:
                self.create_resource_group(sub, group, location)
            held = self._specs.setdefault(
                _key(spec_id), _spec_model(spec_id, _location(location), {}, {})
            )
            version_model = _version_model(
                f"{spec_id}/versions/{version}",
                _location(location),
                {},
                {"mainTemplate": copy.deepcopy(dict(main_template))},
            )
            self._versions[_key(version_model["id"])] = version_model
            held["properties"]["versions"][version] = _version_times()

    def fail_halfway(self, count: int = 1) -> None:
        """The next `count` deployments create their first VM, then fail (see module doc)."""
        with self._arm._lock:
            self._halfway_forced += count

    def summary(self) -> list[dict[str, Any]]:
        """Every deployment: id, provisioningState and the ids of the resources it made."""
        with self._arm._lock:
            self._arm._sweep()
            return [
                {
                    "id": d.id,
                    "provisioningState": d.state,
                    "resources": [op.resource.id for op in d.ops if op.error is None],
                    "failed": [op.resource.id for op in d.ops if op.error is not None],
                }
                for d in self._deployments.values()
            ]

    # -- routes --------------------------------------------------------------------------------

    def route(self, method: str, parts: list[str], lower: list[str]) -> tuple[str, Handler] | None:
        """The (operation, handler) of a Microsoft.Resources request, None for any other."""
        sub, rest, low = parts[1], parts[2:], lower[2:]
        if low[:1] == ["operationresults"] and len(rest) == 2 and method == "GET":
            return "Deployments_OperationResult", lambda: self._delete_result(rest[1])
        if low[:1] != ["resourcegroups"]:
            return None
        if len(rest) == 1:
            return (
                ("ResourceGroups_List", lambda: self._list_groups(sub)) if method == "GET" else None
            )
        group = rest[1]
        if len(rest) == 2:
            return self._group_route(method, sub, group)
        if low[2] == "deployments" and len(rest) in (5, 6) and low[4] == "operations":
            if method == "GET":  # ARM's operations path has no provider segment
                return self._operations_route(sub, group, rest[3], rest[5:])
            return None
        if low[2:4] != ["providers", RESOURCES] or len(rest) < 5:
            return None
        kind, tail, tail_low = low[4], rest[5:], low[5:]
        if kind == "deployments":
            return self._deployment_route(method, sub, group, tail, tail_low)
        if kind == "templatespecs" and tail:
            return self._spec_route(method, sub, group, tail, tail_low)
        return None

    def _group_route(self, method: str, sub: str, group: str) -> tuple[str, Handler] | None:
        handlers = {
            "PUT": ("ResourceGroups_CreateOrUpdate", lambda: self._put_group(sub, group)),
            "GET": ("ResourceGroups_Get", lambda: _json(self._group_view(self._group(sub, group)))),
            "HEAD": ("ResourceGroups_CheckExistence", lambda: self._group_exists(sub, group)),
        }
        return handlers.get(method)

    def _deployment_route(
        self, method: str, sub: str, group: str, tail: list[str], low: list[str]
    ) -> tuple[str, Handler] | None:
        if not tail:
            if method == "GET":
                return "Deployments_ListByResourceGroup", lambda: self._list(sub, group)
            return None
        name = tail[0]
        if len(tail) == 1:
            handlers = {
                "PUT": ("Deployments_CreateOrUpdate", lambda: self._put(sub, group, name)),
                "GET": ("Deployments_Get", lambda: self._get(sub, group, name)),
                "HEAD": ("Deployments_CheckExistence", lambda: self._exists(sub, group, name)),
                "DELETE": ("Deployments_Delete", lambda: self._delete(sub, group, name)),
            }
            return handlers.get(method)
        if method != "GET":
            return None
        if low[1] == "operations" and len(tail) in (2, 3):
            return self._operations_route(sub, group, name, tail[2:])
        if low[1] == "operationstatuses" and len(tail) == 3:
            return "Deployments_OperationStatus", lambda: self._status(tail[2])
        return None

    def _operations_route(
        self, sub: str, group: str, name: str, tail: list[str]
    ) -> tuple[str, Handler]:
        if tail:
            return "DeploymentOperations_Get", lambda: self._operation(sub, group, name, tail[0])
        return "DeploymentOperations_List", lambda: self._operations(sub, group, name)

    def _spec_route(
        self, method: str, sub: str, group: str, tail: list[str], low: list[str]
    ) -> tuple[str, Handler] | None:
        spec_id = (
            f"/subscriptions/{sub}/resourceGroups/{group}/providers/{TEMPLATE_SPEC_TYPE}/{tail[0]}"
        )
        if len(tail) == 1:
            handlers = {
                "PUT": ("TemplateSpecs_CreateOrUpdate", lambda: self._put_spec(spec_id)),
                "GET": ("TemplateSpecs_Get", lambda: _json(self._spec_or_404(spec_id))),
            }
            return handlers.get(method)
        if low[1] != "versions" or len(tail) > 3:
            return None
        if len(tail) == 2:
            if method == "GET":
                return "TemplateSpecVersions_List", lambda: self._list_versions(spec_id)
            return None
        version_id = f"{spec_id}/versions/{tail[2]}"
        handlers = {
            "PUT": ("TemplateSpecVersions_CreateOrUpdate", lambda: self._put_version(version_id)),
            "GET": ("TemplateSpecVersions_Get", lambda: _json(self._version_or_404(version_id))),
        }
        return handlers.get(method)

    # -- resource groups -----------------------------------------------------------------------

    def _group(self, sub: str, name: str) -> _Group:
        found = self._find_group(sub, name)
        if found is None:
            raise ArmError(
                404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found."
            )
        return found

    def _find_group(self, sub: str, name: str) -> _Group | None:
        gid = f"/subscriptions/{sub}/resourceGroups/{name}"
        found = self._groups.get(_key(gid))
        if found is not None:
            return found
        implied = name.lower() in {g.lower() for g in self.default_resource_groups}
        if implied or self._holds_resources(gid):
            return _Group(gid, name, DEFAULT_GROUP_LOCATION, {})
        return None

    def _holds_resources(self, gid: str) -> bool:
        prefix = _key(gid) + "/"
        arm = self._arm
        held = itertools.chain(arm._vms, arm._resources, arm._vnets, arm._images)
        return any(key.startswith(prefix) for key in held)

    def _put_group(self, sub: str, name: str) -> Response:
        body = self._arm._body()
        location = _location(str(body.get("location") or ""))
        if not location:
            raise ArmError(
                400, "LocationRequired", "The location property is required for this definition."
            )
        gid = f"/subscriptions/{sub}/resourceGroups/{name}"
        existed = self._find_group(sub, name) is not None  # created, default or implied
        existing = self._groups.get(_key(gid))  # only a created group has a location of its own
        if existing is not None and existing.location != location:
            raise ArmError(
                409,
                "InvalidResourceGroupLocation",
                f"Invalid resource group location '{location}'. The Resource group already "
                f"exists in location '{existing.location}'.",
            )
        group = _Group(
            existing.id if existing else gid,
            existing.name if existing else name,
            location,
            dict(body.get("tags") or {}),
        )
        self._groups[_key(gid)] = group
        return _json(self._group_view(group), 200 if existed else 201)

    def _group_exists(self, sub: str, name: str) -> Response:
        return Response(status=204 if self._find_group(sub, name) else 404)

    def _list_groups(self, sub: str) -> Response:
        prefix = f"/subscriptions/{sub}/resourcegroups/".lower()
        names = {g.name.lower(): g.name for k, g in self._groups.items() if k.startswith(prefix)}
        for name in self.default_resource_groups:
            names.setdefault(name.lower(), name)
        arm = self._arm
        for key in itertools.chain(arm._vms, arm._resources, arm._vnets, arm._images):
            if key.startswith(prefix):
                names.setdefault(key.split("/")[4], key.split("/")[4])
        groups = [self._find_group(sub, name) for name in sorted(names.values())]
        return _json({"value": [self._group_view(g) for g in groups if g is not None]})

    @staticmethod
    def _group_view(group: _Group) -> dict[str, Any]:
        return {
            "id": group.id,
            "name": group.name,
            "type": RESOURCE_GROUP_TYPE,
            "location": group.location,
            "tags": dict(group.tags),
            "properties": {"provisioningState": "Succeeded"},
        }

    # -- template specs ------------------------------------------------------------------------

    def _put_spec(self, spec_id: str) -> Response:
        parts = spec_id.split("/")
        self._group(parts[2], parts[4])
        body = self._arm._body()
        location = _location(str(body.get("location") or ""))
        if not location:
            raise ArmError(400, "LocationRequired", "The location property is required.")
        existing = self._specs.get(_key(spec_id))
        props = dict(_object(body.get("properties")))
        props["versions"] = (existing or {}).get("properties", {}).get("versions", {})
        model = _spec_model(spec_id, location, dict(body.get("tags") or {}), props)
        self._specs[_key(spec_id)] = model
        return _json(model, 200 if existing else 201)

    def _spec_or_404(self, spec_id: str) -> dict[str, Any]:
        model = self._specs.get(_key(spec_id))
        if model is None:
            raise _not_found(spec_id)
        return model

    def _put_version(self, version_id: str) -> Response:
        spec_id = version_id.rsplit("/versions/", 1)[0]
        spec = self._specs.get(_key(spec_id))
        if spec is None:
            raise ArmError(
                404,
                "ParentResourceNotFound",
                "Can not perform requested operation on nested resource. Parent resource "
                f"'{spec_id.rsplit('/', 1)[1]}' not found.",
            )
        body = self._arm._body()
        props = _object(body.get("properties"))
        if not isinstance(props.get("mainTemplate"), dict):
            raise ArmError(
                400,
                "InvalidRequestContent",
                "The request content was invalid and could not be deserialized: 'Required "
                "property 'mainTemplate' not found in JSON. Path 'properties'.'",
            )
        existing = self._versions.get(_key(version_id))
        model = _version_model(
            version_id,
            _location(str(body.get("location") or "")) or spec["location"],
            dict(body.get("tags") or {}),
            copy.deepcopy(props),
        )
        self._versions[_key(version_id)] = model
        spec["properties"]["versions"][model["name"]] = _version_times()
        return _json(model, 200 if existing else 201)

    def _version_or_404(self, version_id: str) -> dict[str, Any]:
        model = self._versions.get(_key(version_id))
        if model is None:
            raise _not_found(version_id)
        return model

    def _list_versions(self, spec_id: str) -> Response:
        self._spec_or_404(spec_id)
        prefix = _key(spec_id) + "/versions/"
        return _json({"value": [m for k, m in self._versions.items() if k.startswith(prefix)]})

    # -- deployments: PUT ----------------------------------------------------------------------

    def _put(self, sub: str, group: str, name: str) -> Response:
        rid = _deployment_id(sub, group, name)
        body = self._arm._body()
        sent = copy.deepcopy(body)
        try:
            deployment, status = self._create(rid, sub, group, name, body)
        except ArmError as error:
            self._puts.append(RecordedPut(rid, sent, error.status, error.code))
            raise
        self._puts.append(RecordedPut(rid, sent, status))
        status_id = uuid.uuid4().hex.upper()
        self._statuses[status_id] = deployment
        response = _json(self._view(deployment), status)
        response.headers["Azure-AsyncOperation"] = self._url(f"{rid}/operationStatuses/{status_id}")
        return response

    def _create(
        self, rid: str, sub: str, group_name: str, name: str, body: dict[str, Any]
    ) -> tuple[_Deployment, int]:
        group = self._group(sub, group_name)
        if len(name) > DEPLOYMENT_NAME_MAX:
            raise ArmError(
                400,
                "DeploymentNameLengthLimitExceeded",
                f"The provided deployment name '{name}' has a length of '{len(name)}' which "
                f"exceeds the maximum length of '{DEPLOYMENT_NAME_MAX}'. {ARM_DEPLOY_HELP}",
            )
        previous = self._deployments.get(_key(rid))
        if previous is not None and previous.state in ACTIVE:
            raise ArmError(
                409,
                "DeploymentActive",
                f"Unable to edit or replace deployment '{name}': previous deployment from "
                f"'{_now_iso(previous.created_at)}' is still active. {ARM_DEPLOY_HELP}",
            )
        held = len(self._history(sub, group.name))
        if previous is None and held >= self.history_limit:
            raise ArmError(
                400,
                "DeploymentQuotaExceeded",
                f"Creating the deployment '{name}' would exceed the quota of "
                f"'{self.history_limit}'. The current deployment count is '{held}'. Please "
                "delete some deployments before creating a new one, or see "
                "https://aka.ms/800LimitFix for information on managing deployment limits.",
            )
        props = body.get("properties")
        if not isinstance(props, dict):
            raise _content_error("Required property 'properties' not found in JSON. Path ''.")
        mode = _mode(props)
        template, link = self._template(props)
        values = self._parameter_values(props)
        scope = Scope(sub, group.name, group.location, name, resource_group_tags=group.tags)
        try:
            planned = arm_templates.plan(template, values, scope)
        except TemplateError as error:
            raise ArmError(400, error.code, error.message) from None
        _preflight(name, planned)
        deployment = _Deployment(
            id=rid,
            name=name,
            body=copy.deepcopy(body),
            template=template,
            plan=planned,
            scope=scope,
            mode=mode,
            template_link=link,
            created_at=time.time(),
            halfway=self._draw_halfway(),
            pending=list(planned.resources),
        )
        self._deployments[_key(rid)] = deployment
        self._prune(sub, group.name)
        return deployment, 201 if previous is None else 200

    def _history(self, sub: str, group: str) -> list[_Deployment]:
        """A group's deployments, oldest first by their latest run."""
        prefix = _key(_deployment_id(sub, group, ""))
        found = [d for k, d in self._deployments.items() if k.startswith(prefix)]
        return sorted(found, key=lambda d: d.created_at)

    def _prune(self, sub: str, group: str) -> None:
        """ARM's automatic deletions: past 700, the oldest that are not running go until 600
        are left (module docstring)."""
        history = self._history(sub, group)
        if len(history) <= self.history_prune_above:
            return
        excess = len(history) - self.history_prune_to
        for doomed in [d for d in history if d.state not in ACTIVE][:excess]:
            del self._deployments[_key(doomed.id)]
            self.pruned.append(doomed.id)

    def _draw_halfway(self) -> bool:
        if self._halfway_forced > 0:
            self._halfway_forced -= 1
            return True
        return self.halfway_failure_rate > 0 and self._rng.random() < self.halfway_failure_rate

    def _template(self, props: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The template to deploy and the templateLink ARM echoes (None when inline)."""
        inline, link = props.get("template"), props.get("templateLink")
        if (inline is None) == (link is None):
            raise ArmError(
                400,
                "InvalidDeployment",
                "The deployment definition is invalid; exactly one of 'template' and "
                "'templateLink' must be given.",
            )
        if props.get("parametersLink") is not None:
            raise ArmError(
                400,
                "InvalidDeployment",
                "The deployment definition is invalid; 'parametersLink' is not supported by the "
                "simulated ARM: give 'parameters'.",
            )
        if inline is not None:
            if not isinstance(inline, dict):
                raise _content_error("The 'template' property must be an object.")
            return copy.deepcopy(inline), None
        link = _object(link)
        if bool(link.get("id")) == bool(link.get("uri")):
            raise ArmError(
                400,
                "InvalidDeployment",
                "The deployment definition is invalid; templateLink must have exactly one of "
                "'id' and 'uri'.",
            )
        template = self._linked_template(link)
        echo = {k: v for k, v in link.items() if k in ("id", "uri", "queryString")}
        echo["contentVersion"] = str(template.get("contentVersion") or "1.0.0.0")
        return template, echo

    def _linked_template(self, link: dict[str, Any]) -> dict[str, Any]:
        if link.get("id"):
            version = self._versions.get(_key(str(link["id"]).rstrip("/")))
            if version is None:
                raise ArmError(
                    400,
                    "InvalidTemplateSpec",
                    "Unable to retrieve the template content from the resource ID "
                    f"'{link['id']}'. {ARM_DEPLOY_HELP}",
                )
            return copy.deepcopy(version["properties"]["mainTemplate"])
        uri = str(link["uri"])
        if link.get("queryString"):
            uri += ("&" if "?" in uri else "?") + str(link["queryString"]).lstrip("?")
        return _fetch_template(uri)

    def _parameter_values(self, props: dict[str, Any]) -> dict[str, Any]:
        given = props.get("parameters") or {}
        if not isinstance(given, dict):
            raise _content_error("The 'parameters' property must be an object.")
        values: dict[str, Any] = {}
        for name, entry in given.items():
            entry = _object(entry)
            if "value" in entry:
                values[name] = entry["value"]
            elif isinstance(entry.get("reference"), dict):
                values[name] = self._secret(name, entry["reference"])
            else:
                raise ArmError(
                    400,
                    "InvalidDeploymentParameterValue",
                    f"The value of deployment parameter '{name}' is null. Please specify the "
                    "value or use the parameter reference. See https://aka.ms/arm-deploy/"
                    "#parameter-file for details.",
                )
        return values

    def _secret(self, parameter: str, reference: dict[str, Any]) -> str:
        vault = str(_object(reference.get("keyVault")).get("id") or "").rstrip("/")
        name = str(reference.get("secretName") or "")
        version = reference.get("secretVersion")
        if not any(v == _key(vault) for v, _ in self._secrets):
            raise ArmError(
                400,
                "KeyVaultParameterReferenceNotFound",
                f"The specified KeyVault '{vault}' could not be found. {KEYVAULT_HELP}",
            )
        held = self._secrets.get((_key(vault), name.lower()), {})
        value = held.get(str(version).lower() if version else None)
        if value is None:
            raise ArmError(
                404,
                "KeyVaultParameterReferenceSecretRetrieveFailed",
                f"The secret of KeyVault parameter '{parameter}' cannot be retrieved. Http "
                f"status code: 'NotFound'. Error message: 'A secret with (name/id) {name} was "
                f"not found in this key vault.'. {KEYVAULT_HELP}",
            )
        return value

    # -- deployments: progress -----------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Move every active deployment on to `now` (called under the SimArm's lock)."""
        for deployment in list(self._deployments.values()):
            if deployment.state in ACTIVE:
                self._step(deployment, now)

    def _step(self, d: _Deployment, now: float) -> None:
        d.state = "Running"  # Accepted is what the PUT answered; ARM has started since
        moved = True
        while moved:
            moved = self._start_ready(d, now)
            for op in d.ops:
                if op.state == "Running" and self._watch(op, now):
                    moved = True
        if not d.pending and all(op.state != "Running" for op in d.ops):
            self._finish(d, now)

    def _start_ready(self, d: _Deployment, now: float) -> bool:
        moved = False
        for resource in list(d.pending):
            states = [self._state_of(d, dependency) for dependency in resource.depends_on]
            if any(s in ("Failed", "Skipped") for s in states):
                d.pending.remove(resource)
                d.skipped.add(_key(resource.id))  # not started: its dependency failed
                moved = True
            elif all(s == "Succeeded" for s in states):
                d.pending.remove(resource)
                d.ops.append(self._start(d, resource, now))
                moved = True
        return moved

    @staticmethod
    def _state_of(d: _Deployment, rid: str) -> str:
        if _key(rid) in d.skipped:
            return "Skipped"
        for op in d.ops:
            if _key(op.resource.id) == _key(rid):
                return op.state
        return "Pending"

    def _start(self, d: _Deployment, resource: PlannedResource, now: float) -> _Op:
        op = _Op(operation_id=self._operation_id(), resource=resource, started_at=now)
        body = _without_nulls(dict(resource.body))
        kind = resource.type.lower()
        arm = self._arm
        try:
            if kind == VM_TYPE.lower():
                vm, status = arm._store_vm(resource.id, body)
                op.vm_key, op.status_code = _key(vm.id), HTTP_REASONS[status]
                op.halfway = d.halfway and not any(o.halfway for o in d.ops)
                return op
            if kind in CREATED_TYPES:
                _, status = arm._store_child(resource.id, CREATED_TYPES[kind], body)
            else:
                status = 201  # any other type: recorded, not made (module docstring)
        except ArmError as error:
            op.state, op.finished_at = "Failed", now
            op.status_code = HTTP_REASONS.get(error.status, str(error.status))
            op.error = error.as_json()
            return op
        op.state, op.finished_at, op.status_code = "Succeeded", now, HTTP_REASONS[status]
        return op

    def _watch(self, op: _Op, now: float) -> bool:
        """Move a VM's operation on; True when it ended."""
        arm = self._arm
        vm = arm._vms.get(op.vm_key or "")
        if vm is None or vm.deleted_at is not None:
            return self._end(op, now, "Canceled", "The resource was deleted while being deployed.")
        if vm.failure is None and arm._phase(vm) == "pending":
            return False
        if vm.failure is None and op.halfway:
            vm.failure = (HALFWAY_CODE, HALFWAY_MESSAGE.format(name=vm.name))
        if vm.failure is not None:
            return self._end(op, now, *vm.failure)
        op.state, op.finished_at, op.status_code = "Succeeded", now, "OK"
        return True

    @staticmethod
    def _end(op: _Op, now: float, code: str, message: str) -> bool:
        op.state, op.finished_at, op.status_code = "Failed", now, "Conflict"
        op.error = {
            "code": "ResourceDeploymentFailure",
            "target": op.resource.id,
            "message": TERMINAL_FAILED,
            "details": [{"code": code, "message": message}],
        }
        return True

    def _finish(self, d: _Deployment, now: float) -> None:
        d.finished_at = now
        failed = [op.error for op in d.ops if op.error is not None]
        if failed:
            d.state = "Failed"
            d.error = {
                "code": "DeploymentFailed",
                "target": d.id,
                "message": DEPLOYMENT_FAILED,
                "details": failed,
            }
            return
        try:
            d.outputs = arm_templates.evaluate_outputs(d.template, d.plan, d.scope, self._reference)
        except arm_templates.ExpressionError as error:
            d.state = "Failed"
            d.error = {
                "code": "DeploymentOutputEvaluationFailed",
                "message": "Unable to evaluate template outputs. Please see error details and "
                "deployment operations. Please see https://aka.ms/arm-common-errors for usage "
                "details.",
                "details": [{"code": "DeploymentOutputEvaluationFailed", "message": str(error)}],
            }
            return
        d.state = "Succeeded"

    def _reference(self, target: str, full: bool) -> Any:
        arm = self._arm
        found = arm._vms.get(_key(target))
        if found is not None:
            model = arm._vm_model(found)
        elif (resource := arm._resources.get(_key(target))) is not None:
            model = _child_view(resource)
        else:
            raise arm_templates.ExpressionError(f"The Resource '{target}' was not found.")
        return model if full else model["properties"]

    def _operation_id(self) -> str:
        # Sorted as created: ARM lists operations in no promised order, the sim in this one.
        return f"{next(self._sequence):08X}{uuid.uuid4().hex[:8].upper()}"

    # -- deployments: reads and delete ---------------------------------------------------------

    def _deployment_or_404(self, sub: str, group: str, name: str) -> _Deployment:
        self._group(sub, group)
        found = self._deployments.get(_key(_deployment_id(sub, group, name)))
        if found is None:
            raise ArmError(404, "DeploymentNotFound", f"Deployment '{name}' could not be found.")
        return found

    def _get(self, sub: str, group: str, name: str) -> Response:
        return _json(self._view(self._deployment_or_404(sub, group, name)))

    def _exists(self, sub: str, group: str, name: str) -> Response:
        found = self._deployments.get(_key(_deployment_id(sub, group, name)))
        return Response(status=204 if found is not None else 404)

    def _list(self, sub: str, group: str) -> Response:
        self._group(sub, group)
        prefix = _key(_deployment_id(sub, group, ""))
        found = [d for k, d in self._deployments.items() if k.startswith(prefix)]
        wanted = _state_filter(self._arm._request.args.get("$filter", ""))
        if wanted is not None:
            found = [d for d in found if d.state.lower() == wanted]
        top = self._arm._request.args.get("$top")
        if top and top.isdigit():
            found = sorted(found, key=lambda d: d.created_at, reverse=True)[: int(top)]
        return self._arm._page(found, self._view, {})

    def _delete(self, sub: str, group: str, name: str) -> Response:
        self._group(sub, group)
        key = _key(_deployment_id(sub, group, name))
        found = self._deployments.get(key)
        if found is None:
            if self._arm.delete_missing_status == 404:
                raise ArmError(
                    404, "DeploymentNotFound", f"Deployment '{name}' could not be found."
                )
            return Response(status=self._arm.delete_missing_status)
        if found.state in ACTIVE:
            raise ArmError(
                409,
                "DeploymentActive",
                f"Unable to delete deployment '{name}': the deployment is still active. "
                f"{ARM_DEPLOY_HELP}",
            )
        del self._deployments[key]  # the record only: its resources stay, as on ARM
        token = uuid.uuid4().hex
        self._delete_results.add(token)
        response = Response(status=202)
        response.headers["Location"] = self._url(f"/subscriptions/{sub}/operationresults/{token}")
        response.headers["Retry-After"] = "0"
        return response

    def _delete_result(self, token: str) -> Response:
        if token not in self._delete_results:
            raise ArmError(404, "NotFound", f"Operation result '{token}' was not found.")
        return Response(status=204)

    def _status(self, status_id: str) -> Response:
        found = self._statuses.get(status_id.upper())
        if found is None:
            raise ArmError(404, "NotFound", f"Operation '{status_id}' was not found.")
        body: dict[str, Any] = {"status": found.state}
        if found.error is not None:
            body["error"] = found.error
        return _json(body)

    def _operations(self, sub: str, group: str, name: str) -> Response:
        found = self._deployment_or_404(sub, group, name)
        items = [_OpView(f"{found.id}/operations/{op.operation_id}", op) for op in found.ops]
        if found.state == "Succeeded":
            items.append(_OpView(f"{found.id}/operations/{'F' * 16}", None, found))
        return self._arm._page(items, _OpView.render, {})

    def _operation(self, sub: str, group: str, name: str, operation_id: str) -> Response:
        found = self._deployment_or_404(sub, group, name)
        for op in found.ops:
            if op.operation_id.lower() == operation_id.lower():
                return _json(_OpView(f"{found.id}/operations/{op.operation_id}", op).render())
        raise ArmError(
            404,
            "DeploymentOperationNotFound",
            f"Deployment operation '{operation_id}' of deployment '{name}' could not be found.",
        )

    def _view(self, d: _Deployment) -> dict[str, Any]:
        end = d.finished_at if d.finished_at is not None else time.time()
        props: dict[str, Any] = {
            "templateHash": _template_hash(d.template),
            "parameters": _parameters_view(d.plan),
            "mode": d.mode,
            "provisioningState": d.state,
            "timestamp": _now_iso(end),
            "duration": f"PT{max(0.0, end - d.created_at):.3f}S",
            "correlationId": d.correlation_id,
            "providers": _providers(d.plan),
            "dependencies": _dependencies(d.plan),
        }
        if d.template_link is not None:
            props["templateLink"] = dict(d.template_link)
        for echoed in ("debugSetting", "onErrorDeployment"):
            if echoed in d.body["properties"]:
                props[echoed] = d.body["properties"][echoed]
        if d.state == "Succeeded":
            props["outputs"] = copy.deepcopy(d.outputs or {})
            props["outputResources"] = [{"id": op.resource.id} for op in d.ops]
        if d.error is not None:
            props["error"] = copy.deepcopy(d.error)
        return {
            "id": d.id,
            "name": d.name,
            "type": DEPLOYMENT_TYPE,
            "tags": dict(d.body.get("tags") or {}),
            "properties": props,
        }

    def _url(self, path: str) -> str:
        version = urllib.parse.quote(self._arm._api_version())
        return f"{self._arm.endpoint}{path}?api-version={version}"

    # -- control endpoints ---------------------------------------------------------------------

    def _behaviour(self, body: dict[str, Any]) -> Response:
        rate = body.get("halfway_failure_rate", self.halfway_failure_rate)
        if not isinstance(rate, int | float) or not 0 <= rate <= 1:
            return _json({"error": "halfway_failure_rate must be in [0, 1]"}, 400)
        names = ("history_limit", "history_prune_above", "history_prune_to")
        figures = [body.get(n, getattr(self, n)) for n in names]
        if not all(isinstance(f, int) and f > 0 for f in figures) or not (
            figures[0] >= figures[1] >= figures[2]
        ):
            return _json(
                {"error": "history_limit >= history_prune_above >= history_prune_to > 0"}, 400
            )
        with self._arm._lock:
            self.halfway_failure_rate = float(rate)
            for name, figure in zip(names, figures, strict=True):
                setattr(self, name, figure)
        return _json({"ok": True})

    def control(
        self, method: str, path: list[str], body: dict[str, Any], args: Mapping[str, str]
    ) -> Response | None:
        """The /_sim/ routes of this module; None for the others."""
        match method, path:
            case "GET", ["deployment-puts"]:
                return _json([p.as_json() for p in self.puts(args.get("name"))])
            case "GET", ["deployments"]:
                return _json(self.summary())
            case "POST", ["keyvault", "secrets"]:
                if not all(isinstance(body.get(k), str) for k in ("vault", "name", "value")):
                    return _json({"error": 'body must be {"vault", "name", "value"}'}, 400)
                self.put_secret(body["vault"], body["name"], body["value"], body.get("version"))
            case "POST", ["resource-groups"]:
                if not all(isinstance(body.get(k), str) for k in ("subscription", "name")):
                    return _json(
                        {"error": 'body must be {"subscription", "name", "location"}'}, 400
                    )
                self.create_resource_group(
                    body["subscription"],
                    body["name"],
                    str(body.get("location") or DEFAULT_GROUP_LOCATION),
                )
            case "POST", ["template-specs"]:
                if not isinstance(body.get("id"), str) or not isinstance(
                    body.get("mainTemplate"), dict
                ):
                    return _json({"error": 'body must be {"id", "mainTemplate", "location"}'}, 400)
                try:
                    self.put_template_spec(
                        body["id"], body["mainTemplate"], str(body.get("location") or "eastus")
                    )
                except ValueError as exc:
                    return _json({"error": str(exc)}, 400)
            case "POST", ["deployments", "fail-halfway"]:
                self.fail_halfway(int(body.get("count", 1)))
            case "POST", ["deployments", "behaviour"]:
                return self._behaviour(body)
            case _:
                return None
        return _json({"ok": True})


@dataclass(frozen=True)
class _OpView:
    """A deployment operation as ARM lists it (`op` None: the outputs' evaluation)."""

    id: str
    op: _Op | None
    deployment: _Deployment | None = None

    def render(self) -> dict[str, Any]:
        op, operation_id = self.op, self.id.rsplit("/", 1)[1]
        if op is None:
            at = self.deployment.finished_at if self.deployment else time.time()
            return {
                "id": self.id,
                "operationId": operation_id,
                "properties": {
                    "provisioningOperation": "EvaluateDeploymentOutput",
                    "provisioningState": "Succeeded",
                    "timestamp": _now_iso(at),
                    "duration": "PT0S",
                    "trackingId": str(uuid.uuid5(uuid.NAMESPACE_URL, self.id)),
                    "statusCode": "OK",
                },
            }
        resource = op.resource
        end = op.finished_at if op.finished_at is not None else time.time()
        props: dict[str, Any] = {
            "provisioningOperation": "Create",
            "provisioningState": op.state,
            "timestamp": _now_iso(end),
            "duration": f"PT{max(0.0, end - op.started_at):.3f}S",
            "trackingId": str(uuid.uuid5(uuid.NAMESPACE_URL, self.id)),
            "targetResource": {
                "id": resource.id,
                "resourceType": resource.type,
                "resourceName": resource.name,
                "apiVersion": resource.api_version,
            },
        }
        if op.status_code is not None:
            props["statusCode"] = op.status_code
        if op.error is not None:
            props["statusMessage"] = {"status": "Failed", "error": copy.deepcopy(op.error)}
        return {"id": self.id, "operationId": operation_id, "properties": props}


# -- helpers -------------------------------------------------------------------------------------


def _spec_model(
    spec_id: str, location: str, tags: dict[str, str], props: dict[str, Any]
) -> dict[str, Any]:
    props.setdefault("versions", {})
    return {
        "id": spec_id,
        "name": spec_id.rsplit("/", 1)[1],
        "type": TEMPLATE_SPEC_TYPE,
        "location": location,
        "tags": tags,
        "properties": props,
    }


def _version_model(
    version_id: str, location: str, tags: dict[str, str], props: dict[str, Any]
) -> dict[str, Any]:
    return {
        "id": version_id,
        "name": version_id.rsplit("/", 1)[1],
        "type": TEMPLATE_SPEC_VERSION_TYPE,
        "location": location,
        "tags": tags,
        "properties": props,
    }


def _version_times() -> dict[str, str]:
    now = _now_iso()
    return {"timeCreated": now, "timeModified": now}


def _deployment_id(sub: str, group: str, name: str) -> str:
    return f"/subscriptions/{sub}/resourceGroups/{group}/providers/{DEPLOYMENT_TYPE}/{name}"


def _location(value: str) -> str:
    return value.lower().replace(" ", "")


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _not_found(rid: str) -> ArmError:
    parts = rid.split("/")
    rtype, name = arm_templates.type_and_name(rid)
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource '{rtype}/{name}' under resource group '{parts[4]}' was not found.",
    )


def _content_error(detail: str) -> ArmError:
    return ArmError(
        400,
        "InvalidRequestContent",
        f"The request content was invalid and could not be deserialized: '{detail}'",
    )


def _mode(props: dict[str, Any]) -> str:
    mode = props.get("mode")
    if mode is None:
        raise _content_error("Required property 'mode' not found in JSON. Path 'properties'.")
    found = MODES.get(str(mode).lower())
    if found is None:
        raise _content_error(
            f"Error converting value \"{mode}\" to type 'DeploymentMode'. Path 'properties.mode'."
        )
    return found  # Complete is run as Incremental: the sim never deletes what is not listed


def _fetch_template(uri: str) -> dict[str, Any]:
    """A template from templateLink.uri: only from this machine (TEMPLATE_URI_HOSTS)."""
    failed = ArmError(
        400,
        "InvalidContentLink",
        f"Unable to download deployment content from '{uri}'. The tracking Id is "
        f"'{uuid.uuid4()}'. {ARM_DEPLOY_HELP}",
    )
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme not in ("http", "https") or parts.hostname not in TEMPLATE_URI_HOSTS:
        raise failed
    # No proxies: the template server is on this machine.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(uri, timeout=TEMPLATE_FETCH_TIMEOUT_S) as reply:
            content = reply.read()
    except (urllib.error.URLError, OSError, ValueError):
        raise failed from None
    try:
        template = json.loads(content)
    except ValueError:
        template = None
    if not isinstance(template, dict):
        raise ArmError(
            400,
            "InvalidTemplate",
            f"Deployment template parse failed: the content of '{uri}' is not a JSON object.",
        )
    return template


def _preflight(name: str, planned: Plan) -> None:
    """What ARM's preflight validation refuses before deploying: 400
    InvalidTemplateDeployment with one inner error per problem."""
    problems = []
    for resource in planned.resources:
        for segment in resource.name.split("/"):
            if not _valid_name(segment):
                problems.append(
                    {
                        "code": "InvalidResourceName",
                        "target": resource.id,
                        "message": f"Resource name {segment} is invalid. The name can be up to "
                        f"{RESOURCE_NAME_MAX} characters long. It must begin with a word "
                        "character, and it must end with a word character or with '_'. The "
                        "name may contain word characters or '.', '-', '_'.",
                    }
                )
        if resource.type.lower() == VM_TYPE.lower():
            problems.extend(_computer_name_problems(resource))
    if problems:
        raise ArmError(
            400,
            "InvalidTemplateDeployment",
            f"The template deployment '{name}' is not valid according to the validation "
            f"procedure. The tracking id is '{uuid.uuid4()}'. See inner errors for details.",
            details=problems,
        )


def _valid_name(name: str) -> bool:
    if not 0 < len(name) <= RESOURCE_NAME_MAX:
        return False
    if not (name[0].isalnum() or name[0] == "_") or not (name[-1].isalnum() or name[-1] == "_"):
        return False
    return all(c.isalnum() or c in "._-" for c in name)


def _computer_name_problems(vm: PlannedResource) -> list[dict[str, Any]]:
    props = _object(vm.body.get("properties"))
    os_profile = _object(props.get("osProfile"))
    computer = os_profile.get("computerName")
    os_type = str(_object(_object(props.get("storageProfile")).get("osDisk")).get("osType", ""))
    windows = "windowsConfiguration" in os_profile or os_type.lower() == "windows"
    if not windows or not isinstance(computer, str) or len(computer) <= WINDOWS_COMPUTER_NAME_MAX:
        return []
    return [
        {
            "code": "InvalidParameter",
            "target": "computerName",
            "message": "Windows computer name cannot be more than 15 characters long, be "
            "entirely numeric, or contain the following characters: ` ~ ! @ # $ % ^ & * ( ) "
            "= + _ [ ] { } \\ | ; : . ' \" , < > / ?.",
        }
    ]


def _without_nulls(value: Any) -> Any:
    """What the resource provider is sent: a property set to null (json('null')) is unset."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _template_hash(template: dict[str, Any]) -> str:
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).digest()
    return str(int.from_bytes(digest[:8], "big"))


def _parameters_view(planned: Plan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in planned.parameter_types.items():
        if kind.lower() in arm_templates.SECURE_TYPES:
            out[name] = {"type": kind}  # ARM never echoes a secure parameter's value
        else:
            out[name] = {"type": kind, "value": copy.deepcopy(planned.parameters[name])}
    return out


def _providers(planned: Plan) -> list[dict[str, Any]]:
    found: dict[str, dict[str, set[str]]] = {}
    for resource in planned.resources:
        namespace, _, rtype = resource.type.partition("/")
        location = str(resource.body.get("location") or "")
        found.setdefault(namespace, {}).setdefault(rtype, set()).add(location)
    return [
        {
            "namespace": namespace,
            "resourceTypes": [
                {"resourceType": rtype, "locations": sorted(locations)}
                for rtype, locations in types.items()
            ],
        }
        for namespace, types in found.items()
    ]


def _dependencies(planned: Plan) -> list[dict[str, Any]]:
    by_id = {_key(r.id): r for r in planned.resources}

    def ref(rid: str) -> dict[str, str]:
        resource = by_id[_key(rid)]
        return {"id": resource.id, "resourceType": resource.type, "resourceName": resource.name}

    return [
        {**ref(r.id), "dependsOn": [ref(d) for d in r.depends_on]}
        for r in planned.resources
        if r.depends_on
    ]


def _state_filter(text: str) -> str | None:
    """The state of `provisioningState eq 'Failed'`, lower case; None for no filter."""
    words = text.replace("'", " ").split()
    if len(words) == 3 and words[0].lower() == "provisioningstate" and words[1].lower() == "eq":
        return words[2].lower()
    return None
