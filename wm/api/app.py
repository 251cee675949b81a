"""The web process's HTTP API: Taskcluster's worker-manager API, under /api/worker-manager/v1/.

Routes, bodies, scopes and errors are worker-manager's own (TC `services/worker-manager/src/
api.js` and `generated/references.json`, taskcluster/taskcluster @ 9d59eb59), so worker-runner,
generic-worker and the Taskcluster clients talk to wm unchanged. This module assembles the
application: its context (wm/api/endpoint.py `ApiContext`), its error answers and the routers
(wm/api/routers/, one per resource). `registerWorker` proves a worker by its cloud's identity
proof and answers Taskcluster credentials; every other endpoint but the health routes checks
Hawk and the endpoint's scope expression, in the one dependency every route declares
(wm/api/endpoint.py `endpoint`; wm/api/authn.py, wm/tc/authorize.py). Bodies are never logged
(they hold proofs and secrets), and error bodies never echo the payloads of register/reregister.
Load shedding, body limits and the last-resort error answer are the guard's (wm/api/guard.py);
`/healthz`, `/metrics` and the OpenAPI document stay at wm's own paths.

Pool ids hold a `/`, which clients send escaped (`proj-x%2Fci`). Starlette decodes the path
before routing, so `KeepEscapedSlashes` routes on the raw path with `%2F` left escaped, and the
`poolid` path convertor (wm/api/endpoint.py) accepts one `%2F` or one literal `/`
(worker-manager's `{*workerPoolId}`) and unescapes it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import Engine
from starlette.exceptions import HTTPException

from wm.api.authn import Authenticator, IssuerSource
from wm.api.endpoint import PREFIX, ApiContext, TaskclusterRoute, error_context
from wm.api.errors import (
    DATABASE_DOWN,
    RETRY_AFTER_S,
    database_down_response,
    error_response,
)
from wm.api.guard import Guard, KeepEscapedSlashes
from wm.api.models import SCHEMA_ERROR
from wm.api.routers import errors, health, pools, providers, workers
from wm.db.schema import Readiness
from wm.take_over.forwarding import Forwarding
from wm.take_over.legacy_forwarder import LegacyForwarder
from wm.tc.errors import TaskclusterError
from wm.workers.identity import IdentityVerifier

MAX_BODY_BYTES = 64 * 1024
# body-parser's '10mb' (TC libraries/api/src/api.js), for pool definitions: see body_limit.
MAX_DEFINITION_BODY_BYTES = 10 * 1024 * 1024
# API requests handled at once; more get 429. procs/web.py sizes its database pool by it, so a
# request in flight never waits for a connection. Measured with a registration storm (bench/
# README.md, "registration"): beyond 20 no more gets through a process, below it shed workers
# wait two Retry-Afters at the p95; each in flight costs a database connection.
MAX_IN_FLIGHT = 20
BODY_TIMEOUT_S = 10.0  # a registration body is a few KiB; a 10 MB definition needs 1 MB/s
# Probes must see a busy process alive: never shed.
EXEMPT_FROM_SHEDDING = (
    "/healthz",
    "/metrics",
    f"{PREFIX}/ping",
    f"{PREFIX}/__lbheartbeat__",
    f"{PREFIX}/__heartbeat__",
    f"{PREFIX}/__version__",
)
# In the order worker-manager's routes were declared before routers (a path two routes could
# match goes to the first).
ROUTERS = (health.router, workers.router, errors.router, pools.router, providers.router)


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
    legacy: LegacyForwarder | None = None,
    schema: Readiness | None = None,
) -> FastAPI:
    """The web process's application: its context, its error answers and its routers."""
    app = FastAPI(
        title="wm: Taskcluster's worker-manager API",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.api = ApiContext(
        engine=engine,
        verifiers=verifiers,
        provider_kinds=provider_kinds,
        regions=dict(provider_regions or {}),
        workers_register=dict(workers_register or {}),
        deployment_id=deployment_id,
        root_url=root_url,
        authenticator=authenticator,
        issuer=issuer,
        version=version,
        legacy=legacy,
        schema=schema or Readiness(problem=None),
    )
    app.add_middleware(KeepEscapedSlashes, prefix=PREFIX)
    if legacy is not None:  # a take-over: what is not wm's goes to the legacy worker-manager
        app.add_middleware(
            Forwarding, prefix=PREFIX, legacy=legacy, providers=provider_kinds, engine=engine
        )
    app.add_middleware(
        Guard,
        max_in_flight=max_in_flight,
        body_limit=body_limit,
        retry_after_s=RETRY_AFTER_S,
        body_timeout_s=body_timeout_s,
        exempt_paths=EXEMPT_FROM_SHEDDING,
        ready=lambda: app.state.api.schema.ready,
    )
    app.router.route_class = TaskclusterRoute
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(HTTPException, http_error)
    for error_type in DATABASE_DOWN:
        app.add_exception_handler(error_type, database_down)
    for router in ROUTERS:
        app.include_router(router)
    app.include_router(health.own)
    return app


async def invalid(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    method, params, payload = error_context(request)
    errors = exc.errors()
    if any(e["type"] == "json_invalid" for e in errors):
        error = TaskclusterError("MalformedPayload", "Failed to parse the request body")
    elif all(e["loc"][:1] == ("query",) for e in errors):
        error = TaskclusterError("InvalidRequestArguments", _describe(errors))
    else:
        error = TaskclusterError("InputValidationError", _describe(errors))
    return error_response(error, method=method, params=params, payload=payload)


async def http_error(request: Request, exc: Exception) -> JSONResponse:
    # Starlette's own answers: an unknown route, a wrong method, a body too large or late.
    assert isinstance(exc, HTTPException)
    method, params, payload = error_context(request)
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
    method, params, payload = error_context(request)
    return database_down_response(exc, method, params, payload)


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


_HTTP_CODES = {405: "MethodNotAllowed", 408: "RequestTimeout", 429: "TooManyRequests"}


def _describe(errors: Any) -> str:
    """The fields that failed and why, never their values (they may hold proofs or secrets):
    a body's schema problems as wm.pools.json_check names them, anything else as pydantic does."""
    lines = []
    for error in errors:
        if error["type"] == SCHEMA_ERROR:
            lines += error["ctx"]["problems"]
            continue
        where = ".".join(str(p) for p in error["loc"] if p not in ("body", "query"))
        lines.append(f"{where or 'body'}: {str(error['msg']).removeprefix('Value error, ')}")
    return "Schema validation error:\n" + "\n".join(lines)
