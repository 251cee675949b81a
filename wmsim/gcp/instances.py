"""The instances routes (insert, get, delete, list, aggregatedList) and the instances held:
requestId idempotency, 409 on a name held, the instance quota in GCE's two shapes, and each
VM's status derived from the simulated lifecycle."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim.behaviour import Faults, Preemptions, lifecycle_state
from wmsim.gcp import market as market_gce
from wmsim.gcp.errors import ApiError, invalid, not_found
from wmsim.gcp.list_filter import list_filter
from wmsim.gcp.operations import Operation
from wmsim.gcp.rest import (
    INSTANCE_ID_BASE,
    LIST_PAGE_SIZE_MAX,
    base_url,
    checked_request_id,
    json_response,
    list_response,
    page_of,
    scoped_list,
)
from wmsim.gcp.vm import BUILT_FIELDS, Vm, attached_disk, instance_json, interfaces_of
from wmsim.market_sim import QUOTA, Refusal, SimMarket


@dataclass(frozen=True)
class InsertRecord:
    """One instances.insert request that reached the simulated cloud, as it was sent."""

    project: str
    zone: str
    request_id: str | None
    body: dict[str, Any]  # the JSON body, camelCase, exactly as received
    error: str | None = None  # the reason of GCE's refusal (`invalid`, `notFound`...), or None


INSERTS_KEPT = 10_000  # the newest insert bodies held for tests (a bench makes many more)


class Instances:
    """SimGce's instances (its state lives on SimGce, wmsim/gcp/gce.py)."""

    _lock: threading.RLock
    faults: Faults
    preemptions: Preemptions
    market: SimMarket | None
    _market_stopped: Callable[[str], None]  # MarketBound's

    def _insert(self, request: Request, project: str, zone: str) -> Response:
        body = request.get_json(force=True, silent=True)
        if not isinstance(body, dict):
            raise ApiError(400, "parseError", "Parse Error")
        request_id = checked_request_id(request)
        with self._lock:
            try:
                response = self._insert_body(project, zone, body, request_id)
            except ApiError as error:
                self._state.inserts.append(
                    InsertRecord(project, zone, request_id, body, error.reason)
                )
                raise
            self._state.inserts.append(InsertRecord(project, zone, request_id, body))
            return response

    def _insert_body(
        self, project: str, zone: str, body: dict[str, Any], request_id: str | None
    ) -> Response:
        self._state.zones.add((project, zone))
        if request_id and (project, request_id) in self._state.request_ids:
            return self._op_response(self._state.request_ids[(project, request_id)])
        vm = self._vm_from_body(project, zone, body)
        now = time.monotonic()
        existing = self._state.vms.get((project, zone, vm.name))
        if existing is not None and self._status(existing, now) is not None:
            raise ApiError(409, "alreadyExists", f"The resource '{vm.path}' already exists")
        quota = self.faults.behaviour.quota_instances
        market = self.market
        offering = None
        if market is not None:
            offering = market.offering(
                market_gce.KIND, market_gce.region_of(zone), zone, vm.machine_type, vm.spot
            )
        if quota is not None and self._live_count(now) >= quota:
            op = self._quota_failure(project, zone, vm, quota)
        elif market is not None and (grant := market.grant(offering, 1, 1)).refusal is not None:
            op = self._market_refusal(project, zone, vm, grant.refusal)
        else:
            if market is not None:
                tags = market_gce.instance_tags(vm.labels, vm.metadata)
                market.started(market_gce.KIND, str(vm.id), offering, tags)
            self._state.vms[(project, zone, vm.name)] = vm
            boot_s = self.faults.behaviour.boot_s
            if vm.spot:
                self.preemptions.schedule(str(vm.id), now + boot_s)
            op = self._new_op(project, zone, "insert", vm, done_at=now + boot_s)
        if request_id:
            self._state.request_ids[(project, request_id)] = op
        return self._op_response(op)

    def _quota_failure(self, project: str, zone: str, vm: Vm, quota: int) -> Operation:
        region = zone.rsplit("-", 1)[0]
        message = f"Quota 'INSTANCES' exceeded.  Limit: {quota:.1f} in region {region}."
        if self.quota_style == "http":
            raise ApiError(403, "quotaExceeded", message, domain="usageLimits")
        op = self._new_op(project, zone, "insert", vm, done_at=time.monotonic())
        op.error = {
            "errors": [
                {
                    "code": "QUOTA_EXCEEDED",
                    "message": message,
                    "errorDetails": [
                        {
                            "quotaInfo": {
                                "metricName": "compute.googleapis.com/instances",
                                "limitName": "INSTANCES-per-project-region",
                                "dimensions": {"region": region},
                                "limit": quota,
                            }
                        }
                    ],
                }
            ]
        }
        op.http_error = (403, "FORBIDDEN")
        return op

    def _market_refusal(self, project: str, zone: str, vm: Vm, refusal: Refusal) -> Operation:
        """The market has none to give: the insert's Operation runs a while (half a boot),
        then is DONE with GCE's error; no instance is made. A quota refusal in the "http"
        style is GCE's synchronous 403 instead."""
        if refusal.reason == QUOTA and self.quota_style == "http":
            _, message, _ = market_gce.quota_message(refusal)
            raise ApiError(403, "quotaExceeded", message, domain="usageLimits")
        done_at = time.monotonic() + self.faults.behaviour.boot_s / 2
        op = self._new_op(project, zone, "insert", vm, done_at=done_at)
        op.error, status, reason = market_gce.operation_error(project, zone, refusal)
        op.http_error = (status, reason)
        return op

    def _get(self, request: Request, project: str, zone: str, name: str) -> Response:
        now = time.monotonic()
        with self._lock:
            vm = self._named(project, zone, name)
            status = self._status(vm, now) if vm else None
            if vm is None or status is None:
                raise not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            return json_response(instance_json(vm, status, request))

    def _delete(self, request: Request, project: str, zone: str, name: str) -> Response:
        request_id = checked_request_id(request)
        now = time.monotonic()
        with self._lock:
            if request_id and (project, request_id) in self._state.request_ids:
                return self._op_response(self._state.request_ids[(project, request_id)])
            vm = self._named(project, zone, name)
            if vm is None or self._status(vm, now) is None:
                raise not_found(f"projects/{project}/zones/{zone}/instances/{name}")
            if vm.deleted_at is None:
                vm.deleted_at = now
                self._market_stopped(str(vm.id))
            done_at = vm.deleted_at + self.faults.behaviour.delete_s
            op = self._new_op(project, zone, "delete", vm, done_at=done_at)
            if request_id:
                self._state.request_ids[(project, request_id)] = op
            return self._op_response(op)

    def _list(self, request: Request, project: str, zone: str) -> Response:
        page_size = self._page_size(request)
        match = list_filter(request.args.get("filter", ""))
        now = time.monotonic()
        with self._lock:
            self._state.zones.add((project, zone))
            items = []
            for vm in sorted(self._live_vms(now), key=lambda v: v.name):
                if (vm.project, vm.zone) == (project, zone):
                    item = instance_json(vm, self._status(vm, now) or "", request)
                    if match(item):
                        items.append(item)
        page, token = page_of(items, request.args.get("pageToken", ""), page_size, "name")
        resource = f"projects/{project}/zones/{zone}/instances"
        return list_response("compute#instanceList", resource, base_url(request), page, token)

    def _aggregated_list(self, request: Request, project: str) -> Response:
        page_size = self._page_size(request)
        match = list_filter(request.args.get("filter", ""))
        now = time.monotonic()
        with self._lock:
            zones = sorted(z for p, z in self._state.zones if p == project)
            items = []
            for vm in sorted(self._live_vms(now), key=lambda v: (v.zone, v.name)):
                if vm.project == project:
                    item = instance_json(vm, self._status(vm, now) or "", request)
                    item["_key"] = f"{vm.zone}/{vm.name}"
                    if match(item):
                        items.append(item)
        page, token = page_of(items, request.args.get("pageToken", ""), page_size, "_key")
        scoped = {f"zones/{zone}": scoped_list(zone, page) for zone in zones}
        body: dict[str, Any] = {
            "kind": "compute#instanceAggregatedList",
            "id": f"projects/{project}/aggregated/instances",
            "items": scoped,
            "selfLink": f"{base_url(request)}/projects/{project}/aggregated/instances",
        }
        if token:
            body["nextPageToken"] = token
        return json_response(body)

    def _page_size(self, request: Request) -> int:
        raw = request.args.get("maxResults", str(LIST_PAGE_SIZE_MAX))
        if not raw.isdigit() or int(raw) > LIST_PAGE_SIZE_MAX:
            raise invalid("maxResults", raw, f"Must be less than or equal to {LIST_PAGE_SIZE_MAX}")
        size = int(raw) or LIST_PAGE_SIZE_MAX
        cap = self.faults.behaviour.page_size_max
        return min(size, cap) if cap else size

    # -- internals -------------------------------------------------------------------------------

    def _vm_from_body(self, project: str, zone: str, body: Mapping[str, Any]) -> Vm:
        checked = self._state.catalog.check_insert(project, zone, body)
        vm_id = INSTANCE_ID_BASE + next(self._ids)
        return Vm(
            image=checked.image,
            id=vm_id,
            project=project,
            zone=zone,
            name=checked.name,
            machine_type=checked.machine_type,
            labels=checked.labels,
            metadata=checked.metadata,
            scheduling=checked.scheduling,
            disks=[attached_disk(i, disk) for i, disk in enumerate(checked.disks)],
            network_interfaces=interfaces_of(checked, vm_id),
            created_at=time.monotonic(),
            created_wall=datetime.now(UTC),
            service_accounts=checked.service_accounts,
            extra={k: v for k, v in body.items() if k not in BUILT_FIELDS},
        )

    def _status(self, vm: Vm, now: float) -> str | None:
        """GCE's status for the VM now, or None once it is gone."""
        b = self.faults.behaviour
        life = lifecycle_state(now, vm.created_at, b.boot_s, vm.deleted_at, b.delete_s)
        if life == "gone":
            return None
        if life == "stopping":
            return "STOPPING"
        if vm.killed_at is not None:
            return "TERMINATED"
        if life == "pending":
            return "PROVISIONING" if now < vm.created_at + b.boot_s / 2 else "STAGING"
        return "RUNNING"

    def _live_vms(self, now: float) -> list[Vm]:
        """VMs that still exist; gone ones are forgotten here, lazily."""
        gone = [key for key, vm in self._state.vms.items() if self._status(vm, now) is None]
        for key in gone:
            del self._state.vms[key]
        return list(self._state.vms.values())

    def _named(self, project: str, zone: str, name: str) -> Vm | None:
        """The instance a path names: by name, or by its numeric id as GCE also takes it
        (worker-manager gets and deletes its instances by id: its workerId)."""
        vm = self._state.vms.get((project, zone, name))
        if vm is None and name.isdigit():
            vm = next(
                (
                    v
                    for v in self._state.vms.values()
                    if (v.project, v.zone) == (project, zone) and str(v.id) == name
                ),
                None,
            )
        return vm

    def _live_count(self, now: float) -> int:
        return sum(1 for vm in self._live_vms(now) if vm.deleted_at is None)

    def _find(self, cloud_id_or_name: str) -> Vm:
        for vm in self._live_vms(time.monotonic()):
            if cloud_id_or_name in (str(vm.id), vm.name):
                return vm
        raise KeyError(cloud_id_or_name)
