"""The web process's HTTP API: Taskcluster's worker-manager API, under /api/worker-manager/v1/.

Routes, bodies, scopes and errors are worker-manager's own (TC `services/worker-manager/src/
api.js` and `generated/references.json`, taskcluster/taskcluster @ 9d59eb59), so worker-runner,
generic-worker and the Taskcluster clients talk to wm unchanged. `registerWorker` proves a
worker by its cloud's identity proof and answers Taskcluster credentials; every other endpoint
but the health routes checks Hawk and the endpoint's scope expression (wm/api/authn.py,
wm/tc/authorize.py). Bodies are never logged (they hold proofs and secrets), and error bodies
never echo the payloads of register/reregister. Load shedding, body limits and the last-resort
error answer are the guard's (wm/api/guard.py); `/healthz`, `/metrics` and the OpenAPI
document stay at wm's own paths.

Pool ids hold a `/`, which clients send escaped (`proj-x%2Fci`). Starlette decodes the path
before routing, so `KeepEscapedSlashes` routes on the raw path with `%2F` left escaped, and the
`poolid` path convertor accepts one `%2F` or one literal `/` (worker-manager's `{*workerPoolId}`)
and unescapes it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
import traceback
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from fastapi import FastAPI, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel
from sqlalchemy import Engine
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException

from wm.api.authn import Authenticator, IssuerSource
from wm.api.errors import error_response
from wm.api.guard import Guard, KeepEscapedSlashes
from wm.api.models import (
    NAME_PATTERN,
    POOL_ID_PATTERN,
    SCHEMA_ERROR,
    Credentials,
    Ping,
    ProviderList,
    RegisterWorkerRequest,
    RegisterWorkerResponse,
    ReportWorkerErrorRequest,
    ReregisterWorkerRequest,
    ReregisterWorkerResponse,
    ShouldWorkerTerminateResponse,
    UpdateWorkerPoolRequest,
    Worker,
    WorkerList,
    WorkerPool,
    WorkerPoolDefinitionRequest,
    WorkerPoolError,
    WorkerPoolErrorList,
    WorkerPoolErrorStats,
    WorkerPoolLaunchConfigList,
    WorkerPoolList,
    WorkerPoolListStats,
    WorkerPoolStats,
)
from wm.api.paging import page_from_query, paginate
from wm.api.queries import check_query
from wm.api.views import (
    error_id_from_slug,
    error_stats_since,
    error_stats_view,
    error_view,
    launch_config_stats,
    launch_config_view,
    pool_stats,
    pool_view,
    provider_list,
    worker_view,
)
from wm.db import api_reads, error_stats, pool_errors, registration
from wm.db import pools as pool_store
from wm.db.engine import ping as ping_database
from wm.db.pool_errors import NewPoolError
from wm.identity import ExpectedIdentity, IdentityRejected, IdentityVerifier
from wm.model import LaunchConfigRecord, PoolRecord, WorkerState
from wm.pool_apply import (
    ApplyPlan,
    plan_apply,
    plan_delete,
    same_definition,
    unscanned_worker_groups,
)
from wm.pool_definition import (
    NULL_PROVIDER,
    DefinitionInvalid,
    PoolDefinition,
    parse_pool_definition,
)
from wm.tc.authorize import authorize
from wm.tc.credentials import new_worker_secret, worker_credentials
from wm.tc.endpoint_scopes import ENDPOINT_SCOPES
from wm.tc.errors import TaskclusterError
from wm.tc.hawk import Authenticated, AuthenticationFailed, HawkRequest, request_host_port
from wm.tc.scopes import can_render_from
from wm.telemetry import capture, log

PREFIX = "/api/worker-manager/v1"
MAX_BODY_BYTES = 64 * 1024
# body-parser's '10mb' (TC libraries/api/src/api.js), for pool definitions: see body_limit.
MAX_DEFINITION_BODY_BYTES = 10 * 1024 * 1024
PROVIDERS_PAGE = 100  # WM api.js listProviders' default limit
# API requests handled at once; more get 429. procs/web.py passes its database pool's size, so a
# request in flight never waits for a connection.
MAX_IN_FLIGHT = 10
RETRY_AFTER_S = 2
BODY_TIMEOUT_S = 10.0  # a registration body is a few KiB; a 10 MB definition needs 1 MB/s
RETRY_AFTER = {"Retry-After": str(RETRY_AFTER_S)}
WORKER_REPORTS_PER_HOUR = 10  # error reports one worker may add to its pool's errors per hour
REPORTS_RETRY_AFTER_S = 300
# Probes must see a busy process alive: never shed.
EXEMPT_FROM_SHEDDING = (
    "/healthz",
    "/metrics",
    f"{PREFIX}/ping",
    f"{PREFIX}/__lbheartbeat__",
    f"{PREFIX}/__heartbeat__",
    f"{PREFIX}/__version__",
)
# Answered 503 (retry later): the database is unreachable, restarting, or its pool exhausted.
# Any other database error is a bug, answered 500 by the guard.
DATABASE_DOWN = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout)
# registerWorker's answer to every refused proof, by provider kind (worker-manager's words).
PROOF_REJECTED = {
    "aws": "Instance identity document validation error",
    "gcp": "Token validation error",
    "azure": "Signature validation error",
}
# Request bodies that hold proofs or secrets are never echoed in an error's requestInfo.
OMITTED = "(OMITTED)"
SECRET_BODIES = frozenset({"registerWorker", "reregisterWorker"})
SCALE_DOWN_REASON = "worker pool has more capacity than it needs"
LAUNCH_CONFIG_ARCHIVED = "launch config archived"
UNKNOWN_METHOD = "unknown"

_NAME = re.compile(NAME_PATTERN)
_POOL = re.compile(POOL_ID_PATTERN)
T = TypeVar("T")


class PoolIdConvertor(Convertor[str]):
    """A worker pool id in a path: `<a>%2F<b>` as clients escape it, or `<a>/<b>`."""

    regex = "[^/%]+(?:%2[Ff]|/)[^/%]+"  # Taskcluster pool ids hold no other escape

    def convert(self, value: str) -> str:
        return value.replace("%2F", "/").replace("%2f", "/")

    def to_string(self, value: str) -> str:
        return value.replace("/", "%2F")


register_url_convertor("poolid", PoolIdConvertor())


def create_app(
    engine: Engine,
    verifiers: Mapping[str, IdentityVerifier],
    *,
    provider_kinds: Mapping[str, str],
    provider_regions: Mapping[str, Sequence[str]] | None = None,
    workers_register: Mapping[str, bool] | None = None,
    deployment_id: str,
    root_url: str,
    authenticator: Authenticator,
    issuer: IssuerSource,
    version: str = "0",
    max_in_flight: int = MAX_IN_FLIGHT,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> FastAPI:
    started = time.monotonic()
    registers = dict(workers_register or {})
    regions = dict(provider_regions or {})
    app = FastAPI(
        title="wm: Taskcluster's worker-manager API",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(KeepEscapedSlashes, prefix=PREFIX)
    app.add_middleware(
        Guard,
        max_in_flight=max_in_flight,
        body_limit=body_limit,
        retry_after_s=RETRY_AFTER_S,
        body_timeout_s=body_timeout_s,
        exempt_paths=EXEMPT_FROM_SHEDDING,
    )

    # -- errors ----------------------------------------------------------------------------

    def context(request: Request) -> tuple[str, dict[str, str], Any]:
        return getattr(request.state, "tc", (UNKNOWN_METHOD, {}, {}))

    class TaskclusterRoute(APIRoute):
        """Answers a TaskclusterError raised by its endpoint. (Not an exception handler:
        Starlette clears a handled exception's traceback, which a frozen dataclass refuses.)"""

        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def handle(request: Request) -> Response:
                # What an error body names, until the endpoint knows more (a body that fails
                # validation never reaches it).
                params = {k: str(v) for k, v in request.path_params.items()}
                shown = OMITTED if self.name in SECRET_BODIES else {}
                request.state.tc = (self.name, params, shown)
                try:
                    return await handler(request)
                except TaskclusterError as error:
                    method, params, payload = context(request)
                    return error_response(error, method=method, params=params, payload=payload)

            return handle

    app.router.route_class = TaskclusterRoute

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        method, params, payload = context(request)
        errors = exc.errors()
        if any(e["type"] == "json_invalid" for e in errors):
            error = TaskclusterError("MalformedPayload", "Failed to parse the request body")
        elif all(e["loc"][:1] == ("query",) for e in errors):
            error = TaskclusterError("InvalidRequestArguments", _describe(errors))
        else:
            error = TaskclusterError("InputValidationError", _describe(errors))
        return error_response(error, method=method, params=params, payload=payload)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        # Starlette's own answers: an unknown route, a wrong method, a body too large or late.
        method, params, payload = context(request)
        if exc.status_code == 413:
            error = TaskclusterError("InputTooLarge", str(exc.detail))
        elif exc.status_code == 400:
            error = TaskclusterError("MalformedPayload", "Failed to parse the request body")
        elif exc.status_code == 404:
            error = TaskclusterError("ResourceNotFound", "No such route")
        else:
            return error_response(
                None,
                code=_HTTP_CODES.get(exc.status_code, "InternalServerError"),
                status=exc.status_code,
                message=str(exc.detail),
                method=method,
                params=params,
                payload=payload,
                headers=exc.headers,
            )
        return error_response(error, method=method, params=params, payload=payload)

    async def database_down(request: Request, exc: Exception) -> JSONResponse:
        log("api-database-error", logging.ERROR, error=type(exc).__name__)
        method, params, payload = context(request)
        return error_response(
            None,
            code="ServiceUnavailable",
            status=503,
            message="the database is unavailable; retry shortly",
            method=method,
            params=params,
            payload=payload,
            headers=RETRY_AFTER,
        )

    for error_type in DATABASE_DOWN:
        app.add_exception_handler(error_type, database_down)

    # -- plumbing ---------------------------------------------------------------------------

    async def begin(
        request: Request, name: str, params: Mapping[str, str], payload: Any = None
    ) -> None:
        """Name the call for error bodies, check its path parameters, and its query unless
        Taskcluster authorizes the endpoint first (then `check` does, after the scopes).

        (Taskcluster checks path parameters after such an endpoint's scopes too; wm checks them
        first, so a malformed id is refused without a call to the auth service.)"""
        shown = {} if payload is None else payload
        request.state.tc = (name, dict(params), shown)
        check_path(params)
        if not authorized_by_path(name, params):
            check_query(name, query_string(request))

    async def check(
        request: Request, name: str, scope_params: Mapping[str, object]
    ) -> Authenticated | None:
        """Hawk and the endpoint's scopes, off the event loop (it may call the auth service)."""
        hawk = await hawk_request(request)
        client_ip = request.client.host if request.client else None
        who = await run_in_threadpool(
            authorize,
            ENDPOINT_SCOPES[name],
            scope_params,
            lambda: authenticator.authenticate(hawk, client_ip),
        )
        _, params, _ = context(request)
        if authorized_by_path(name, params):
            check_query(name, query_string(request))
        return who

    def authorized_by_path(name: str, params: Mapping[str, str]) -> bool:
        # TC auth.js `useUrlParams`: an endpoint whose scopes render from its path alone is
        # authorized before its parameters and query are checked; the others are authorized by
        # their handler, after those checks.
        template = ENDPOINT_SCOPES[name]
        return template is not None and can_render_from(template, params)

    async def run(fn: Callable[..., T], *args: Any) -> T:
        return await run_in_threadpool(fn, *args)

    def reply(model: BaseModel) -> JSONResponse:
        return JSONResponse(model.model_dump(mode="json", exclude_none=True))

    # -- health ------------------------------------------------------------------------------

    @app.get(f"{PREFIX}/ping", response_model=Ping, name="ping")
    async def ping(request: Request) -> JSONResponse:
        await begin(request, "ping", {})
        return reply(Ping(alive=True, uptime=round(time.monotonic() - started, 3)))

    @app.get(f"{PREFIX}/__lbheartbeat__", name="lbheartbeat")
    async def lbheartbeat(request: Request) -> JSONResponse:
        await begin(request, "lbheartbeat", {})
        return JSONResponse({})

    @app.get(f"{PREFIX}/__version__", name="version")
    async def version_info(request: Request) -> JSONResponse:
        await begin(request, "version", {})
        # Dockerflow's version object; wm knows its package version only.
        return JSONResponse({"source": "wm", "version": version, "commit": "", "build": ""})

    @app.get(f"{PREFIX}/__heartbeat__", name="heartbeat")
    async def heartbeat(request: Request) -> JSONResponse:
        await begin(request, "heartbeat", {})
        await run(ping_database, engine)
        return JSONResponse({})

    # -- the worker interface ----------------------------------------------------------------

    @app.post(
        f"{PREFIX}/worker/register", response_model=RegisterWorkerResponse, name="registerWorker"
    )
    async def register_worker(request: Request, body: RegisterWorkerRequest) -> JSONResponse:
        """Register a running worker, proven by its cloud's identity proof: Taskcluster
        credentials, its worker config and the secret for reregisterWorker."""
        await begin(request, "registerWorker", {}, OMITTED)
        return reply(await run(register, body))

    def register(body: RegisterWorkerRequest) -> RegisterWorkerResponse:
        # worker-manager's order (WM src/api.js registerWorker); the state is checked before
        # the proof, so a replay costs no signature check.
        if not registration.pool_exists(engine, body.workerPoolId):
            raise TaskclusterError("ResourceNotFound", "Worker pool does not exist")
        verifier = verifiers.get(body.providerId)
        if verifier is None:
            raise TaskclusterError("ResourceNotFound", "Provider does not exist")
        target = registration.registration_target(
            engine, body.workerPoolId, body.workerGroup, body.workerId
        )
        if target is None:
            raise TaskclusterError("ResourceNotFound", "Worker not found")
        allowed = {target.pool_provider_id, *target.previous_provider_ids} - {None}
        if body.providerId not in allowed:
            raise TaskclusterError("InputError", "Worker pool does not use this provider")
        if target.expired:
            raise TaskclusterError("InputError", "Worker has expired")
        if target.worker.provider_id != body.providerId:
            raise TaskclusterError("InputError", "Worker does not belong to this provider")
        if target.worker.state != WorkerState.REQUESTED:
            raise TaskclusterError("InputError", "This worker is either stopped or running")
        worker = target.worker
        expected = ExpectedIdentity(
            deployment_id=deployment_id,
            provider_id=body.providerId,
            pool_id=body.workerPoolId,
            worker_id=worker.worker_id,
            region=worker.worker_group,
            cloud_id=worker.cloud_id,
            tc_worker_id=worker.tc_worker_id,
            audience=root_url,
            provider_data=worker.provider_data,
            requested_at=worker.created,
        )
        refused = PROOF_REJECTED.get(provider_kinds.get(body.providerId, ""), "Invalid proof")
        try:
            verifier.verify(body.workerIdentityProof, expected)
        except IdentityRejected as rejected:
            log(
                "identity-rejected",
                logging.WARNING,
                worker=worker.worker_id,
                provider=body.providerId,
                reason=rejected.reason,
            )
            raise TaskclusterError("InputError", refused) from None
        except Exception as exc:
            # A verifier bug met input it did not expect. Fail closed, with the same answer as
            # any rejection (a 500 would tell a forger it reached somewhere new), and report it.
            where = traceback.extract_tb(exc.__traceback__)[-1]
            log(
                "identity-verifier-failed",
                logging.ERROR,
                worker=worker.worker_id,
                provider=body.providerId,
                error=type(exc).__name__,
                where=f"{where.filename}:{where.lineno}",
            )
            capture(exc, provider=body.providerId)
            raise TaskclusterError("InputError", refused) from None
        secret = new_worker_secret()
        expires = registration.register(
            engine,
            worker.worker_id,
            secret_hash(secret),
            target.reregistration_timeout_s,
            booted_at=body.boot_time(),
        )
        if expires is None:  # a concurrent registration won, or the deadline passed meanwhile
            raise TaskclusterError("InputError", "This worker is either stopped or running")
        log(
            "worker-running",
            worker=worker.worker_id,
            pool=body.workerPoolId,
            provider=body.providerId,
        )
        return RegisterWorkerResponse(
            expires=expires,
            credentials=issue(worker.provider_id, body, expires),
            workerConfig=dict(target.worker_config),
            secret=secret,
        )

    def issue(provider_id: str, body: Any, expires: datetime) -> Credentials:
        credentials = worker_credentials(
            issuer.get(),
            provider_id=provider_id,
            worker_pool_id=body.workerPoolId,
            worker_group=body.workerGroup,
            worker_id=body.workerId,
            expires=expires,
            now=datetime.now(UTC),
        )
        return Credentials(**credentials.as_json())

    @app.post(
        f"{PREFIX}/worker/reregister",
        response_model=ReregisterWorkerResponse,
        name="reregisterWorker",
    )
    async def reregister_worker(request: Request, body: ReregisterWorkerRequest) -> JSONResponse:
        """New credentials and a new secret for a running worker holding its current secret."""
        await begin(request, "reregisterWorker", {}, OMITTED)
        ids = {
            "workerPoolId": body.workerPoolId,
            "workerGroup": body.workerGroup,
            "workerId": body.workerId,
        }
        await check(request, "reregisterWorker", ids)
        return reply(await run(reregister, body))

    def reregister(body: ReregisterWorkerRequest) -> ReregisterWorkerResponse:
        refused = TaskclusterError("InputError", "Could not generate credentials for this secret")
        target = registration.registration_target(
            engine, body.workerPoolId, body.workerGroup, body.workerId
        )
        if target is None:
            raise refused
        secret = new_worker_secret()
        expires = registration.reregister(
            engine,
            target.worker.worker_id,
            secret_hash(body.secret),
            secret_hash(secret),
            target.reregistration_timeout_s,
        )
        if expires is None:  # wrong or old secret, not running, or expired
            raise refused
        return ReregisterWorkerResponse(
            expires=expires,
            credentials=issue(target.worker.provider_id, body, expires),
            secret=secret,
        )

    worker_path = f"{PREFIX}/workers/{{workerPoolId:poolid}}/{{workerGroup}}/{{workerId}}"

    @app.get(
        f"{worker_path}/should-terminate",
        response_model=ShouldWorkerTerminateResponse,
        name="shouldWorkerTerminate",
    )
    async def should_worker_terminate(
        request: Request, workerPoolId: str, workerGroup: str, workerId: str
    ) -> JSONResponse:
        """Whether the worker should shut down, and why."""
        ids = {"workerPoolId": workerPoolId, "workerGroup": workerGroup, "workerId": workerId}
        await begin(request, "shouldWorkerTerminate", ids)
        await check(request, "shouldWorkerTerminate", ids)
        worker = await run(api_reads.worker_by_name, engine, workerPoolId, workerGroup, workerId)
        if worker is None:
            raise TaskclusterError("ResourceNotFound", "Worker not found")
        archived = await run(
            api_reads.launch_config_archived, engine, worker.pool_id, worker.launch_config_id
        )
        if worker.state in (WorkerState.STOPPING, WorkerState.STOPPED):
            answer = (True, worker.stop_reason or f"worker is {worker.state.value}")
        elif archived:
            answer = (True, LAUNCH_CONFIG_ARCHIVED)  # worker-manager's own words
        elif worker.should_terminate:
            answer = (True, SCALE_DOWN_REASON)
        else:
            answer = (False, "none")
        return reply(ShouldWorkerTerminateResponse(terminate=answer[0], reason=answer[1]))

    @app.delete(worker_path, name="removeWorker")
    async def remove_worker(
        request: Request, workerPoolId: str, workerGroup: str, workerId: str
    ) -> JSONResponse:
        """Remove a worker: it goes to stopping and its VM is deleted by the scanner."""
        ids = {"workerPoolId": workerPoolId, "workerGroup": workerGroup, "workerId": workerId}
        await begin(request, "removeWorker", ids)
        who = await check(request, "removeWorker", ids)
        worker = await run(api_reads.worker_by_name, engine, workerPoolId, workerGroup, workerId)
        if worker is None:
            raise TaskclusterError("ResourceNotFound", "Worker not found")
        by_worker = who is not None and (who.client_id or "").startswith("worker/")
        reason = "removed-by-worker" if by_worker else "removed-by-operator"
        await run(registration.request_removal, engine, worker.worker_id, reason)
        log("worker-removal-requested", worker=worker.worker_id, pool=workerPoolId, reason=reason)
        return JSONResponse({})

    errors_path = f"{PREFIX}/worker-pool-errors/{{workerPoolId:poolid}}"

    @app.post(errors_path, response_model=WorkerPoolError, name="reportWorkerError")
    async def report_worker_error(
        request: Request, workerPoolId: str, body: ReportWorkerErrorRequest
    ) -> JSONResponse:
        """A worker reports an error; it shows in listWorkerPoolErrors (errors are public)."""
        await begin(request, "reportWorkerError", {"workerPoolId": workerPoolId}, body.model_dump())
        ids = {
            "workerPoolId": workerPoolId,
            "workerGroup": body.workerGroup,
            "workerId": body.workerId,
        }
        await check(request, "reportWorkerError", ids)
        return reply(await run(report, workerPoolId, body))

    def report(pool_id: str, body: ReportWorkerErrorRequest) -> WorkerPoolError:
        if not registration.pool_exists(engine, pool_id):
            raise TaskclusterError("ResourceNotFound", "Worker pool does not exist")
        worker = api_reads.worker_by_name(engine, pool_id, body.workerGroup, body.workerId)
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
            engine,
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

    # -- reads ----------------------------------------------------------------------------------

    @app.get(worker_path, response_model=Worker, name="worker")
    async def worker(
        request: Request, workerPoolId: str, workerGroup: str, workerId: str
    ) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId, "workerGroup": workerGroup, "workerId": workerId}
        await begin(request, "worker", ids)
        await check(request, "worker", ids)
        found = await run(api_reads.worker_by_name, engine, workerPoolId, workerGroup, workerId)
        if found is None:
            raise TaskclusterError("ResourceNotFound", "Worker not found")
        return reply(worker_view(found))

    @app.get(
        f"{PREFIX}/workers/{{workerPoolId:poolid}}/{{workerGroup}}",
        response_model=WorkerList,
        name="listWorkersForWorkerGroup",
    )
    async def list_workers_for_worker_group(
        request: Request,
        workerPoolId: str,
        workerGroup: str,
        continuationToken: str | None = None,
        limit: str | None = None,
    ) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId, "workerGroup": workerGroup}
        await begin(request, "listWorkersForWorkerGroup", ids)
        await check(request, "listWorkersForWorkerGroup", ids)
        page = page_from_query(continuationToken, limit)
        rows, token = await run(
            paginate,
            page,
            lambda offset, n: api_reads.workers_page(
                engine, workerPoolId, offset=offset, limit=n, worker_group=workerGroup
            ),
        )
        return reply(WorkerList(workers=[worker_view(w) for w in rows], continuationToken=token))

    @app.get(
        f"{PREFIX}/workers/{{workerPoolId:poolid}}",
        response_model=WorkerList,
        name="listWorkersForWorkerPool",
    )
    async def list_workers_for_worker_pool(
        request: Request,
        workerPoolId: str,
        continuationToken: str | None = None,
        limit: str | None = None,
        launchConfigId: str | None = None,
        state: str | None = None,
    ) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "listWorkersForWorkerPool", ids)
        await check(request, "listWorkersForWorkerPool", ids)
        page = page_from_query(continuationToken, limit)
        if not await run(registration.pool_exists, engine, workerPoolId):
            raise TaskclusterError("ResourceNotFound", "Worker Pool does not exist")
        rows, token = await run(
            paginate,
            page,
            lambda offset, n: api_reads.workers_page(
                engine,
                workerPoolId,
                offset=offset,
                limit=n,
                state=state,
                launch_config_id=launchConfigId,
            ),
        )
        return reply(WorkerList(workers=[worker_view(w) for w in rows], continuationToken=token))

    pool_path = f"{PREFIX}/worker-pool/{{workerPoolId:poolid}}"

    @app.get(pool_path, response_model=WorkerPool, name="workerPool")
    async def worker_pool(request: Request, workerPoolId: str) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "workerPool", ids)
        await check(request, "workerPool", ids)
        views = await run(
            lambda: api_reads.pools_page(engine, offset=0, limit=1, pool_id=workerPoolId)
        )
        if not views:
            raise TaskclusterError("ResourceNotFound", "Worker Pool does not exist")
        stats = await run(api_reads.state_counts, engine, [workerPoolId])
        return reply(pool_view(views[0], stats))

    def definition(pool_id: str, body: WorkerPoolDefinitionRequest) -> PoolDefinition:
        """The body as a definition its provider's schema accepts, or the error to answer."""
        if body.providerId != NULL_PROVIDER and body.providerId not in provider_kinds:
            valid = sorted([*provider_kinds, NULL_PROVIDER])
            raise TaskclusterError(
                "InputError",
                f"Invalid Provider: {body.providerId!r} is not one of {', '.join(valid)}",
            )
        raw = body.model_dump(
            include={"providerId", "description", "config", "owner", "emailOnError"}
        )
        try:
            parsed = parse_pool_definition(pool_id, raw, provider_kinds)
        except DefinitionInvalid as invalid:
            raise TaskclusterError("InputValidationError", "\n".join(invalid.problems)) from None
        problems = unscanned_worker_groups(parsed, regions)
        if problems:
            raise TaskclusterError("InputValidationError", "\n".join(problems))
        if parsed.warnings:  # accepted, as worker-manager accepts them; said in the log
            log("worker-pool-warnings", pool=pool_id, warnings=list(parsed.warnings))
        return parsed

    def log_definition_change(event: str, pool_id: str, plan: ApplyPlan) -> None:
        # The audit trail worker-manager keeps in its audit history: who is in the access log.
        if not plan.empty:
            log(event, pool=pool_id, changes=list(plan.lines))

    def pool_answer(pool_id: str) -> WorkerPool:
        views = api_reads.pools_page(engine, offset=0, limit=1, pool_id=pool_id)
        stats = api_reads.state_counts(engine, [pool_id])
        return pool_view(views[0], stats)

    def conflict_free(plan: ApplyPlan) -> ApplyPlan:
        if plan.conflicts:
            raise Refused(TaskclusterError("RequestConflict", "; ".join(plan.conflicts)))
        return plan

    async def apply_definitions(planner: Callable[..., ApplyPlan]) -> ApplyPlan:
        """Plan and apply in one transaction; a refusal rolls it back."""
        try:
            return await run(pool_store.apply_definitions, engine, planner)
        except Refused as refused:
            raise refused.error from None

    @app.put(pool_path, response_model=WorkerPool, name="createWorkerPool")
    async def create_worker_pool(
        request: Request, workerPoolId: str, body: WorkerPoolDefinitionRequest
    ) -> JSONResponse:
        """Create a worker pool from its definition; creating it again as it is answers the
        pool, with another definition 409."""
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "createWorkerPool", ids)
        await check(request, "createWorkerPool", {**ids, "providerId": body.providerId})
        parsed = definition(workerPoolId, body)

        def planner(pools: list[PoolRecord], lcs: list[LaunchConfigRecord]) -> ApplyPlan:
            existing = next((p for p in pools if p.pool_id == workerPoolId), None)
            if existing is not None and not same_definition(parsed, existing):
                raise Refused(TaskclusterError("RequestConflict", "Worker pool already exists"))
            if existing is not None:
                return ApplyPlan()
            return conflict_free(plan_apply([parsed], pools, lcs, workers_register=registers))

        plan = await apply_definitions(planner)
        log_definition_change("worker-pool-created", workerPoolId, plan)
        return reply(await run(pool_answer, workerPoolId))

    @app.post(pool_path, response_model=WorkerPool, name="updateWorkerPool")
    async def update_worker_pool(
        request: Request, workerPoolId: str, body: UpdateWorkerPoolRequest
    ) -> JSONResponse:
        """Replace a pool's definition; launch configs it no longer holds are archived. To
        delete a pool, set its providerId to "null-provider"."""
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "updateWorkerPool", ids)
        await check(request, "updateWorkerPool", {**ids, "providerId": body.providerId})
        parsed = definition(workerPoolId, body)
        if body.workerPoolId and body.workerPoolId != workerPoolId:
            raise TaskclusterError("InputError", "Incorrect workerPoolId in request body")

        def planner(pools: list[PoolRecord], lcs: list[LaunchConfigRecord]) -> ApplyPlan:
            if not any(p.pool_id == workerPoolId for p in pools):
                raise Refused(TaskclusterError("ResourceNotFound", "Worker pool does not exist"))
            return conflict_free(plan_apply([parsed], pools, lcs, workers_register=registers))

        plan = await apply_definitions(planner)
        log_definition_change("worker-pool-updated", workerPoolId, plan)
        return reply(await run(pool_answer, workerPoolId))

    @app.delete(pool_path, response_model=WorkerPool, name="deleteWorkerPool")
    async def delete_worker_pool(request: Request, workerPoolId: str) -> JSONResponse:
        """Mark a pool for deletion: it moves to the null provider, its launch configs are
        archived and its workers drain."""
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "deleteWorkerPool", ids)
        await check(request, "deleteWorkerPool", ids)

        def planner(pools: list[PoolRecord], lcs: list[LaunchConfigRecord]) -> ApplyPlan:
            pool = next((p for p in pools if p.pool_id == workerPoolId), None)
            if pool is None:
                raise Refused(TaskclusterError("ResourceNotFound", "Worker pool does not exist"))
            return plan_delete(pool, [lc for lc in lcs if lc.pool_id == workerPoolId])

        plan = await apply_definitions(planner)
        log_definition_change("worker-pool-deleted", workerPoolId, plan)
        return reply(await run(pool_answer, workerPoolId))

    @app.get(
        f"{pool_path}/launch-configs",
        response_model=WorkerPoolLaunchConfigList,
        name="listWorkerPoolLaunchConfigs",
    )
    async def list_worker_pool_launch_configs(
        request: Request,
        workerPoolId: str,
        continuationToken: str | None = None,
        limit: str | None = None,
        includeArchived: str | None = None,
    ) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "listWorkerPoolLaunchConfigs", ids)
        await check(request, "listWorkerPoolLaunchConfigs", ids)
        if not await run(registration.pool_exists, engine, workerPoolId):
            raise TaskclusterError("ResourceNotFound", "Worker pool does not exist")
        page = page_from_query(continuationToken, limit)
        rows, token = await run(
            paginate,
            page,
            lambda offset, n: api_reads.launch_configs_page(
                engine,
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

    @app.get(f"{pool_path}/stats", response_model=WorkerPoolStats, name="workerPoolStats")
    async def worker_pool_stats(request: Request, workerPoolId: str) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "workerPoolStats", ids)
        await check(request, "workerPoolStats", ids)
        views = await run(
            lambda: api_reads.pools_page(engine, offset=0, limit=1, pool_id=workerPoolId)
        )
        if not views:
            raise TaskclusterError("ResourceNotFound", "Worker Pool does not exist")
        stats = await run(api_reads.state_counts, engine, [workerPoolId])
        configs = [lc.launch_config_id for lc in views[0].launch_configs]
        return reply(
            WorkerPoolStats(launchConfigStats=launch_config_stats(workerPoolId, configs, stats))
        )

    @app.get(f"{PREFIX}/worker-pools", response_model=WorkerPoolList, name="listWorkerPools")
    async def list_worker_pools(
        request: Request, continuationToken: str | None = None, limit: str | None = None
    ) -> JSONResponse:
        await begin(request, "listWorkerPools", {})
        await check(request, "listWorkerPools", {})
        page = page_from_query(continuationToken, limit)
        views, token = await run(
            paginate, page, lambda offset, n: api_reads.pools_page(engine, offset=offset, limit=n)
        )
        stats = await run(api_reads.state_counts, engine, [v.pool.pool_id for v in views])
        pools = [pool_view(v, stats) for v in views]
        return reply(WorkerPoolList(workerPools=pools, continuationToken=token))

    @app.get(
        f"{PREFIX}/worker-pools/stats",
        response_model=WorkerPoolListStats,
        name="listWorkerPoolsStats",
    )
    async def list_worker_pools_stats(
        request: Request, continuationToken: str | None = None, limit: str | None = None
    ) -> JSONResponse:
        await begin(request, "listWorkerPoolsStats", {})
        await check(request, "listWorkerPoolsStats", {})
        page = page_from_query(continuationToken, limit)
        views, token = await run(
            paginate, page, lambda offset, n: api_reads.pools_page(engine, offset=offset, limit=n)
        )
        ids = [v.pool.pool_id for v in views]
        stats = await run(api_reads.state_counts, engine, ids)
        return reply(
            WorkerPoolListStats(
                workerPoolsStats=[pool_stats(pool_id, stats) for pool_id in ids],
                continuationToken=token,
            )
        )

    @app.get(errors_path, response_model=WorkerPoolErrorList, name="listWorkerPoolErrors")
    async def list_worker_pool_errors(
        request: Request,
        workerPoolId: str,
        continuationToken: str | None = None,
        limit: str | None = None,
        launchConfigId: str | None = None,
        errorId: str | None = None,
    ) -> JSONResponse:
        ids = {"workerPoolId": workerPoolId}
        await begin(request, "listWorkerPoolErrors", ids)
        await check(request, "listWorkerPoolErrors", ids)
        page = page_from_query(continuationToken, limit)
        if errorId is not None and error_id_from_slug(errorId) is None:
            return reply(WorkerPoolErrorList(workerPoolErrors=[]))
        wanted = error_id_from_slug(errorId) if errorId is not None else None
        rows, token = await run(
            paginate,
            page,
            lambda offset, n: api_reads.errors_page(
                engine,
                workerPoolId,
                offset=offset,
                limit=n,
                launch_config_id=launchConfigId,
                error_id=wanted,
            ),
        )
        return reply(
            WorkerPoolErrorList(
                workerPoolErrors=[error_view(e) for e in rows], continuationToken=token
            )
        )

    @app.get(
        f"{PREFIX}/worker-pool-errors/stats",
        response_model=WorkerPoolErrorStats,
        name="workerPoolErrorStats",
    )
    async def worker_pool_error_stats(
        request: Request, workerPoolId: str | None = None
    ) -> JSONResponse:
        """Errors counted per day (the last 7), per hour (the last 24), by title, code, pool
        and launch config: of one pool, or of every pool without `workerPoolId`."""
        await begin(request, "workerPoolErrorStats", {})
        pool_id = workerPoolId or None  # worker-manager takes an empty id as none
        # Every pool's stats need the scope for `*` itself (WM api.js).
        await check(request, "workerPoolErrorStats", {"workerPoolId": pool_id or "*"})
        if pool_id is not None and not await run(registration.pool_exists, engine, pool_id):
            raise TaskclusterError("ResourceNotFound", "Worker pool does not exist")
        found = await run(error_stats.error_counts, engine, pool_id, error_stats_since)
        return reply(error_stats_view(pool_id, found))

    @app.get(f"{PREFIX}/providers", response_model=ProviderList, name="listProviders")
    async def list_providers(
        request: Request, continuationToken: str | None = None, limit: str | None = None
    ) -> JSONResponse:
        await begin(request, "listProviders", {})
        await check(request, "listProviders", {})
        rows, token = provider_page(provider_list(provider_kinds), continuationToken, limit)
        return reply(ProviderList(providers=rows, continuationToken=token))

    # -- wm's own ------------------------------------------------------------------------------

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """200 when the database answers."""
        ping_database(engine)
        return {"status": "ok"}

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest().decode(), media_type=CONTENT_TYPE_LATEST)

    return app


def check_path(params: Mapping[str, str]) -> None:
    for key, value in params.items():
        pattern = _POOL if key == "workerPoolId" else _NAME
        if not pattern.match(value) or (key != "workerPoolId" and len(value) > 38):
            raise TaskclusterError(
                "InvalidRequestArguments",
                f"Invalid URL parameter {key}: does not match {pattern.pattern}",
            )


def query_string(request: Request) -> str:
    return request.scope.get("query_string", b"").decode("latin-1")


def provider_page(
    providers: Sequence[T], continuation_token: str | None, limit: str | None
) -> tuple[list[T], str | None]:
    """listProviders' page, as worker-manager cuts it (WM api.js): the token is the plain
    offset of the next page, the limit 100 unless given; a page that reaches the end has no
    token, and neither has the page of `limit=0` at offset 0 (JavaScript's falsy 0)."""
    start = int(continuation_token) if continuation_token else 0
    size = int(limit) if limit else PROVIDERS_PAGE
    end = start + size if start + size < len(providers) else None
    return list(providers[start:end]), str(end) if end else None


def body_limit(method: str, path: str) -> int:
    """The largest body a request may send (the guard answers 413 InputTooLarge beyond).

    Taskcluster accepts 10 MB on every route (TC `libraries/api/src/api.js` `inputLimit`), and
    pool definitions need it: a definition with many launch configs and their worker configs
    passes 64 KiB easily. Only create/updateWorkerPool get it. Every other body is a few KiB,
    and registerWorker is unauthenticated and called by every booting VM at once: a small limit
    there is what keeps a storm (or a flood of junk) from holding megabytes per request in
    flight. (Past its limit Taskcluster's body parser fails with a 500; wm answers the 413
    Taskcluster declares for it.)"""
    if method in ("PUT", "POST") and path.startswith(f"{PREFIX}/worker-pool/"):
        return MAX_DEFINITION_BODY_BYTES
    return MAX_BODY_BYTES


def secret_hash(secret: str) -> str:
    # Secrets are 264 random bits: a plain hash is enough, no slow KDF needed.
    return hashlib.sha256(secret.encode()).hexdigest()


async def hawk_request(request: Request) -> HawkRequest:
    """What the client signed: the resource exactly as received, host and port as it saw them."""
    raw_path = request.scope.get("raw_path") or request.url.path.encode()
    query = request.scope.get("query_string", b"")
    resource = raw_path.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")
    headers = request.headers
    try:
        host, port = request_host_port(
            headers.get("host", ""),
            tls=request.url.scheme == "https",
            forwarded_port=headers.get("x-forwarded-port"),
            forwarded_proto=headers.get("x-forwarded-proto"),
        )
    except AuthenticationFailed:
        host, port = "", 0  # no signature can match: authentication fails with its message
    return HawkRequest(
        method=request.method,
        resource=resource,
        host=host,
        port=port,
        authorization=headers.get("authorization"),
        content=await request.body(),
        content_type=headers.get("content-type"),
    )


_HTTP_CODES = {405: "MethodNotAllowed", 408: "RequestTimeout", 429: "TooManyRequests"}


def _describe(errors: Any) -> str:
    """The fields that failed and why, never their values (they may hold proofs or secrets):
    a body's schema problems as wm.json_check names them, anything else as pydantic does."""
    lines = []
    for error in errors:
        if error["type"] == SCHEMA_ERROR:
            lines += error["ctx"]["problems"]
            continue
        where = ".".join(str(p) for p in error["loc"] if p not in ("body", "query"))
        lines.append(f"{where or 'body'}: {str(error['msg']).removeprefix('Value error, ')}")
    return "Schema validation error:\n" + "\n".join(lines)


class Refused(Exception):
    """A refusal decided inside a transaction. TaskclusterError is frozen, and leaving a
    `with` block sets an exception's traceback, so it travels wrapped until outside."""

    def __init__(self, error: TaskclusterError) -> None:
        super().__init__(error.message)
        self.error = error
