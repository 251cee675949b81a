"""Pools for tests: written in the short old `[[pools]]` form, applied as the Taskcluster
definitions `wm pools convert` makes of them (wm.pools.config_tables), so most scenarios stay
one line and the converter is exercised by every one of them.

A pool dict is {id, provider, max_capacity, launch_configs: [{region, machine_type, image, ...}],
...}. `requires_registration = false` in the old form is now the provider's `workers_register`:
applying here passes it per provider, as a converted config would set it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Engine

from wm.config.loader import Config
from wm.db import pools as pool_store
from wm.pools import config_tables
from wm.pools.apply_plan import ApplyPlan
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import PoolDefinition, parse_pool_definition
from wmsim.azure.launch_configs import default_subnet_id

OWNER = "wm-tests@example.com"


def old_providers(config: Config) -> dict[str, config_tables.OldProvider]:
    found = {}
    for provider in config.providers:
        subnet = None
        if provider.kind == "azure":
            subnet = default_subnet_id(provider.subscription_id, provider.resource_group)
        found[provider.id] = config_tables.OldProvider(provider.kind, subnet)
    return found


def documents(config: Config, pools: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The pools as definition documents ({workerPoolId, providerId, ..., config})."""
    conversion = config_tables.convert([dict(p) for p in pools], old_providers(config), owner=OWNER)
    assert not conversion.problems, conversion.problems
    return [dict(d) for d in conversion.documents]


def aws_create_body(config: Config, pool_id: str) -> dict[str, Any]:
    """A createWorkerPool body for a small pool on the config's AWS provider."""
    provider = next(p for p in config.providers if p.kind == "aws")
    old = {
        "id": pool_id,
        "provider": provider.id,
        "max_capacity": 3,
        "launch_configs": [
            {"region": provider.regions[0], "machine_type": "m5.large", "image": "ami-0abc"}
        ],
    }
    (document,) = documents(config, [old])
    return {k: v for k, v in document.items() if k != "workerPoolId"}


def definitions(config: Config, pools: Iterable[Mapping[str, Any]]) -> list[PoolDefinition]:
    parsed = []
    for document in documents(config, pools):
        pool_id = document.pop("workerPoolId")
        parsed.append(parse_pool_definition(pool_id, document, config.provider_kinds()))
    return parsed


def registers(config: Config, pools: Sequence[Mapping[str, Any]]) -> dict[str, bool]:
    """Per provider: its `workers_register`, false where an old-form pool said so."""
    found = {p.id: p.workers_register for p in config.providers}
    for pool in pools:
        if pool.get("requires_registration") is False:
            found[pool["provider"]] = False
    return found


def apply_pools(
    engine: Engine, config: Config, pools: Sequence[Mapping[str, Any]], *, prune: bool = False
) -> ApplyPlan:
    """Apply the pools (old form) as their definitions, as `wm pools apply` does."""
    parsed = definitions(config, pools)
    wanted = registers(config, pools)
    plan = apply_change(
        engine, ApplyDefinitions(tuple(parsed), prune=prune), workers_register=wanted
    )
    assert isinstance(plan, ApplyPlan), plan
    pool_store.ensure_scan_units(
        engine, [(p.id, region) for p in config.providers for region in p.regions]
    )
    return plan
