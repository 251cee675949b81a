"""Plan how the database's pools change when worker pool definitions are applied: pure.

The rules are worker-manager's (services/worker-manager/src/data.js, db version 0105): a launch
config keeps its id for life; applying one whose id exists with other content outside
`workerManager` is a conflict (409 on the API), while `workerManager` (weight, capacity, max)
may change in place; launch configs missing from a new definition are archived, never deleted,
and their workers told to terminate; a deleted pool moves to the null provider, its previous
provider kept in `previous_provider_ids` so its workers are still scanned and drained.

wm's one departure: a launch config row written before pools held definitions (empty
`configuration`) takes the content of the first definition that names its id, so operators
can move from `[[pools]]` without replacing a worker (`wm pools convert` keeps the ids).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from wm.model import LaunchConfigRecord, PoolRecord
from wm.pools.definition import NULL_PROVIDER, LaunchConfigDefinition, PoolDefinition


@dataclass(frozen=True)
class ApplyPlan:
    create_pools: tuple[PoolRecord, ...] = ()
    update_pools: tuple[PoolRecord, ...] = ()  # the new values
    create_launch_configs: tuple[LaunchConfigRecord, ...] = ()
    update_launch_configs: tuple[LaunchConfigRecord, ...] = ()  # workerManager, un-archive
    archive_launch_configs: tuple[LaunchConfigRecord, ...] = ()
    # Launch config ids that exist with other content: nothing may be applied (409).
    conflicts: tuple[str, ...] = ()
    lines: tuple[str, ...] = field(default=(), compare=False)  # what a human reads

    @property
    def empty(self) -> bool:
        return not (
            self.create_pools
            or self.update_pools
            or self.create_launch_configs
            or self.update_launch_configs
            or self.archive_launch_configs
        )


def pool_record(
    definition: PoolDefinition,
    previous_provider_ids: tuple[str, ...] = (),
    *,
    requires_registration: bool = True,
) -> PoolRecord:
    deleted = definition.provider_id == NULL_PROVIDER
    lifecycle = definition.lifecycle
    return PoolRecord(
        pool_id=definition.worker_pool_id,
        provider_id=None if deleted else definition.provider_id,
        previous_provider_ids=previous_provider_ids,
        min_capacity=definition.min_capacity,
        max_capacity=definition.max_capacity,
        scaling_ratio=definition.scaling_ratio,
        registration_timeout_s=lifecycle.effective_registration_timeout_s,
        reregistration_timeout_s=lifecycle.reregistration_timeout_s,
        queue_inactivity_timeout_s=lifecycle.queue_inactivity_timeout_s,
        requires_registration=requires_registration,
        removed=deleted,
        description=definition.description,
        owner=definition.owner,
        email_on_error=definition.email_on_error,
        config=definition.config,
    )


def launch_config_record(pool_id: str, lc: LaunchConfigDefinition) -> LaunchConfigRecord:
    return LaunchConfigRecord(
        pool_id=pool_id,
        launch_config_id=lc.launch_config_id,
        region=lc.worker_group,
        capacity_per_worker=lc.capacity_per_instance,
        weight=lc.initial_weight,
        max_capacity=lc.max_capacity,
        configuration=lc.body,
        worker_config=lc.worker_config,
    )


def same_definition(definition: PoolDefinition, pool: PoolRecord) -> bool:
    """Whether applying the definition would leave the pool as it is (createWorkerPool is
    idempotent only then)."""
    provider = None if definition.provider_id == NULL_PROVIDER else definition.provider_id
    return (
        provider == pool.provider_id
        and definition.description == pool.description
        and definition.owner == pool.owner
        and definition.email_on_error == pool.email_on_error
        and plain_json(definition.config) == plain_json(pool.config)
    )


def plan_apply(
    definitions: Sequence[PoolDefinition],
    pools: Iterable[PoolRecord],
    launch_configs: Iterable[LaunchConfigRecord],
    *,
    workers_register: Mapping[str, bool] | None = None,
    prune: bool = False,
) -> ApplyPlan:
    """The changes that make the database hold `definitions`.

    With `prune`, every live pool the definitions do not name is deleted as deleteWorkerPool
    does (the files are the whole truth); without it, other pools are left alone.
    """
    registers = workers_register or {}
    current = {p.pool_id: p for p in pools}
    current_lcs: dict[str, dict[str, LaunchConfigRecord]] = {}
    for lc in launch_configs:
        current_lcs.setdefault(lc.pool_id, {})[lc.launch_config_id] = lc
    create: list[PoolRecord] = []
    update: list[PoolRecord] = []
    lc_create: list[LaunchConfigRecord] = []
    lc_update: list[LaunchConfigRecord] = []
    lc_archive: list[LaunchConfigRecord] = []
    conflicts: list[str] = []
    lines: list[str] = []

    for definition in definitions:
        pool_id = definition.worker_pool_id
        old = current.get(pool_id)
        provider = None if definition.provider_id == NULL_PROVIDER else definition.provider_id
        requires = registers.get(provider or "", True)
        if old is None:
            create.append(pool_record(definition, requires_registration=requires))
            lines.append(f"create pool {pool_id} on {definition.provider_id}")
        else:
            new = pool_record(definition, _previous(old, provider), requires_registration=requires)
            if new != old:
                update.append(new)
                lines.append(f"update pool {pool_id}" + _moved(old, new))
        existing = current_lcs.get(pool_id, {})
        wanted = {
            lc.launch_config_id: launch_config_record(pool_id, lc)
            for lc in definition.launch_configs
        }
        if provider is None:
            wanted = {}  # a deleted pool launches nothing: every launch config is archived
        for lc_id, lc in wanted.items():
            before = existing.get(lc_id)
            if before is None:
                lc_create.append(lc)
                lines.append(f"create launch config {pool_id} {lc_id} ({lc.region})")
            elif before.configuration and _content(before) != _content(lc):
                conflicts.append(
                    f"{pool_id}: launch config with ID `{lc_id}` already exists with "
                    "different configuration"
                )
            elif before != lc:
                lc_update.append(lc)
                verb = "restore" if before.archived else "update"
                lines.append(f"{verb} launch config {pool_id} {lc_id}")
        for lc_id, lc in existing.items():
            if lc_id not in wanted and not lc.archived:
                lc_archive.append(replace(lc, archived=True))
                lines.append(f"archive launch config {pool_id} {lc_id} (its workers stop)")

    if prune:
        named = {d.worker_pool_id for d in definitions}
        for pool_id, old in sorted(current.items()):
            if pool_id in named or old.removed:
                continue
            removal = plan_delete(old, current_lcs.get(pool_id, {}).values())
            update += removal.update_pools
            lc_archive += removal.archive_launch_configs
            lines += removal.lines

    return ApplyPlan(
        create_pools=tuple(create),
        update_pools=tuple(update),
        create_launch_configs=tuple(lc_create),
        update_launch_configs=tuple(lc_update),
        archive_launch_configs=tuple(lc_archive),
        conflicts=tuple(conflicts),
        lines=tuple(lines),
    )


def plan_delete(pool: PoolRecord, launch_configs: Iterable[LaunchConfigRecord]) -> ApplyPlan:
    """deleteWorkerPool: the pool moves to the null provider (its workers drain, its previous
    provider still scans them) and every launch config is archived."""
    gone = replace(
        pool, provider_id=None, previous_provider_ids=_previous(pool, None), removed=True
    )
    archive = [replace(lc, archived=True) for lc in launch_configs if not lc.archived]
    lines = [f"delete pool {pool.pool_id} (its workers are drained)"]
    lines += [f"archive launch config {pool.pool_id} {lc.launch_config_id}" for lc in archive]
    return ApplyPlan(
        update_pools=(gone,) if gone != pool else (),
        archive_launch_configs=tuple(archive),
        lines=tuple(lines),
    )


def unscanned_worker_groups(
    definition: PoolDefinition, regions_by_provider: Mapping[str, Sequence[str]]
) -> list[str]:
    """Launch configs whose worker group no scanner of the provider covers (wm scans the
    regions config.toml lists, and a VM it never lists could never be managed)."""
    regions = regions_by_provider.get(definition.provider_id)
    if regions is None:
        return []
    return [
        f"config.launchConfigs[{index}]: worker group {lc.worker_group!r} is not one of "
        f"provider {definition.provider_id!r}'s regions {sorted(regions)} in wm's config.toml"
        for index, lc in enumerate(definition.launch_configs)
        if lc.worker_group not in regions
    ]


def _content(lc: LaunchConfigRecord) -> Any:
    """What defines the machine: the launch config outside `workerManager`."""
    return plain_json({k: v for k, v in lc.configuration.items() if k != "workerManager"})


def plain_json(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists: to compare stored with given JSON, and
    to store it (read-only mappings do not serialise)."""
    if isinstance(value, Mapping):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return value


def _previous(old: PoolRecord, new_provider: str | None) -> tuple[str, ...]:
    previous = [p for p in old.previous_provider_ids if p != new_provider]
    if old.provider_id and old.provider_id != new_provider and old.provider_id not in previous:
        previous.append(old.provider_id)
    return tuple(previous)


def _moved(old: PoolRecord, new: PoolRecord) -> str:
    if old.provider_id != new.provider_id:
        return f" (provider {old.provider_id} -> {new.provider_id or NULL_PROVIDER})"
    return ""
