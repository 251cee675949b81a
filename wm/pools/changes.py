"""Applying worker pool definitions: the one use case behind createWorkerPool, updateWorkerPool,
deleteWorkerPool (wm/api/routers/pools.py) and `wm pools apply` (wm/cli/pools.py).

A change is planned against the pools as they are and applied in one transaction, all or
nothing, under one lock (wm/db/pools.py `definitions_transaction`), so two appliers never plan
from the same state. `plan_change` is the decision, pure: the changes to write
(wm/pools/apply_plan.py plans them), or a refusal returned as a value with Taskcluster's code and
words, which the API answers and the CLI prints; nothing is raised through the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Engine

from wm.db import pools as pool_store
from wm.model import LaunchConfigRecord, PoolRecord
from wm.pools.apply_plan import ApplyPlan, plan_apply, plan_delete, same_definition
from wm.pools.definition import PoolDefinition


@dataclass(frozen=True)
class CreatePool:
    """createWorkerPool: a new pool; the same definition again changes nothing."""

    definition: PoolDefinition


@dataclass(frozen=True)
class UpdatePool:
    """updateWorkerPool: an existing pool's new definition."""

    definition: PoolDefinition


@dataclass(frozen=True)
class DeletePool:
    """deleteWorkerPool: the pool moves to the null provider and its workers drain."""

    pool_id: str


@dataclass(frozen=True)
class ApplyDefinitions:
    """`wm pools apply`: every definition of the files; with `prune`, the files are the whole
    truth and every live pool they do not name is deleted."""

    definitions: Sequence[PoolDefinition]
    prune: bool = False


Change = CreatePool | UpdatePool | DeletePool | ApplyDefinitions


@dataclass(frozen=True)
class ApplyRefused:
    """A change refused as a whole: nothing was written."""

    code: str  # Taskcluster's error code: RequestConflict (409) or ResourceNotFound (404)
    message: str  # worker-manager's words
    problems: tuple[str, ...] = ()  # each conflicting launch config, for the CLI to list


POOL_MISSING = ApplyRefused("ResourceNotFound", "Worker pool does not exist")
POOL_EXISTS = ApplyRefused("RequestConflict", "Worker pool already exists")


def plan_change(
    change: Change,
    pools: Sequence[PoolRecord],
    launch_configs: Sequence[LaunchConfigRecord],
    *,
    workers_register: Mapping[str, bool],
) -> ApplyPlan | ApplyRefused:
    """The changes that make the database hold `change`, or why it may not."""
    if isinstance(change, DeletePool):
        pool = _pool(pools, change.pool_id)
        if pool is None:
            return POOL_MISSING
        return plan_delete(pool, [lc for lc in launch_configs if lc.pool_id == change.pool_id])
    if isinstance(change, CreatePool):
        existing = _pool(pools, change.definition.worker_pool_id)
        if existing is not None:
            # createWorkerPool is idempotent only for the same definition.
            return ApplyPlan() if same_definition(change.definition, existing) else POOL_EXISTS
    if isinstance(change, UpdatePool) and _pool(pools, change.definition.worker_pool_id) is None:
        return POOL_MISSING
    definitions, prune = (
        (change.definitions, change.prune)
        if isinstance(change, ApplyDefinitions)
        else ([change.definition], False)
    )
    plan = plan_apply(
        definitions, pools, launch_configs, workers_register=workers_register, prune=prune
    )
    if plan.conflicts:
        return ApplyRefused("RequestConflict", "; ".join(plan.conflicts), plan.conflicts)
    return plan


def apply_change(
    engine: Engine,
    change: Change,
    *,
    workers_register: Mapping[str, bool] | None = None,
    dry_run: bool = False,
) -> ApplyPlan | ApplyRefused:
    """Plan `change` against the pools as they are and write it, in one transaction; a
    refusal or a dry run writes nothing."""
    with pool_store.definitions_transaction(engine) as held:
        outcome = plan_change(
            change, held.pools, held.launch_configs, workers_register=workers_register or {}
        )
        if isinstance(outcome, ApplyPlan) and not (dry_run or outcome.empty):
            held.apply(outcome)
    return outcome


def _pool(pools: Iterable[PoolRecord], pool_id: str) -> PoolRecord | None:
    return next((p for p in pools if p.pool_id == pool_id), None)
