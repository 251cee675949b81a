"""Azure provider: one VM PUT creates a worker, one VM DELETE removes it.

The provider is the common interface (create, list, lookup, terminate) and what it composes:
the SDK clients (clients.py), the gate classed by ARM's buckets (`CALL_CLASSES`, errors.py's
`classify`), the VM's PUT body (vm_body.py, sent by vm_put.py), the states read from ARM's lists
(listing.py, states.py), the hooks of the take-over of worker-manager's VMs
(`adoption`: wm/take_over/adoption/azure.py), and the
ARM-template form: launch configs with `armDeployment` are launched as one template deployment
per worker (deployments.py, its rules arm.py); this module lists, looks up and deletes their VMs
with the rest, in every resource group they are deployed into.

Long-running operations are never awaited: every `begin_*` call uses `polling=False`, because
an `LROPoller` started with polling on spawns a background thread that keeps polling ARM until
the operation ends. The initial response is all wm needs; later state comes from the scan.

Listing (a departure from "filter on the deployment tag server-side"): ARM's VM lists take no
tag filter and no page size (ARM picks the page size). The server-side filter is the
resource group, and the deployment tag is checked on every VM client-side. `statusOnly=true`
lists carry power states but no tags (azure-sdk-for-go#18565), and the model list carries tags
but no power state, so a scan reads both, by pages, and joins them by resource id:
pages(each resource group) + pages(subscription statuses) calls, never one per VM. The groups
are the provider's and those ARM-template launch configs deploy into, as the scan's records
say (the pools' launch configs and the unit's rows: `UnitRecords`), never what this process
happened to deploy or look up; for those, the scan also reads the groups' deployments, by
pages (wm/providers/azure/arm.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from enum import Enum
from functools import partial
from typing import TYPE_CHECKING, Any

from wm.calls import CallClass
from wm.config.loader import DEFAULT_ROOT_URL
from wm.errors import CloudError, ConfigError, ErrorCategory, ErrorScope
from wm.kinds import azure as azure_kind
from wm.kinds.azure import AzureProviderConfig
from wm.model import CloudInstance, LaunchSpec, Offering, WorkerRef, WorkerState
from wm.ops.telemetry import log
from wm.providers.azure import errors as azure_errors
from wm.providers.azure import launch_failures
from wm.providers.azure.arm import (
    TORN_DOWN_TYPES,
    VM_TYPE,
    arm_deployment,
    deployment_groups,
    same_region,
)
from wm.providers.azure.arm import parse_resource_id as _parse_resource_id
from wm.providers.azure.clients import CALL_CONCURRENCY, AzureClients
from wm.providers.azure.deployments import ArmDeployments
from wm.providers.azure.errors import IN_USE_CODES, classify
from wm.providers.azure.listing import (
    fetch_json_page,
    json_fields,
    json_statuses,
    model_fields,
    vm_list_request,
)
from wm.providers.azure.names import vm_name
from wm.providers.azure.signals import CALL_CLASSES as SIGNAL_CALL_CLASSES
from wm.providers.azure.states import VM_ID, Listed, joined, model_of, view_statuses
from wm.providers.azure.vm_body import admin_password, admin_username, vm_body
from wm.providers.azure.vm_put import PutVm, put_vm
from wm.providers.base import (
    NO_RECORDS,
    Answered,
    LaunchBatch,
    LaunchResult,
    TerminateResult,
    UnitRecords,
    not_listening,
    owned,
    ownership_tags,
    telling,
)
from wm.providers.gate import Gate, provider_gate
from wm.providers.meter import carry
from wm.take_over.marks import imported_from

if TYPE_CHECKING:
    from wm.take_over.adoption.azure import AzureAdoption

# provider_data keys of workers created the old multi-step way (a str or a list of names).
OLD_NIC_NAMES = "nic_names"
OLD_PUBLIC_IP_NAMES = "public_ip_names"
OLD_DISK_NAMES = "disk_names"
GONE_LEAVING_RESOURCES = "vm-gone-resources-left"  # stop reason: the VM went, its NIC etc. did not

# Which of Azure's buckets each operation draws from: Resource Manager's, and for VMs Compute's
# own policy too.
CALL_CLASSES: Mapping[str, tuple[CallClass, ...]] = {
    "VirtualMachines_CreateOrUpdate": (CallClass.WRITE, CallClass.PUT_VM),
    "VirtualMachines_Delete": (CallClass.DELETE, CallClass.DELETE_VM),
    "NetworkInterfaces_Delete": (CallClass.DELETE,),
    "PublicIPAddresses_Delete": (CallClass.DELETE,),
    "Disks_Delete": (CallClass.DELETE,),
    "VirtualMachines_Get": (CallClass.READ, CallClass.GET_VM),
    "VirtualMachines_List": (CallClass.READ, CallClass.LIST_VMS),
    "VirtualMachines_ListAll": (CallClass.READ, CallClass.LIST_VMS),
    "Deployments_CreateOrUpdate": (CallClass.WRITE,),
    "Deployments_Get": (CallClass.READ,),
    "Deployments_ListByResourceGroup": (CallClass.READ,),
    "Deployments_Delete": (CallClass.DELETE,),
    "DeploymentOperations_List": (CallClass.READ,),
    "ResourceGroups_CheckExistence": (CallClass.READ,),
    "ResourceGroups_List": (CallClass.READ,),  # the sweep for unrecorded deployments
    "ResourceGroups_CreateOrUpdate": (CallClass.WRITE,),
    "NetworkInterfaces_List": (CallClass.READ,),
    "PublicIPAddresses_List": (CallClass.READ,),
    "Disks_ListByResourceGroup": (CallClass.READ,),
    **SIGNAL_CALL_CLASSES,  # the launch choice's signal reads (signals.py)
}


def make(
    config: AzureProviderConfig, deployment_id: str, root_url: str = DEFAULT_ROOT_URL
) -> AzureProvider:
    if config.credentials == "simulated" and not config.endpoint:
        # Fake credentials must never be sent to the real Entra ID / ARM.
        raise ConfigError([f"providers.{config.id}.endpoint: required with simulated credentials"])
    return AzureProvider(config, deployment_id, make_gate(config), AzureClients(config), root_url)


def make_gate(config: AzureProviderConfig) -> Gate:
    """The gate of one Azure provider's calls, classed by ARM's buckets; whoever calls ARM
    for this provider (its scans and passes, the web process's look-ups) uses one of these."""
    return provider_gate(config, classify, CALL_CLASSES)


class AzureProvider:
    """VMs in one subscription, owned by the deployment tag: in the provider's resource group,
    and in the groups ARM-template launch configs deploy into."""

    create_batch_max = azure_kind.DESCRIPTION.create_batch_max

    def __init__(
        self,
        config: AzureProviderConfig,
        deployment_id: str,
        gate: Gate,
        clients: AzureClients,
        root_url: str = DEFAULT_ROOT_URL,
    ) -> None:
        self.id = config.id
        self.root_url = root_url
        self.regions = config.regions
        self.deployment_id = deployment_id
        self.subscription_id = config.subscription_id
        self.resource_group = self._rg = config.resource_group
        # The take-over of a legacy worker-manager's VMs (adopt_legacy), set where providers
        # are built (wm/providers/__init__.py); None: wm's own VMs only.
        self.adoption: AzureAdoption | None = None
        self.gate = gate
        self.clients = self._clients = clients
        self.pool = self._pool = ThreadPoolExecutor(
            CALL_CONCURRENCY, thread_name_prefix=f"azure-{config.id}"
        )
        self._arm = ArmDeployments(self)

    # -- create ------------------------------------------------------------------------------

    def create(self, batch: LaunchBatch, answered: Answered = not_listening) -> list[LaunchResult]:
        if arm_deployment(batch.spec.launch_config):
            return self._arm.create(batch, answered)
        make_body = partial(self._vm_body, batch)
        create_one = telling(answered, lambda i: self._create_one(i.worker_id, make_body))
        return list(self._pool.map(carry(create_one), batch.intents))

    def _create_one(self, worker_id: str, make_body: Callable[[str], dict]) -> LaunchResult:
        name = vm_name(worker_id)
        try:
            vm = self.gate.call(
                "VirtualMachines_CreateOrUpdate", self._put_vm, name, make_body(worker_id)
            )
        except CloudError as error:
            if error.code == "PropertyChangeNotAllowed":
                # The VM exists already (a retried batch): its admin password, chosen anew for
                # each PUT, is immutable. The existing VM is the answer, if it is ours.
                return self._existing(worker_id, name, error)
            return LaunchResult(worker_id, None, error=error.not_found_as_config())
        data = {VM_ID: vm.vm_id} if vm.vm_id else {}
        return LaunchResult(worker_id, vm.id, provider_data=data, tc_worker_id=vm.name)

    def _existing(self, worker_id: str, name: str, conflict: CloudError) -> LaunchResult:
        try:
            vm = self.get_vm(name)
        except CloudError as error:
            error.maybe_applied = True  # ARM said the VM exists: it may be this one
            return LaunchResult(worker_id, None, error=error)
        if vm is None or not self.owns(vm):
            return LaunchResult(worker_id, None, error=conflict)
        return LaunchResult(worker_id, vm.id, provider_data=_vm_data(vm), tc_worker_id=vm.name)

    def _put_vm(self, name: str, body: dict[str, Any]) -> PutVm:
        send = self._clients.compute.send_request
        return put_vm(send, self.subscription_id, self._rg, name, body)

    def worker_tags(self, batch: LaunchBatch, worker_id: str, location: str) -> dict[str, str]:
        """The tags of every resource of a worker: the launch config's own, under
        worker-manager's (what worker-runner reads) and then wm's ownership tags."""
        spec = batch.spec
        return {
            **dict(spec.launch_config.get("tags") or {}),
            **azure_kind.azure_tags(
                root_url=self.root_url,
                pool_id=batch.pool_id,
                provider_id=self.id,
                location=location,
                launch_config_id=spec.launch_config_id,
                owner=spec.pool_owner,
            ),
            **ownership_tags(
                self.deployment_id, self.id, batch.pool_id, spec.launch_config_id, worker=worker_id
            ),
        }

    def _vm_body(self, batch: LaunchBatch, worker_id: str) -> dict:
        spec = batch.spec
        launch_config = spec.launch_config
        # The worker group is the launch config's location (a required key).
        location = str(launch_config.get("location") or spec.region)
        tags = self.worker_tags(batch, worker_id, location)
        custom_data = azure_kind.azure_custom_data(
            root_url=self.root_url, pool_id=batch.pool_id, provider_id=self.id, location=location
        )
        return vm_body(
            launch_config=launch_config,
            location=location,
            worker_id=worker_id,
            tags=tags,
            admin_username=admin_username(),
            admin_password=admin_password(),
            custom_data=custom_data,
        )

    # -- list --------------------------------------------------------------------------------

    def list_pages(
        self, region: str, records: UnitRecords = NO_RECORDS
    ) -> Iterator[list[CloudInstance]]:
        own = self._rg.lower()
        # Where ARM deployments are: from the pools' launch configs and the rows, never from
        # what this process deployed (a scanner deploys nothing).
        arm_groups = deployment_groups(
            self._rg, region, records.launch_configs, (r.provider_data for r in records.rows)
        )
        groups = [self._rg, *(g for g in arm_groups if g.lower() != own)]
        legacy: list[CloudInstance] = []
        if arm_groups:
            # ARM deployments are joined with the unit's VMs as a whole (a deployment without
            # its VM is a worker too): that join holds the unit's instances, not its models.
            vms = self.list_groups(region, groups)
            yield self._arm.instances(region, [v for v in vms if not v.legacy], arm_groups)
            legacy = [v for v in vms if v.legacy]
        else:
            for page in self.group_pages(region, groups):
                yield [v for v in page if not v.legacy]
                legacy += [v for v in page if v.legacy]
        if legacy and self.adoption is not None:
            # One NIC list per resource group for all of them, after the VMs' pages.
            yield self.adoption.with_records(legacy)

    def list_instances(self, region: str, records: UnitRecords = NO_RECORDS) -> list[CloudInstance]:
        return [i for page in self.list_pages(region, records) for i in page]

    def list_groups(self, region: str, groups: Sequence[str]) -> list[CloudInstance]:
        """This deployment's VMs of one region in these resource groups."""
        return [i for page in self.group_pages(region, groups) for i in page]

    def group_pages(self, region: str, groups: Sequence[str]) -> Iterator[list[CloudInstance]]:
        """This deployment's VMs of one region in these resource groups: a paged list per
        group (tags), then the subscription's status list (power states), joined by id, a page
        of statuses at a time. Both lists are read as JSON for the fields wm reads (listing.py),
        and of the models' pages only what the join needs is kept (`Listed`)."""
        subscription = self.subscription_id

        def list_group(group: str) -> Callable[[], Any]:
            return lambda: vm_list_request(subscription, group)

        listed: dict[str, Listed] = {}
        for group in groups:
            for page in self.json_pages("VirtualMachines_List", list_group(group)):
                for vm in map(json_fields, page):
                    if self.owns(vm) and same_region(vm.location, region):
                        listed[vm.id.lower()] = model_of(vm, region)
                del page
        if self.adoption is not None:  # the take-over's: a legacy worker-manager's VMs
            listed.update(self.adoption.listed(region))
        if not listed:
            return
        # A VM created or deleted between the two lists is left out; the scan looks it up.
        for page in self.json_pages(
            "VirtualMachines_ListAll",
            lambda: vm_list_request(subscription, None, status_only="true"),
        ):
            statuses = {
                key: json_statuses(vm)
                for vm in page
                if (key := vm["id"].lower()) in listed and vm.get("properties") is not None
            }
            del page
            yield [joined(self.id, listed.pop(key), found) for key, found in statuses.items()]

    def all_pages(self, operation: str, make_pager: Callable[[], Any]) -> list[Any]:
        return [item for page in self.pages(operation, make_pager) for item in page]

    def pages(self, operation: str, make_pager: Callable[[], Any]) -> Iterator[list[Any]]:
        """An ARM list a page at a time, each page one call through the gate, asked for once
        the caller is done with the one before."""
        token: str | None = None
        while True:
            page, token = self.gate.call(operation, fetch_page, make_pager, token)
            yield page
            del page
            if not token:
                return

    def json_pages(
        self, operation: str, first_request: Callable[[], Any]
    ) -> Iterator[list[Mapping[str, Any]]]:
        """`pages`, but each page the answer's JSON items, not the SDK's models (listing.py)."""
        send = self._clients.compute.send_request
        token: str | None = None
        while True:
            page, token = self.gate.call(operation, fetch_json_page, send, first_request, token)
            yield page
            del page
            if not token:
                return

    # -- lookup ------------------------------------------------------------------------------

    def lookup(self, refs: Sequence[WorkerRef]) -> dict[str, CloudInstance]:
        deployed = [(ref, self._arm.ref_of(ref)) for ref in refs]
        arm = [(ref, dep) for ref, dep in deployed if dep is not None]
        plain = [ref for ref, dep in deployed if dep is None]
        found = self._arm.lookup(arm) if arm else {}
        answers = self._pool.map(carry(self._lookup_one), plain)
        for ref, instance in zip(plain, answers, strict=True):
            if instance is not None:
                found[ref.worker_id] = instance
        # Intents whose create was never answered (no cloud id): an ARM deployment may be
        # making their VM in any group. A row with a cloud id had its VM, and that is gone.
        unrecorded = [
            r
            for r in plain
            if r.worker_id not in found and r.cloud_id is None and not r.provider_data
        ]
        if unrecorded:
            names = {r.worker_id: ref_vm_name(r) for r in unrecorded}
            found.update(self._arm.find_unrecorded(unrecorded, names))
        return found

    def _lookup_one(self, ref: WorkerRef) -> CloudInstance | None:
        group = ref_group(ref, self._rg)
        if imported_from(ref.provider_data) is not None:  # the take-over's (none without it)
            if self.adoption is None:
                return None
            group = ref_group(ref, self.adoption.group(ref, self._rg))
        vm = self.get_vm(self._vm_name(ref), expand="instanceView", group=group)
        if vm is None and _old_style_resources(ref):
            # The VM is gone but a worker made the old multi-step way had a NIC, public IP and
            # disk that do not go with it: until terminate finds them gone too, the worker is
            # not gone; it shows as stopped, so the scan deletes what is left.
            return CloudInstance(
                worker_id=ref.worker_id,
                cloud_id=ref.cloud_id or self._vm_name(ref),
                region=ref.region,
                state=WorkerState.STOPPED,
                reason=GONE_LEAVING_RESOURCES,
                provider_data=dict(ref.provider_data),
            )
        if vm is None:
            return None
        return self._any_instance(vm, vm.properties.instance_view, ref.region)

    def vm_instance(self, group: str, name: str, region: str) -> CloudInstance | None:
        """One VM of this deployment (or, with adopt_legacy, of its legacy worker-manager),
        looked up by name in a resource group."""
        vm = self.get_vm(name, expand="instanceView", group=group)
        if vm is None:
            return None
        return self._any_instance(vm, vm.properties.instance_view, region)

    def recorded(self, instances: Sequence[CloudInstance]) -> None:
        """Rows now hold what their ARM deployments made: those may go (arm.py)."""
        self._arm.recorded(instances)

    # -- terminate ---------------------------------------------------------------------------

    def terminate(self, refs: Sequence[WorkerRef]) -> list[TerminateResult]:
        return list(self._pool.map(carry(self._terminate_any), refs))

    def _terminate_any(self, ref: WorkerRef) -> TerminateResult:
        deployment = self._arm.ref_of(ref)
        if deployment is not None:
            return self._arm.terminate(ref, deployment)
        parsed = _parse_resource_id(ref.cloud_id or "")
        if parsed is not None and parsed.type in TORN_DOWN_TYPES - {VM_TYPE}:
            return self._arm.delete_leftover(ref)  # an orphan NIC, public IP or disk
        return self._terminate_one(ref)

    def _terminate_one(self, ref: WorkerRef) -> TerminateResult:
        # The VM the cloud named, where known (an orphan found by its tag may carry any name);
        # else the name wm gave the worker's VM.
        if imported_from(ref.provider_data) is not None and self.adoption is None:
            return TerminateResult(ref.worker_id, gone=True, nothing_sent=True)  # not wm's
        name, group = self._vm_name(ref), ref_group(ref, self._rg)
        try:
            vm = self.get_vm(name, group=group)
            if vm is None:
                return TerminateResult(ref.worker_id, gone=self._delete_leftovers(ref))
            if not self.may_delete(vm):
                # Not this deployment's VM: never touched. Nothing of this worker is there.
                log("azure-vm-not-owned", provider=self.id, worker=ref.worker_id, vm=name)
                return TerminateResult(ref.worker_id, gone=True)
            if self.provisioning_state(vm) == "deleting":
                return TerminateResult(ref.worker_id, gone=False, nothing_sent=True)
            try:
                self.gate.call("VirtualMachines_Delete", self.delete, "vm", name, group)
            except CloudError as error:
                if error.category is not ErrorCategory.NOT_FOUND:
                    raise
                # Deleted by someone else since the GET: what it left is ours to delete.
                return TerminateResult(ref.worker_id, gone=self._delete_leftovers(ref))
            return TerminateResult(ref.worker_id, gone=False)
        except CloudError as error:
            return TerminateResult(ref.worker_id, gone=False, error=error)

    def _delete_leftovers(self, ref: WorkerRef) -> bool:
        """Delete what an old-style worker left beside its VM; True when none of it is left."""
        data = ref.provider_data
        first = [("nic", n) for n in _names(data.get(OLD_NIC_NAMES))]
        first += [("disk", n) for n in _names(data.get(OLD_DISK_NAMES))]
        # A public IP can only go once the NIC holding it is gone.
        then = [("ip", n) for n in _names(data.get(OLD_PUBLIC_IP_NAMES))]
        gone = all([self._delete_leftover(kind, name) for kind, name in first])
        return all([self._delete_leftover(kind, name) for kind, name in then]) and gone

    def _delete_leftover(self, kind: str, name: str) -> bool:
        operation = {
            "nic": "NetworkInterfaces_Delete",
            "ip": "PublicIPAddresses_Delete",
            "disk": "Disks_Delete",
        }[kind]
        try:
            status = self.gate.call(operation, self.delete, kind, name)
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return True  # deleted already (ARM answers 404 where it does not answer 204)
            if error.code.lower() in IN_USE_CODES:
                return False
            raise
        # 200: deleted synchronously, 204: there was nothing; 202 means still deleting.
        return status in (200, 204)

    def delete(self, kind: str, name: str, group: str | None = None) -> int:
        """One DELETE (`kind`: vm, disk, nic or ip), never awaited; its HTTP status."""
        clients = self._clients
        operations = {
            "vm": lambda: clients.compute.virtual_machines,
            "disk": lambda: clients.compute.disks,
            "nic": lambda: clients.network.network_interfaces,
            "ip": lambda: clients.network.public_ip_addresses,
        }
        poller = operations[kind]().begin_delete(
            group or self._rg, name, polling=False, cls=_status_code
        )
        return poller.result()

    # -- shared ------------------------------------------------------------------------------

    def get_vm(self, name: str, expand: str | None = None, group: str | None = None) -> Any:
        """The VM model, or None when ARM says it does not exist."""
        get = self._clients.compute.virtual_machines.get
        group = group or self._rg
        try:
            if expand:
                return self.gate.call("VirtualMachines_Get", get, group, name, expand=expand)
            return self.gate.call("VirtualMachines_Get", get, group, name)
        except CloudError as error:
            if error.category is ErrorCategory.NOT_FOUND:
                return None
            raise

    def owns(self, vm: Any) -> bool:
        return self.owns_tags(vm.tags or {})

    def may_delete(self, vm: Any) -> bool:
        """A VM a worker's teardown may delete: this deployment's, or an adopted one's."""
        if self.owns(vm):
            return True
        return self.adoption is not None and self.adoption.pool_of(vm.tags or {}) is not None

    def _vm_name(self, ref: WorkerRef) -> str:
        """The VM name of a worker (an imported worker's: the take-over says)."""
        if self.adoption is not None and imported_from(ref.provider_data) is not None:
            return self.adoption.teardown_name(ref, named_vm(ref))
        return ref_vm_name(ref)

    def _any_instance(self, vm: Any, instance_view: Any, region: str) -> CloudInstance | None:
        """The VM as the scan sees it: wm's, a legacy worker-manager's under its import key
        (the take-over's `listed_vm`), or None."""
        fields = model_fields(vm)
        if self.owns(fields):
            listed = model_of(fields, region)
        elif self.adoption is None or (theirs := self.adoption.listed_vm(fields, region)) is None:
            return None
        else:
            listed = theirs
        return joined(self.id, listed, view_statuses(instance_view))

    def owns_tags(self, tags: Mapping[str, str]) -> bool:
        """Whether a resource with these tags is this deployment's and this provider's."""
        return owned(tags, self.deployment_id, self.id)

    @staticmethod
    def provisioning_state(vm: Any) -> str:
        return _text(vm.properties.provisioning_state).lower()

    def offering(self, launch_config: Mapping[str, Any], worker_group: str) -> Offering | None:
        return azure_kind.DESCRIPTION.offering(launch_config, worker_group)

    def error_scope(self, error: CloudError, spec: LaunchSpec) -> ErrorScope | None:
        return azure_errors.error_scope(error.code, error.message, spec)

    def failed_launch(self, reason: str | None) -> CloudError | None:
        return launch_failures.failed_launch(self.id, reason)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.gate.close()
        self._clients.close()


# -- pure helpers ----------------------------------------------------------------------------


def fetch_page(make_pager: Callable[[], Any], token: str | None) -> tuple[list[Any], str | None]:
    """One page (one HTTP call) of an ARM list from its continuation token.

    A fresh pager per call, so a call the gate abandoned at its timeout cannot move the
    paging state under the retry.
    """
    pages = make_pager().by_page(continuation_token=token)
    page = next(pages, None)
    if page is None:
        return [], None
    return list(page), pages.continuation_token


def _old_style_resources(ref: WorkerRef) -> bool:
    data = ref.provider_data
    return any(
        _names(data.get(key)) for key in (OLD_NIC_NAMES, OLD_PUBLIC_IP_NAMES, OLD_DISK_NAMES)
    )


def named_vm(ref: WorkerRef) -> str | None:
    """The VM name a worker's resource id holds, when the cloud told it."""
    if ref.cloud_id and "/virtualmachines/" in ref.cloud_id.lower():
        return ref.cloud_id.rstrip("/").rsplit("/", 1)[1]
    return None


def ref_vm_name(ref: WorkerRef) -> str:
    """The VM name of a worker of wm's: from its resource id when the cloud told it, else
    derived from its worker id."""
    return named_vm(ref) or vm_name(ref.worker_id)


def ref_group(ref: WorkerRef, default: str) -> str:
    """The resource group of a worker's VM: from its resource id when the cloud told it."""
    parsed = _parse_resource_id(ref.cloud_id or "")
    return parsed.resource_group if parsed is not None else default


def _vm_data(vm: Any) -> dict[str, Any]:
    vm_id = vm.properties.vm_id if vm.properties is not None else None
    return {VM_ID: vm_id} if vm_id else {}


def _text(value: Any) -> str:
    # The SDK's enums are str subclasses whose str() is the member name, not the value.
    return value.value if isinstance(value, Enum) else str(value or "")


def _names(value: Any) -> list[str]:
    if not value:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _status_code(pipeline_response: Any, deserialized: Any, headers: Any) -> int:
    return pipeline_response.http_response.status_code
