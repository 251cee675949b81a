"""A deployment's run, as ARM runs it (deployments.py's module docstring): the records of a
run and its operations, and `DeploymentRunner`, which moves active runs on whenever the sim
is looked at: resources started once what they depend on succeeded, a VM's operation
watched until it has booted (or failed), the outputs evaluated at the end.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from wmsim.azure import arm_templates
from wmsim.azure.arm_host import ArmHost
from wmsim.azure.arm_templates import Plan, PlannedResource
from wmsim.azure.errors import ArmError
from wmsim.azure.resources import DISK_TYPE, IP_TYPE, NIC_TYPE, VM_TYPE, _child_view, _key
from wmsim.azure.template_expressions import ExpressionError
from wmsim.azure.template_functions import Scope
from wmsim.azure.vm_views import vm_model, vm_phase

DEPLOYMENT_TYPE = "Microsoft.Resources/deployments"
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


@dataclass
class DeploymentOp:
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
class Deployment:
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
    ops: list[DeploymentOp] = field(default_factory=list)
    skipped: set[str] = field(default_factory=set)  # keys of resources never started
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    finished_at: float | None = None
    correlation_id: str = field(default_factory=lambda: str(uuid.uuid4()))


class DeploymentRunner:
    """Moves the runs of one SimArm's deployments on (under the SimArm's lock)."""

    def __init__(self, arm: ArmHost) -> None:
        self._arm = arm
        self._sequence = itertools.count(1)

    def advance(self, deployments: Iterable[Deployment], now: float) -> None:
        """Move every active one of `deployments` on to `now`."""
        for deployment in list(deployments):
            if deployment.state in ACTIVE:
                self._step(deployment, now)

    def _step(self, d: Deployment, now: float) -> None:
        d.state = "Running"  # Accepted is what the PUT answered; ARM has started since
        moved = True
        while moved:
            moved = self._start_ready(d, now)
            for op in d.ops:
                if op.state == "Running" and self._watch(op, now):
                    moved = True
        if not d.pending and all(op.state != "Running" for op in d.ops):
            self._finish(d, now)

    def _start_ready(self, d: Deployment, now: float) -> bool:
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
    def _state_of(d: Deployment, rid: str) -> str:
        if _key(rid) in d.skipped:
            return "Skipped"
        for op in d.ops:
            if _key(op.resource.id) == _key(rid):
                return op.state
        return "Pending"

    def _start(self, d: Deployment, resource: PlannedResource, now: float) -> DeploymentOp:
        op = DeploymentOp(operation_id=self._operation_id(), resource=resource, started_at=now)
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

    def _watch(self, op: DeploymentOp, now: float) -> bool:
        """Move a VM's operation on; True when it ended."""
        arm = self._arm
        vm = arm._vms.get(op.vm_key or "")
        if vm is None or vm.deleted_at is not None:
            return self._end(op, now, "Canceled", "The resource was deleted while being deployed.")
        if vm.failure is None and vm_phase(vm) == "pending":
            return False
        if vm.failure is None and op.halfway:
            vm.failure = (HALFWAY_CODE, HALFWAY_MESSAGE.format(name=vm.name))
        if vm.failure is not None:
            return self._end(op, now, *vm.failure)
        op.state, op.finished_at, op.status_code = "Succeeded", now, "OK"
        return True

    @staticmethod
    def _end(op: DeploymentOp, now: float, code: str, message: str) -> bool:
        op.state, op.finished_at, op.status_code = "Failed", now, "Conflict"
        op.error = {
            "code": "ResourceDeploymentFailure",
            "target": op.resource.id,
            "message": TERMINAL_FAILED,
            "details": [{"code": code, "message": message}],
        }
        return True

    def _finish(self, d: Deployment, now: float) -> None:
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
        except ExpressionError as error:
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
            model = vm_model(found)
        elif (resource := arm._resources.get(_key(target))) is not None:
            model = _child_view(resource)
        else:
            raise ExpressionError(f"The Resource '{target}' was not found.")
        return model if full else model["properties"]

    def _operation_id(self) -> str:
        # Sorted as created: ARM lists operations in no promised order, the sim in this one.
        return f"{next(self._sequence):08X}{uuid.uuid4().hex[:8].upper()}"


def _without_nulls(value: Any) -> Any:
    """What the resource provider is sent: a property set to null (json('null')) is unset."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value
