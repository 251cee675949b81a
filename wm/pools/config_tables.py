"""`[[pools]]` tables of an old config.toml as Taskcluster worker pool definitions: pure.

Before pools held Taskcluster's definitions, config.toml described each launch config by region,
machine type, image and two flags. `wm pools convert` turns those tables into definitions in the
clouds' own parameters, keeping every launch config's old id (`workerManager.launchConfigId`),
so applying them adopts the rows migration 0009 left without a definition and no worker is
replaced. Old weights (any non-negative number) become `initialWeight` (0..1) relative to the
pool's largest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wm.config.loader import schema_problems

MIN_QUEUE_INACTIVITY_S = 1200  # Taskcluster's minimum of lifecycle.queueInactivityTimeout
SPOT_EC2 = {
    "MarketType": "spot",
    "SpotOptions": {"SpotInstanceType": "one-time", "InstanceInterruptionBehavior": "terminate"},
}
# STOP, as wm launched spot VMs before: a pre-empted worker stays listed as TERMINATED, so the
# scan learns why it died before deleting it.
SPOT_GCE = {
    "provisioningModel": "SPOT",
    "onHostMaintenance": "TERMINATE",
    "instanceTerminationAction": "STOP",
}
# Deallocate, as wm launched spot VMs before: an evicted VM stays listed, so the scan sees why.
SPOT_AZURE = {
    "priority": "Spot",
    "evictionPolicy": "Deallocate",
    "billingProfile": {"maxPrice": -1},
}
GCE_DEFAULT_NETWORK = "global/networks/default"


class _Old(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OldLaunchConfig(_Old):
    region: Annotated[str, Field(min_length=1)]
    machine_type: Annotated[str, Field(min_length=1)]
    image: Annotated[str, Field(min_length=1)]
    capacity_per_worker: int = Field(1, ge=1)
    weight: float = Field(1.0, ge=0)
    max_capacity: int | None = Field(None, ge=0)
    public_ip: bool = False
    spot: bool = False
    worker_config: Mapping[str, Any] = Field(default_factory=dict)

    @property
    def old_id(self) -> str:
        """The id wm derived before: the machine-defining fields, weight and max left out."""
        identity = self.model_dump(exclude={"weight", "max_capacity"})
        digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
        return f"lc-{digest[:16]}"


class OldPool(_Old):
    id: str
    provider: str
    min_capacity: int = Field(0, ge=0)
    max_capacity: int = Field(ge=0)
    scaling_ratio: float = Field(1.0, ge=0, le=1)
    registration_timeout_s: float = Field(1800.0, gt=0)
    reregistration_timeout_s: float = Field(4 * 24 * 3600.0, gt=0)
    queue_inactivity_timeout_s: float = Field(7200.0, gt=0)
    requires_registration: bool = True
    launch_configs: Annotated[tuple[OldLaunchConfig, ...], Field(min_length=1)]


@dataclass(frozen=True)
class OldProvider:
    kind: str  # aws, gcp, azure
    subnet_id: str | None = None  # Azure: the provider-wide subnet of the old config


@dataclass(frozen=True)
class Conversion:
    documents: tuple[dict[str, Any], ...]  # definitions, each with its workerPoolId
    problems: tuple[str, ...]  # what could not be converted; nothing is written then
    notes: tuple[str, ...]  # what the operator must do besides applying


def convert(raw_pools: Any, providers: Mapping[str, OldProvider], *, owner: str) -> Conversion:
    """Every `[[pools]]` table as a definition; problems name the table's key path."""
    documents: list[dict[str, Any]] = []
    problems: list[str] = []
    notes: list[str] = []
    for index, raw in enumerate(raw_pools if isinstance(raw_pools, list) else []):
        key = f"pools[{index}]"
        try:
            pool = OldPool.model_validate(raw)
        except ValidationError as exc:
            problems += [f"{key}.{problem}" for problem in schema_problems(exc)]
            continue
        provider = providers.get(pool.provider)
        if provider is None:
            problems.append(f"{key}.provider: no provider with id {pool.provider!r}")
            continue
        if provider.kind == "azure" and not provider.subnet_id:
            problems.append(
                f"{key}: provider {pool.provider!r} has no subnet_id to give its launch "
                "configs' subnetId"
            )
            continue
        if provider.kind == "azure":
            notes.append(
                f"{pool.id}: its launch configs carry the subnetId; remove subnet_id from "
                f"[[providers]] id {pool.provider!r}"
            )
        if not pool.requires_registration:
            notes.append(
                f"{pool.id}: requires_registration = false is now the provider's "
                f"`workers_register = false` ([[providers]] id {pool.provider!r})"
            )
        if pool.queue_inactivity_timeout_s < MIN_QUEUE_INACTIVITY_S:
            notes.append(
                f"{pool.id}: queue_inactivity_timeout_s {pool.queue_inactivity_timeout_s:g} "
                f"is below Taskcluster's minimum: written as {MIN_QUEUE_INACTIVITY_S}"
            )
        documents.append(_definition(pool, provider, owner))
    return Conversion(tuple(documents), tuple(problems), tuple(notes))


def _definition(pool: OldPool, provider: OldProvider, owner: str) -> dict[str, Any]:
    heaviest = max(lc.weight for lc in pool.launch_configs)
    lifecycle: dict[str, Any] = {
        "registrationTimeout": round(pool.registration_timeout_s),
        "reregistrationTimeout": round(pool.reregistration_timeout_s),
        "queueInactivityTimeout": max(
            MIN_QUEUE_INACTIVITY_S, round(pool.queue_inactivity_timeout_s)
        ),
    }
    return {
        "workerPoolId": pool.id,
        "providerId": pool.provider,
        "description": f"{pool.id}, converted from config.toml [[pools]]",
        "owner": owner,
        "emailOnError": False,
        "config": {
            "minCapacity": pool.min_capacity,
            "maxCapacity": pool.max_capacity,
            "scalingRatio": pool.scaling_ratio,
            "lifecycle": lifecycle,
            "launchConfigs": [
                launch_config(provider, lc, lc.weight / heaviest if heaviest else 0.0)
                for lc in pool.launch_configs
            ],
        },
    }


def launch_config(provider: OldProvider, lc: OldLaunchConfig, weight: float) -> dict[str, Any]:
    """One old launch config in its cloud's own parameters, keeping its old id."""
    manager: dict[str, Any] = {
        "launchConfigId": lc.old_id,
        "capacityPerInstance": lc.capacity_per_worker,
        "initialWeight": round(weight, 6),
    }
    if lc.max_capacity is not None:
        manager["maxCapacity"] = lc.max_capacity
    worker_config = dict(lc.worker_config)
    if provider.kind == "aws":
        run: dict[str, Any] = {"ImageId": lc.image, "InstanceType": lc.machine_type}
        if lc.spot:
            run["InstanceMarketOptions"] = SPOT_EC2
        return {
            "region": lc.region,
            "launchConfig": run,
            "workerConfig": worker_config,
            "workerManager": manager,
        }
    if provider.kind == "gcp":
        nat = [{"type": "ONE_TO_ONE_NAT", "name": "External NAT"}] if lc.public_ip else []
        return {
            "region": lc.region.rsplit("-", 1)[0],
            "zone": lc.region,
            "machineType": f"zones/{lc.region}/machineTypes/{lc.machine_type}",
            "disks": [
                {
                    "type": "PERSISTENT",
                    "boot": True,
                    "autoDelete": True,
                    "initializeParams": {"sourceImage": lc.image},
                }
            ],
            "networkInterfaces": [{"network": GCE_DEFAULT_NETWORK, "accessConfigs": nat}],
            "scheduling": dict(SPOT_GCE) if lc.spot else {},
            "workerConfig": worker_config,
            "workerManager": manager,
        }
    vm: dict[str, Any] = {
        "location": lc.region,
        "subnetId": provider.subnet_id,
        "hardwareProfile": {"vmSize": lc.machine_type},
        "storageProfile": {
            "imageReference": _azure_image(lc.image),
            "osDisk": {"createOption": "FromImage"},
        },
        "workerConfig": worker_config,
        "workerManager": {**manager, "publicIp": lc.public_ip},
    }
    if lc.spot:
        vm |= SPOT_AZURE
    return vm


def _azure_image(image: str) -> dict[str, str]:
    if image.startswith("/"):
        return {"id": image}
    parts = image.split(":")
    if len(parts) == 4 and all(parts):
        return dict(zip(("publisher", "offer", "sku", "version"), parts, strict=True))
    return {"id": image}  # the definition's check names it


def old_providers(raw_providers: Sequence[Any]) -> dict[str, OldProvider]:
    """The kind (and Azure subnet) of each `[[providers]]` table of the old file."""
    found: dict[str, OldProvider] = {}
    for raw in raw_providers:
        if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
            subnet = raw.get("subnet_id")
            found[raw["id"]] = OldProvider(
                str(raw.get("kind")), subnet if isinstance(subnet, str) else None
            )
    return found
