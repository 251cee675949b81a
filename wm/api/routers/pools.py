"""Worker pools: their definitions (create, update, delete), reads, launch configs and stats."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from wm.api.endpoint import (
    PREFIX,
    ApiContext,
    Call,
    Scope,
    TaskclusterRoute,
    endpoint,
    reply,
    require_pool,
    run,
)
from wm.api.models import (
    UpdateWorkerPoolRequest,
    WorkerPool,
    WorkerPoolDefinitionRequest,
    WorkerPoolLaunchConfigList,
    WorkerPoolList,
    WorkerPoolListStats,
    WorkerPoolStats,
)
from wm.api.paging import page_from_query, paginate
from wm.api.views import launch_config_stats, launch_config_view, pool_stats, pool_view
from wm.db import api_reads
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

router = APIRouter(prefix=PREFIX, route_class=TaskclusterRoute)

POOL_PATH = "/worker-pool/{workerPoolId:poolid}"


def create_scope(body: WorkerPoolDefinitionRequest) -> Scope:
    return Scope(params={"providerId": body.providerId}, input=body)


def update_scope(body: UpdateWorkerPoolRequest) -> Scope:
    return Scope(params={"providerId": body.providerId}, input=body)


@router.get(POOL_PATH, response_model=WorkerPool, name="workerPool")
async def worker_pool(workerPoolId: str, call: Annotated[Call, endpoint()]) -> JSONResponse:
    engine = call.api.engine
    views = await run(lambda: api_reads.pools_page(engine, offset=0, limit=1, pool_id=workerPoolId))
    if not views:
        raise TaskclusterError("ResourceNotFound", "Worker Pool does not exist")
    stats = await run(api_reads.state_counts, engine, [workerPoolId])
    return reply(pool_view(views[0], stats))


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


def pool_answer(api: ApiContext, pool_id: str) -> WorkerPool:
    views = api_reads.pools_page(api.engine, offset=0, limit=1, pool_id=pool_id)
    stats = api_reads.state_counts(api.engine, [pool_id])
    return pool_view(views[0], stats)


async def change_pool(call: Call, event: str, pool_id: str, change: Change) -> JSONResponse:
    """Apply the change (wm/pools/changes.py), then answer the pool as it now is."""
    registers = call.api.workers_register
    outcome = await run(lambda: apply_change(call.api.engine, change, workers_register=registers))
    if isinstance(outcome, ApplyRefused):
        raise TaskclusterError(outcome.code, outcome.message)
    # The audit trail worker-manager keeps in its audit history: who is in the access log.
    if not outcome.empty:
        log(event, pool=pool_id, changes=list(outcome.lines))
    return reply(await run(pool_answer, call.api, pool_id))


@router.put(POOL_PATH, response_model=WorkerPool, name="createWorkerPool")
async def create_worker_pool(
    workerPoolId: str, call: Annotated[Call, endpoint(create_scope)]
) -> JSONResponse:
    """Create a worker pool from its definition; creating it again as it is answers the
    pool, with another definition 409."""
    parsed = definition(call.api, workerPoolId, call.input)
    return await change_pool(call, "worker-pool-created", workerPoolId, CreatePool(parsed))


@router.post(POOL_PATH, response_model=WorkerPool, name="updateWorkerPool")
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


@router.delete(POOL_PATH, response_model=WorkerPool, name="deleteWorkerPool")
async def delete_worker_pool(workerPoolId: str, call: Annotated[Call, endpoint()]) -> JSONResponse:
    """Mark a pool for deletion: it moves to the null provider, its launch configs are
    archived and its workers drain."""
    return await change_pool(call, "worker-pool-deleted", workerPoolId, DeletePool(workerPoolId))


@router.get(
    f"{POOL_PATH}/launch-configs",
    response_model=WorkerPoolLaunchConfigList,
    name="listWorkerPoolLaunchConfigs",
)
async def list_worker_pool_launch_configs(
    workerPoolId: str,
    call: Annotated[Call, endpoint()],
    continuationToken: str | None = None,
    limit: str | None = None,
    includeArchived: str | None = None,
) -> JSONResponse:
    await require_pool(call, workerPoolId, "Worker pool does not exist")
    page = page_from_query(continuationToken, limit)
    rows, token = await run(
        paginate,
        page,
        lambda offset, n: api_reads.launch_configs_page(
            call.api.engine,
            workerPoolId,
            offset=offset,
            limit=n,
            include_archived=includeArchived == "true",
        ),
    )
    return reply(
        WorkerPoolLaunchConfigList(
            workerPoolLaunchConfigs=[launch_config_view(r) for r in rows],
            continuationToken=token,
        )
    )


@router.get(f"{POOL_PATH}/stats", response_model=WorkerPoolStats, name="workerPoolStats")
async def worker_pool_stats(workerPoolId: str, call: Annotated[Call, endpoint()]) -> JSONResponse:
    engine = call.api.engine
    views = await run(lambda: api_reads.pools_page(engine, offset=0, limit=1, pool_id=workerPoolId))
    if not views:
        raise TaskclusterError("ResourceNotFound", "Worker Pool does not exist")
    stats = await run(api_reads.state_counts, engine, [workerPoolId])
    configs = [lc.launch_config_id for lc in views[0].launch_configs]
    return reply(
        WorkerPoolStats(launchConfigStats=launch_config_stats(workerPoolId, configs, stats))
    )


@router.get("/worker-pools", response_model=WorkerPoolList, name="listWorkerPools")
async def list_worker_pools(
    call: Annotated[Call, endpoint()],
    continuationToken: str | None = None,
    limit: str | None = None,
) -> JSONResponse:
    return await pools_listed(
        call.api, "workerPools", "/worker-pools", pools_json, continuationToken, limit
    )


WmPage = Callable[
    [ApiContext, str | None, str | None], Awaitable[tuple[list[dict[str, Any]], str | None]]
]


async def pools_listed(
    api: ApiContext,
    key: str,
    path: str,
    wm_page: WmPage,
    continuation_token: str | None,
    limit: str | None,
) -> JSONResponse:
    """A list of pools: wm's, or during a take-over wm's and the legacy's merged."""
    if api.legacy is None:
        rows, token = await wm_page(api, continuation_token, limit)
    else:
        rows, token = await merged_page(
            api.legacy,
            continuation_token,
            limit,
            wm_page=lambda inner, n: wm_page(api, inner, n),
            legacy_path=f"{PREFIX}{path}",
            key=key,
            theirs=pools_theirs(api),
        )
    return JSONResponse(answer(key, rows, token))


async def pools_json(
    api: ApiContext, continuation_token: str | None, limit: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    engine = api.engine
    page = page_from_query(continuation_token, limit)
    views, token = await run(
        paginate, page, lambda offset, n: api_reads.pools_page(engine, offset=offset, limit=n)
    )
    stats = await run(api_reads.state_counts, engine, [v.pool.pool_id for v in views])
    listed = WorkerPoolList(workerPools=[pool_view(v, stats) for v in views])
    return listed.model_dump(mode="json", exclude_none=True)["workerPools"], token


@router.get("/worker-pools/stats", response_model=WorkerPoolListStats, name="listWorkerPoolsStats")
async def list_worker_pools_stats(
    call: Annotated[Call, endpoint()],
    continuationToken: str | None = None,
    limit: str | None = None,
) -> JSONResponse:
    return await pools_listed(
        call.api,
        "workerPoolsStats",
        "/worker-pools/stats",
        pool_stats_json,
        continuationToken,
        limit,
    )


async def pool_stats_json(
    api: ApiContext, continuation_token: str | None, limit: str | None
) -> tuple[list[dict[str, Any]], str | None]:
    engine = api.engine
    page = page_from_query(continuation_token, limit)
    views, token = await run(
        paginate, page, lambda offset, n: api_reads.pools_page(engine, offset=offset, limit=n)
    )
    ids = [v.pool.pool_id for v in views]
    stats = await run(api_reads.state_counts, engine, ids)
    listed = WorkerPoolListStats(workerPoolsStats=[pool_stats(pool_id, stats) for pool_id in ids])
    return listed.model_dump(mode="json", exclude_none=True)["workerPoolsStats"], token
