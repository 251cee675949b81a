"""Request and response bodies of the worker-manager API, as Taskcluster declares them.

Field names, patterns and limits follow TC `services/worker-manager/schemas/v1/*.yml` (rendered
in `generated/references.json`, taskcluster/taskcluster @ 9d59eb59). Every model refuses
properties it does not declare, both ways: a request with one is an `InputValidationError`, and
a response could not carry one. Secrets and proofs are left out of the models' reprs, so no
traceback or error report shows one.

Every value a request stores must be one Postgres takes as it is: text there cannot hold NUL,
and JSONB holds neither NUL nor NaN nor infinities; such input is refused here, not by the
driver later.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator

from wm.tc.errors import js_time

# Taskcluster's identifier patterns (worker-full.yml, worker-pool-full.yml).
POOL_ID_PATTERN = r"^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$"
NAME_PATTERN = r"^([a-zA-Z0-9-_]*)$"
SECRET_PATTERN = r"^[a-zA-Z0-9_-]{44}$"
KIND_PATTERN = r"[-a-z0-9]+"

PoolId = Annotated[str, Field(pattern=POOL_ID_PATTERN)]
Name = Annotated[str, Field(min_length=1, max_length=38, pattern=NAME_PATTERN)]
Secret = Annotated[str, Field(pattern=SECRET_PATTERN, repr=False)]
# Dates as JavaScript's Date.toJSON() writes them: what worker-manager sends.
JsTime = Annotated[datetime, PlainSerializer(js_time, return_type=str)]
WorkerState = Literal["requested", "running", "stopping", "stopped"]


def storable(value: Any) -> Any:
    """Refuse what Postgres cannot store as it is (see unstorable)."""
    problem = unstorable(value)
    if problem:
        raise ValueError(problem)
    return value


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def unstorable(value: Any) -> str | None:
    """Why Postgres could not store `value` as text or JSONB (naming where inside it), or None.
    Never quotes the value. Iterative: a body nested as deep as the JSON parser allows must not
    exhaust the stack."""
    pending: list[tuple[str, Any]] = [("", value)]
    while pending:
        where, item = pending.pop()
        at = f" (at {where})" if where else ""
        if isinstance(item, str) and "\x00" in item:
            return f"text must not contain NUL characters{at}"
        if isinstance(item, float) and not math.isfinite(item):
            return f"numbers must be finite{at}"
        if isinstance(item, dict):
            for key, inner in item.items():
                if "\x00" in key:
                    return f"keys must not contain NUL characters{at}"
                pending.append((f"{where}.{key}" if where else key, inner))
        elif isinstance(item, list):
            pending.extend((f"{where}[{i}]", inner) for i, inner in enumerate(item))
    return None


# -- the worker interface ------------------------------------------------------------------


class RegisterWorkerRequest(_Body):
    workerPoolId: PoolId
    providerId: Name
    workerGroup: Name
    workerId: Name
    # One of the providers' shapes (google {token}, aws {document, signature}, azure
    # {document}, static {staticSecret}); the provider's verifier refuses any other, with the
    # same InputError as a bad signature, so the shape is checked in one place only.
    workerIdentityProof: dict[str, Any] = Field(repr=False)
    systemBootTime: datetime | None = None


class Credentials(_Body):
    clientId: str
    accessToken: str = Field(repr=False)
    certificate: str


class RegisterWorkerResponse(_Body):
    expires: JsTime
    credentials: Credentials
    workerConfig: dict[str, Any]
    secret: Secret


class ReregisterWorkerRequest(_Body):
    workerPoolId: PoolId
    workerGroup: Name
    workerId: Name
    secret: Secret


class ReregisterWorkerResponse(_Body):
    expires: JsTime
    credentials: Credentials
    secret: Secret


class ReportWorkerErrorRequest(_Body):
    workerGroup: Name
    workerId: Name
    kind: str = Field(max_length=128, pattern=KIND_PATTERN)
    title: str = Field(max_length=128)
    description: str = Field(max_length=10240)
    extra: dict[str, Any]

    @field_validator("kind", "title", "description", "extra")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return storable(value)


class WorkerPoolDefinitionRequest(_Body):
    """create-worker-pool-request.yml: a worker pool definition. `config` is checked against
    its provider's schema by wm.pool_definition once the provider is known."""

    providerId: str = Field(min_length=1, max_length=38, pattern=NAME_PATTERN)
    description: str = Field(max_length=10240)
    config: dict[str, Any]
    owner: str = Field(min_length=1)
    emailOnError: bool

    @field_validator("description", "config", "owner")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return storable(value)


class UpdateWorkerPoolRequest(WorkerPoolDefinitionRequest):
    """update-worker-pool-request.yml: the same, plus what workerPool() answers so that its
    answer can be edited and sent back (`workerPoolId` must match; the times are ignored)."""

    workerPoolId: PoolId | None = None
    created: datetime | None = None
    lastModified: datetime | None = None


class ShouldWorkerTerminateResponse(_Body):
    terminate: bool
    reason: str = Field(min_length=1)


# -- reads --------------------------------------------------------------------------------


class Worker(_Body):
    """worker-full.yml."""

    workerPoolId: str
    workerGroup: str
    workerId: str
    providerId: str
    created: JsTime
    expires: JsTime
    state: WorkerState
    capacity: int = Field(ge=1)
    lastChecked: JsTime
    lastModified: JsTime
    launchConfigId: str | None = None


class WorkerList(_Body):
    workers: list[Worker]
    continuationToken: str | None = None


class WorkerPool(_Body):
    """worker-pool-full.yml, with its deprecated counts (still required by the schema)."""

    workerPoolId: str
    providerId: str
    description: str
    created: JsTime
    lastModified: JsTime
    config: dict[str, Any]
    owner: str
    emailOnError: bool
    currentCapacity: int = Field(ge=0)
    requestedCount: int = Field(ge=0)
    runningCount: int = Field(ge=0)
    stoppingCount: int = Field(ge=0)
    stoppedCount: int = Field(ge=0)
    requestedCapacity: int = Field(ge=0)
    runningCapacity: int = Field(ge=0)
    stoppingCapacity: int = Field(ge=0)
    stoppedCapacity: int = Field(ge=0)


class WorkerPoolLaunchConfig(_Body):
    launchConfigId: str
    workerPoolId: str
    isArchived: bool
    configuration: dict[str, Any]
    created: JsTime
    lastModified: JsTime


class WorkerPoolLaunchConfigList(_Body):
    workerPoolLaunchConfigs: list[WorkerPoolLaunchConfig]
    continuationToken: str | None = None


class WorkerPoolList(_Body):
    workerPools: list[WorkerPool]
    continuationToken: str | None = None


class WorkerPoolError(_Body):
    """worker-pool-error.yml."""

    workerPoolId: str
    errorId: str
    reported: JsTime
    kind: str
    title: str
    description: str
    extra: dict[str, Any]
    launchConfigId: str | None = None


class WorkerPoolErrorList(_Body):
    workerPoolErrors: list[WorkerPoolError]
    continuationToken: str | None = None


class ErrorStatsTotals(_Body):
    """worker-pool-error-stats.yml `totals`: error counts keyed as worker-manager keys them."""

    total: int = Field(ge=0)  # errors of the daily buckets
    daily: dict[str, int]  # start of the UTC day (Date.toJSON) -> errors; the last 7 days
    hourly: dict[str, int]  # start of the UTC hour -> errors; the last 24 hours
    title: dict[str, int]
    code: dict[str, int]
    workerPool: dict[str, int]
    launchConfig: dict[str, int]  # empty unless the stats are one pool's


class WorkerPoolErrorStats(_Body):
    """worker-pool-error-stats.yml."""

    workerPoolId: str  # "" for every pool's
    totals: ErrorStatsTotals


class Provider(_Body):
    providerId: str
    providerType: str


class ProviderList(_Body):
    providers: list[Provider]
    continuationToken: str | None = None


class _Counts(_Body):
    currentCapacity: int = Field(ge=0)
    requestedCount: int = Field(ge=0)
    runningCount: int = Field(ge=0)
    stoppingCount: int = Field(ge=0)
    stoppedCount: int = Field(ge=0)
    requestedCapacity: int = Field(ge=0)
    runningCapacity: int = Field(ge=0)
    stoppingCapacity: int = Field(ge=0)
    stoppedCapacity: int = Field(ge=0)


class LaunchConfigStats(_Counts):
    workerPoolId: str
    launchConfigId: str


class WorkerPoolStats(_Body):
    launchConfigStats: list[LaunchConfigStats]


class PoolStats(_Counts):
    workerPoolId: str


class WorkerPoolListStats(_Body):
    workerPoolsStats: list[PoolStats]
    continuationToken: str | None = None


class Ping(_Body):
    alive: bool
    uptime: float
