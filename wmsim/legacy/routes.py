"""worker-manager's API surface as the stand-in answers it: each route's method, path and
scopes (services/worker-manager/src/api.js), query checks, offset paging (`limit`,
`continuationToken`) and the error shape (`{code, message, requestInfo}`, libraries/api)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from wmsim.legacy.store import BadToken, page

ERROR_STATUS = {
    "MalformedPayload": 400,
    "InvalidRequestArguments": 400,
    "InputValidationError": 400,
    "InputError": 400,
    "AuthenticationFailed": 401,
    "InsufficientScopes": 403,
    "ResourceNotFound": 404,
    "RequestConflict": 409,
    "ProviderSetupFailed": 503,
}


class ApiError(Exception):
    def __init__(self, code: str, message: str, details: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = dict(details or {})


def require_keys(body: Any, keys: Sequence[str]) -> None:
    if not isinstance(body, dict):
        raise ApiError("InputValidationError", "the request body must be a JSON object")
    missing = [k for k in keys if k not in body]
    if missing:
        raise ApiError(
            "InputValidationError", f"data must have required properties {', '.join(missing)}"
        )


def paged(items: Sequence[Any], query: Mapping[str, str], key: str) -> dict[str, Any]:
    try:
        return page(items, query.get("limit"), query.get("continuationToken"), key)
    except BadToken as bad:
        raise ApiError("InputError", str(bad)) from None


def fill(template: str, context: Mapping[str, Any]) -> str:
    for name, value in context.items():
        if isinstance(value, str):
            template = template.replace(f"<{name}>", value)
    return template


# (method, path shape) -> (route name, scopes): `P` is a worker pool id (two path segments when
# the slash arrives unescaped), `*` one segment.
ROUTES: list[tuple[str, tuple[str, ...], str, tuple[str, ...]]] = [
    ("GET", ("ping",), "ping", ()),
    ("GET", ("providers",), "listProviders", ("worker-manager:list-providers",)),
    ("GET", ("worker-pools",), "listWorkerPools", ("worker-manager:list-worker-pools",)),
    (
        "GET",
        ("worker-pools", "stats"),
        "listWorkerPoolsStats",
        ("worker-manager:list-worker-pools",),
    ),
    (
        "GET",
        ("worker-pool", "P", "stats"),
        "workerPoolStats",
        ("worker-manager:get-worker-pool:<workerPoolId>",),
    ),
    ("GET", ("worker-pool", "P"), "workerPool", ("worker-manager:get-worker-pool:<workerPoolId>",)),
    (
        "PUT",
        ("worker-pool", "P"),
        "createWorkerPool",
        (
            "worker-manager:manage-worker-pool:<workerPoolId>",
            "worker-manager:provider:<providerId>",
        ),
    ),
    (
        "POST",
        ("worker-pool", "P"),
        "updateWorkerPool",
        (
            "worker-manager:manage-worker-pool:<workerPoolId>",
            "worker-manager:provider:<providerId>",
        ),
    ),
    (
        "GET",
        ("workers", "P", "*", "*", "should-terminate"),
        "shouldWorkerTerminate",
        ("worker-manager:should-worker-terminate:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "GET",
        ("workers", "P", "*", "*"),
        "worker",
        ("worker-manager:get-worker:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "DELETE",
        ("workers", "P", "*", "*"),
        "removeWorker",
        ("worker-manager:remove-worker:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "GET",
        ("workers", "P", "*"),
        "listWorkersForWorkerGroup",
        ("worker-manager:list-workers:<workerPoolId>/<workerGroup>",),
    ),
    (
        "GET",
        ("workers", "P"),
        "listWorkersForWorkerPool",
        ("worker-manager:list-workers:<workerPoolId>",),
    ),
    ("POST", ("worker", "register"), "registerWorker", ()),
    (
        "POST",
        ("worker", "reregister"),
        "reregisterWorker",
        ("worker-manager:reregister-worker:<workerPoolId>/<workerGroup>/<workerId>",),
    ),
    (
        "POST",
        ("worker-pool-errors", "P"),
        "reportWorkerError",
        ("assume:worker-pool:<workerPoolId>", "assume:worker-id:<workerGroup>/<workerId>"),
    ),
    (
        "GET",
        ("worker-pool-errors", "P"),
        "listWorkerPoolErrors",
        ("worker-manager:list-worker-pool-errors:<workerPoolId>",),
    ),
]
UNLOCKED = {"removeWorker"}  # takes the store's lock itself, around its cloud calls
PARAM_NAMES = ("workerGroup", "workerId")
QUERY_PATTERNS = {
    "limit": r"[0-9]+",
    "state": r"requested|running|stopping|stopped|standalone",
    "continuationToken": r".+",
}


def _match(shape: tuple[str, ...], parts: list[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    stars = iter(PARAM_NAMES)
    i = 0
    for element in shape:
        if i >= len(parts):
            return None
        if element == "P":
            if "/" in parts[i]:
                params["workerPoolId"] = parts[i]
                i += 1
            elif i + 1 < len(parts):
                params["workerPoolId"] = f"{parts[i]}/{parts[i + 1]}"
                i += 2
            else:
                return None
        elif element == "*":
            params[next(stars)] = parts[i]
            i += 1
        elif element == parts[i]:
            i += 1
        else:
            return None
    return params if i == len(parts) else None


def route(method: str, parts: list[str], body: Any) -> tuple[str, dict[str, str], tuple[str, ...]]:
    for verb, shape, name, scopes in ROUTES:
        if verb != method:
            continue
        params = _match(shape, parts)
        if params is not None:
            return name, params, scopes
    raise ApiError("ResourceNotFound", f"no such API method: {method} /{'/'.join(parts)}")


def check_query(query: Mapping[str, str]) -> None:
    errors = [
        f"{key}: {value!r} does not match {pattern}"
        for key, pattern in QUERY_PATTERNS.items()
        if (value := query.get(key)) is not None and not re.fullmatch(pattern, value)
    ]
    if errors:
        raise ApiError("InvalidRequestArguments", "\n".join(errors), {"errors": errors})
