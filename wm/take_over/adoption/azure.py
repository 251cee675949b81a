"""Azure's take-over of a legacy worker-manager's VMs (wm/take_over/adoption/base.py): which
VMs are its (`legacy_pool`, from worker-manager's `#deploymentTags`), the worker each is under
its import key (`legacy_listed`), and what worker-manager made for each, read from ARM for its
row to keep (`with_legacy_records`: its NICs, their public IPs, its disks, where its deployment
would be), so that its teardown deletes what worker-manager would have. Everything wm reads of
worker-manager's records on Azure is here; the provider calls its `AzureAdoption` where it lists,
looks up and deletes VMs.

`legacy_pool` and `legacy_listed` are pure; the rest lists through the provider's gated calls
(its `LegacyHost`), so that this module never imports the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from wm.kinds.base import MANAGED_BY
from wm.model import CloudInstance, WorkerRef
from wm.providers.azure.arm import (
    DeploymentRef,
    Made,
    deployment_name,
    parse_resource_id,
    same_region,
)
from wm.providers.azure.listing import VmFields, json_fields, vm_list_request
from wm.providers.azure.states import Listed, model_of
from wm.take_over.adoption.base import imported_tc_worker_id, made_by_wm
from wm.take_over.marks import imported_worker_id

# A legacy VM's listing: the ids of the NICs and disks it points at (never kept on a row).
LEGACY_HELD = "legacyHeld"


class LegacyHost(Protocol):
    """What the take-over uses of the Azure provider (provider.AzureProvider): its clients and
    its paged lists through its gate."""

    id: str
    root_url: str
    subscription_id: str
    clients: Any  # clients.AzureClients

    def all_pages(self, operation: str, make_pager: Callable[[], Any]) -> list[Any]: ...

    def json_pages(
        self, operation: str, first_request: Callable[[], Any]
    ) -> Iterator[list[Mapping[str, Any]]]: ...


class AzureAdoption:
    """The legacy's VMs of one Azure provider, read through that provider's calls."""

    def __init__(self, host: LegacyHost) -> None:
        self.provider_id = host.id
        self._host = host

    def pool_of(self, tags: Mapping[str, str]) -> str | None:
        return legacy_pool(tags, self.provider_id, self._host.root_url)

    def listed(self, region: str) -> Iterator[tuple[str, Listed]]:
        """worker-manager's VMs of a region (by lowercased resource id), in whatever group of
        the subscription its launch configs put them (armDeploymentResourceGroup): one more
        list, of the subscription, joined by the provider with its status list."""
        subscription = self._host.subscription_id
        for page in self._host.json_pages(
            "VirtualMachines_ListAll", lambda: vm_list_request(subscription, None)
        ):
            for vm in map(json_fields, page):
                pool = self.pool_of(vm.tags or {})
                if pool is not None and same_region(vm.location, region):
                    yield vm.id.lower(), legacy_listed(vm, region, pool)
            del page

    def listed_vm(self, vm: VmFields, region: str) -> Listed | None:
        """A VM the provider looked up, under its import key if it is the legacy's."""
        pool = self.pool_of(vm.tags or {})
        return None if pool is None else legacy_listed(vm, region, pool)

    def with_records(self, instances: Sequence[CloudInstance]) -> list[CloudInstance]:
        """The unit's legacy VMs, recording what worker-manager made for each (a last page)."""
        return with_legacy_records(self._host, instances)

    def teardown_name(self, ref: WorkerRef, named: str | None) -> str:
        """An imported worker's VM name: the one its resource id says (`named`), else
        worker-manager's workerId."""
        return named or imported_tc_worker_id(ref.worker_id)

    def group(self, ref: WorkerRef, default: str) -> str:
        """Where an imported worker's VM is looked up when no resource id says: the group
        `wm import` learnt, else the provider's."""
        return str(ref.provider_data.get("resourceGroupName") or default)


def legacy_pool(tags: Mapping[str, str], provider_id: str, root_url: str) -> str | None:
    """The pool of a resource worker-manager made for this provider of this deployment, from
    its `#deploymentTags` (created-by, managed-by, provider-id, root-url; the pool exactly as
    worker-pool-id); None for anything else. wm's own VMs carry these tags too, and wm's tags
    besides."""
    if made_by_wm(tags):
        return None
    if tags.get("created-by") != f"taskcluster-wm-{provider_id}":
        return None
    if tags.get("managed-by") != MANAGED_BY or tags.get("provider-id") != provider_id:
        return None
    if (tags.get("root-url") or "").rstrip("/") != root_url.rstrip("/"):
        return None
    return tags.get("worker-pool-id") or None


def legacy_listed(vm: VmFields, region: str, pool: str) -> Listed:
    """A legacy worker-manager's VM of `pool`, under its import key, holding the ids of what it
    points at (its NICs and disks)."""
    listed = model_of(vm, region)
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


def with_legacy_records(
    host: LegacyHost, instances: Sequence[CloudInstance]
) -> list[CloudInstance]:
    """worker-manager's VMs, each recording what worker-manager made for it (its NICs,
    their public IPs, its disks; and where its ARM deployment would be), for its row to
    keep: the teardown deletes from that record, as for a finished ARM deployment of
    wm's. One NIC list per resource group holding any."""
    if not instances:
        return []
    groups = {}
    for instance in instances:
        parsed = parse_resource_id(instance.cloud_id)
        if parsed is not None:
            groups.setdefault(parsed.resource_group.lower(), parsed.resource_group)
    public_ips: dict[str, list[str]] = {}
    for group in groups.values():
        nics = host.all_pages(
            "NetworkInterfaces_List",
            lambda g=group: host.clients.network.network_interfaces.list(g),
        )
        for nic in nics:
            public_ips[str(nic.id).lower()] = [
                ip
                for c in nic.ip_configurations or []
                if (ip := _id_of(getattr(c, "public_ip_address", None)))
            ]
    out = []
    for instance in instances:
        parsed = parse_resource_id(instance.cloud_id)
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


def _id_of(reference: Any) -> str | None:
    """The id of an SDK sub-resource reference (a model, or a mapping where the SDK left one)."""
    if reference is None:
        return None
    if isinstance(reference, Mapping):
        found = reference.get("id")
    else:
        found = getattr(reference, "id", None)
    return str(found) if found else None


def adopt(provider: LegacyHost) -> AzureAdoption:
    """The take-over of one Azure provider (provider.AzureProvider), through its calls."""
    return AzureAdoption(provider)
