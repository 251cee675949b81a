"""GCE's Operations: zone operations for instance inserts, deletes and the system events of a
VM that died (get, wait, list), and the finished global or regional ones of networks,
subnetworks and images."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim.gcp.errors import not_found
from wmsim.gcp.list_filter import list_filter
from wmsim.gcp.rest import (
    API,
    INSTANCE_ID_BASE,
    base_url,
    json_response,
    list_response,
    page_of,
    resource_id,
    rfc3339,
)
from wmsim.gcp.vm import Vm

# Real GCE's operations.wait returns after about 2 minutes even if the operation is not done;
# the simulation returns sooner so a client's loop is exercised without long blocking calls.
OPERATION_WAIT_MAX_S = 2.0


@dataclass
class Operation:
    """A zone operation: an insert, a delete or a system event of one instance."""

    id: int
    name: str
    project: str
    zone: str
    operation_type: str
    target_name: str
    target_id: int
    inserted: datetime
    done_at: float  # monotonic; DONE from then on
    error: dict[str, Any] | None = None  # {"errors": [...]}; set for operations that failed
    http_error: tuple[int, str] | None = None
    status_message: str | None = None


def op_order(op: Operation) -> tuple[datetime, str]:
    return (op.inserted, op.name)


class ZoneOperations:
    """SimGce's operations (its state lives on SimGce, wmsim/gcp/gce.py)."""

    _lock: threading.RLock

    def _done_op(self, request: Request, project: str, scope: str, target: str) -> dict[str, Any]:
        """A finished global or regional Operation: these resources are made at once."""
        base = base_url(request)
        stamp = rfc3339(datetime.now(UTC))
        name = f"operation-{int(time.time() * 1000)}-{uuid.uuid4().hex[:13]}"
        op: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(INSTANCE_ID_BASE + next(self._ids)),
            "name": name,
            "operationType": "insert",
            "targetLink": f"{base}/{target}",
            "targetId": resource_id(target),
            "status": "DONE",
            "user": "anonymous",
            "progress": 100,
            "insertTime": stamp,
            "startTime": stamp,
            "endTime": stamp,
            "selfLink": f"{base}/projects/{project}/{scope}/operations/{name}",
        }
        if scope.startswith("regions/"):
            op["region"] = f"{base}/projects/{project}/{scope}"
        return op

    def _operation_get(self, request: Request, project: str, zone: str, operation: str) -> Response:
        return self._op_response(self._op(project, zone, operation))

    def _operation_wait(
        self, request: Request, project: str, zone: str, operation: str
    ) -> Response:
        op = self._op(project, zone, operation)
        remaining = op.done_at - time.monotonic()
        if remaining > 0:
            time.sleep(min(remaining, OPERATION_WAIT_MAX_S))
        return self._op_response(op)

    def _operation_list(self, request: Request, project: str, zone: str) -> Response:
        page_size = self._page_size(request)
        match = list_filter(request.args.get("filter", ""))
        with self._lock:
            ops = [o for (p, z, _), o in self._state.ops.items() if (p, z) == (project, zone)]
        items = [j for j in (self._op_json(o, request) for o in sorted(ops, key=op_order))]
        page, token = page_of(
            [i for i in items if match(i)], request.args.get("pageToken", ""), page_size, "name"
        )
        resource = f"projects/{project}/zones/{zone}/operations"
        return list_response("compute#operationList", resource, base_url(request), page, token)

    def _op(self, project: str, zone: str, operation: str) -> Operation:
        with self._lock:
            op = self._state.ops.get((project, zone, operation))
        if op is None:
            raise not_found(f"projects/{project}/zones/{zone}/operations/{operation}")
        return op

    def _new_op(
        self, project: str, zone: str, op_type: str, vm: Vm, *, done_at: float
    ) -> Operation:
        op_id = INSTANCE_ID_BASE + next(self._ids)
        stamp = int(time.time() * 1000)
        name = f"operation-{stamp}-{uuid.uuid4().hex[:13]}-{uuid.uuid4().hex[:8]}"
        if op_type.startswith("compute.instances."):
            name = f"systemevent-{stamp}-{op_type.rsplit('.', 1)[1].lower()}-{vm.name}"
        op = Operation(
            id=op_id,
            name=name,
            project=project,
            zone=zone,
            operation_type=op_type,
            target_name=vm.name,
            target_id=vm.id,
            inserted=datetime.now(UTC),
            done_at=done_at,
        )
        self._state.ops[(project, zone, name)] = op
        return op

    def _op_response(self, op: Operation) -> Response:
        return json_response(self._op_json(op, None))

    def _op_json(self, op: Operation, request: Request | None) -> dict[str, Any]:
        base = self.endpoint + API if request is None else base_url(request)
        done = time.monotonic() >= op.done_at
        zone_url = f"{base}/projects/{op.project}/zones/{op.zone}"
        out: dict[str, Any] = {
            "kind": "compute#operation",
            "id": str(op.id),
            "name": op.name,
            "zone": zone_url,
            "operationType": op.operation_type,
            "targetLink": f"{zone_url}/instances/{op.target_name}",
            "targetId": str(op.target_id),
            "status": "DONE" if done else "RUNNING",
            "user": "system" if op.operation_type.startswith("compute.") else "anonymous",
            "progress": 100 if done else 0,
            "insertTime": rfc3339(op.inserted),
            "startTime": rfc3339(op.inserted),
            "selfLink": f"{zone_url}/operations/{op.name}",
        }
        if done:
            out["endTime"] = rfc3339(op.inserted)
        if op.status_message:
            out["statusMessage"] = op.status_message
        # GCE tells an operation's error once the operation is DONE, not while it runs.
        if op.error and done:
            out["error"] = op.error
        if op.http_error and done:
            out["httpErrorStatusCode"], out["httpErrorMessage"] = op.http_error
        return out
