"""Error answers in Taskcluster's body `{code, message, requestInfo}`, for every status.

Taskcluster's own codes come as `TaskclusterError` (wm/tc/errors.py). The few answers Taskcluster
never gives (429 when the process sheds load, 408 for a body that does not arrive, 503 when the
database is down) use the same body with a code of their own, so every client parses them alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from fastapi.responses import JSONResponse

# Answered 503 (retry later); any other database error is a bug, answered 500 by the guard.
from wm.db.engine import DATABASE_DOWN as DATABASE_DOWN
from wm.ops.telemetry import log
from wm.tc.errors import TaskclusterError, error_body, js_time

RETRY_AFTER_S = 2


def error_json(
    *, code: str, status: int, message: str, method: str, params: Mapping[str, str], payload: Any
) -> dict[str, Any]:
    """The body for a code Taskcluster does not define, in the same form as its own."""
    time = js_time(datetime.now(UTC))
    trailer = (
        f"\n\n---\n\n* method:     {method}\n* errorCode:  {code}\n"
        f"* statusCode: {status}\n* time:       {time}"
    )
    return {
        "code": code,
        "message": message + trailer,
        "requestInfo": {"method": method, "params": dict(params), "payload": payload, "time": time},
    }


def error_response(
    error: TaskclusterError | None,
    *,
    method: str,
    params: Mapping[str, str],
    payload: Any,
    code: str = "",
    status: int = 500,
    message: str = "",
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    if error is not None:
        body = error_body(
            error, method=method, params=params, payload=payload, now=datetime.now(UTC)
        ).model_dump()
        return JSONResponse(body, status_code=error.status, headers=dict(error.headers))
    body = error_json(
        code=code, status=status, message=message, method=method, params=params, payload=payload
    )
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def database_down_response(
    down: BaseException, method: str, params: Mapping[str, str], payload: Any
) -> JSONResponse:
    """503, retry shortly: the database is gone (`down`, logged without its trace, whose
    frames may hold request values)."""
    log(
        "api-database-error",
        logging.ERROR,
        exc_info=down,
        trace_in_log=False,
        error=type(down).__name__,
    )
    return error_response(
        None,
        code="ServiceUnavailable",
        status=503,
        message="the database is unavailable; retry shortly",
        method=method,
        params=params,
        payload=payload,
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )
