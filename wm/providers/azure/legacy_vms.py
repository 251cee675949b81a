"""The legacy worker-manager's VMs, taken over (a provider's `adopt_legacy`): which VMs are its
(`legacy_pool`), the worker each is under its import key (`legacy_listed`), and what
worker-manager made for each, read from ARM for its row to keep (`with_legacy_records`: its
NICs, their public IPs, its disks, where its deployment would be), so that its teardown deletes
what worker-manager would have. Everything wm reads of worker-manager's records on Azure is here;
the provider calls it where it lists and looks up VMs.

`legacy_pool` and `legacy_listed` are pure; `with_legacy_records` lists NICs through the
provider's gate (its `LegacyHost`), so that this module never imports the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from wm.kinds import azure as azure_kind
from wm.model import CloudInstance
from wm.providers.azure.arm import DeploymentRef, Made, deployment_name, parse_resource_id
from wm.providers.azure.listing import VmFields
from wm.providers.azure.states import Listed, model_of
from wm.providers.base import made_by_wm
from wm.take_over.marks import imported_worker_id

# A legacy VM's listing: the ids of the NICs and disks it points at (never kept on a row).
LEGACY_HELD = "legacyHeld"


class LegacyHost(Protocol):
    """What the take-over uses of the Azure provider (provider.AzureProvider): its clients and
    its paged lists through its gate."""

    clients: Any  # clients.AzureClients

    def all_pages(self, operation: str, make_pager: Callable[[], Any]) -> list[Any]: ...


def legacy_pool(tags: Mapping[str, str], provider_id: str, root_url: str) -> str | None:
    """The pool of a VM the legacy worker-manager made for this provider (its tags; wm's own
    carry them too, and wm's tags besides), else None."""
    if made_by_wm(tags):
        return None
    return azure_kind.legacy_pool(tags, provider_id, root_url)


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
