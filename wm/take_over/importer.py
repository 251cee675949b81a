"""`wm import`: a legacy worker-manager's pools and workers of some providers, written in one
transaction (wm/take_over/import_plan.py decides; README: "Moving a deployment onto wm").

The pools go through wm's own appliers (wm/pools/changes.py `plan_change`, under
`definitions_transaction`'s lock), so a legacy definition is validated and conflicts exactly as
createWorkerPool's; the workers are written by the one writer (`adopt_workers`) in the same
transaction, after the launch configs they belong to. A refusal or a dry run writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from sqlalchemy import Engine

from wm.db import pools as pool_store
from wm.db import workers as worker_reads
from wm.db.imported_workers import AdoptedWorker, adopt_workers
from wm.pools.apply_plan import ApplyPlan
from wm.pools.changes import ApplyDefinitions, ApplyRefused, plan_change
from wm.take_over.import_plan import (
    LegacyPool,
    LegacyWorker,
    PoolSummary,
    ProviderFacts,
    parse_legacy_pools,
    plan_workers,
    pool_summaries,
)
from wm.take_over.marks import imported_worker_id


@dataclass(frozen=True)
class ImportRefused:
    """Nothing was written: every problem names the pool, worker or key it is about."""

    problems: tuple[str, ...]


@dataclass(frozen=True)
class Imported:
    summaries: tuple[PoolSummary, ...]
    pool_changes: tuple[str, ...]  # the pool appliers' lines: what changes in wm's pools
    workers_written: int  # 0 on a dry run
    dry_run: bool


def import_fleet(
    engine: Engine,
    root_url: str,
    pools: Sequence[LegacyPool],
    workers: Sequence[LegacyWorker],
    providers: Mapping[str, ProviderFacts],
    *,
    workers_register: Mapping[str, bool],
    dry_run: bool = False,
) -> Imported | ImportRefused:
    """Plan the pools and workers against wm's database and write them, all or nothing.

    `pools` are the legacy pools of the providers imported (wm.take_over.import_plan.chosen_pools),
    `workers` theirs as listWorkersForWorkerPool answered."""
    definitions, problems = parse_legacy_pools(pools, providers)
    if problems:
        return ImportRefused(tuple(problems))
    with pool_store.definitions_transaction(engine) as held:
        pool_plan = plan_change(
            ApplyDefinitions(tuple(definitions)),
            held.pools,
            held.launch_configs,
            workers_register=workers_register,
        )
        if isinstance(pool_plan, ApplyRefused):
            return ImportRefused(pool_plan.problems or (pool_plan.message,))
        assert isinstance(pool_plan, ApplyPlan)
        candidates = [
            imported_worker_id(w.worker_pool_id, w.worker_group, w.worker_id) for w in workers
        ]
        known = worker_reads.existing_worker_ids(held.conn, candidates)
        plan = plan_workers(root_url, workers, definitions, providers, known)
        if plan.problems:
            return ImportRefused(plan.problems)
        summaries = pool_summaries(definitions, held.pools, pool_plan, plan)
        written = 0
        if not dry_run:
            if not pool_plan.empty:
                held.apply(pool_plan)
            rows = adopt_workers(held.conn, [AdoptedWorker(**asdict(w)) for w in plan.adopt])
            written = len(rows)
    return Imported(tuple(summaries), pool_plan.lines, written, dry_run)
