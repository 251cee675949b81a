"""A Taskcluster Google launch config the simulation accepts as it is (`example_launch_config`)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from wmsim.gcp.catalog import region_of
from wmsim.launch_configs import worker_manager

EXAMPLE_MACHINE_TYPE = "e2-standard-2"  # example_launch_config's
EXAMPLE_IMAGE = "projects/debian-cloud/global/images/family/debian-12"


def example_launch_config(
    zone: str,
    *,
    machine_type: str = EXAMPLE_MACHINE_TYPE,
    image: str | None = None,
    spot: bool = False,
    public_ip: bool = True,
    capacity: int = 1,
    launch_config_id: str | None = None,
    weight: float | None = None,
    max_capacity: int | None = None,
    worker_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Taskcluster Google launch config (worker-manager's config-google.yml: the
    instances.insert body plus region, zone, workerConfig, workerManager) that the simulation
    accepts as it is: a boot disk from a public image it knows, the `default` network with an
    external IP when `public_ip` (worker-runner on GCE reads one), Spot scheduling when `spot`.

    `machine_type` is a name (made zone-qualified, as GCE's docs and Taskcluster's own
    configurations write it) or a reference used as given; `weight` is
    workerManager.initialWeight (0..1)."""
    manager = worker_manager(
        capacity=capacity,
        launch_config_id=launch_config_id,
        weight=weight,
        max_capacity=max_capacity,
    )
    interface: dict[str, Any] = {"network": "global/networks/default"}
    if public_ip:
        interface["accessConfigs"] = [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    # STOP, not DELETE: a pre-empted worker stays visible as TERMINATED, so a scan learns why
    # it died before deleting it.
    scheduling = (
        {
            "provisioningModel": "SPOT",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "STOP",
        }
        if spot
        else {}
    )
    return {
        "region": region_of(zone),
        "zone": zone,
        "machineType": machine_type
        if "/" in machine_type
        else f"zones/{zone}/machineTypes/{machine_type}",
        "disks": [
            {
                "type": "PERSISTENT",
                "boot": True,
                "autoDelete": True,
                "initializeParams": {"sourceImage": image or EXAMPLE_IMAGE},
            }
        ],
        "networkInterfaces": [interface],
        "scheduling": scheduling,
        "workerConfig": copy.deepcopy(dict(worker_config or {})),
        "workerManager": manager,
    }
