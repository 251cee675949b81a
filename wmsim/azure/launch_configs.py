"""Taskcluster Azure launch configs the simulated ARM launches as they are: the default
subnet's id, an imageReference from a URN or an id, and `example_launch_config`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wm.pools.config_tables import SPOT_AZURE
from wmsim.azure.resources import DEFAULT_RESOURCE_GROUP, DEFAULT_SUBNET, DEFAULT_VNET, VNET_TYPE
from wmsim.launch_configs import worker_manager

DEFAULT_SUBSCRIPTION_ID = "00000000-0000-0000-0000-000000000000"
DEFAULT_IMAGE = "Canonical:ubuntu-24_04-lts:server:latest"


def default_subnet_id(
    subscription_id: str = DEFAULT_SUBSCRIPTION_ID, resource_group: str = DEFAULT_RESOURCE_GROUP
) -> str:
    """The id of the default subnet, which every resource group of the sim holds."""
    return (
        f"/subscriptions/{subscription_id}/resourceGroups/{resource_group}/providers/"
        f"{VNET_TYPE}/{DEFAULT_VNET}/subnets/{DEFAULT_SUBNET}"
    )


def image_reference(image: str) -> dict[str, str]:
    """An ARM imageReference from a resource id or a `publisher:offer:sku:version` URN."""
    if image.startswith("/"):
        return {"id": image}
    parts = image.split(":")
    if len(parts) == 4 and all(parts):
        return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))
    raise ValueError(
        f"image {image!r} is neither an ARM resource id nor publisher:offer:sku:version"
    )


def example_launch_config(
    location: str,
    *,
    vm_size: str = "Standard_D2s_v3",
    image: str | None = None,
    spot: bool = False,
    public_ip: bool = False,
    subnet_id: str | None = None,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    worker_config: Mapping[str, Any] | None = None,
    subscription_id: str | None = None,
    resource_group: str | None = None,
) -> dict[str, Any]:
    """A Taskcluster Azure launch config (resource form, config-azure.yml) that the sim
    launches as it is: the default subnet of `resource_group` in `subscription_id` (the demo
    provider's by default) unless `subnet_id`, a marketplace image the sim knows unless
    `image` (a URN or an image id; an id must be registered), a Standard SSD OS disk.

    `spot` makes it a Spot VM as worker pools write it (priority Spot, evicted by deletion,
    any price); `weight` is `workerManager.initialWeight` (0..1)."""
    subnet = subnet_id or default_subnet_id(
        subscription_id or DEFAULT_SUBSCRIPTION_ID, resource_group or DEFAULT_RESOURCE_GROUP
    )
    manager = worker_manager(
        capacity=capacity,
        launch_config_id=launch_config_id,
        weight=weight,
        max_capacity=max_capacity,
        publicIp=public_ip,
    )
    config: dict[str, Any] = {
        "location": location,
        "subnetId": subnet,
        "hardwareProfile": {"vmSize": vm_size},
        "storageProfile": {
            "imageReference": image_reference(image or DEFAULT_IMAGE),
            "osDisk": {
                "createOption": "FromImage",
                "caching": "ReadWrite",
                "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
            },
        },
    }
    if spot:
        config.update(SPOT_AZURE)  # Deallocate: an evicted VM stays listed, the scan sees why
    config["workerConfig"] = dict(worker_config or {})
    config["workerManager"] = manager
    return config
