"""What every worker-manager route shares: the app's context, the router that declares each route
at its endpoint's method and path, the route class that answers a TaskclusterError, and
`endpoint`, the one dependency that names the call, checks its path and query, and
authenticates it against the endpoint's scope expression (all of it the endpoint table's row,
wm/api/endpoint_table.py).

Routes never write that prologue themselves: each declares `call: Annotated[Call, endpoint()]`
(or `endpoint(scope)` when its scopes take parameters from its body or query) and starts with
what it does. A route's body is validated before the dependency runs, as before routers: the scope
function that declares the body is the dependency's own dependency, and FastAPI never calls a
dependency whose inputs failed validation.
"""

# No `from __future__ import annotations`: FastAPI reads the annotations of `authorized`,
# whose dependency is a local name.
import re
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy import Engine
from starlette.convertors import Convertor, register_url_convertor

from wm.api.authn import Authenticator, IssuerSource
from wm.api.endpoint_table import BY_NAME
from wm.api.errors import error_response
from wm.api.models import NAME_PATTERN, POOL_ID_PATTERN
from wm.api.paging import Page, page_from_query, paginate
from wm.api.queries import check_query
from wm.db import api_reads
from wm.db.schema import Readiness
from wm.model import WorkerRecord
from wm.take_over.legacy_forwarder import LegacyForwarder
from wm.tc.authorize import authorize
from wm.tc.errors import TaskclusterError
from wm.tc.hawk import Authenticated, AuthenticationFailed, HawkRequest, request_host_port
from wm.tc.scopes import ScopeExpression, can_render_from
from wm.workers.identity import IdentityVerifier

PREFIX = "/api/worker-manager/v1"
# What an error's requestInfo shows of a body that holds proofs or secrets.
OMITTED = "(OMITTED)"
UNKNOWN_METHOD = "unknown"

_NAME = re.compile(NAME_PATTERN)
_POOL = re.compile(POOL_ID_PATTERN)
_PARAM = re.compile(r"<(\w+)>")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class PoolIdConvertor(Convertor[str]):
    """A worker pool id in a path: `<a>%2F<b>` as clients escape it, or `<a>/<b>`."""

    regex = "[^/%]+(?:%2[Ff]|/)[^/%]+"  # Taskcluster pool ids hold no other escape

    def convert(self, value: str) -> str:
        return value.replace("%2F", "/").replace("%2f", "/")

    def to_string(self, value: str) -> str:
        return value.replace("/", "%2F")


# Registered before any router declares a `poolid` path.
register_url_convertor("poolid", PoolIdConvertor())


@dataclass(frozen=True)
class ApiContext:
    """What the routes serve from: the database, the deployment and its providers."""

    engine: Engine
    verifiers: Mapping[str, IdentityVerifier]  # provider id -> its identity proof verifier
    provider_kinds: Mapping[str, str]  # provider id -> its kind (a key of wm.kinds.KINDS)
    regions: Mapping[str, Sequence[str]]  # provider id -> the regions its scanners list
    workers_register: Mapping[str, bool]  # provider id -> whether its workers register
    deployment_id: str
    root_url: str
    authenticator: Authenticator
    issuer: IssuerSource
    version: str
    started: float = field(default_factory=time.monotonic)  # for ping's uptime
    # The legacy worker-manager while taking over from it ([take_over]): the merged lists read
    # its side. None: no take-over, every list is wm's alone.
    legacy: LegacyForwarder | None = None
    # Whether the database's schema is the one wm needs (procs/web.py's watcher sets it).
    schema: Readiness = field(default_factory=lambda: Readiness(problem=None))


@dataclass(frozen=True)
class Scope:
    """What an endpoint's scopes are rendered with beyond its path parameters, what its error
    bodies show of the request, and the input (body or query) its route reads."""

    params: Mapping[str, object] = field(default_factory=dict)
    payload: Any = None  # None: the route class's default ({}, or OMITTED for secrets)
    input: Any = None


@dataclass(frozen=True)
class Call:
    """An authorized call: the app's context, who called (None on public endpoints), the
    path parameters and the input its scope function took from the request."""

    api: ApiContext
    who: Authenticated | None
    params: Mapping[str, str]
    input: Any = None


def error_context(request: Request) -> tuple[str, dict[str, str], Any]:
    """The endpoint name, path parameters and payload an error body names."""
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
            row = BY_NAME.get(self.name)  # None: one of wm's own routes (/healthz, /metrics)
            shown = OMITTED if row is not None and row.secret_body else {}
            request.state.tc = (self.name, params, shown)
            try:
                return await handler(request)
            except TaskclusterError as error:
                method, params, payload = error_context(request)
                return error_response(error, method=method, params=params, payload=payload)

        return handle


class EndpointRouter(APIRouter):
    """A router of worker-manager's routes, each declared by its endpoint's name: at the
    method and path of its row in the endpoint table, below the API's prefix."""

    def __init__(self) -> None:
        super().__init__(prefix=PREFIX, route_class=TaskclusterRoute)

    def declare(self, name: str, **options: Any) -> Callable[[F], F]:
        row = BY_NAME[name]
        return self.api_route(app_path(row.route), methods=[row.method], name=name, **options)


def app_path(route: str) -> str:
    """A route of the reference as the app's router matches it: a pool id by the `poolid`
    convertor, every other parameter as one path segment."""
    return _PARAM.sub(
        lambda m: "{workerPoolId:poolid}" if m[1] == "workerPoolId" else f"{{{m[1]}}}", route
    )


def api_context(request: Request) -> ApiContext:
    return request.app.state.api


def path_scope() -> Scope:
    """An endpoint whose scopes take their parameters from its path alone."""
    return Scope()


def endpoint(scope: Callable[..., Any] = path_scope) -> Any:
    """The dependency of every worker-manager route (see the module's docstring)."""

    async def authorized(
        request: Request,
        api: Annotated[ApiContext, Depends(api_context)],
        given: Annotated[Scope, Depends(scope)],
    ) -> Call:
        name, params, shown = error_context(request)
        if given.payload is not None:
            shown = given.payload
        request.state.tc = (name, params, shown)
        # Taskcluster checks path parameters after an endpoint's scopes; wm checks them first,
        # so a malformed id is refused without a call to the auth service.
        check_path(params)
        row = BY_NAME[name]
        by_path = authorized_by_path(row.scopes, params)
        if not by_path:
            check_query(row.query, query_string(request))
        template = row.scopes
        who = None
        if template is not None:
            hawk = await hawk_request(request)
            client_ip = request.client.host if request.client else None
            # Off the event loop: it may call the auth service.
            who = await run_in_threadpool(
                authorize,
                template,
                {**params, **given.params},
                lambda: api.authenticator.authenticate(hawk, client_ip),
            )
            if by_path:
                check_query(row.query, query_string(request))
        return Call(api=api, who=who, params=params, input=given.input)

    return Depends(authorized)


def authorized_by_path(template: ScopeExpression | None, params: Mapping[str, str]) -> bool:
    # TC auth.js `useUrlParams`: an endpoint whose scopes render from its path alone is
    # authorized before its parameters and query are checked; the others are authorized by
    # their handler, after those checks.
    return template is not None and can_render_from(template, params)


def check_path(params: Mapping[str, str]) -> None:
    for key, value in params.items():
        pattern = _POOL if key == "workerPoolId" else _NAME
        if not pattern.match(value) or (key != "workerPoolId" and len(value) > 38):
            raise TaskclusterError(
                "InvalidRequestArguments",
                f"Invalid URL parameter {key}: does not match {pattern.pattern}",
            )


@dataclass(frozen=True)
class Paged:
    """A list's paging query (`paginateResults.query`), as the client sent it."""

    continuation_token: str | None
    limit: str | None

    def page(self) -> Page:
        """The page asked for; InvalidRequestArguments or InputError if it cannot be read."""
        return page_from_query(self.continuation_token, self.limit)

    async def rows(self, fetch: Callable[[int, int], Sequence[T]]) -> tuple[list[T], str | None]:
        """The page's rows of `fetch(offset, limit)`, and the next page's token if any."""
        return await run(paginate, self.page(), fetch)


def paging_query(continuationToken: str | None = None, limit: str | None = None) -> Paged:
    return Paged(continuationToken, limit)


# What a list route declares to read its paging query.
PagingQuery = Annotated[Paged, Depends(paging_query)]


async def require_pool(call: Call, pool_id: str, message: str) -> None:
    """ResourceNotFound with the endpoint's own words (worker-manager's vary) unless the pool
    exists."""
    if not await run(api_reads.pool_exists, call.api.engine, pool_id):
        raise TaskclusterError("ResourceNotFound", message)


async def require_worker(call: Call, pool_id: str, group: str, worker_id: str) -> WorkerRecord:
    """The worker Taskcluster names so; ResourceNotFound otherwise."""
    worker = await run(api_reads.worker_by_name, call.api.engine, pool_id, group, worker_id)
    if worker is None:
        raise TaskclusterError("ResourceNotFound", "Worker not found")
    return worker


def query_string(request: Request) -> str:
    return request.scope.get("query_string", b"").decode("latin-1")


async def run(fn: Callable[..., T], *args: Any) -> T:
    return await run_in_threadpool(fn, *args)


def reply(model: BaseModel) -> JSONResponse:
    return JSONResponse(model.model_dump(mode="json", exclude_none=True))


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
