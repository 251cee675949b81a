"""Virtual machines in the simulated ARM: PUT (create, or an update that may change tags
only), GET (with $expand), the instance view, DELETE and the lists (by group, location or
subscription, statusOnly). What a VM body may name is checked as ARM checks it; every PUT
handled is recorded, body verbatim, with its answer (`vm_puts`).
"""

from __future__ import annotations

import collections
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure import market as market_arm
from wmsim.azure.arm_state import ArmState
from wmsim.azure.errors import ArmError, missing, not_found, required_location
from wmsim.azure.resources import RecordedPut, _json, _key, _Vm, as_object
from wmsim.azure.vm_rules import (
    check_create_option,
    check_data_disks,
    check_priority,
    check_size,
)
from wmsim.azure.vm_views import vm_instance_view, vm_model, vm_status_only
from wmsim.market import SimOffering
from wmsim.market_sim import SimMarket

# VM resource fields that live beside `properties`, kept and echoed.
VM_RESOURCE_FIELDS = ("plan", "identity", "zones", "extendedLocation", "placement")
VM_PUTS_KEPT = 10_000  # the record of VM PUT bodies keeps the latest this many


class VirtualMachines(ArmState):
    _vm_puts: collections.deque[RecordedPut]
    market: SimMarket | None
    _market_stopped: Callable[[str], None]  # MarketBound's

    def vm_puts(self, name: str | None = None) -> list[RecordedPut]:
        """The VM PUTs handled, oldest first; only those of the VM `name` if given."""
        with self._lock:
            puts = list(self._vm_puts)
        if name is None:
            return puts
        return [put for put in puts if put.name.lower() == name.lower()]

    def _put_vm(self, rid: str) -> Response:
        body = self._body()
        sent = json.loads(json.dumps(body))
        try:
            vm, status = self._store_vm(rid, body)
        except ArmError as error:
            self._vm_puts.append(RecordedPut(rid, sent, error.status, error.code))
            raise
        self._vm_puts.append(RecordedPut(rid, sent, status))
        return self._vm_accepted(vm, status, "create")

    def preload(self, resource_id: str, body: dict[str, Any]) -> None:
        """Hold a VM as if a PUT of `body` had created it: a fast set-up for big lists. What
        the body names is not checked (such VMs were made before the test, by any means)."""
        with self._lock:
            self._store_vm(resource_id, json.loads(json.dumps(body)), check=False)

    def _store_vm(self, rid: str, body: dict[str, Any], *, check: bool = True) -> tuple[_Vm, int]:
        props = body.get("properties") or {}
        location = required_location(body)
        if check:
            self._check_vm(rid, location, props)
        os_profile = dict(props.get("osProfile") or {})
        digest = hashlib.sha256(json.dumps(os_profile, sort_keys=True).encode()).hexdigest()
        existing = self._vms.get(_key(rid))
        if existing is not None:
            return self._update_vm(existing, body, digest), 200
        behaviour = self.faults.behaviour
        quota = behaviour.quota_instances
        if quota is not None and len(self._vms) >= quota:
            # Azure counts Spot VMs against Low Priority cores, the others against the regional
            # (and family) cores; the sim holds one count and words it as the VM's would be.
            spot = str(props.get("priority", "")).lower() in ("spot", "low")
            which = "Low Priority" if spot else "Total Regional"
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation could not be completed as it results in exceeding approved {which} "
                "Cores quota. Additional details - Deployment Model: Resource Manager, "
                f"Location: {location}, Current Limit: {quota}, Current Usage: {len(self._vms)}, "
                f"Additional Required: 1, (Minimum) New Limit Required: {len(self._vms) + 1}.",
            )
        failure, offering = self._market_decides(body, location, check)
        vm = _Vm(
            id=rid,
            name=rid.rsplit("/", 1)[1],
            location=location,
            tags=dict(body.get("tags") or {}),
            properties=_strip_secrets(props),
            os_profile_digest=digest,
            user_data=props.get("userData"),
            created_at=time.time(),
            boot_s=behaviour.boot_s,
            custom_data=os_profile.get("customData"),
            resource_fields={k: body[k] for k in VM_RESOURCE_FIELDS if k in body},
        )
        self._attach_network(vm, rid)
        self._attach_os_disk(vm, rid)
        self._attach_data_disks(vm, rid)
        self._vms[_key(rid)] = vm
        if failure is not None:
            vm.failure = failure  # accepted; its provisioning fails (wmsim/azure/market.py)
            return vm, 201
        if vm.spot:
            self.preemptions.schedule(vm.id, time.monotonic() + vm.boot_s)
        if self.market is not None:
            self.market.started(market_arm.KIND, _key(rid), offering, vm.tags)
        return vm, 201

    def _market_preflight(self, name: str, resources: list[tuple[str, dict[str, Any]]]) -> None:
        """A deployment's validation, for the VMs it would make (id, body): 400
        InvalidTemplateDeployment when the market would refuse one of them at once."""
        market = self.market
        if market is None:
            return
        problems = []
        for rid, body in resources:
            location = str(body.get("location") or "")
            zone, size, spot = market_arm.offering_params(body)
            if size is None:
                continue
            offering = market.offering(market_arm.KIND, location, zone, size, spot)
            refusal = market.check(offering, 1)
            problem = refusal and market_arm.validation_problem(refusal, location, rid)
            if problem:
                problems.append(problem)
        if problems:
            raise ArmError(
                400,
                "InvalidTemplateDeployment",
                f"The template deployment '{name}' is not valid according to the validation "
                f"procedure. The tracking id is '{uuid.uuid4()}'. See inner errors for details.",
                details=problems,
            )

    def _market_decides(
        self, body: dict[str, Any], location: str, check: bool
    ) -> tuple[tuple[str, str] | None, SimOffering | None]:
        """Whether the market lets the VM be allocated: (None, its offering) when it does;
        an allocation failure to show in its provisioning; or ArmError for Azure's 409."""
        market = self.market
        if market is None or not check:
            return None, None
        zone, size, spot = market_arm.offering_params(body)
        offering = None
        if size is not None:
            offering = market.offering(market_arm.KIND, location, zone, size, spot)
        refusal = market.grant(offering, 1, 1).refusal
        if refusal is None:
            return None, offering
        refused = market_arm.synchronous_refusal(refusal, location)
        if refused is not None:
            raise refused
        return market_arm.allocation_failure(refusal), offering

    def _update_vm(self, vm: _Vm, body: dict[str, Any], digest: str) -> _Vm:
        if vm.deleted_at is not None:
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation 'PUT' is not allowed on VM '{vm.name}' since the VM is marked for "
                "deletion. You can only retry the Delete operation.",
            )
        if digest != vm.os_profile_digest:
            raise ArmError(
                409,
                "PropertyChangeNotAllowed",
                "Changing property 'osProfile.adminPassword' is not allowed.",
            )
        vm.tags = dict(body.get("tags") or vm.tags)
        return vm

    # -- what a VM PUT may name --------------------------------------------------------------

    def _check_vm(self, rid: str, location: str, props: dict[str, Any]) -> None:
        """Refuse, as ARM does, a VM body naming what does not exist or breaking its rules."""
        check_size(props)
        storage = as_object(props.get("storageProfile"))
        os_disk = storage.get("osDisk")
        if not isinstance(os_disk, dict):
            raise missing("osDisk")
        create = check_create_option(os_disk, "osDisk")
        if create == "fromimage":
            self._check_image(location, storage.get("imageReference"))
        check_data_disks(storage.get("dataDisks"))
        check_priority(props)
        os_profile = as_object(props.get("osProfile"))
        if os_profile and not os_profile.get("adminUsername"):
            raise missing("adminUsername")
        self._check_network(rid, props)

    def _get_vm(self, rid: str) -> Response:
        vm = self._vm_or_404(rid)
        expand = self._request.args.get("$expand", "").lower()
        return _json(
            vm_model(vm, instance_view=expand == "instanceview", user_data=expand == "userdata")
        )

    def _instance_view(self, rid: str) -> Response:
        return _json(vm_instance_view(self._vm_or_404(rid)))

    def _delete_vm(self, rid: str) -> Response:
        vm = self._vms.get(_key(rid))
        if vm is None:
            return self._delete_missing(rid)
        if vm.deleted_at is None:
            vm.deleted_at = time.time()
            self._market_stopped(_key(rid))
            vm.delete_s = self.faults.behaviour.delete_s
        operation = self._new_operation(_key(rid), "delete")
        response = Response(status=202)
        url = self._operation_url(vm.location, operation)
        response.headers["Azure-AsyncOperation"] = url
        response.headers["Location"] = url
        return response

    def _list_vms(self, sub: str, rg: str | None, location: str | None) -> Response:
        args = self._request.args
        status_only = args.get("statusOnly", "").lower() == "true"
        if args.get("$expand") and not args.get("$filter"):
            raise ArmError(
                400,
                "InvalidParameter",
                "The value 'instanceView' of parameter '$expand' requires a valid '$filter'.",
            )
        prefix = f"/subscriptions/{sub}/".lower()
        if rg is not None:
            prefix += f"resourcegroups/{rg}/".lower()
        vms = [
            vm
            for key, vm in self._vms.items()
            if key.startswith(prefix) and (location is None or vm.location == location)
        ]
        render = vm_status_only if status_only else vm_model
        return self._page(vms, render, {"statusOnly": "true"} if status_only else {})

    def _vm_or_404(self, rid: str) -> _Vm:
        vm = self._vms.get(_key(rid))
        if vm is None:
            raise not_found(rid)
        return vm


def _strip_secrets(props: dict[str, Any]) -> dict[str, Any]:
    # Never echo secrets: ARM does not return adminPassword or customData.
    stored = json.loads(json.dumps(props))
    os_profile = stored.get("osProfile")
    if isinstance(os_profile, dict):
        os_profile.pop("adminPassword", None)
        os_profile.pop("customData", None)
    return stored
