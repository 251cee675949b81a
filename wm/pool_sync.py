"""Plan how the database's pools must change to match the config: a pure function.

Launch configs keep their id across edits of weight or max capacity (the id is derived from the
fields that define the machine) and are archived, never deleted, when removed: workers still
point at them. A pool removed from the config, or moved to another provider, keeps its old
provider in `previous_provider_ids` so its existing workers are still scanned and drained.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from wm.config import Config
from wm.model import LaunchConfigRecord, PoolRecord


@dataclass(frozen=True)
class SyncPlan:
    create_pools: tuple[PoolRecord, ...] = ()
    update_pools: tuple[PoolRecord, ...] = ()  # the new values
    create_launch_configs: tuple[LaunchConfigRecord, ...] = ()
    update_launch_configs: tuple[LaunchConfigRecord, ...] = ()  # weight, max, un-archive
    archive_launch_configs: tuple[LaunchConfigRecord, ...] = ()
    scan_units: tuple[tuple[str, str], ...] = ()  # (provider id, region) to exist
    lines: tuple[str, ...] = field(default=(), compare=False)  # what a human reads

    @property
    def empty(self) -> bool:
        return not (
            self.create_pools
            or self.update_pools
            or self.create_launch_configs
            or self.update_launch_configs
            or self.archive_launch_configs
            or self.scan_units
        )


def plan_sync(
    config: Config,
    pools: Iterable[PoolRecord],
    launch_configs: Iterable[LaunchConfigRecord],
    scan_units: Iterable[tuple[str, str]] = (),
) -> SyncPlan:
    current = {p.pool_id: p for p in pools}
    current_lcs: dict[str, dict[str, LaunchConfigRecord]] = {}
    for lc in launch_configs:
        current_lcs.setdefault(lc.pool_id, {})[lc.launch_config_id] = lc
    create, update, lc_create, lc_update, lc_archive, lines = [], [], [], [], [], []

    for pool in config.pools:
        old = current.get(pool.id)
        if old is None:
            create.append(PoolRecord.from_config(pool))
            lines.append(f"create pool {pool.id} on {pool.provider}")
        else:
            new = PoolRecord.from_config(pool, _previous(old, pool.provider))
            if new != old:
                update.append(new)
                lines.append(f"update pool {pool.id}" + _moved(old, new))
        wanted = {lc.id: LaunchConfigRecord.from_config(pool.id, lc) for lc in pool.launch_configs}
        existing = current_lcs.get(pool.id, {})
        for lc_id, lc in wanted.items():
            if lc_id not in existing:
                lc_create.append(lc)
                lines.append(f"create launch config {pool.id} {lc_id} ({lc.region})")
            elif existing[lc_id] != lc:
                lc_update.append(lc)
                lines.append(f"update launch config {pool.id} {lc_id}")
        for lc_id, lc in existing.items():
            if lc_id not in wanted and not lc.archived:
                lc_archive.append(replace(lc, archived=True))
                lines.append(f"archive launch config {pool.id} {lc_id}")

    configured = {pool.id for pool in config.pools}
    for pool_id, old in current.items():
        if pool_id in configured or old.removed:
            continue
        update.append(
            replace(old, provider_id=None, previous_provider_ids=_previous(old, None), removed=True)
        )
        lines.append(f"remove pool {pool_id} (its workers are drained)")
        for lc in current_lcs.get(pool_id, {}).values():
            if not lc.archived:
                lc_archive.append(replace(lc, archived=True))
                lines.append(f"archive launch config {pool_id} {lc.launch_config_id}")

    wanted_units = {(p.id, region) for p in config.providers for region in p.regions}
    new_units = sorted(wanted_units - set(scan_units))
    lines += [f"add scan unit {provider} {region}" for provider, region in new_units]
    return SyncPlan(
        create_pools=tuple(create),
        update_pools=tuple(update),
        create_launch_configs=tuple(lc_create),
        update_launch_configs=tuple(lc_update),
        archive_launch_configs=tuple(lc_archive),
        scan_units=tuple(new_units),
        lines=tuple(lines),
    )


def _previous(old: PoolRecord, new_provider: str | None) -> tuple[str, ...]:
    previous = [p for p in old.previous_provider_ids if p != new_provider]
    if old.provider_id and old.provider_id != new_provider and old.provider_id not in previous:
        previous.append(old.provider_id)
    return tuple(previous)


def _moved(old: PoolRecord, new: PoolRecord) -> str:
    if old.provider_id != new.provider_id:
        return f" (provider {old.provider_id} -> {new.provider_id})"
    return ""
