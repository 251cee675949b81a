"""Request and response bodies of the worker-manager API, as Taskcluster declares them.

Field names, patterns and limits follow TC `services/worker-manager/schemas/v1/*.yml` (rendered
in `generated/references.json`, taskcluster/taskcluster @ 9d59eb59). A request body is first
checked against its endpoint's schema exactly as Taskcluster checks it (the endpoint table's,
wm/api/endpoint_table.py, by wm.pools.json_check: no type coercion, every problem named by its
key path), and only a body that passes is read into its model, whose fields are then plain
types; a refusal is an `InputValidationError`. Response models refuse properties they do not
declare. Secrets and proofs are left out of the models' reprs, so no traceback or error report
shows one.

Every value a request stores must be one Postgres takes as it is: text there cannot hold NUL,
and JSONB holds neither NUL nor NaN nor infinities; such input is refused here, not by the
driver later.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator, model_validator
from pydantic_core import PydanticCustomError

from wm.api.endpoint_table import BY_NAME
from wm.pools.json_check import Schema, check
from wm.tc.errors import js_time

# Taskcluster's identifier patterns (worker-full.yml, worker-pool-full.yml).
POOL_ID_PATTERN = r"^[a-zA-Z0-9-_]{1,38}/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$"
NAME_PATTERN = r"^([a-zA-Z0-9-_]*)$"
SECRET_PATTERN = r"^[a-zA-Z0-9_-]{44}$"

# The error type a request body's schema problems travel under (ctx["problems"]: each one
# `key.path: what is wrong`), from the model to the API's error answer.
SCHEMA_ERROR = "taskcluster_schema"

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


def body_schema(endpoint: str) -> Schema:
    """The schema of `endpoint`'s request body, as the endpoint table holds it."""
    schema = BY_NAME[endpoint].body
    assert schema is not None, f"{endpoint} takes no body"
    return schema


class _Request(_Body):
    """A request body: checked against its endpoint's Taskcluster schema before pydantic reads
    it, so pydantic's lax coercions ("yes" -> True, "5" -> 5, a number -> a datetime) never
    see a body Taskcluster would refuse."""

    SCHEMA: ClassVar[Schema]

    @model_validator(mode="before")
    @classmethod
    def _as_taskcluster_checks_it(cls, data: Any) -> Any:
        problems = check(data, cls.SCHEMA)
        if problems:
            raise PydanticCustomError(
                SCHEMA_ERROR, "the body fails its schema", {"problems": problems}
            )
        return data


# -- the worker interface ------------------------------------------------------------------


class RegisterWorkerRequest(_Request):
    SCHEMA = body_schema("registerWorker")

    workerPoolId: str
    providerId: str
    workerGroup: str
    workerId: str
    # One of the providers' shapes (google {token}, aws {document, signature}, azure
    # {document}, static {staticSecret}), by the schema; whether it is the shape of the
    # worker's own provider is the verifier's to say (the same InputError as a bad signature).
    workerIdentityProof: dict[str, Any] = Field(repr=False)
    systemBootTime: str | None = None  # a date-time by the schema's format: see boot_time

    def boot_time(self) -> datetime | None:
        return js_date(self.systemBootTime) if self.systemBootTime is not None else None


class WorkerRequest(_Request):
    """create-worker-request.yml, createWorker's and updateWorker's body: a worker no cloud
    launches (a static provider's), its expiry, capacity and secret."""

    SCHEMA = body_schema("createWorker")

    expires: str  # a date-time by the schema's format: see expiry
    capacity: int = 1  # api.js: `{capacity: 1, ...req.body}`
    providerInfo: dict[str, Any] | None = Field(None, repr=False)

    def expiry(self) -> datetime | None:
        return js_date(self.expires)

    def static_secret(self) -> str | None:
        return (self.providerInfo or {}).get("staticSecret")

    def shown(self) -> dict[str, Any]:
        """The body as an error names it: the secret omitted (api.js cleanCreatePayload)."""
        shown = self.model_dump(exclude_none=True)
        if self.static_secret():
            shown["providerInfo"] = {"staticSecret": "(OMITTED)"}
        return shown


class Credentials(_Body):
    clientId: str
    accessToken: str = Field(repr=False)
    certificate: str


class RegisterWorkerResponse(_Body):
    expires: JsTime
    credentials: Credentials
    workerConfig: dict[str, Any]
    secret: Secret


class ReregisterWorkerRequest(_Request):
    SCHEMA = body_schema("reregisterWorker")

    workerPoolId: str
    workerGroup: str
    workerId: str
    secret: str = Field(repr=False)


class ReregisterWorkerResponse(_Body):
    expires: JsTime
    credentials: Credentials
    secret: Secret


class ReportWorkerErrorRequest(_Request):
    SCHEMA = body_schema("reportWorkerError")

    workerGroup: str
    workerId: str
    kind: str
    title: str
    description: str
    extra: dict[str, Any]

    @field_validator("kind", "title", "description", "extra")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return storable(value)


class WorkerPoolDefinitionRequest(_Request):
    """create-worker-pool-request.yml: a worker pool definition. `config` is checked against
    its provider's schema by wm.pools.definition once the provider is known."""

    SCHEMA = body_schema("createWorkerPool")

    providerId: str
    description: str
    config: dict[str, Any]
    owner: str
    emailOnError: bool

    @field_validator("description", "config", "owner")
    @classmethod
    def _storable(cls, value: Any) -> Any:
        return storable(value)


class UpdateWorkerPoolRequest(WorkerPoolDefinitionRequest):
    """update-worker-pool-request.yml: the same, plus what workerPool() answers so that its
    answer can be edited and sent back (`workerPoolId` must match; the times are ignored, so
    they are kept as the date-time text the schema checked)."""

    SCHEMA = body_schema("updateWorkerPool")

    workerPoolId: str | None = None
    created: str | None = None
    lastModified: str | None = None


# What JavaScript's Date reads from a date-time ajv's format accepts: date, `T` (or a space),
# time, an optional fraction, an optional zone.
_JS_DATE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt\s]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+-])([0-9]{2})(?::?([0-9]{2}))?)?"
)


def js_date(text: str) -> datetime | None:
    """The instant a date-time names, or None where worker-manager's `new Date(text)` is an
    invalid date (which it then ignores): a date-time the format accepts that is no instant,
    such as a leap second. Without a zone, UTC (JavaScript would take the server's local zone);
    fractions finer than a microsecond are cut."""
    found = _JS_DATE.fullmatch(text)
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in found.groups()[:6])
    fraction, _, sign, zone_hours, zone_minutes = found.groups()[6:]
    zone = UTC
    if sign:
        offset = timedelta(hours=int(zone_hours), minutes=int(zone_minutes or 0))
        try:
            zone = timezone(offset if sign == "+" else -offset)
        except ValueError:  # an offset of a day or more
            return None
    micro = int((fraction or "0")[:6].ljust(6, "0"))
    try:
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=zone)
    except ValueError:
        return None


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


class _PoolDefinition(_Body):
    workerPoolId: str
    providerId: str
    description: str
    created: JsTime
    lastModified: JsTime
    config: dict[str, Any]
    owner: str
    emailOnError: bool


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


# The bases in this order: pydantic takes the fields of the last base first, so the counts follow
# the definition, as in worker-manager's answers.
class WorkerPool(_Counts, _PoolDefinition):
    """worker-pool-full.yml, with its deprecated counts (still required by the schema)."""


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
