"""Worker pool errors: a worker's report, the list of a pool's errors, and their counts."""

from __future__ import annotations

from typing import Annotated

from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from wm.api.endpoint import (
    PREFIX,
    ApiContext,
    Call,
    EndpointRouter,
    PagingQuery,
    Scope,
    endpoint,
    reply,
    require_pool,
    run,
)
from wm.api.endpoint_table import BY_NAME
from wm.api.models import (
    ReportWorkerErrorRequest,
    WorkerPoolError,
    WorkerPoolErrorList,
    WorkerPoolErrorStats,
)
from wm.api.views import error_id_from_slug, error_stats_since, error_stats_view, error_view
from wm.db import api_reads, error_stats, pool_errors
from wm.db.pool_errors import NewPoolError
from wm.take_over.routes import sum_error_stats

router = EndpointRouter()

WORKER_REPORTS_PER_HOUR = 10  # error reports one worker may add to its pool's errors per hour
REPORTS_RETRY_AFTER_S = 300


def report_scope(body: ReportWorkerErrorRequest) -> Scope:
    # The reporting worker is named by the body (WM api.js), and the body is shown in errors.
    ids = {"workerGroup": body.workerGroup, "workerId": body.workerId}
    return Scope(params=ids, payload=body.model_dump(), input=body)


def stats_scope(workerPoolId: str | None = None) -> Scope:
    pool_id = workerPoolId or None  # worker-manager takes an empty id as none
    # Every pool's stats need the scope for `*` itself (WM api.js).
    return Scope(params={"workerPoolId": pool_id or "*"}, input=pool_id)


@router.declare("reportWorkerError", response_model=WorkerPoolError)
async def report_worker_error(
    workerPoolId: str, call: Annotated[Call, endpoint(report_scope)]
) -> JSONResponse:
    """A worker reports an error; it shows in listWorkerPoolErrors (errors are public)."""
    await require_pool(call, workerPoolId, "Worker pool does not exist")
    return reply(await run(report, call.api, workerPoolId, call.input))


def report(api: ApiContext, pool_id: str, body: ReportWorkerErrorRequest) -> WorkerPoolError:
    worker = api_reads.worker_by_name(api.engine, pool_id, body.workerGroup, body.workerId)
    new = NewPoolError(
        pool_id=pool_id,
        kind=body.kind,
        title=body.title,
        description=body.description,
        provider_id=worker.provider_id if worker else None,
        launch_config_id=worker.launch_config_id if worker else None,
        # The worker's names last: a report cannot name another worker as its sender.
        extra={**body.extra, "workerGroup": body.workerGroup, "workerId": body.workerId},
    )
    stored = pool_errors.record_worker_report(
        api.engine,
        new,
        worker_key=worker.worker_id if worker else None,
        worker_group=body.workerGroup,
        worker_name=body.workerId,
        per_window=WORKER_REPORTS_PER_HOUR,
    )
    if stored is None:
        # Not a Taskcluster code: worker-manager has no such limit, and 429 is what says
        # "later" to any HTTP client without claiming the server failed.
        raise HTTPException(
            429,
            f"this worker has sent {WORKER_REPORTS_PER_HOUR} error reports within the "
            "last hour; this one was not recorded",
            {"Retry-After": str(REPORTS_RETRY_AFTER_S)},
        )
    return error_view(stored)


@router.declare("listWorkerPoolErrors", response_model=WorkerPoolErrorList)
async def list_worker_pool_errors(
    workerPoolId: str,
    call: Annotated[Call, endpoint()],
    paged: PagingQuery,
    launchConfigId: str | None = None,
    errorId: str | None = None,
) -> JSONResponse:
    paged.page()  # checked before an unknown error id answers the empty list
    if errorId is not None and error_id_from_slug(errorId) is None:
        return reply(WorkerPoolErrorList(workerPoolErrors=[]))
    wanted = error_id_from_slug(errorId) if errorId is not None else None
    rows, token = await paged.rows(
        lambda offset, n: api_reads.errors_page(
            call.api.engine,
            workerPoolId,
            offset=offset,
            limit=n,
            launch_config_id=launchConfigId,
            error_id=wanted,
        )
    )
    return reply(
        WorkerPoolErrorList(workerPoolErrors=[error_view(e) for e in rows], continuationToken=token)
    )


@router.declare("workerPoolErrorStats", response_model=WorkerPoolErrorStats)
async def worker_pool_error_stats(call: Annotated[Call, endpoint(stats_scope)]) -> JSONResponse:
    """Errors counted per day (the last 7), per hour (the last 24), by title, code, pool
    and launch config: of one pool, or of every pool without `workerPoolId`."""
    pool_id: str | None = call.input
    if pool_id is not None:
        await require_pool(call, pool_id, "Worker pool does not exist")
    found = await run(error_stats.error_counts, call.api.engine, pool_id, error_stats_since)
    mine = error_stats_view(pool_id, found)
    legacy = call.api.legacy
    if pool_id is not None or legacy is None:
        return reply(mine)
    # A take-over, every pool's: the legacy's errors counted too (its pools' and, until they
    # age out, those of the pools it exported to wm).
    theirs = await legacy.read(PREFIX + BY_NAME["workerPoolErrorStats"].route, {})
    totals = theirs.get("totals")
    shown = mine.model_dump(mode="json", exclude_none=True)
    if isinstance(totals, dict):
        shown["totals"] = sum_error_stats(shown["totals"], totals)
    return JSONResponse(shown)
