"""An Azure worker made as Taskcluster's worker-manager makes it (services/worker-manager/src/
providers/azure/index.js), through azure-mgmt-network, -compute and -resource: the same
`#deploymentTags` on every resource, in one of its two ways:

- the sequential way (`#provisionSequentialWorker`, `provisionResources`): a public IP
  `pip-...` (only with `workerManager.publicIp`), a NIC `nic-...` on the launch config's
  `subnetId`, then the VM `vm-<suffix>` pointing at the NIC by id, its OS disk named
  `disk-<suffix>-os` and data disks `disk-<suffix>-<n>` (no deleteOption: they outlive the VM
  as on Azure, and worker-manager deletes them one by one), computerName and customData;
- the ARM way (`#provisionARMTemplateWorker`, for a launch config with `armDeployment`): the
  deployment `deploy-<suffix>` in the launch config's `armDeploymentResourceGroup` (else the
  provider's group), its parameters overridden with tags, vmName, computerName, admin
  credentials and customData, and the deployment itself tagged.

worker-manager waits for each resource between scans; this waits for each in turn, once.
Nothing of wm's is written.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import string
import uuid
from collections.abc import Mapping
from typing import Any

from wmsim.cloud import LegacyLaunch, LegacyVm

# The simulated Entra ID takes any client; these grant nothing anywhere else.
TENANT_ID = "00000000-0000-0000-0000-0000000000aa"
CLIENT_ID = "00000000-0000-0000-0000-0000000000bb"
CLIENT_SECRET = "legacy-worker-manager"
NOT_IN_VM = ("capacityPerInstance", "workerConfig", "workerManager")
# The VM resource's own fields, beside `properties`; keys the VM model does not have.
RESOURCE_KEYS = ("plan", "identity", "zones", "extendedLocation", "placement")
NOT_VM_KEYS = ("location", "tags", "subnetId", "ignoreFailedProvisioningStates")


def nicer_id() -> str:
    """utils.js nicerId(): three slugid.nice() joined, lowercased, alphanumerics only."""

    def nice() -> str:
        raw = bytearray(uuid.uuid4().bytes)
        raw[0] &= 0x7F
        return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")

    return "".join(c for c in (nice() + nice() + nice()).lower() if c.isalnum())


def admin_password() -> str:
    """72 characters with upper, lower, digits and symbols (generate-password, strict)."""
    alphabet = string.ascii_letters + string.digits + "!#%*-_"
    return "Aa1!" + "".join(secrets.choice(alphabet) for _ in range(68))


def capacity(launch_config: Mapping[str, Any]) -> int:
    wm_part = launch_config.get("workerManager") or {}
    return int(wm_part.get("capacityPerInstance") or launch_config.get("capacityPerInstance") or 1)


def deployment_tags(launch: LegacyLaunch, worker_group: str) -> dict[str, str]:
    """`#deploymentTags`: the launch config's tags, then worker-manager's."""
    return {
        **(launch.launch_config.get("tags") or {}),
        "created-by": f"taskcluster-wm-{launch.provider_id}",
        "managed-by": "taskcluster",
        "provider-id": launch.provider_id,
        "worker-group": worker_group,
        "worker-pool-id": launch.pool_id,
        "root-url": launch.root_url,
        "owner": launch.owner,
        "launch-config-id": launch.launch_config_id,
    }


def custom_data(launch: LegacyLaunch, worker_group: str) -> str:
    data = {
        "workerPoolId": launch.pool_id,
        "workerGroup": worker_group,
        "providerId": launch.provider_id,
        "rootUrl": launch.root_url,
        "workerConfig": {},
    }
    return base64.b64encode(json.dumps(data, separators=(",", ":")).encode()).decode()


class _Clients:
    def __init__(self, settings: Mapping[str, Any]) -> None:
        from azure.identity import ClientSecretCredential
        from azure.mgmt.compute import ComputeManagementClient
        from azure.mgmt.network import NetworkManagementClient
        from azure.mgmt.resource.deployments import DeploymentsMgmtClient
        from azure.mgmt.resource.resources import ResourceManagementClient

        endpoint = str(settings["endpoint"])
        verify = settings.get("ca_bundle") or True
        self.credential = ClientSecretCredential(
            TENANT_ID,
            CLIENT_ID,
            CLIENT_SECRET,
            authority=settings.get("authority") or endpoint,
            disable_instance_discovery=True,
            connection_verify=verify,
        )
        options: dict[str, Any] = {
            "base_url": endpoint,
            "connection_verify": verify,
            "retry_total": 0,
            "polling_interval": 0,
            "credential_scopes": [endpoint.rstrip("/") + "/.default"],
        }
        subscription = str(settings["subscription_id"])
        self.compute = ComputeManagementClient(self.credential, subscription, **options)
        self.network = NetworkManagementClient(self.credential, subscription, **options)
        self.deployments = DeploymentsMgmtClient(self.credential, subscription, **options)
        self.resources = ResourceManagementClient(self.credential, subscription, **options)

    def close(self) -> None:
        for client in (self.compute, self.network, self.deployments, self.resources):
            client.close()
        self.credential.close()


def launch(launch: LegacyLaunch) -> LegacyVm:
    clients = _Clients(launch.settings)
    try:
        suffix = (nicer_id() + nicer_id())[:35]
        if launch.launch_config.get("armDeployment"):
            return _arm(clients, launch, suffix)
        return _sequential(clients, launch, suffix)
    finally:
        clients.close()


def _sequential(clients: _Clients, launch: LegacyLaunch, suffix: str) -> LegacyVm:
    cfg = json.loads(json.dumps(launch.launch_config))
    group = str(launch.settings["resource_group"])
    location = str(cfg["location"])
    tags = deployment_tags(launch, location)
    vm_name = f"vm-{suffix}"
    computer_name = nicer_id()[:15]
    ip_name = f"pip-{nicer_id()}"[:24]
    nic_name = f"nic-{nicer_id()}"[:24]
    os_disk = {**cfg["storageProfile"]["osDisk"], "name": f"disk-{suffix}-os"}
    disks = [os_disk["name"]]
    data_disks = []
    for number, disk in enumerate(cfg["storageProfile"].get("dataDisks") or [], start=1):
        data_disks.append({**disk, "name": f"disk-{suffix}-{number}"})
        disks.append(f"disk-{suffix}-{number}")
    public_ip = bool((cfg.get("workerManager") or {}).get("publicIp", False))
    from azure.mgmt.network import models as net

    ip_id = None
    if public_ip:
        ip = clients.network.public_ip_addresses.begin_create_or_update(
            group,
            ip_name,
            net.PublicIPAddress(
                location=location,
                public_ip_allocation_method="Static",
                sku=net.PublicIPAddressSku(name="Standard"),
                tags=tags,
            ),
        ).result()
        ip_id = ip.id
    nic = clients.network.network_interfaces.begin_create_or_update(
        group,
        nic_name,
        net.NetworkInterface(
            location=location,
            tags=tags,
            ip_configurations=[
                net.NetworkInterfaceIPConfiguration(
                    name=nic_name,
                    private_ip_allocation_method="Dynamic",
                    subnet=net.Subnet(id=cfg["subnetId"]),
                    public_ip_address=net.PublicIPAddress(id=ip_id) if ip_id else None,
                )
            ],
        ),
    ).result()
    config = {k: v for k, v in cfg.items() if k not in NOT_IN_VM}
    config["osProfile"] = {
        **(cfg.get("osProfile") or {}),
        "computerName": computer_name,
        "customData": custom_data(launch, location),
        "adminUsername": nicer_id()[:20],
        "adminPassword": admin_password(),
    }
    config["networkProfile"] = {
        **(cfg.get("networkProfile") or {}),
        "networkInterfaces": [{"id": nic.id, "primary": True}],
    }
    config["storageProfile"] = {**cfg["storageProfile"], "osDisk": os_disk, "dataDisks": data_disks}
    vm = clients.compute.virtual_machines.begin_create_or_update(
        group, vm_name, _vm_model(config, tags)
    ).result()
    return LegacyVm(
        worker_id=vm_name,
        worker_group=location,
        capacity=capacity(cfg),
        provider_data={
            "location": location,
            "resourceGroupName": group,
            "workerConfig": cfg.get("workerConfig"),
            "skipPublicIp": not public_ip,
            "tags": tags,
            "vm": {"name": vm_name, "computerName": computer_name, "id": vm.id},
            "ip": {"name": ip_name, "id": ip_id or False},
            "nic": {"name": nic_name, "id": nic.id},
            "disks": [{"name": name, "id": True} for name in disks],
            "subnet": {"id": cfg["subnetId"]},
        },
    )


def _vm_model(config: Mapping[str, Any], tags: Mapping[str, str]) -> dict[str, Any]:
    """The VM body as worker-manager's SDK sends its config (the VirtualMachine model puts
    each key where ARM wants it and drops those it does not know, such as subnetId)."""
    resource = {k: config[k] for k in RESOURCE_KEYS if k in config}
    properties = {k: v for k, v in config.items() if k not in (*RESOURCE_KEYS, *NOT_VM_KEYS)}
    return {
        **resource,
        "location": config["location"],
        "tags": dict(tags),
        "properties": properties,
    }


def _arm(clients: _Clients, launch: LegacyLaunch, suffix: str) -> LegacyVm:
    cfg = launch.launch_config
    arm = json.loads(json.dumps(cfg["armDeployment"]))
    location = str(arm["parameters"]["location"]["value"])
    tags = deployment_tags(launch, location)
    vm_name = f"vm-{suffix}"
    computer_name = nicer_id()[:15]
    deployment_name = f"deploy-{suffix}"
    properties = {
        **arm,
        "parameters": {
            **arm.get("parameters", {}),
            "tags": {"value": tags},
            "vmName": {"value": vm_name},
            "computerName": {"value": computer_name},
            "adminUsername": {"value": nicer_id()[:20]},
            "adminPassword": {"value": admin_password()},
            "customData": {"value": custom_data(launch, location)},
        },
    }
    group = str(cfg.get("armDeploymentResourceGroup") or launch.settings["resource_group"])
    # `#ensureResourceGroup`: made if missing (the provider's own group exists already).
    if cfg.get("armDeploymentResourceGroup") and not (
        clients.resources.resource_groups.check_existence(group)
    ):
        clients.resources.resource_groups.create_or_update(group, {"location": location})
    poller = clients.deployments.deployments.begin_create_or_update(
        group, deployment_name, {"properties": properties, "tags": tags}
    )
    poller.result()
    return LegacyVm(
        worker_id=vm_name,
        worker_group=location,
        capacity=capacity(cfg),
        provider_data={
            "deploymentMethod": "arm-template",
            "location": location,
            "resourceGroupName": group,
            "workerConfig": cfg.get("workerConfig"),
            "armDeployment": arm,
            "keepDeployment": (cfg.get("workerManager") or {}).get("keepDeployment") is True,
            "tags": tags,
            "deployment": {"name": deployment_name, "id": False},
            "vm": {"name": vm_name, "computerName": computer_name, "id": False},
        },
    )


def terminate(settings: Mapping[str, Any], vm: LegacyVm) -> None:
    """worker-manager's removal of a sequential worker (`deprovisionResources`): the VM, then
    the NIC, the public IP and the disks, each once the one before is gone; of an ARM worker,
    every resource its deployment made, then the deployment."""
    clients = _Clients(settings)
    data = vm.provider_data
    group = str(data.get("resourceGroupName") or settings["resource_group"])
    try:
        if data.get("deploymentMethod") == "arm-template":
            _terminate_deployment(clients, group, str(data["deployment"]["name"]))
            return
        clients.compute.virtual_machines.begin_delete(group, vm.worker_id).result()
        clients.network.network_interfaces.begin_delete(group, data["nic"]["name"]).result()
        if not data.get("skipPublicIp"):
            clients.network.public_ip_addresses.begin_delete(group, data["ip"]["name"]).result()
        for disk in data.get("disks") or []:
            clients.compute.disks.begin_delete(group, disk["name"]).result()
    finally:
        clients.close()


def _terminate_deployment(clients: _Clients, group: str, name: str) -> None:
    from azure.core.exceptions import ResourceNotFoundError

    operations = clients.deployments.deployment_operations.list(group, name)
    made = [
        op.properties.target_resource.id
        for op in operations
        if op.properties and op.properties.target_resource and op.properties.target_resource.id
    ]
    # Dependents first: the VM, then its NICs, then IPs and disks.
    order = ("virtualmachines/", "networkinterfaces/", "publicipaddresses/", "disks/")
    for kind in order:
        for resource_id in made:
            if kind in resource_id.lower():
                with contextlib.suppress(ResourceNotFoundError):
                    _delete_by_id(clients, resource_id)
    clients.deployments.deployments.begin_delete(group, name).result()


def _delete_by_id(clients: _Clients, resource_id: str) -> None:
    parts = resource_id.strip("/").split("/")
    group, kind, name = parts[3], parts[-2].lower(), parts[-1]
    deleters = {
        "virtualmachines": clients.compute.virtual_machines,
        "disks": clients.compute.disks,
        "networkinterfaces": clients.network.network_interfaces,
        "publicipaddresses": clients.network.public_ip_addresses,
    }
    deleters[kind].begin_delete(group, name).result()
