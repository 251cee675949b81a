"""The HTTP API of the web process.

Worker endpoints: register (identity proof), re-register and everything after it with the
worker's own secret. Operator endpoints: a bearer token from the environment. Bodies are never
logged: they hold proofs and secrets. Every error is a `Problem` with a stable code; identity
rejections all get the same body so a forger learns nothing from it. Load shedding, body limits
and the last-resort error answer are the guard's (wm/api/guard.py).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from typing import Annotated

from fastapi import FastAPI, Header, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import Engine
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from wm.api import auth
from wm.api.guard import Guard
from wm.api.models import (
    ID_MAX_CHARS,
    ID_PATTERN,
    Problem,
    RegisterRequest,
    RegisterResponse,
    ReregisterRequest,
    ReregisterResponse,
    ShouldTerminateResponse,
    WorkerErrorReport,
)
from wm.config import format_key_path
from wm.db import pool_errors, registration
from wm.db import pools as pool_store
from wm.db.pool_errors import NewPoolError
from wm.db.workers import list_workers
from wm.identity import ExpectedIdentity, IdentityRejected, IdentityVerifier
from wm.model import WorkerState
from wm.telemetry import capture, log

MAX_BODY_BYTES = 64 * 1024
# API requests handled at once; more get 429. procs/web.py passes its database pool's size, so a
# request in flight never waits for a connection.
MAX_IN_FLIGHT = 10
RETRY_AFTER_S = 2
BODY_TIMEOUT_S = 10.0  # a registration body is a few KiB: far longer than any client needs
RETRY_AFTER = {"Retry-After": str(RETRY_AFTER_S)}
WORKER_REPORTS_PER_HOUR = 10  # error reports one worker may add to its pool's errors per hour
REPORTS_RETRY_AFTER_S = 300
EXEMPT_FROM_SHEDDING = ("/healthz", "/metrics")  # probes must see a busy process alive
PROOF_REJECTED = Problem(code="identity-rejected", message="the identity proof was not accepted")
# Answered 503 (retry later): the database is unreachable, restarting, or its pool exhausted.
# Any other database error is a bug, answered 500 by the guard.
DATABASE_DOWN = (OperationalError, InterfaceError, DisconnectionError, PoolTimeout)
HTTP_CODES = {
    400: "bad-request",
    404: "not-found",
    405: "method-not-allowed",
    408: "body-timeout",
    413: "too-large",
}
# Path parameters: the same rules as ids in bodies (no control characters, bounded).
PathId = Annotated[str, Path(min_length=1, max_length=ID_MAX_CHARS, pattern=ID_PATTERN)]


class ApiError(Exception):
    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        self.status = status
        self.problem = Problem(code=code, message=message)
        self.headers = headers


def create_app(
    engine: Engine,
    verifiers: Mapping[str, IdentityVerifier],
    *,
    deployment_id: str,
    audience: str,
    operator_token: str | None,
    max_in_flight: int = MAX_IN_FLIGHT,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> FastAPI:
    app = FastAPI(
        title="wm worker API",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.add_middleware(
        Guard,
        max_in_flight=max_in_flight,
        max_body_bytes=MAX_BODY_BYTES,
        retry_after_s=RETRY_AFTER_S,
        body_timeout_s=body_timeout_s,
        exempt_paths=EXEMPT_FROM_SHEDDING,
    )

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.problem.model_dump(), status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Name the fields, never echo their values (they may hold proofs or secrets).
        fields = [
            f"{format_key_path([p for p in e['loc'] if p != 'body'])}: {_what_is_wrong(e)}"
            for e in exc.errors()
        ]
        return _problem(400, "bad-request", "; ".join(fields))

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        # Starlette's own answers (unknown route, wrong method, a body that is not JSON, a body
        # over the limit) in the same Problem shape as every other error.
        code = HTTP_CODES.get(exc.status_code, "error")
        message = "the body is not valid JSON" if exc.status_code == 400 else str(exc.detail)
        return _problem(exc.status_code, code, message, exc.headers)

    async def database_down(_request: Request, exc: Exception) -> JSONResponse:
        log("api-database-error", logging.ERROR, error=type(exc).__name__)
        return _problem(
            503, "unavailable", "the database is unavailable; retry shortly", RETRY_AFTER
        )

    for error_type in DATABASE_DOWN:
        app.add_exception_handler(error_type, database_down)

    @app.post(
        "/api/v1/workers/register",
        response_model=RegisterResponse,
        responses={
            400: {"model": Problem},
            403: {"model": Problem},
            404: {"model": Problem},
            409: {"model": Problem},
        },
    )
    def register(body: RegisterRequest) -> RegisterResponse:
        """Register a worker that proves, with its cloud's identity proof, that it is that VM."""
        if not registration.pool_exists(engine, body.pool_id):
            raise ApiError(404, "unknown-pool", f"no worker pool {body.pool_id!r}")
        target = registration.registration_target(engine, body.worker_id)
        if target is None or target.worker.pool_id != body.pool_id:
            raise ApiError(404, "unknown-worker", f"no worker {body.worker_id!r} in this pool")
        allowed = {target.pool_provider_id, *target.previous_provider_ids} - {None}
        if body.provider_id not in allowed or target.worker.provider_id != body.provider_id:
            raise ApiError(400, "provider-mismatch", "the worker does not belong to that provider")
        if target.worker.worker_group != body.worker_group:
            raise ApiError(400, "group-mismatch", "the worker is not in that worker group")
        if target.worker.state != WorkerState.REQUESTED:
            raise ApiError(409, "not-requested", "the worker is not waiting to register")
        if target.expired:
            raise ApiError(409, "deadline-passed", "the registration deadline has passed")
        verifier = verifiers.get(body.provider_id)
        if verifier is None:
            raise ApiError(400, "provider-mismatch", "no identity verifier for that provider")
        expected = ExpectedIdentity(
            deployment_id=deployment_id,
            provider_id=body.provider_id,
            pool_id=body.pool_id,
            worker_id=body.worker_id,
            region=target.worker.worker_group,
            cloud_id=target.worker.cloud_id,
            audience=audience,
            provider_data=target.worker.provider_data,
            requested_at=target.worker.created,
        )
        try:
            verifier.verify(body.identity_proof, expected)
        except IdentityRejected as rejected:
            log(
                "identity-rejected",
                logging.WARNING,
                worker=body.worker_id,
                provider=body.provider_id,
                reason=rejected.reason,
            )
            raise ApiError(403, PROOF_REJECTED.code, PROOF_REJECTED.message) from None
        except Exception as exc:
            # A verifier bug met input it did not expect. Fail closed, with the same answer as
            # any rejection (a 500 would tell a forger it reached somewhere new), and report it.
            where = traceback.extract_tb(exc.__traceback__)[-1]
            log(
                "identity-verifier-failed",
                logging.ERROR,
                worker=body.worker_id,
                provider=body.provider_id,
                error=type(exc).__name__,
                where=f"{where.filename}:{where.lineno}",
            )
            capture(exc, provider=body.provider_id)
            raise ApiError(403, PROOF_REJECTED.code, PROOF_REJECTED.message) from None
        secret = auth.new_secret()
        expires = registration.register(
            engine, body.worker_id, auth.secret_hash(secret), target.reregistration_timeout_s
        )
        if expires is None:  # a replay, or the deadline passed while we verified
            raise ApiError(409, "not-requested", "the worker is not waiting to register")
        log("worker-running", worker=body.worker_id, pool=body.pool_id, provider=body.provider_id)
        return RegisterResponse(
            worker_id=body.worker_id,
            secret=secret,
            expires=expires,
            worker_config=dict(target.worker_config),
        )

    @app.post(
        "/api/v1/workers/reregister",
        response_model=ReregisterResponse,
        responses={403: {"model": Problem}},
    )
    def reregister(body: ReregisterRequest) -> ReregisterResponse:
        """Rotate a registered worker's secret and extend its deadline."""
        target = registration.registration_target(engine, body.worker_id)
        if (
            target is None
            or target.worker.pool_id != body.pool_id
            or target.worker.worker_group != body.worker_group
        ):
            raise ApiError(403, "bad-secret", "unknown worker or wrong secret")
        secret = auth.new_secret()
        expires = registration.reregister(
            engine,
            body.worker_id,
            auth.secret_hash(body.secret),
            auth.secret_hash(secret),
            target.reregistration_timeout_s,
        )
        if expires is None:
            raise ApiError(403, "bad-secret", "unknown worker or wrong secret")
        return ReregisterResponse(worker_id=body.worker_id, secret=secret, expires=expires)

    def worker_from_secret(pool_id: str, group: str, worker_id: str, authorization: str | None):
        secret = auth.bearer(authorization)
        worker = (
            registration.worker_with_secret(engine, worker_id, auth.secret_hash(secret))
            if secret
            else None
        )
        if worker is None or worker.pool_id != pool_id or worker.worker_group != group:
            raise ApiError(403, "bad-secret", "unknown worker or wrong secret")
        return worker

    @app.get(
        "/api/v1/workers/{pool_id:path}/{group}/{worker_id}/should-terminate",
        response_model=ShouldTerminateResponse,
    )
    def should_terminate(
        pool_id: PathId, group: PathId, worker_id: PathId, authorization: str | None = Header(None)
    ) -> ShouldTerminateResponse:
        """Whether the worker should shut down (the pool has more capacity than it needs)."""
        worker = worker_from_secret(pool_id, group, worker_id, authorization)
        if worker.state == WorkerState.STOPPING:
            return ShouldTerminateResponse(should_terminate=True, reason=worker.stop_reason)
        reason = "scale-down" if worker.should_terminate else None
        return ShouldTerminateResponse(should_terminate=worker.should_terminate, reason=reason)

    @app.delete("/api/v1/workers/{pool_id:path}/{group}/{worker_id}", status_code=202)
    def remove(
        pool_id: PathId, group: PathId, worker_id: PathId, authorization: str | None = Header(None)
    ) -> dict[str, str]:
        """Remove a worker (the worker itself, or an operator): it stops and its VM is deleted."""
        token = auth.bearer(authorization)
        if auth.token_matches(token, operator_token):
            reason = "removed-by-operator"
            target = registration.registration_target(engine, worker_id)
            if target is None or target.worker.pool_id != pool_id:
                raise ApiError(404, "unknown-worker", f"no worker {worker_id!r} in this pool")
        else:
            worker_from_secret(pool_id, group, worker_id, authorization)
            reason = "removed-by-worker"
        registration.request_removal(engine, worker_id, reason)
        log("worker-removal-requested", worker=worker_id, pool=pool_id, reason=reason)
        return {"worker_id": worker_id, "state": "stopping"}

    @app.post("/api/v1/pools/{pool_id:path}/errors", status_code=201)
    def report_error(
        pool_id: PathId, body: WorkerErrorReport, authorization: str | None = Header(None)
    ) -> dict[str, str]:
        """A worker reports an error; it shows in `wm pools errors POOL`."""
        secret = auth.bearer(authorization)
        worker = (
            registration.worker_with_secret(engine, body.worker_id, auth.secret_hash(secret))
            if secret
            else None
        )
        if worker is None or worker.pool_id != pool_id:
            raise ApiError(403, "bad-secret", "unknown worker or wrong secret")
        report = NewPoolError(
            pool_id=pool_id,
            kind="worker-report",
            title=body.title,
            description=body.description,
            provider_id=worker.provider_id,
            launch_config_id=worker.launch_config_id,
            # The worker's id last: a report cannot name another worker as its sender.
            extra={**body.extra, "worker_id": worker.worker_id},
        )
        if not pool_errors.record_worker_report(
            engine, report, worker.worker_id, WORKER_REPORTS_PER_HOUR
        ):
            raise ApiError(
                429,
                "too-many-reports",
                f"this worker has sent {WORKER_REPORTS_PER_HOUR} error reports within the "
                "last hour; this one was not recorded",
                {"Retry-After": str(REPORTS_RETRY_AFTER_S)},
            )
        return {"status": "recorded"}

    def require_operator(authorization: str | None) -> None:
        if not operator_token:
            raise ApiError(403, "operator-disabled", "WM_OPERATOR_TOKEN is not set on this server")
        if not auth.token_matches(auth.bearer(authorization), operator_token):
            raise ApiError(401, "unauthorized", "an operator bearer token is required")

    @app.get("/api/v1/pools")
    def pools(authorization: str | None = Header(None)) -> list[dict]:
        """Every pool with pending tasks and capacity by state (operators)."""
        require_operator(authorization)
        return [s.__dict__ for s in pool_store.pool_statuses(engine)]

    @app.get("/api/v1/pools/{pool_id:path}/workers")
    def pool_workers(pool_id: PathId, authorization: str | None = Header(None)) -> list[dict]:
        """Workers of one pool (operators)."""
        require_operator(authorization)
        _known_pool(pool_id)
        return [_worker_view(w) for w in list_workers(engine, pool_id=pool_id)]

    @app.get("/api/v1/pools/{pool_id:path}/errors")
    def errors(pool_id: PathId, authorization: str | None = Header(None)) -> list[dict]:
        """Recent errors of one pool (operators)."""
        require_operator(authorization)
        _known_pool(pool_id)
        return [e.__dict__ for e in pool_errors.list_errors(engine, pool_id)]

    def _known_pool(pool_id: str) -> None:
        if not registration.pool_exists(engine, pool_id):
            raise ApiError(404, "unknown-pool", f"no worker pool {pool_id!r}")

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """200 when the database answers."""
        registration.pool_exists(engine, "")
        return {"status": "ok"}

    @app.get("/metrics")
    def metrics() -> PlainTextResponse:
        return PlainTextResponse(generate_latest().decode(), media_type=CONTENT_TYPE_LATEST)

    return app


def _worker_view(worker) -> dict:
    view = {k: v for k, v in worker.__dict__.items() if k not in ("idempotency_token",)}
    view["state"] = worker.state.value
    return view


def _what_is_wrong(error: Mapping) -> str:
    if error["type"] == "string_pattern_mismatch":  # ids: ID_PATTERN
        return "must not contain control characters"
    return str(error["msg"]).removeprefix("Value error, ")


def _problem(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        Problem(code=code, message=message).model_dump(),
        status_code=status,
        headers=dict(headers or {}),
    )
