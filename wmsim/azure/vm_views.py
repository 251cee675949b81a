"""A simulated VM as ARM shows it: its phase, provisioning state and instance view statuses
(where a VM in its boot, run, failure or delete stands), its model (GET, lists, deployments'
reference()), the lean statusOnly form, and what tests see of it (`SimVm`).
"""

from __future__ import annotations

import json
import time
from typing import Any

from wmsim.azure.resources import VM_TYPE, _now_iso, _Vm
from wmsim.behaviour import SimVm, lifecycle_state


def vm_phase(vm: _Vm) -> str:
    return lifecycle_state(time.time(), vm.created_at, vm.boot_s, vm.deleted_at, vm.delete_s)


def provisioning_state(vm: _Vm) -> str:
    phase = vm_phase(vm)
    if phase == "stopping":
        return "Deleting"
    if vm.failure:
        return "Failed"
    return "Creating" if phase == "pending" else "Succeeded"


def vm_statuses(vm: _Vm) -> list[dict[str, Any]]:
    provisioning = provisioning_state(vm)
    if provisioning == "Failed":
        code, message = vm.failure or ("", "")
        return [
            {
                "code": f"ProvisioningState/failed/{code}",
                "level": "Error",
                "displayStatus": "Provisioning failed",
                "message": message,
                "time": _now_iso(),
            }
        ]
    if provisioning == "Deleting":
        power = "stopping"
    elif provisioning == "Creating":
        power = "starting"
    else:
        power = vm.power or "running"
    return [
        {
            "code": f"ProvisioningState/{provisioning.lower()}",
            "level": "Info",
            "displayStatus": f"Provisioning {provisioning.lower()}",
            "time": _now_iso(vm.created_at + vm.boot_s),
        },
        {"code": f"PowerState/{power}", "level": "Info", "displayStatus": f"VM {power}"},
    ]


def vm_instance_view(vm: _Vm) -> dict[str, Any]:
    computer = (vm.properties.get("osProfile") or {}).get("computerName", vm.name)
    return {"computerName": computer, "statuses": vm_statuses(vm)}


def vm_model(vm: _Vm, *, instance_view: bool = False, user_data: bool = False) -> dict[str, Any]:
    props = json.loads(json.dumps(vm.properties))
    props.pop("userData", None)
    props.update(
        vmId=vm.vm_id,
        provisioningState=provisioning_state(vm),
        timeCreated=_now_iso(vm.created_at),
    )
    if instance_view:
        props["instanceView"] = vm_instance_view(vm)
    if user_data and vm.user_data is not None:
        props["userData"] = vm.user_data
    return {
        "id": vm.id,
        "name": vm.name,
        "type": VM_TYPE,
        "location": vm.location,
        "tags": dict(vm.tags),
        **json.loads(json.dumps(vm.resource_fields)),
        "properties": props,
    }


def vm_status_only(vm: _Vm) -> dict[str, Any]:
    # What statusOnly=true carries: the instance view, no tags, no model.
    return {
        "id": vm.id,
        "name": vm.name,
        "type": VM_TYPE,
        "location": vm.location,
        "properties": {"instanceView": vm_instance_view(vm)},
    }


def sim_vm(vm: _Vm) -> SimVm:
    phase = vm_phase(vm)
    if vm.failure or (vm.power and phase == "running"):
        phase = "stopped"
    return SimVm(
        cloud_id=vm.id,
        name=vm.name,
        region=vm.location,
        state=phase,
        tags=dict(vm.tags),
        spot=vm.spot,
    )


def sim_vm_json(vm: SimVm) -> dict[str, Any]:
    return {
        "cloud_id": vm.cloud_id,
        "name": vm.name,
        "region": vm.region,
        "state": vm.state,
        "tags": dict(vm.tags),
        "spot": vm.spot,
    }
