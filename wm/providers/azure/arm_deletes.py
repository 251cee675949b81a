"""The ARM-template form's deletes: one DELETE of a VM, NIC, public IP, disk or deployment
through the provider's gate, read as what it found; a teardown plan's deletes in the order ARM
allows (VMs, then NICs and disks, then public IPs)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from wm.errors import CloudError, ErrorCategory
from wm.ops.telemetry import log
from wm.providers.azure.arm import (
    DISK_TYPE,
    IP_TYPE,
    NIC_TYPE,
    VM_TYPE,
    DeploymentRef,
    Teardown,
    parse_resource_id,
)
from wm.providers.azure.arm_host import ArmHost
from wm.providers.azure.errors import IN_USE_CODES


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


class ArmDeletes:
    """The deletes of one Azure provider's ARM-template workers."""

    def __init__(self, provider: ArmHost) -> None:
        self._p = provider

    def plan(self, plan: Teardown) -> tuple[bool, list[Deleted]]:
        """Delete a plan's VMs; once they are gone, its NICs and disks, then its public IPs.
        Whether all of it is gone, and what each delete found."""
        results = [self.vm(vm_id) for vm_id in plan.vms]
        if all(r.gone for r in results):
            results += [self.by_id(i) for i in plan.nics_and_disks]
            results += [self.by_id(i) for i in plan.public_ips]
        return all(r.gone for r in results) and len(results) == len(plan.all), results

    def vm(self, vm_id: str) -> Deleted:
        parsed = parse_resource_id(vm_id)
        assert parsed is not None
        vm = self._p.get_vm(parsed.name, group=parsed.resource_group)
        if vm is None:
            return Deleted.ABSENT
        if not self._p.may_delete(vm):
            log("azure-vm-not-owned", provider=self._p.id, vm=vm_id)
            return Deleted.NOT_OURS
        if self._p.provisioning_state(vm) == "deleting":
            return Deleted.UNDER_WAY
        return self.by_id(vm_id)

    def by_id(self, resource_id: str) -> Deleted:
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

    def deployment(self, ref: DeploymentRef) -> Deleted:
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


def _status_code(pipeline_response: Any, deserialized: Any, headers: Any) -> int:
    return pipeline_response.http_response.status_code
