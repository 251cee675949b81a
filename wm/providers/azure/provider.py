"""Azure provider: one VM PUT creates a worker, one VM DELETE removes it.

The VM body is the Taskcluster launch config (resource form) verbatim, plus exactly what
worker-manager overrides (services/worker-manager/src/providers/azure/index.js
`#provisionSequentialWorker`): computer name, admin credentials, boot data, disk names, the
network interface on the launch config's `subnetId`, and its tags on every resource. Where
worker-manager creates a public IP, a NIC and then the VM, each on a later pass, wm puts the
NIC inline (`networkInterfaceConfigurations`), a public IP only where `workerManager.publicIp`,
and `deleteOption: Delete` on NIC, IP and every disk, so ARM deletes them with the VM. Names
are derived from the worker id, which makes the PUT idempotent: a second PUT of the same name
updates the VM instead of making another one. Launch configs in the ARM-template form
(`armDeployment`) are launched as one template deployment per worker (wm/providers/azure/arm.py);
this module lists, looks up and deletes their VMs with the rest, in every resource group they
are deployed into.

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

import copy
import email.utils
import secrets
import string
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from enum import Enum
from functools import partial
from typing import Any

from wm.calls import CallClass
from wm.config.loader import DEFAULT_ROOT_URL
from wm.errors import CloudError, ConfigError, ErrorCategory, UnknownCloudState
from wm.kinds import azure as azure_kind
from wm.kinds.azure import AzureProviderConfig
from wm.model import CloudInstance, WorkerRef, WorkerState
from wm.ops.telemetry import log
from wm.providers.azure.arm import (
    OS_DISK_KEY,
    TORN_DOWN_TYPES,
    VM_TYPE,
    DeploymentRef,
    Made,
    arm_deployment,
    deployment_groups,
    deployment_name,
)
from wm.providers.azure.arm import parse_resource_id as _parse_resource_id
from wm.providers.azure.deployments import ArmDeployments
from wm.providers.azure.listing import (
    VmFields,
    fetch_json_page,
    json_fields,
    json_statuses,
    model_fields,
    vm_list_request,
)
from wm.providers.azure.names import VM_NAME_PREFIX, computer_name, vm_name
from wm.providers.azure.vm_put import PutVm, put_vm
from wm.providers.base import (
    NO_RECORDS,
    TAG_DEPLOYMENT,
    TAG_LAUNCH_CONFIG,
    TAG_POOL,
    TAG_PROVIDER,
    TAG_WORKER,
    LaunchBatch,
    LaunchResult,
    TerminateResult,
    UnitRecords,
    imported_tc_worker_id,
    made_by_wm,
    owned,
)
from wm.providers.gate import Gate, provider_gate
from wm.providers.meter import carry
from wm.take_over.marks import imported_from, imported_worker_id

CALL_CONCURRENCY = 16  # SDK calls one provider method keeps in flight (the gate bounds it too)
POLLING_INTERVAL_S = 1.0  # only for a poller someone waits on; wm itself never waits
NETWORK_API_VERSION = "2020-11-01"  # the oldest that accepts networkInterfaceConfigurations
ADMIN_USERNAME_CHARS = 20  # Windows' limit; worker-manager draws 20 random characters too
MESSAGE_MAX_CHARS = 500
DEFAULT_ENDPOINT = "https://management.azure.com"
# Fixed fake credentials of the simulated ARM; they grant nothing anywhere else.
SIMULATED_TENANT_ID = "00000000-0000-0000-0000-000000000001"
SIMULATED_CLIENT_ID = "00000000-0000-0000-0000-000000000002"
SIMULATED_CLIENT_SECRET = "simulated-client-secret"
# provider_data keys of workers created the old multi-step way (a str or a list of names).
OLD_NIC_NAMES = "nic_names"
OLD_PUBLIC_IP_NAMES = "public_ip_names"
OLD_DISK_NAMES = "disk_names"
VM_ID = "vmId"
GONE_LEAVING_RESOURCES = "vm-gone-resources-left"  # stop reason: the VM went, its NIC etc. did not
REASON_SPOT_EVICTED = "spot-eviction"
# A legacy VM's listing: the ids of the NICs and disks it points at (never kept on a row).
LEGACY_HELD = "legacyHeld"

# Provisioning state -> worker state; None means the power state decides.
PROVISIONING_STATES: dict[str, WorkerState | None] = {
    "creating": WorkerState.REQUESTED,
    "updating": None,
    "migrating": None,
    "succeeded": None,
    "deleting": WorkerState.STOPPING,
    # A VM whose provisioning failed will never run; it still holds resources, and the scan
    # terminates stopped VMs it still lists.
    "failed": WorkerState.STOPPED,
}
POWER_STATES: dict[str, WorkerState] = {
    "starting": WorkerState.REQUESTED,
    "running": WorkerState.RUNNING,
    "stopping": WorkerState.STOPPING,
    "deallocating": WorkerState.STOPPING,
    # Stopped or deallocated VMs keep their disks (and a Spot VM its quota) until deleted; wm
    # never stops VMs itself, so these died out of band and the scan terminates them.
    "stopped": WorkerState.STOPPED,
    "deallocated": WorkerState.STOPPED,
}
QUOTA_CODES = frozenset(
    {
        "quotaexceeded",
        "skunotavailable",
        "allocationfailed",
        "zonalallocationfailed",
        "overconstrainedallocationrequest",
        "overconstrainedzonalallocationrequest",
    }
)
# 409s that clear by themselves (another operation on the resource is still running).
RETRYABLE_CONFLICT_CODES = frozenset({"anotheroperationinprogress", "retryableerror", "conflict"})
NOT_FOUND_CODES = frozenset({"resourcenotfound", "notfound"})
# A NIC or IP still attached to something being deleted: try again on the next pass.
IN_USE_CODES = frozenset({"nicinuse", "publicipaddresscannotbedeleted", "inuse"})

# How a launch config's keys reach the VM PUT (worker-manager passes the launch config to the
# SDK's VirtualMachine model, which puts each key where ARM wants it):
WM_ONLY_KEYS = ("capacityPerInstance", "workerConfig", "workerManager")  # never sent
# The VM resource's own fields, beside `properties` (`location` and `tags` are set apart).
RESOURCE_KEYS = ("plan", "identity", "zones", "extendedLocation", "placement")
# Read by worker-manager, unknown to the VM model (so the SDK drops them): `subnetId` goes to
# the NIC; the deprecated top-level `ignoreFailedProvisioningStates` is worker-manager's.
NOT_VM_KEYS = ("location", "tags", "subnetId", "ignoreFailedProvisioningStates")
# Replaced by the NIC wm defines inline.
NETWORK_OVERRIDDEN = ("networkInterfaces", "networkInterfaceConfigurations", "networkApiVersion")


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


class AzureClients:
    """The SDK clients of one provider, built in one place; network only when needed."""

    def __init__(self, config: AzureProviderConfig) -> None:
        import requests
        from azure.mgmt.compute import ComputeManagementClient
        from requests.adapters import HTTPAdapter
        from urllib3.util.retry import Retry

        self._config = config
        # One pooled session for every thread; retries off, so the gate is the only policy.
        self._session = requests.Session()
        adapter = HTTPAdapter(
            pool_maxsize=CALL_CONCURRENCY + config.gate.concurrency,
            max_retries=Retry(total=False, redirect=False, raise_on_status=False),
        )
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        self.credential = _credential(config)
        self.compute = ComputeManagementClient(
            self.credential, config.subscription_id, **self._client_options()
        )
        self._network: Any = None
        self._deployments: Any = None
        self._resources: Any = None
        self._lock = threading.Lock()

    @property
    def network(self) -> Any:
        with self._lock:
            if self._network is None:
                from azure.mgmt.network import NetworkManagementClient

                self._network = NetworkManagementClient(
                    self.credential, self._config.subscription_id, **self._client_options()
                )
            return self._network

    @property
    def deployments(self) -> Any:
        """Template deployments and their operations (ARM-template launch configs only)."""
        with self._lock:
            if self._deployments is None:
                from azure.mgmt.resource.deployments import DeploymentsMgmtClient

                self._deployments = DeploymentsMgmtClient(
                    self.credential, self._config.subscription_id, **self._client_options()
                )
            return self._deployments

    @property
    def resources(self) -> Any:
        """Resource groups (an ARM-template launch config's own group is made if missing)."""
        with self._lock:
            if self._resources is None:
                from azure.mgmt.resource.resources import ResourceManagementClient

                self._resources = ResourceManagementClient(
                    self.credential, self._config.subscription_id, **self._client_options()
                )
            return self._resources

    def _client_options(self) -> dict[str, Any]:
        from azure.core.pipeline.transport import RequestsTransport

        config = self._config
        transport = RequestsTransport(
            session=self._session,
            session_owner=False,
            connection_timeout=config.gate.timeout_s,
            read_timeout=config.gate.timeout_s,
            connection_verify=config.ca_bundle or True,
        )
        options: dict[str, Any] = {
            "base_url": config.endpoint or DEFAULT_ENDPOINT,
            "retry_total": 0,
            "polling_interval": POLLING_INTERVAL_S,
            "transport": transport,
        }
        if config.endpoint:
            options["credential_scopes"] = [config.endpoint.rstrip("/") + "/.default"]
        return options

    def close(self) -> None:
        self.compute.close()
        for client in (self._network, self._deployments, self._resources):
            if client is not None:
                client.close()
        self.credential.close()
        self._session.close()


def _credential(config: AzureProviderConfig) -> Any:
    timeouts = {"connection_timeout": config.gate.timeout_s, "read_timeout": config.gate.timeout_s}
    if config.credentials == "simulated":
        # The real Entra ID client-credentials path, against the simulated cloud's endpoints.
        from azure.identity import ClientSecretCredential

        return ClientSecretCredential(
            SIMULATED_TENANT_ID,
            SIMULATED_CLIENT_ID,
            SIMULATED_CLIENT_SECRET,
            authority=config.authority or config.endpoint,
            disable_instance_discovery=True,
            connection_verify=config.ca_bundle or True,
            retry_total=0,
            **timeouts,
        )
    from azure.identity import DefaultAzureCredential

    extra = {"authority": config.authority} if config.authority else {}
    return DefaultAzureCredential(**extra, **timeouts)


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
        self.adopt_legacy = config.adopt_legacy
        self.gate = gate
        self.clients = self._clients = clients
        self.pool = self._pool = ThreadPoolExecutor(
            CALL_CONCURRENCY, thread_name_prefix=f"azure-{config.id}"
        )
        self._arm = ArmDeployments(self)

    # -- create ------------------------------------------------------------------------------

    def create(self, batch: LaunchBatch) -> list[LaunchResult]:
        if arm_deployment(batch.spec.launch_config):
            return self._arm.create(batch)
        make_body = partial(self._vm_body, batch)
        return list(
            self._pool.map(carry(lambda i: self._create_one(i.worker_id, make_body)), batch.intents)
        )

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
            TAG_DEPLOYMENT: self.deployment_id,
            TAG_PROVIDER: self.id,
            TAG_POOL: batch.pool_id,
            TAG_WORKER: worker_id,
            TAG_LAUNCH_CONFIG: spec.launch_config_id,
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
            admin_username=_admin_username(),
            admin_password=_admin_password(),
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
        if legacy:
            # One NIC list per resource group for all of them, after the VMs' pages.
            yield self._with_legacy_records(legacy)

    def list_instances(self, region: str, records: UnitRecords = NO_RECORDS) -> list[CloudInstance]:
        return [i for page in self.list_pages(region, records) for i in page]

    def _with_legacy_records(self, instances: Sequence[CloudInstance]) -> list[CloudInstance]:
        """worker-manager's VMs, each recording what worker-manager made for it (its NICs,
        their public IPs, its disks; and where its ARM deployment would be), for its row to
        keep: the teardown deletes from that record, as for a finished ARM deployment of
        wm's. One NIC list per resource group holding any."""
        if not instances:
            return []
        groups = {}
        for instance in instances:
            parsed = _parse_resource_id(instance.cloud_id)
            if parsed is not None:
                groups.setdefault(parsed.resource_group.lower(), parsed.resource_group)
        public_ips: dict[str, list[str]] = {}
        for group in groups.values():
            nics = self.all_pages(
                "NetworkInterfaces_List",
                lambda g=group: self._clients.network.network_interfaces.list(g),
            )
            for nic in nics:
                public_ips[str(nic.id).lower()] = [
                    ip
                    for c in nic.ip_configurations or []
                    if (ip := _id_of(getattr(c, "public_ip_address", None)))
                ]
        out = []
        for instance in instances:
            parsed = _parse_resource_id(instance.cloud_id)
            held = instance.provider_data.get(LEGACY_HELD) or []
            ips = [ip for i in held for ip in public_ips.get(str(i).lower(), [])]
            record: dict[str, Any] = {**Made("Succeeded", (instance.cloud_id, *held, *ips)).data()}
            if parsed is not None:
                # worker-manager's deployment of an ARM worker, deleted with it if still there.
                ref = DeploymentRef(parsed.resource_group, deployment_name(parsed.name))
                record.update(ref.data())
            data = {k: v for k, v in instance.provider_data.items() if k != LEGACY_HELD}
            out.append(replace(instance, provider_data=data, record=record))
        return out

    def list_groups(self, region: str, groups: Sequence[str]) -> list[CloudInstance]:
        """This deployment's VMs of one region in these resource groups."""
        return [i for page in self.group_pages(region, groups) for i in page]

    def group_pages(self, region: str, groups: Sequence[str]) -> Iterator[list[CloudInstance]]:
        """This deployment's VMs of one region in these resource groups: a paged list per
        group (tags), then the subscription's status list (power states), joined by id, a page
        of statuses at a time. Both lists are read as JSON for the fields wm reads (listing.py),
        and of the models' pages only what the join needs is kept (`_Listed`)."""
        subscription = self.subscription_id

        def list_group(group: str) -> Callable[[], Any]:
            return lambda: vm_list_request(subscription, group)

        listed: dict[str, _Listed] = {}
        for group in groups:
            for page in self.json_pages("VirtualMachines_List", list_group(group)):
                for vm in map(json_fields, page):
                    if self.owns(vm) and same_region(vm.location, region):
                        listed[vm.id.lower()] = _model_of(vm, region)
                del page
        if self.adopt_legacy:
            # worker-manager's VMs, in whatever group of the subscription its launch configs
            # put them (armDeploymentResourceGroup): one more list, of the subscription.
            for page in self.json_pages(
                "VirtualMachines_ListAll", lambda: vm_list_request(subscription, None)
            ):
                for vm in map(json_fields, page):
                    if self.legacy_pool(vm) is not None and same_region(vm.location, region):
                        listed[vm.id.lower()] = self._legacy(vm, region)
                del page
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
            yield [self._joined(listed.pop(key), found) for key, found in statuses.items()]

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
        if imported_from(ref.provider_data) is not None:
            group = ref_group(ref, str(ref.provider_data.get("resourceGroupName") or self._rg))
        vm = self.get_vm(ref_vm_name(ref), expand="instanceView", group=group)
        if vm is None and _old_style_resources(ref):
            # The VM is gone but a worker made the old multi-step way had a NIC, public IP and
            # disk that do not go with it: until terminate finds them gone too, the worker is
            # not gone; it shows as stopped, so the scan deletes what is left.
            return CloudInstance(
                worker_id=ref.worker_id,
                cloud_id=ref.cloud_id or ref_vm_name(ref),
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
        name, group = ref_vm_name(ref), ref_group(ref, self._rg)
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

    def legacy_pool(self, vm: Any) -> str | None:
        """With adopt_legacy, the pool of a VM the legacy worker-manager made for this provider
        of this deployment (its tags; wm's own carry them too, and wm's tags besides)."""
        tags = vm.tags or {}
        if not self.adopt_legacy or made_by_wm(tags):
            return None
        return azure_kind.legacy_pool(tags, self.id, self.root_url)

    def may_delete(self, vm: Any) -> bool:
        """A VM a worker's teardown may delete: this deployment's, or an adopted one's."""
        return self.owns(vm) or self.legacy_pool(vm) is not None

    def _any_instance(self, vm: Any, instance_view: Any, region: str) -> CloudInstance | None:
        """The VM as the scan sees it: wm's, a legacy worker-manager's under its import key
        (holding the ids of what it points at, for `_with_legacy_records`), or None."""
        fields = model_fields(vm)
        if self.owns(fields):
            listed = _model_of(fields, region)
        elif self.legacy_pool(fields) is not None:
            listed = self._legacy(fields, region)
        else:
            return None
        return self._joined(listed, _view_statuses(instance_view))

    def _legacy(self, vm: VmFields, region: str) -> _Listed:
        """A legacy worker-manager's VM (`legacy_pool` is not None), under its import key,
        holding the ids of what it points at (its NICs and disks)."""
        pool = self.legacy_pool(vm)
        listed = _model_of(vm, region)
        tags = vm.tags
        held = [*vm.nic_ids, *([vm.os_disk_id] if vm.os_disk_id else []), *vm.data_disk_ids]
        instance = replace(
            listed.instance,
            worker_id=imported_worker_id(pool, tags.get("worker-group") or region, vm.name),
            pool_id=pool,
            launch_config_id=tags.get("launch-config-id"),
            provider_data={**listed.instance.provider_data, LEGACY_HELD: held},
            legacy=True,
        )
        return replace(listed, instance=instance)

    def _joined(self, listed: _Listed, statuses: Iterable[Any] | None) -> CloudInstance:
        """The listed VM with its state, read from its instance view's statuses."""
        provisioning, power, failure = read_statuses(statuses)
        provisioning = provisioning or listed.provisioning_state
        state = worker_state(self.id, provisioning, power)
        reason = stop_reason(state, power, failure, listed.spot)
        return replace(
            listed.instance, state=state, reason=reason, preempted=reason == REASON_SPOT_EVICTED
        )

    def owns_tags(self, tags: Mapping[str, str]) -> bool:
        """Whether a resource with these tags is this deployment's and this provider's."""
        return owned(tags, self.deployment_id, self.id)

    @staticmethod
    def provisioning_state(vm: Any) -> str:
        return _text(vm.properties.provisioning_state).lower()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.gate.close()
        self._clients.close()


# -- pure helpers ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Listed:
    """A listed VM model as a scan keeps it until its status comes: the instance it is, short
    of its state, and what that state is read from besides the instance view."""

    instance: CloudInstance  # state, reason and preempted come from the instance view
    provisioning_state: str
    spot: bool


def _model_of(vm: VmFields, region: str) -> _Listed:
    tags = vm.tags
    data = {VM_ID: vm.vm_id} if vm.vm_id else {}
    # The managed OS disk a VM made from its image (one it attached is not its own).
    if vm.os_disk_id and vm.os_disk_create_option.lower() == "fromimage":
        data[OS_DISK_KEY] = vm.os_disk_id
    instance = CloudInstance(
        worker_id=tags.get(TAG_WORKER),
        cloud_id=vm.id,
        region=region,
        state=WorkerState.REQUESTED,
        pool_id=tags.get(TAG_POOL),
        launch_config_id=tags.get(TAG_LAUNCH_CONFIG),
        launched_at=vm.time_created,
        provider_data=data,
        tc_worker_id=vm.name,
    )
    return _Listed(instance, vm.provisioning_state, vm.priority.lower() == "spot")


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


def worker_state(provider_id: str, provisioning: str, power: str | None) -> WorkerState:
    key = provisioning.lower()
    if key not in PROVISIONING_STATES:
        raise UnknownCloudState(provider_id, f"ProvisioningState/{provisioning}")
    state = PROVISIONING_STATES[key]
    if state is not None:
        return state
    if power is None or power.lower() not in POWER_STATES:
        raise UnknownCloudState(provider_id, f"ProvisioningState/{provisioning} PowerState/{power}")
    return POWER_STATES[power.lower()]


def _view_statuses(instance_view: Any) -> Iterable[Any] | None:
    """An instance view's statuses. The SDK's models deserialize a field when it is first read,
    and once, on lookups run in parallel in a fresh process, handed back the raw JSON instead
    (bench.scale's old scanner: `'dict' object has no attribute 'statuses'`): read both."""
    if instance_view is None:
        return None
    if isinstance(instance_view, Mapping):
        return instance_view.get("statuses") or []
    return instance_view.statuses


def read_statuses(statuses: Iterable[Any] | None) -> tuple[str | None, str | None, str | None]:
    """(provisioning state, power state, failure code) from instance-view statuses."""
    provisioning = power = failure = None
    for status in statuses or ():
        code = str(status.get("code") if isinstance(status, Mapping) else status.code or "")
        kind, _, rest = code.partition("/")
        if kind == "ProvisioningState":
            provisioning, _, failure_code = rest.partition("/")
            failure = failure_code or None
        elif kind == "PowerState":
            power = rest
    return provisioning, power, failure


def stop_reason(
    state: WorkerState, power: str | None, failure: str | None, spot: bool
) -> str | None:
    # ARM shows no eviction status: an evicted Spot VM (Deallocate policy) is just
    # deallocated. wm never deallocates VMs, so a deallocated Spot VM was evicted.
    if failure:
        return f"ProvisioningState/failed/{failure}"
    if state is WorkerState.STOPPED or (power or "").lower() == "deallocating":
        if spot and (power or "").lower() in ("deallocated", "deallocating"):
            return REASON_SPOT_EVICTED
        if power:
            return f"PowerState/{power}"
    return None


def same_region(location: str | None, region: str) -> bool:
    def norm(value: str) -> str:
        return value.lower().replace(" ", "")

    return norm(location or "") == norm(region)


def _old_style_resources(ref: WorkerRef) -> bool:
    data = ref.provider_data
    return any(
        _names(data.get(key)) for key in (OLD_NIC_NAMES, OLD_PUBLIC_IP_NAMES, OLD_DISK_NAMES)
    )


def ref_vm_name(ref: WorkerRef) -> str:
    """The VM name of a worker: from its resource id when the cloud told it, else derived
    (an imported worker's is worker-manager's workerId)."""
    if ref.cloud_id and "/virtualmachines/" in ref.cloud_id.lower():
        return ref.cloud_id.rstrip("/").rsplit("/", 1)[1]
    if imported_from(ref.provider_data) is not None:
        return imported_tc_worker_id(ref.worker_id)
    return vm_name(ref.worker_id)


def ref_group(ref: WorkerRef, default: str) -> str:
    """The resource group of a worker's VM: from its resource id when the cloud told it."""
    parsed = _parse_resource_id(ref.cloud_id or "")
    return parsed.resource_group if parsed is not None else default


def vm_body(
    *,
    launch_config: Mapping[str, Any],
    location: str,
    worker_id: str,
    tags: Mapping[str, Any],
    admin_username: str,
    admin_password: str,
    custom_data: str | None = None,
) -> dict[str, Any]:
    """The VM PUT body of a launch config in Taskcluster's resource form: its VM fields
    verbatim, plus worker-manager's overrides and wm's inline NIC (see the module docstring).

    `custom_data` is worker-manager's boot data; None leaves it out (VMs made by hand).
    """
    config = copy.deepcopy(dict(launch_config))
    skipped = {*WM_ONLY_KEYS, *RESOURCE_KEYS, *NOT_VM_KEYS}
    properties = {key: value for key, value in config.items() if key not in skipped}
    properties["osProfile"] = {
        **_mapping(config.get("osProfile")),
        "computerName": computer_name(worker_id),
        **({"customData": custom_data} if custom_data is not None else {}),
        "adminUsername": admin_username,
        "adminPassword": admin_password,
    }
    properties["storageProfile"] = storage_profile(config.get("storageProfile"), worker_id)
    properties["networkProfile"] = network_profile(config, worker_id, tags)
    resource = {key: config[key] for key in RESOURCE_KEYS if key in config}
    return {**resource, "location": location, "tags": dict(tags), "properties": properties}


def storage_profile(storage: Any, worker_id: str) -> dict[str, Any]:
    """The launch config's storageProfile with its disks named as worker-manager names them
    (`disk-<vm name suffix>-os`, then `-1`, `-2`... for data disks, as users may not name
    disks) and each deleted with the VM, since wm never deletes disks one by one."""
    profile = dict(_mapping(storage))
    suffix = vm_name(worker_id).removeprefix(VM_NAME_PREFIX)
    profile["osDisk"] = {
        **_mapping(profile.get("osDisk")),
        "name": f"disk-{suffix}-os",
        "deleteOption": "Delete",
    }
    profile["dataDisks"] = [
        {**_mapping(disk), "name": f"disk-{suffix}-{number}", "deleteOption": "Delete"}
        for number, disk in enumerate(profile.get("dataDisks") or [], start=1)
    ]
    return profile


def network_profile(
    launch_config: Mapping[str, Any], worker_id: str, tags: Mapping[str, Any]
) -> dict[str, Any]:
    """The VM's one NIC, inline, on the launch config's subnet, with a public IP only where
    `workerManager.publicIp` (Static, Standard, as worker-manager makes it)."""
    ip_config: dict[str, Any] = {"primary": True}
    subnet_id = launch_config.get("subnetId")
    if subnet_id:
        ip_config["subnet"] = {"id": subnet_id}
    if _mapping(launch_config.get("workerManager")).get("publicIp"):
        ip_config["publicIPAddressConfiguration"] = {
            "name": vm_name(worker_id, "pip-"),
            "sku": {"name": "Standard"},
            "tags": dict(tags),
            "properties": {"deleteOption": "Delete", "publicIPAllocationMethod": "Static"},
        }
    nic_config = {
        "name": vm_name(worker_id, "nic-"),
        "tags": dict(tags),
        "properties": {
            "primary": True,
            "deleteOption": "Delete",
            "ipConfigurations": [{"name": "ipconfig1", "properties": ip_config}],
        },
    }
    network = _mapping(launch_config.get("networkProfile"))
    kept = {key: value for key, value in network.items() if key not in NETWORK_OVERRIDDEN}
    return {
        **kept,
        "networkApiVersion": NETWORK_API_VERSION,
        "networkInterfaceConfigurations": [nic_config],
    }


def _admin_username() -> str:
    # Like worker-manager: a fresh random name per create, never used (a user who needs to log
    # in resets it). A letter first, since Linux user names may not start with a digit.
    alphabet = string.ascii_lowercase + string.digits
    rest = "".join(secrets.choice(alphabet) for _ in range(ADMIN_USERNAME_CHARS - 1))
    return secrets.choice(string.ascii_lowercase) + rest


def _admin_password() -> str:
    # Workers are never logged into; ARM still wants a credential. A fresh random one per PUT,
    # never stored or logged; the fixed prefix meets ARM's complexity rules.
    return "Wm-9" + secrets.token_urlsafe(24)


def _vm_data(vm: Any) -> dict[str, Any]:
    vm_id = vm.properties.vm_id if vm.properties is not None else None
    return {VM_ID: vm_id} if vm_id else {}


def _id_of(reference: Any) -> str | None:
    """The id of an SDK sub-resource reference (a model, or a mapping where the SDK left one)."""
    if reference is None:
        return None
    if isinstance(reference, Mapping):
        found = reference.get("id")
    else:
        found = getattr(reference, "id", None)
    return str(found) if found else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    # The SDK's enums are str subclasses whose str() is the member name, not the value.
    return value.value if isinstance(value, Enum) else str(value or "")


def _names(value: Any) -> list[str]:
    if not value:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _status_code(pipeline_response: Any, deserialized: Any, headers: Any) -> int:
    return pipeline_response.http_response.status_code


# -- error classification --------------------------------------------------------------------


def classify(provider_id: str, exc: BaseException) -> CloudError:
    """Translate an azure-core / azure-identity exception into a CloudError, once."""
    from azure.core.exceptions import (
        ClientAuthenticationError,
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )

    def error(category: ErrorCategory, code: str, message: str, **kw: Any) -> CloudError:
        return CloudError(provider_id, category, code, message[:MESSAGE_MAX_CHARS], **kw)

    if isinstance(exc, ServiceRequestError | ServiceResponseError):
        return error(ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))
    if isinstance(exc, HttpResponseError):
        status = exc.status_code
        code = (exc.error.code if exc.error is not None else None) or ""
        message = (exc.error.message if exc.error is not None else None) or exc.reason or ""
        headers = exc.response.headers if exc.response is not None else {}
        lower = code.lower()
        if status is None and isinstance(exc, ClientAuthenticationError):
            # The credential failed before any ARM call. azure-identity wraps an unreachable
            # token endpoint in this error too, with the connection error as its cause.
            if isinstance(exc.__cause__, ServiceRequestError | ServiceResponseError):
                return error(ErrorCategory.TRANSIENT, "TokenEndpointUnreachable", str(exc))
            return error(ErrorCategory.BAD_CONFIG, "AuthenticationFailed", str(exc))
        if status == 429 or lower == "toomanyrequests":
            return error(
                ErrorCategory.THROTTLED,
                code or "TooManyRequests",
                message,
                retry_after_s=retry_after_s(headers),
            )
        if status is not None and status >= 500:
            return error(
                ErrorCategory.TRANSIENT,
                code or f"HTTP{status}",
                message,
                retry_after_s=retry_after_s(headers),
            )
        if lower in QUOTA_CODES or (lower == "operationnotallowed" and "quota" in message.lower()):
            return error(ErrorCategory.QUOTA, code, message)
        if status == 404 or lower in NOT_FOUND_CODES:
            return error(ErrorCategory.NOT_FOUND, code or "NotFound", message)
        if status == 409 and lower in RETRYABLE_CONFLICT_CODES:
            return error(ErrorCategory.TRANSIENT, code, message)
        # 400 InvalidParameter / ImageNotFound, 401, 403 AuthorizationFailed, other 409s.
        return error(ErrorCategory.BAD_CONFIG, code or f"HTTP{status}", message)
    from azure.identity import CredentialUnavailableError

    if isinstance(exc, CredentialUnavailableError):
        return error(ErrorCategory.BAD_CONFIG, "CredentialUnavailable", str(exc))
    return error(ErrorCategory.TRANSIENT, type(exc).__name__, str(exc))


def retry_after_s(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from retry-after-ms / x-ms-retry-after-ms / Retry-After, if any."""
    if not headers:
        return None
    for name in ("retry-after-ms", "x-ms-retry-after-ms"):
        value = headers.get(name)
        if value:
            try:
                return max(0.0, float(value) / 1000)
            except ValueError:
                pass
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
