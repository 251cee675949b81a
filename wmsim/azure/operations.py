"""ARM's long-running operations: a PUT or DELETE answers with an `Azure-AsyncOperation` URL
the SDK's poller follows to Succeeded, Failed or Canceled. A VM's create runs until it has
booted (or failed), its delete until it is gone; other resources are done at once.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from werkzeug.wrappers import Response

from wmsim.azure.arm_state import ArmState
from wmsim.azure.errors import ArmError
from wmsim.azure.resources import _json, _key, _now_iso, _Vm
from wmsim.azure.vm_views import vm_model, vm_phase


@dataclass
class Operation:
    id: str
    target: str  # resource key
    kind: str  # create | delete | done


class Operations(ArmState):
    _operations: dict[str, Operation]

    def _new_operation(self, target: str, kind: str) -> Operation:
        operation = Operation(id=str(uuid.uuid4()), target=target, kind=kind)
        self._operations[operation.id] = operation
        return operation

    def _operation_url(self, location: str, operation: Operation) -> str:
        sub = operation.target.split("/")[2]
        return (
            f"{self.endpoint}/subscriptions/{sub}/providers/Microsoft.Compute/locations/"
            f"{location}/operations/{operation.id}?api-version={quote(self._api_version())}"
        )

    def _operation(self, op_id: str) -> Response:
        operation = self._operations.get(op_id)
        if operation is None:
            raise ArmError(404, "NotFound", f"Operation {op_id} was not found.")
        body: dict[str, Any] = {"name": op_id, "startTime": _now_iso()}
        vm = self._vms.get(operation.target)
        if operation.kind == "done":
            body["status"] = "Succeeded"
        elif operation.kind == "delete":
            body["status"] = "InProgress" if vm else "Succeeded"
        elif vm is None:
            body["status"] = "Canceled"
        elif vm.failure:
            code, message = vm.failure
            body.update(status="Failed", error={"code": code, "message": message})
        else:
            body["status"] = "InProgress" if vm_phase(vm) == "pending" else "Succeeded"
        return _json(body)

    def _accepted(self, view: dict[str, Any], status: int, rid: str, location: str) -> Response:
        operation = self._new_operation(_key(rid), "done")
        response = _json(view, status)
        response.headers["Azure-AsyncOperation"] = self._operation_url(location, operation)
        return response

    def _vm_accepted(self, vm: _Vm, status: int, kind: str) -> Response:
        operation = self._new_operation(_key(vm.id), kind)
        response = _json(vm_model(vm), status)
        response.headers["Azure-AsyncOperation"] = self._operation_url(vm.location, operation)
        return response
