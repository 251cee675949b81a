"""Microsoft.Resources in the simulated ARM: resource groups, template specs, deployments.

The REST surface is ARM's own, as azure-mgmt-resource (ResourceManagementClient,
api-version 2025-04-01), azure-mgmt-resource-deployments (DeploymentsMgmtClient, 2026-06-01)
and azure-mgmt-resource-templatespecs (TemplateSpecsClient, 2022-02-01) send it:
- /subscriptions/{s}/resourcegroups[/{rg}]: list; PUT (201 created, 200 updated), GET,
  HEAD (204 / 404). A group exists once created, and so do the sim's default group
  (`ResourceGroups.default_names`) and any group already holding a resource (the VM, NIC, IP and
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

This module is the facade the SimArm holds (`sim.deployments`): its routes, the deployment
PUT and reads, and the test knobs. Groups live in resource_groups.py, template specs in
template_specs.py, what a PUT is checked for in deployment_checks.py, a run's progress in
deployment_runs.py, and what GET shows in deployment_views.py.
"""

from __future__ import annotations

import collections
import copy
import random
import time
import urllib.parse
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure import arm_templates
from wmsim.azure.arm_host import ArmHost
from wmsim.azure.arm_templates import TemplateError
from wmsim.azure.deployment_checks import (
    ARM_DEPLOY_HELP,
    content_error,
    deployment_mode,
    deployment_template,
    parameter_values,
    preflight,
)
from wmsim.azure.deployment_runs import (
    ACTIVE,
    DEPLOYMENT_TYPE,
    Deployment,
    DeploymentRunner,
)
from wmsim.azure.deployment_views import OperationView, deployment_view
from wmsim.azure.errors import ArmError
from wmsim.azure.key_vault import KeyVault
from wmsim.azure.resource_groups import DEFAULT_GROUP_LOCATION, ResourceGroups
from wmsim.azure.resources import VM_TYPE, RecordedPut, _json, _key, _now_iso
from wmsim.azure.template_functions import Scope
from wmsim.azure.template_specs import TemplateSpecs

RESOURCES = "microsoft.resources"
DEPLOYMENT_NAME_MAX = 64
DEPLOYMENT_PUTS_KEPT = 10_000
# ARM's deployment history of a group (module docstring).
HISTORY_LIMIT = 800
HISTORY_PRUNE_ABOVE = 700
HISTORY_PRUNE_TO = 600

Handler = Callable[[], Response]


class ArmDeployments:
    """Resource groups, template specs and deployments of one SimArm. Every method runs
    under the SimArm's lock (handlers are called holding it; the accessors take it)."""

    def __init__(self, arm: ArmHost, *, seed: int | None = None) -> None:
        self._arm = arm
        self._rng = random.Random(seed)
        self._runner = DeploymentRunner(arm)
        self._groups = ResourceGroups(arm)
        self._specs = TemplateSpecs(arm, self._groups)
        self._deployments: dict[str, Deployment] = {}  # lower-case id -> latest run
        self._statuses: dict[str, Deployment] = {}  # async operation id -> its run
        self._delete_results: set[str] = set()  # finished deletes (Location tokens)
        self._vault = KeyVault()
        self._puts: collections.deque[RecordedPut] = collections.deque(maxlen=DEPLOYMENT_PUTS_KEPT)
        self.halfway_failure_rate = 0.0
        self._halfway_forced = 0
        self.pruned: list[str] = []  # ids of the deployments the history pruning deleted
        self.history_limit = HISTORY_LIMIT
        self.history_prune_above = HISTORY_PRUNE_ABOVE
        self.history_prune_to = HISTORY_PRUNE_TO

    # -- test accessors ------------------------------------------------------------------------

    def reset(self) -> None:
        with self._arm._lock:
            self._groups.reset()
            self._specs.reset()
            self._deployments.clear()
            self._statuses.clear()
            self._delete_results.clear()
            self._vault.reset()
            self._puts.clear()
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
            self._vault.put(vault_id, name, value, version)

    def create_resource_group(
        self,
        subscription_id: str,
        name: str,
        location: str = DEFAULT_GROUP_LOCATION,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        with self._arm._lock:
            self._groups.create(subscription_id, name, location, tags)

    def put_template_spec(
        self,
        version_id: str,
        main_template: Mapping[str, Any],
        location: str = DEFAULT_GROUP_LOCATION,
    ) -> None:
        """Hold a template spec version (its group and spec made as needed), as if created by
        the SDK: a fast set-up for tests and the demo."""
        with self._arm._lock:
            self._specs.put(version_id, main_template, location)

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
            return self._groups.list_route(method, sub)
        group = rest[1]
        if len(rest) == 2:
            return self._groups.route(method, sub, group)
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
            return self._specs.route(method, sub, group, tail, tail_low)
        return None

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
        response = _json(deployment_view(deployment), status)
        response.headers["Azure-AsyncOperation"] = self._url(f"{rid}/operationStatuses/{status_id}")
        return response

    def _create(
        self, rid: str, sub: str, group_name: str, name: str, body: dict[str, Any]
    ) -> tuple[Deployment, int]:
        group = self._groups.get(sub, group_name)
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
            raise content_error("Required property 'properties' not found in JSON. Path ''.")
        mode = deployment_mode(props)
        template, link = deployment_template(props, self._specs.main_template)
        values = parameter_values(props, self._vault.resolve)
        scope = Scope(sub, group.name, group.location, name, resource_group_tags=group.tags)
        try:
            planned = arm_templates.plan(template, values, scope)
        except TemplateError as error:
            raise ArmError(400, error.code, error.message) from None
        preflight(name, planned)
        self._arm._market_preflight(
            name,
            [(r.id, dict(r.body)) for r in planned.resources if r.type.lower() == VM_TYPE.lower()],
        )
        deployment = Deployment(
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

    def _history(self, sub: str, group: str) -> list[Deployment]:
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

    # -- deployments: progress -----------------------------------------------------------------

    def advance(self, now: float) -> None:
        """Move every active deployment on to `now` (called under the SimArm's lock)."""
        self._runner.advance(self._deployments.values(), now)

    # -- deployments: reads and delete ---------------------------------------------------------

    def _deployment_or_404(self, sub: str, group: str, name: str) -> Deployment:
        self._groups.get(sub, group)
        found = self._deployments.get(_key(_deployment_id(sub, group, name)))
        if found is None:
            raise ArmError(404, "DeploymentNotFound", f"Deployment '{name}' could not be found.")
        return found

    def _get(self, sub: str, group: str, name: str) -> Response:
        return _json(deployment_view(self._deployment_or_404(sub, group, name)))

    def _exists(self, sub: str, group: str, name: str) -> Response:
        found = self._deployments.get(_key(_deployment_id(sub, group, name)))
        return Response(status=204 if found is not None else 404)

    def _list(self, sub: str, group: str) -> Response:
        self._groups.get(sub, group)
        prefix = _key(_deployment_id(sub, group, ""))
        found = [d for k, d in self._deployments.items() if k.startswith(prefix)]
        wanted = _state_filter(self._arm._request.args.get("$filter", ""))
        if wanted is not None:
            found = [d for d in found if d.state.lower() == wanted]
        top = self._arm._request.args.get("$top")
        if top and top.isdigit():
            found = sorted(found, key=lambda d: d.created_at, reverse=True)[: int(top)]
        return self._arm._page(found, deployment_view, {})

    def _delete(self, sub: str, group: str, name: str) -> Response:
        self._groups.get(sub, group)
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
        items = [OperationView(f"{found.id}/operations/{op.operation_id}", op) for op in found.ops]
        if found.state == "Succeeded":
            items.append(OperationView(f"{found.id}/operations/{'F' * 16}", None, found))
        return self._arm._page(items, OperationView.render, {})

    def _operation(self, sub: str, group: str, name: str, operation_id: str) -> Response:
        found = self._deployment_or_404(sub, group, name)
        for op in found.ops:
            if op.operation_id.lower() == operation_id.lower():
                return _json(OperationView(f"{found.id}/operations/{op.operation_id}", op).render())
        raise ArmError(
            404,
            "DeploymentOperationNotFound",
            f"Deployment operation '{operation_id}' of deployment '{name}' could not be found.",
        )

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


def _deployment_id(sub: str, group: str, name: str) -> str:
    return f"/subscriptions/{sub}/resourceGroups/{group}/providers/{DEPLOYMENT_TYPE}/{name}"


def _state_filter(text: str) -> str | None:
    """The state of `provisioningState eq 'Failed'`, lower case; None for no filter."""
    words = text.replace("'", " ").split()
    if len(words) == 3 and words[0].lower() == "provisioningstate" and words[1].lower() == "eq":
        return words[2].lower()
    return None
