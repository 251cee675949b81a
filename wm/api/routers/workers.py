"""Workers: the worker interface (register, reregister, should-terminate, remove) and the
reads of workers by pool and worker group."""

from __future__ import annotations

import hashlib
import logging
import traceback
from datetime import UTC, datetime
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
    require_worker,
    run,
)
from wm.api.models import (
    Credentials,
    RegisterWorkerRequest,
    RegisterWorkerResponse,
    ReregisterWorkerRequest,
    ReregisterWorkerResponse,
    ShouldWorkerTerminateResponse,
    Worker,
    WorkerList,
)
from wm.api.paging import page_from_query, paginate
from wm.api.views import worker_view
from wm.db import api_reads, worker_writes
from wm.identity import ExpectedIdentity, IdentityRejected
from wm.model import WorkerState
from wm.registration_policy import (
    NOT_REQUESTED,
    Deployment,
    Refusal,
    RegistrationRequest,
    decide,
    proof_rejected,
)
from wm.tc.credentials import new_worker_secret, worker_credentials
from wm.tc.errors import TaskclusterError
from wm.telemetry import capture, log

router = APIRouter(prefix=PREFIX, route_class=TaskclusterRoute)

WORKER_PATH = "/workers/{workerPoolId:poolid}/{workerGroup}/{workerId}"
SCALE_DOWN_REASON = "worker pool has more capacity than it needs"
LAUNCH_CONFIG_ARCHIVED = "launch config archived"


def register_scope(body: RegisterWorkerRequest) -> Scope:
    return Scope(input=body)


def reregister_scope(body: ReregisterWorkerRequest) -> Scope:
    # reregisterWorker names its worker in the body (WM api.js).
    ids = {"workerPoolId": body.workerPoolId, "workerGroup": body.workerGroup}
    return Scope(params={**ids, "workerId": body.workerId}, input=body)


@router.post("/worker/register", response_model=RegisterWorkerResponse, name="registerWorker")
async def register_worker(call: Annotated[Call, endpoint(register_scope)]) -> JSONResponse:
    """Register a running worker, proven by its cloud's identity proof: Taskcluster
    credentials, its worker config and the secret for reregisterWorker."""
    return reply(await run(register, call.api, call.input))


def register(api: ApiContext, body: RegisterWorkerRequest) -> RegisterWorkerResponse:
    request = RegistrationRequest(
        pool_id=body.workerPoolId,
        provider_id=body.providerId,
        worker_group=body.workerGroup,
        worker_id=body.workerId,
    )
    target = api_reads.registration_target(
        api.engine, body.workerPoolId, body.workerGroup, body.workerId
    )
    deployment = Deployment(api.deployment_id, api.root_url, api.verifiers.keys())
    expected = decide(target, request, deployment)
    if isinstance(expected, Refusal):
        raise refused(expected)
    worker = target.worker
    assert worker is not None  # decide accepts only a worker it found
    verify(api, body, expected)
    secret = new_worker_secret()
    expires = worker_writes.register(
        api.engine,
        worker.worker_id,
        secret_hash(secret),
        target.reregistration_timeout_s,
        booted_at=body.boot_time(),
    )
    if expires is None:  # a concurrent registration won, or the deadline passed meanwhile
        raise refused(NOT_REQUESTED)
    log("worker-running", worker=worker.worker_id, pool=body.workerPoolId, provider=body.providerId)
    return RegisterWorkerResponse(
        expires=expires,
        credentials=issue(api, worker.provider_id, body, expires),
        workerConfig=dict(target.worker_config),
        secret=secret,
    )


def verify(api: ApiContext, body: RegisterWorkerRequest, expected: ExpectedIdentity) -> None:
    """The provider's verifier judges the proof; every failure is the kind's one answer."""
    rejected = refused(proof_rejected(api.provider_kinds.get(body.providerId)))
    try:
        api.verifiers[body.providerId].verify(body.workerIdentityProof, expected)
    except IdentityRejected as rejection:
        log(
            "identity-rejected",
            logging.WARNING,
            worker=expected.worker_id,
            provider=body.providerId,
            reason=rejection.reason,
        )
        raise rejected from None
    except Exception as exc:
        # A verifier bug met input it did not expect. Fail closed, with the same answer as
        # any rejection (a 500 would tell a forger it reached somewhere new), and report it.
        where = traceback.extract_tb(exc.__traceback__)[-1]
        log(
            "identity-verifier-failed",
            logging.ERROR,
            worker=expected.worker_id,
            provider=body.providerId,
            error=type(exc).__name__,
            where=f"{where.filename}:{where.lineno}",
        )
        capture(exc, provider=body.providerId)
        raise rejected from None


def refused(refusal: Refusal) -> TaskclusterError:
    return TaskclusterError(refusal.code, refusal.message)


def issue(api: ApiContext, provider_id: str, body: Any, expires: datetime) -> Credentials:
    credentials = worker_credentials(
        api.issuer.get(),
        provider_id=provider_id,
        worker_pool_id=body.workerPoolId,
        worker_group=body.workerGroup,
        worker_id=body.workerId,
        expires=expires,
        now=datetime.now(UTC),
    )
    return Credentials(**credentials.as_json())


@router.post("/worker/reregister", response_model=ReregisterWorkerResponse, name="reregisterWorker")
async def reregister_worker(call: Annotated[Call, endpoint(reregister_scope)]) -> JSONResponse:
    """New credentials and a new secret for a running worker holding its current secret."""
    return reply(await run(reregister, call.api, call.input))


def reregister(api: ApiContext, body: ReregisterWorkerRequest) -> ReregisterWorkerResponse:
    refused = TaskclusterError("InputError", "Could not generate credentials for this secret")
    target = api_reads.registration_target(
        api.engine, body.workerPoolId, body.workerGroup, body.workerId
    )
    if target.worker is None:
        raise refused
    secret = new_worker_secret()
    expires = worker_writes.reregister(
        api.engine,
        target.worker.worker_id,
        secret_hash(body.secret),
        secret_hash(secret),
        target.reregistration_timeout_s,
    )
    if expires is None:  # wrong or old secret, not running, or expired
        raise refused
    return ReregisterWorkerResponse(
        expires=expires,
        credentials=issue(api, target.worker.provider_id, body, expires),
        secret=secret,
    )


def secret_hash(secret: str) -> str:
    # Secrets are 264 random bits: a plain hash is enough, no slow KDF needed.
    return hashlib.sha256(secret.encode()).hexdigest()


@router.get(
    f"{WORKER_PATH}/should-terminate",
    response_model=ShouldWorkerTerminateResponse,
    name="shouldWorkerTerminate",
)
async def should_worker_terminate(
    workerPoolId: str, workerGroup: str, workerId: str, call: Annotated[Call, endpoint()]
) -> JSONResponse:
    """Whether the worker should shut down, and why."""
    engine = call.api.engine
    worker = await require_worker(call, workerPoolId, workerGroup, workerId)
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


@router.delete(WORKER_PATH, name="removeWorker")
async def remove_worker(
    workerPoolId: str, workerGroup: str, workerId: str, call: Annotated[Call, endpoint()]
) -> JSONResponse:
    """Remove a worker: it goes to stopping and its VM is deleted by the scanner."""
    engine = call.api.engine
    worker = await require_worker(call, workerPoolId, workerGroup, workerId)
    who = call.who
    by_worker = who is not None and (who.client_id or "").startswith("worker/")
    reason = "removed-by-worker" if by_worker else "removed-by-operator"
    await run(worker_writes.request_removal, engine, worker.worker_id, reason)
    log("worker-removal-requested", worker=worker.worker_id, pool=workerPoolId, reason=reason)
    return JSONResponse({})


@router.get(WORKER_PATH, response_model=Worker, name="worker")
async def worker(
    workerPoolId: str, workerGroup: str, workerId: str, call: Annotated[Call, endpoint()]
) -> JSONResponse:
    found = await require_worker(call, workerPoolId, workerGroup, workerId)
    return reply(worker_view(found))


@router.get(
    "/workers/{workerPoolId:poolid}/{workerGroup}",
    response_model=WorkerList,
    name="listWorkersForWorkerGroup",
)
async def list_workers_for_worker_group(
    workerPoolId: str,
    workerGroup: str,
    call: Annotated[Call, endpoint()],
    continuationToken: str | None = None,
    limit: str | None = None,
) -> JSONResponse:
    page = page_from_query(continuationToken, limit)
    rows, token = await run(
        paginate,
        page,
        lambda offset, n: api_reads.workers_page(
            call.api.engine, workerPoolId, offset=offset, limit=n, worker_group=workerGroup
        ),
    )
    return reply(WorkerList(workers=[worker_view(w) for w in rows], continuationToken=token))


@router.get(
    "/workers/{workerPoolId:poolid}", response_model=WorkerList, name="listWorkersForWorkerPool"
)
async def list_workers_for_worker_pool(
    workerPoolId: str,
    call: Annotated[Call, endpoint()],
    continuationToken: str | None = None,
    limit: str | None = None,
    launchConfigId: str | None = None,
    state: str | None = None,
) -> JSONResponse:
    page = page_from_query(continuationToken, limit)
    await require_pool(call, workerPoolId, "Worker Pool does not exist")
    rows, token = await run(
        paginate,
        page,
        lambda offset, n: api_reads.workers_page(
            call.api.engine,
            workerPoolId,
            offset=offset,
            limit=n,
            state=state,
            launch_config_id=launchConfigId,
        ),
    )
    return reply(WorkerList(workers=[worker_view(w) for w in rows], continuationToken=token))
