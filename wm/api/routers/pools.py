"""Worker pools: their definitions (create, update, delete), reads, launch configs and stats."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy import Engine

from wm.api.endpoint import (
    PREFIX,
    ApiContext,
    Call,
    EndpointRouter,
    Paged,
    PagingQuery,
    Scope,
    endpoint,
    reply,
    require_pool,
    run,
)
from wm.api.endpoint_table import BY_NAME
from wm.api.models import (
    UpdateWorkerPoolRequest,
    WorkerPool,
    WorkerPoolDefinitionRequest,
    WorkerPoolLaunchConfigList,
    WorkerPoolList,
    WorkerPoolListStats,
    WorkerPoolStats,
)
from wm.api.views import launch_config_stats, launch_config_view, pool_stats, pool_view
from wm.db import api_reads
from wm.db.api_reads import PoolView, StateCounts
from wm.ops.telemetry import log
from wm.pools.apply_plan import unscanned_worker_groups
from wm.pools.changes import (
    ApplyRefused,
    Change,
    CreatePool,
    DeletePool,
    UpdatePool,
    apply_change,
)
from wm.pools.definition import (
    NULL_PROVIDER,
    DefinitionInvalid,
    PoolDefinition,
    parse_pool_definition,
)
from wm.take_over.merged import answer, merged_page, pools_theirs
from wm.tc.errors import TaskclusterError

router = EndpointRouter()


def create_scope(body: WorkerPoolDefinitionRequest) -> Scope:
    return Scope(params={"providerId": body.providerId}, input=body)


def update_scope(body: UpdateWorkerPoolRequest) -> Scope:
    return Scope(params={"providerId": body.providerId}, input=body)


@router.declare("workerPool", response_model=WorkerPool)
async def worker_pool(workerPoolId: str, call: Annotated[Call, endpoint()]) -> JSONResponse:
    return reply(pool_view(*await existing_pool(call, workerPoolId)))


def read_pool(engine: Engine, pool_id: str) -> tuple[PoolView, list[StateCounts]] | None:
    """The pool as it is and the counts of its workers by state (None: no such pool)."""
    views = api_reads.pools_page(engine, offset=0, limit=1, pool_id=pool_id)
    return (views[0], api_reads.state_counts(engine, [pool_id])) if views else None


async def existing_pool(call: Call, pool_id: str) -> tuple[PoolView, list[StateCounts]]:
    found = await run(read_pool, call.api.engine, pool_id)
    if found is None:
        raise TaskclusterError("ResourceNotFound", "Worker Pool does not exist")
    return found


def definition(api: ApiContext, pool_id: str, body: WorkerPoolDefinitionRequest) -> PoolDefinition:
    """The body as a definition its provider's schema accepts, or the error to answer."""
    kinds = api.provider_kinds
    if body.providerId != NULL_PROVIDER and body.providerId not in kinds:
        valid = sorted([*kinds, NULL_PROVIDER])
        raise TaskclusterError(
            "InputError",
            f"Invalid Provider: {body.providerId!r} is not one of {', '.join(valid)}",
        )
    raw = body.model_dump(include={"providerId", "description", "config", "owner", "emailOnError"})
    try:
        parsed = parse_pool_definition(pool_id, raw, kinds)
    except DefinitionInvalid as invalid:
        raise TaskclusterError("InputValidationError", "\n".join(invalid.problems)) from None
    problems = unscanned_worker_groups(parsed, api.regions)
    if problems:
        raise TaskclusterError("InputValidationError", "\n".join(problems))
    if parsed.warnings:  # accepted, as worker-manager accepts them; said in the log
        log("worker-pool-warnings", pool=pool_id, warnings=list(parsed.warnings))
    return parsed


async def change_pool(call: Call, event: str, pool_id: str, change: Change) -> JSONResponse:
    """Apply the change (wm/pools/changes.py), then answer the pool as it now is."""
    registers = call.api.workers_register
    outcome = await run(lambda: apply_change(call.api.engine, change, workers_register=registers))
    if isinstance(outcome, ApplyRefused):
        raise TaskclusterError(outcome.code, outcome.message)
    # The audit trail worker-manager keeps in its audit history: who is in the access log.
    if not outcome.empty:
        log(event, pool=pool_id, changes=list(outcome.lines))
    return reply(pool_view(*await existing_pool(call, pool_id)))


@router.declare("createWorkerPool", response_model=WorkerPool)
async def create_worker_pool(
    workerPoolId: str, call: Annotated[Call, endpoint(create_scope)]
) -> JSONResponse:
    """Create a worker pool from its definition; creating it again as it is answers the
    pool, with another definition 409."""
    parsed = definition(call.api, workerPoolId, call.input)
    return await change_pool(call, "worker-pool-created", workerPoolId, CreatePool(parsed))


@router.declare("updateWorkerPool", response_model=WorkerPool)
async def update_worker_pool(
    workerPoolId: str, call: Annotated[Call, endpoint(update_scope)]
) -> JSONResponse:
    """Replace a pool's definition; launch configs it no longer holds are archived. To
    delete a pool, set its providerId to "null-provider"."""
    body: UpdateWorkerPoolRequest = call.input
    parsed = definition(call.api, workerPoolId, body)
    if body.workerPoolId and body.workerPoolId != workerPoolId:
        raise TaskclusterError("InputError", "Incorrect workerPoolId in request body")
    return await change_pool(call, "worker-pool-updated", workerPoolId, UpdatePool(parsed))


@router.declare("deleteWorkerPool", response_model=WorkerPool)
async def delete_worker_pool(workerPoolId: str, call: Annotated[Call, endpoint()]) -> JSONResponse:
    """Mark a pool for deletion: it moves to the null provider, its launch configs are
    archived and its workers drain."""
    return await change_pool(call, "worker-pool-deleted", workerPoolId, DeletePool(workerPoolId))


@router.declare("listWorkerPoolLaunchConfigs", response_model=WorkerPoolLaunchConfigList)
async def list_worker_pool_launch_configs(
    workerPoolId: str,
    call: Annotated[Call, endpoint()],
    paged: PagingQuery,
    includeArchived: str | None = None,
) -> JSONResponse:
    await require_pool(call, workerPoolId, "Worker pool does not exist")
    archived = includeArchived == "true"
    rows, token = await paged.rows(
        lambda offset, n: api_reads.launch_configs_page(
            call.api.engine, workerPoolId, offset=offset, limit=n, include_archived=archived
        )
    )
    return reply(
        WorkerPoolLaunchConfigList(
            workerPoolLaunchConfigs=[launch_config_view(r) for r in rows],
            continuationToken=token,
        )
    )


@router.declare("workerPoolStats", response_model=WorkerPoolStats)
async def worker_pool_stats(workerPoolId: str, call: Annotated[Call, endpoint()]) -> JSONResponse:
    view, stats = await existing_pool(call, workerPoolId)
    configs = [lc.launch_config_id for lc in view.launch_configs]
    return reply(
        WorkerPoolStats(launchConfigStats=launch_config_stats(workerPoolId, configs, stats))
    )


@dataclass(frozen=True)
class PoolList:
    """One of the lists of every pool: its endpoint, its answer's key and a pool's item."""

    endpoint: str
    key: str
    item: Callable[[PoolView, Sequence[StateCounts]], BaseModel]


POOLS = PoolList("listWorkerPools", "workerPools", pool_view)
POOLS_STATS = PoolList(
    "listWorkerPoolsStats",
    "workerPoolsStats",
    lambda view, stats: pool_stats(view.pool.pool_id, stats),
)


@router.declare(POOLS.endpoint, response_model=WorkerPoolList)
async def list_worker_pools(call: Annotated[Call, endpoint()], paged: PagingQuery) -> JSONResponse:
    return await pools_listed(call.api, POOLS, paged)


@router.declare(POOLS_STATS.endpoint, response_model=WorkerPoolListStats)
async def list_worker_pools_stats(
    call: Annotated[Call, endpoint()], paged: PagingQuery
) -> JSONResponse:
    return await pools_listed(call.api, POOLS_STATS, paged)


async def pools_listed(api: ApiContext, listed: PoolList, paged: Paged) -> JSONResponse:
    """A list of pools: wm's, or during a take-over wm's and the legacy's merged."""

    async def wm_page(token: str | None, limit: str | None) -> tuple[list[dict[str, Any]], Any]:
        views, next_token = await Paged(token, limit).rows(
            lambda offset, n: api_reads.pools_page(api.engine, offset=offset, limit=n)
        )
        stats = await run(api_reads.state_counts, api.engine, [v.pool.pool_id for v in views])
        items = [listed.item(v, stats).model_dump(mode="json", exclude_none=True) for v in views]
        return items, next_token

    if api.legacy is None:
        rows, token = await wm_page(paged.continuation_token, paged.limit)
    else:
        rows, token = await merged_page(
            api.legacy,
            paged.continuation_token,
            paged.limit,
            wm_page=wm_page,
            legacy_path=PREFIX + BY_NAME[listed.endpoint].route,
            key=listed.key,
            theirs=pools_theirs(api),
        )
    return JSONResponse(answer(listed.key, rows, token))
