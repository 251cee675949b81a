"""`wm import`: what taking a provider's pools and workers from a live worker-manager changes.

Pure, no I/O. The adapter (wm/take_over/legacy_client.py) reads the legacy API into
`LegacyPool`s and `LegacyWorker`s; the use case (wm/take_over/importer.py) plans the pools with
wm's own appliers (wm/pools/changes.py: the same validation and conflicts as createWorkerPool)
and the workers here, then writes both in one transaction. Decided here:

- A provider may be imported only when wm's config has it, and a provider that launches in a
  cloud only with `adopt_legacy = true` (its scans must adopt the imported VMs, else wm would
  count workers whose VMs it never sees).
- A legacy definition is checked as `wm pools apply` checks a file: Taskcluster's schemas for
  the provider's kind, and every worker group one of the provider's configured regions.
- A worker keeps worker-manager's launch config: its `launchConfigId` when the API gives one
  (worker-manager's ids are wm's: wm/pools/definition.py derives them the same way); without
  one, the pool's one launch config for its worker group (narrowed by capacity when several);
  otherwise it is a problem, and nothing is written.
- Workers of a static provider are not imported: worker-manager keeps each one's
  `staticSecret` in its database and never answers it on the API, and a static worker
  registers with that secret every time it starts, so a row wm cannot check the secret of
  would refuse it at its next start. Their pools are imported; each worker is named, to be
  made again with createWorker at wm (a new secret handed to the machine).
- A running worker's `registered_at` is worker-manager's `lastModified`: the API has no
  registration time, and registerWorker (or reregisterWorker) is the last change of a running
  row's state. `created`, `lastModified`, `capacity` and `state` are kept as given; `expires`
  is worker-manager's row retention, not a deadline, so wm's deadline is derived (`_deadline`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from wm.kinds import KINDS
from wm.model import PoolRecord, WorkerState
from wm.pools.apply_plan import ApplyPlan, unscanned_worker_groups
from wm.pools.definition import DefinitionInvalid, PoolDefinition, parse_pool_definition
from wm.take_over.marks import IMPORTED_FROM, imported_worker_id

# worker-manager's states of a worker that still has (or will have) a VM: each is adopted.
IMPORTED_STATES: Mapping[str, WorkerState] = {
    "requested": WorkerState.REQUESTED,
    "running": WorkerState.RUNNING,
    "stopping": WorkerState.STOPPING,
}
NEW, CHANGED, UNCHANGED = "new", "changed", "unchanged"


@dataclass(frozen=True)
class LegacyPool:
    """A pool as listWorkerPools answers it."""

    worker_pool_id: str
    provider_id: str
    body: Mapping[str, Any]  # providerId, description, owner, emailOnError, config


@dataclass(frozen=True)
class LegacyWorker:
    """A worker as listWorkersForWorkerPool answers it."""

    worker_pool_id: str
    worker_group: str
    worker_id: str
    provider_id: str
    state: str
    capacity: int
    launch_config_id: str | None  # absent from older worker-managers' answers
    created: datetime
    expires: datetime | None
    last_modified: datetime


@dataclass(frozen=True)
class ProviderFacts:
    """What the import needs to know of one configured provider."""

    kind: str
    adopt_legacy: bool
    regions: tuple[str, ...]


@dataclass(frozen=True)
class ImportedWorker:
    """A worker row to adopt: the fields of wm.db.imported_workers.AdoptedWorker."""

    worker_id: str
    pool_id: str
    worker_group: str
    tc_worker_id: str
    provider_id: str
    state: WorkerState
    capacity: int
    launch_config_id: str
    created: datetime
    last_modified: datetime
    expires: datetime | None
    registered_at: datetime | None
    provider_data: Mapping[str, Any]


@dataclass(frozen=True)
class PoolSummary:
    """What the import does to one pool, for the operator to read."""

    pool_id: str
    provider_id: str
    verdict: str  # NEW, CHANGED or UNCHANGED
    new_workers: Mapping[str, int] = field(default_factory=dict)  # state -> count
    known_workers: Mapping[str, int] = field(default_factory=dict)  # state -> count
    left_workers: tuple[str, ...] = ()  # static workers, not imported: "<group>/<id>"


@dataclass(frozen=True)
class WorkersPlan:
    adopt: tuple[ImportedWorker, ...] = ()
    known: tuple[ImportedWorker, ...] = ()  # wm has a row for each already
    left: tuple[LegacyWorker, ...] = ()  # static workers: not imported
    problems: tuple[str, ...] = ()


def provider_problems(chosen: Sequence[str], providers: Mapping[str, ProviderFacts]) -> list[str]:
    """Why the providers asked for cannot be imported (before anything is read)."""
    problems = []
    for provider_id in chosen:
        facts = providers.get(provider_id)
        if facts is None:
            known = ", ".join(sorted(providers)) or "none"
            problems.append(
                f"--provider {provider_id}: wm's config has no provider {provider_id!r} "
                f"(configured: {known})"
            )
        elif KINDS[facts.kind].scanned and not facts.adopt_legacy:
            problems.append(
                f"--provider {provider_id}: providers.{provider_id}.adopt_legacy is not true in "
                "wm's config: its scans would never adopt the imported workers' VMs"
            )
    return problems


def chosen_pools(pools: Iterable[LegacyPool], chosen: Sequence[str]) -> list[LegacyPool]:
    """The legacy pools of the providers asked for; the others stay where they are."""
    return sorted((p for p in pools if p.provider_id in chosen), key=lambda p: p.worker_pool_id)


def parse_legacy_pools(
    pools: Sequence[LegacyPool], providers: Mapping[str, ProviderFacts]
) -> tuple[list[PoolDefinition], list[str]]:
    """Each pool's definition through wm's validation; every problem names pool and key path."""
    kinds = {provider_id: facts.kind for provider_id, facts in providers.items()}
    regions = {
        provider_id: facts.regions
        for provider_id, facts in providers.items()
        if KINDS[facts.kind].scanned
    }
    definitions: list[PoolDefinition] = []
    problems: list[str] = []
    for pool in pools:
        try:
            definition = parse_pool_definition(pool.worker_pool_id, dict(pool.body), kinds)
        except DefinitionInvalid as invalid:
            problems += [f"pool {pool.worker_pool_id}: {p}" for p in invalid.problems]
            continue
        outside = unscanned_worker_groups(definition, regions)
        problems += [f"pool {pool.worker_pool_id}: {p}" for p in outside]
        if not outside:
            definitions.append(definition)
    return definitions, problems


def plan_workers(
    root_url: str,
    workers: Iterable[LegacyWorker],
    definitions: Sequence[PoolDefinition],
    providers: Mapping[str, ProviderFacts],
    known_worker_ids: Iterable[str],
) -> WorkersPlan:
    """The worker rows to write: every worker not stopped of the imported pools' providers,
    but those wm has a row for already and those of a static provider."""
    by_pool = {d.worker_pool_id: d for d in definitions}
    known_ids = set(known_worker_ids)
    adopt: list[ImportedWorker] = []
    known: list[ImportedWorker] = []
    left: list[LegacyWorker] = []
    problems: list[str] = []
    for worker in sorted(workers, key=lambda w: (w.worker_pool_id, w.worker_group, w.worker_id)):
        state = IMPORTED_STATES.get(worker.state)
        definition = by_pool.get(worker.worker_pool_id)
        facts = providers.get(worker.provider_id)
        if state is None or definition is None or facts is None:
            continue  # stopped, or of a pool or provider not imported
        if KINDS[facts.kind].hand_made:
            left.append(worker)
            continue
        launch_config_id, problem = resolve_launch_config(worker, definition)
        if launch_config_id is None:
            problems.append(problem)
            continue
        row = ImportedWorker(
            worker_id=imported_worker_id(
                worker.worker_pool_id, worker.worker_group, worker.worker_id
            ),
            pool_id=worker.worker_pool_id,
            worker_group=worker.worker_group,
            tc_worker_id=worker.worker_id,
            provider_id=worker.provider_id,
            state=state,
            capacity=worker.capacity,
            launch_config_id=launch_config_id,
            created=worker.created,
            last_modified=worker.last_modified,
            expires=_deadline(worker, state, definition),
            registered_at=worker.last_modified if state is WorkerState.RUNNING else None,
            provider_data={IMPORTED_FROM: root_url},
        )
        (known if row.worker_id in known_ids else adopt).append(row)
    return WorkersPlan(tuple(adopt), tuple(known), tuple(left), tuple(problems))


def _deadline(
    worker: LegacyWorker, state: WorkerState, definition: PoolDefinition
) -> datetime | None:
    """wm's `expires` for the row. worker-manager's `expires` is when it deletes the row (a
    week after launch, renewed by its scanner), not a deadline: it keeps a requested worker's
    registration deadline in providerData (terminateAfter, launch + registration timeout),
    which the API does not show, so wm computes it again from `created`. A running worker's
    reregistration deadline (terminateAfter) is never before its registration (`lastModified`,
    the change to running) plus the pool's reregistration timeout; wm takes the later of that
    and the row's expiry, never early, until the worker reregisters with wm."""
    lifecycle = definition.lifecycle
    if state is WorkerState.RUNNING:
        renewal = worker.last_modified + timedelta(seconds=lifecycle.reregistration_timeout_s)
        return renewal if worker.expires is None else max(renewal, worker.expires)
    if state is not WorkerState.REQUESTED:
        return worker.expires
    registration = worker.created + timedelta(seconds=lifecycle.effective_registration_timeout_s)
    return registration if worker.expires is None else min(registration, worker.expires)


def resolve_launch_config(
    worker: LegacyWorker, definition: PoolDefinition
) -> tuple[str | None, str]:
    """The launch config wm files the worker under, or why there is none."""
    name = f"worker {worker.worker_pool_id}/{worker.worker_group}/{worker.worker_id}"
    ids = {lc.launch_config_id for lc in definition.launch_configs}
    if worker.launch_config_id is not None:
        if worker.launch_config_id in ids:
            return worker.launch_config_id, ""
        return None, (
            f"{name}: its launchConfigId {worker.launch_config_id!r} is not one of the pool's "
            f"launch configs ({', '.join(sorted(ids)) or 'none'}); worker-manager archived it, "
            "and wm cannot know what it launched"
        )
    in_group = [lc for lc in definition.launch_configs if lc.worker_group == worker.worker_group]
    if len(in_group) > 1:
        in_group = [lc for lc in in_group if lc.capacity_per_instance == worker.capacity]
    if len(in_group) == 1:
        return in_group[0].launch_config_id, ""
    reason = (
        "the pool has no launch config in that worker group"
        if not in_group
        else f"{len(in_group)} of the pool's launch configs have that worker group and capacity"
    )
    return None, f"{name}: no launchConfigId given and {reason}; import it after it stops"


def pool_summaries(
    definitions: Sequence[PoolDefinition],
    held_pools: Iterable[PoolRecord],
    pool_plan: ApplyPlan,
    workers: WorkersPlan,
) -> list[PoolSummary]:
    """Per imported pool: new, changed or unchanged in wm, and its workers by state."""
    held = {p.pool_id for p in held_pools}
    changed = {
        record.pool_id
        for record in (
            *pool_plan.update_pools,
            *pool_plan.create_launch_configs,
            *pool_plan.update_launch_configs,
            *pool_plan.archive_launch_configs,
        )
    }
    summaries = []
    for definition in definitions:
        pool_id = definition.worker_pool_id
        verdict = NEW if pool_id not in held else CHANGED if pool_id in changed else UNCHANGED
        summaries.append(
            PoolSummary(
                pool_id=pool_id,
                provider_id=definition.provider_id,
                verdict=verdict,
                new_workers=_by_state(w for w in workers.adopt if w.pool_id == pool_id),
                known_workers=_by_state(w for w in workers.known if w.pool_id == pool_id),
                left_workers=tuple(
                    f"{w.worker_group}/{w.worker_id}"
                    for w in workers.left
                    if w.worker_pool_id == pool_id
                ),
            )
        )
    return summaries


def _by_state(rows: Iterable[ImportedWorker]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state.value] = counts.get(row.state.value, 0) + 1
    return dict(sorted(counts.items()))


def summary_lines(summaries: Sequence[PoolSummary]) -> list[str]:
    """What `wm import` prints: one line per pool, then one line of totals.

    pool <poolId> (<providerId>): <new|changed|unchanged>; workers new: <state> <n>, …;
    already known: <state> <n>, …[; static workers left: <n> (<group>/<id>, …)]
    """
    lines = []
    for s in summaries:
        line = (
            f"pool {s.pool_id} ({s.provider_id}): {s.verdict}; workers new: "
            f"{_counts(s.new_workers)}; already known: {_counts(s.known_workers)}"
        )
        if s.left_workers:
            line += (
                f"; static workers left: {len(s.left_workers)} ({', '.join(s.left_workers)}): "
                "worker-manager keeps their staticSecret; make each again with createWorker"
            )
        lines.append(line)
    verdicts = [s.verdict for s in summaries]
    new_workers = sum(sum(s.new_workers.values()) for s in summaries)
    known_workers = sum(sum(s.known_workers.values()) for s in summaries)
    left = sum(len(s.left_workers) for s in summaries)
    lines.append(
        f"{len(summaries)} pools: {verdicts.count(NEW)} new, {verdicts.count(CHANGED)} changed, "
        f"{verdicts.count(UNCHANGED)} unchanged; workers: {new_workers} new, "
        f"{known_workers} already known, {left} static left"
    )
    return lines


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{state} {n}" for state, n in counts.items()) or "none"
