"""Workers: the worker interface (register, reregister, should-terminate, remove) and the
reads of workers by pool and worker group."""

from __future__ import annotations

import hashlib
import logging
import traceback
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi.responses import JSONResponse

from wm.api.endpoint import (
    ApiContext,
    Call,
    EndpointRouter,
    Paged,
    PagingQuery,
    Scope,
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
    WorkerRequest,
)
from wm.api.views import worker_view
from wm.db import api_reads, worker_writes
from wm.db.worker_writes import HandMadeWorker
from wm.kinds import KINDS
from wm.model import WorkerState
from wm.ops.telemetry import log
from wm.pools.definition import DEFAULT_REREGISTRATION_TIMEOUT_S, HAND_MADE_LAUNCH_CONFIG_ID
from wm.take_over.imported_reregistration import reregister_imported
from wm.tc.credentials import new_worker_secret, worker_credentials
from wm.tc.errors import TaskclusterError
from wm.tc.hawk import Authenticated
from wm.workers.identity import ExpectedIdentity, IdentityRejected
from wm.workers.registration_policy import (
    NOT_REQUESTED,
    NOT_RUNNING,
    Deployment,
    Refusal,
    RegistrationRequest,
    decide,
    launched,
    proof_rejected,
)
from wm.workers.static_workers import (
    ALREADY_EXISTS,
    SECRET_HASH_KEY,
    HandMade,
    decide_create,
    decide_update,
    hand_made_worker_id,
)
from wm.workers.static_workers import Refusal as HandMadeRefusal
from wm.workers.static_workers import secret_hash as static_secret_hash

router = EndpointRouter()

SCALE_DOWN_REASON = "worker pool has more capacity than it needs"
LAUNCH_CONFIG_ARCHIVED = "launch config archived"


def register_scope(body: RegisterWorkerRequest) -> Scope:
    return Scope(input=body)


def reregister_scope(body: ReregisterWorkerRequest) -> Scope:
    # reregisterWorker names its worker in the body (WM api.js).
    ids = {"workerPoolId": body.workerPoolId, "workerGroup": body.workerGroup}
    return Scope(params={**ids, "workerId": body.workerId}, input=body)


@router.declare("registerWorker", response_model=RegisterWorkerResponse)
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
    deployment = Deployment(
        api.deployment_id, api.root_url, api.verifiers.keys(), api.provider_kinds
    )
    expected = decide(target, request, deployment)
    if isinstance(expected, Refusal):
        raise refused(expected)
    worker = target.worker
    assert worker is not None  # decide accepts only a worker it found
    verify(api, body, expected)
    secret = new_worker_secret()
    if launched(api.provider_kinds, body.providerId):
        # Refused when a concurrent registration won, or the deadline passed meanwhile.
        write, too_late = worker_writes.register, NOT_REQUESTED
    else:  # made by createWorker: registers while running, as often as it restarts
        write, too_late = worker_writes.check_in, NOT_RUNNING  # removed or expired meanwhile
    expires = write(
        api.engine,
        worker.worker_id,
        secret_hash(secret),
        target.reregistration_timeout_s,
        booted_at=body.boot_time(),
    )
    if expires is None:
        raise refused(too_late)
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
        if rejection.answer is not None:
            raise refused(Refusal("InputError", rejection.answer)) from None
        raise rejected from None
    except Exception as exc:
        # A verifier bug met input it did not expect. Fail closed, with the same answer as
        # any rejection (a 500 would tell a forger it reached somewhere new), and report it.
        where = traceback.extract_tb(exc.__traceback__)[-1]
        log(
            "identity-verifier-failed",
            logging.ERROR,
            exc_info=exc,
            trace_in_log=False,  # its message may quote the proof
            worker=expected.worker_id,
            provider=body.providerId,
            error=type(exc).__name__,
            where=f"{where.filename}:{where.lineno}",
        )
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


@router.declare("reregisterWorker", response_model=ReregisterWorkerResponse)
async def reregister_worker(call: Annotated[Call, endpoint(reregister_scope)]) -> JSONResponse:
    """New credentials and a new secret for a running worker holding its current secret."""
    return reply(await run(reregister, call.api, call.input, call.who))


def reregister(
    api: ApiContext, body: ReregisterWorkerRequest, who: Authenticated | None = None
) -> ReregisterWorkerResponse:
    refused = TaskclusterError("InputError", "Could not generate credentials for this secret")
    secret = new_worker_secret()
    # worker-manager renews a createWorker worker's credentials for a flat 96 hours: its
    # reregisterWorker reads the timeout a cloud provider records on the worker, and static
    # records none. Such a worker keeps its operator's expiry. One statement finds the worker,
    # checks its secret and writes: a boot storm's reregistrations are one round trip each.
    renewed = worker_writes.reregister(
        api.engine,
        body.workerPoolId,
        body.workerGroup,
        body.workerId,
        secret_hash(body.secret),
        secret_hash(secret),
        hand_made_providers=hand_made_providers(api.provider_kinds),
        hand_made_timeout_s=DEFAULT_REREGISTRATION_TIMEOUT_S,
    )
    if renewed is None:  # the take-over's hook: an imported worker, on its own credentials
        renewed = reregister_imported(
            api.engine,
            (body.workerPoolId, body.workerGroup, body.workerId),
            secret_hash(secret),
            who,
            api.issuer.client_id,
            hand_made_providers=hand_made_providers(api.provider_kinds),
            hand_made_timeout_s=DEFAULT_REREGISTRATION_TIMEOUT_S,
        )
    if renewed is None:  # no such worker, wrong or old secret, not running, or expired
        raise refused
    return ReregisterWorkerResponse(
        expires=renewed.expires,
        credentials=issue(api, renewed.provider_id, body, renewed.expires),
        secret=secret,
    )


def hand_made_providers(provider_kinds: Mapping[str, str]) -> list[str]:
    """The providers whose workers createWorker makes, not a cloud."""
    return [p for p in provider_kinds if not launched(provider_kinds, p)]


def secret_hash(secret: str) -> str:
    # Secrets are 264 random bits: a plain hash is enough, no slow KDF needed.
    return hashlib.sha256(secret.encode()).hexdigest()


# -- workers no cloud launches (a static provider's): made and changed by the API ---------------


def worker_body_scope(body: WorkerRequest) -> Scope:
    return Scope(payload=body.shown(), input=body)


@router.declare("createWorker", response_model=Worker)
async def create_worker(
    workerPoolId: str,
    workerGroup: str,
    workerId: str,
    call: Annotated[Call, endpoint(worker_body_scope)],
) -> JSONResponse:
    """Make a worker known that no cloud launches (a static provider's machine): running from
    now until its `expires`, registering with the secret given here."""
    body: WorkerRequest = call.input
    provider_id, hand_made = await pool_provider(call, workerPoolId)
    expires = body.expiry()
    asked = HandMade(
        expires=expires or datetime.min.replace(tzinfo=UTC),  # no instant: never in the future
        capacity=body.capacity,
        secret=body.static_secret(),
    )
    refusal = decide_create(hand_made, asked, datetime.now(UTC))
    if refusal is not None:
        raise hand_made_refused(refusal)
    assert asked.secret is not None and provider_id is not None  # decide_create refused those
    made = HandMadeWorker(
        worker_id=hand_made_worker_id(workerPoolId, workerGroup, workerId),
        pool_id=workerPoolId,
        worker_group=workerGroup,
        tc_worker_id=workerId,
        provider_id=provider_id,
        launch_config_id=HAND_MADE_LAUNCH_CONFIG_ID,
        capacity=asked.capacity,
        expires=asked.expires,
        provider_data={SECRET_HASH_KEY: static_secret_hash(asked.secret)},
    )
    worker = await run(worker_writes.make_hand_made, call.api.engine, made)
    if worker is None:
        raise hand_made_refused(ALREADY_EXISTS)
    log("worker-created", worker=worker.worker_id, pool=workerPoolId, provider=provider_id)
    return reply(worker_view(worker))


@router.declare("updateWorker", response_model=Worker)
async def update_worker(
    workerPoolId: str,
    workerGroup: str,
    workerId: str,
    call: Annotated[Call, endpoint(worker_body_scope)],
) -> JSONResponse:
    """Change a worker no cloud launches: its expiry (in the past: it stops now), its
    capacity, and its secret when one is given (else it keeps the one it has)."""
    body: WorkerRequest = call.input
    _, hand_made = await pool_provider(call, workerPoolId)
    found = await run(
        api_reads.worker_by_name, call.api.engine, workerPoolId, workerGroup, workerId
    )
    if found is None:
        raise TaskclusterError(
            "ResourceNotFound", f"Worker {workerPoolId}/{workerGroup}/{workerId} does not exist"
        )
    refusal = decide_update(hand_made)
    if refusal is not None:
        raise hand_made_refused(refusal)
    expires = body.expiry() or datetime.now(UTC)  # no instant: expired now
    secret = body.static_secret()
    data = {SECRET_HASH_KEY: static_secret_hash(secret)} if secret else None
    worker = await run(
        worker_writes.amend_hand_made,
        call.api.engine,
        found.worker_id,
        expires,
        body.capacity,
        data,
    )
    if worker is None:  # gone meanwhile (expired past the retention)
        raise TaskclusterError(
            "ResourceNotFound", f"Worker {workerPoolId}/{workerGroup}/{workerId} does not exist"
        )
    if expires <= datetime.now(UTC):
        # Expired by its operator: it stops now, not at the next expiry pass.
        await run(worker_writes.stop_lapsed, call.api.engine, worker.provider_id)
        worker = await require_worker(call, workerPoolId, workerGroup, workerId)
    return reply(worker_view(worker))


async def pool_provider(call: Call, pool_id: str) -> tuple[str | None, bool | None]:
    """The pool's provider and whether createWorker makes its kind's workers ((None, None): a
    deleted pool's null provider); worker-manager's ResourceNotFound for a missing pool or
    a provider the deployment no longer has."""
    exists, provider_id = await run(api_reads.pool_provider, call.api.engine, pool_id)
    if not exists:
        raise TaskclusterError("ResourceNotFound", f"Worker pool {pool_id} does not exist")
    if provider_id is None:
        return None, None
    kind = call.api.provider_kinds.get(provider_id)
    if kind is None:
        raise TaskclusterError(
            "ResourceNotFound", f"Provider {provider_id} for worker pool {pool_id} does not exist"
        )
    return provider_id, KINDS[kind].hand_made


def hand_made_refused(refusal: HandMadeRefusal) -> TaskclusterError:
    return TaskclusterError(refusal.code, refusal.message)


@router.declare("shouldWorkerTerminate", response_model=ShouldWorkerTerminateResponse)
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


@router.declare("removeWorker")
async def remove_worker(
    workerPoolId: str, workerGroup: str, workerId: str, call: Annotated[Call, endpoint()]
) -> JSONResponse:
    """Remove a worker: it goes to stopping and its VM is deleted by the scanner; a worker no
    cloud launched (a static provider's) stops at once, with nothing to delete."""
    engine = call.api.engine
    worker = await require_worker(call, workerPoolId, workerGroup, workerId)
    who = call.who
    by_worker = who is not None and (who.client_id or "").startswith("worker/")
    reason = "removed-by-worker" if by_worker else "removed-by-operator"
    if launched(call.api.provider_kinds, worker.provider_id):
        await run(worker_writes.request_removal, engine, worker.worker_id, reason)
    else:
        await run(worker_writes.stop_hand_made, engine, worker.worker_id, reason)
    log("worker-removal-requested", worker=worker.worker_id, pool=workerPoolId, reason=reason)
    return JSONResponse({})


@router.declare("worker", response_model=Worker)
async def worker(
    workerPoolId: str, workerGroup: str, workerId: str, call: Annotated[Call, endpoint()]
) -> JSONResponse:
    found = await require_worker(call, workerPoolId, workerGroup, workerId)
    return reply(worker_view(found))


@router.declare("listWorkersForWorkerGroup", response_model=WorkerList)
async def list_workers_for_worker_group(
    workerPoolId: str, workerGroup: str, call: Annotated[Call, endpoint()], paged: PagingQuery
) -> JSONResponse:
    return await workers_listed(call, paged, workerPoolId, worker_group=workerGroup)


@router.declare("listWorkersForWorkerPool", response_model=WorkerList)
async def list_workers_for_worker_pool(
    workerPoolId: str,
    call: Annotated[Call, endpoint()],
    paged: PagingQuery,
    launchConfigId: str | None = None,
    state: str | None = None,
) -> JSONResponse:
    paged.page()  # checked before the pool is looked up
    await require_pool(call, workerPoolId, "Worker Pool does not exist")
    return await workers_listed(
        call, paged, workerPoolId, state=state, launch_config_id=launchConfigId
    )


async def workers_listed(
    call: Call, paged: Paged, pool_id: str, **only: str | None
) -> JSONResponse:
    """A page of the pool's workers, `only` those with these values (api_reads.workers_page)."""
    rows, token = await paged.rows(
        lambda offset, n: api_reads.workers_page(
            call.api.engine, pool_id, offset=offset, limit=n, **only
        )
    )
    return reply(WorkerList(workers=[worker_view(w) for w in rows], continuationToken=token))
