"""Taskcluster's API error replies: the codes, their HTTP statuses and the body.

Sources (taskcluster/taskcluster @ 9d59eb59): `libraries/api/src/middleware/errors.js`
(`ERROR_CODES`), `middleware/express-error.js` (the body `{code, message, requestInfo}`, the
`{{key}}` substitution from `details` and the trailer appended to every message),
`middleware/auth.js` (`www-authenticate: hawk` on AuthenticationFailed, the InsufficientScopes
messages) and WM `src/api.js` (`errorCodes: {ProviderSetupFailed: 503}`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

ERROR_STATUS: Mapping[str, int] = {
    "MalformedPayload": 400,  # the body is not JSON (or not an object/array)
    "InvalidRequestArguments": 400,  # route or query parameter fails its pattern
    "InputValidationError": 400,  # the body fails the JSON schema
    "InputError": 400,  # any other input the handler refuses
    "AuthenticationFailed": 401,
    "InsufficientScopes": 403,
    "ResourceNotFound": 404,
    "RequestConflict": 409,
    "ResourceExpired": 410,
    "InputTooLarge": 413,
    "InternalServerError": 500,
    "ProviderSetupFailed": 503,  # worker-manager's own addition
}

_SUBSTITUTION = re.compile(r"{{([a-zA-Z0-9_-]+)}}")


class RequestInfo(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    method: str  # the API method (endpoint) name, e.g. "reregisterWorker"
    params: dict[str, str]  # the route parameters, unescaped
    payload: Any  # the request body as parsed, `{}` when there was none
    time: str  # when the error was formed, JS toJSON() form


class ErrorBody(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    message: str
    requestInfo: RequestInfo  # Taskcluster's wire name (camelCase)


@dataclass(frozen=True)
class TaskclusterError(Exception):
    """An error reply, raised where it is decided and turned into a response at the edge."""

    code: str  # a key of ERROR_STATUS
    message: str  # may hold `{{key}}` placeholders filled from `details`
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in ERROR_STATUS:
            raise ValueError(f"unknown Taskcluster error code {self.code!r}")

    @property
    def status(self) -> int:
        return ERROR_STATUS[self.code]

    @property
    def headers(self) -> Mapping[str, str]:
        return {"www-authenticate": "hawk"} if self.code == "AuthenticationFailed" else {}


def js_time(when: datetime) -> str:
    """A UTC instant as JavaScript's `Date.prototype.toJSON()` writes it (milliseconds, `Z`)."""
    when = when.astimezone(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def error_body(
    error: TaskclusterError,
    *,
    method: str,
    params: Mapping[str, str],
    payload: Any,
    now: datetime,
) -> ErrorBody:
    """The JSON body Taskcluster sends for `error` raised by endpoint `method`."""
    time = js_time(now)
    message = _SUBSTITUTION.sub(lambda m: _detail(error.details, m), error.message)
    message += "\n".join(
        [
            "\n\n---\n",
            f"* method:     {method}",
            f"* errorCode:  {error.code}",
            f"* statusCode: {error.status}",
            f"* time:       {time}",
        ]
    )
    info = RequestInfo(method=method, params=dict(params), payload=payload, time=time)
    return ErrorBody(code=error.code, message=message, requestInfo=info)


def authentication_failed(message: str) -> TaskclusterError:
    return TaskclusterError("AuthenticationFailed", message)


def insufficient_scopes(
    client_id: str | None, required: Any, unsatisfied: Any | None
) -> TaskclusterError:
    """InsufficientScopes as Taskcluster words it; `client_id` None means no credentials."""
    if client_id is None:
        lines = [
            "This request requires Taskcluster credentials that satisfy the following scope "
            "expression:",
            "",
            "```",
            "{{required}}",
            "```",
        ]
    else:
        lines = [
            f"Client ID {client_id} does not have sufficient scopes and is missing the "
            "following scopes:",
            "",
            "```",
            "{{unsatisfied}}",
            "```",
            "",
            "This request requires the client to satisfy the following scope expression:",
            "",
            "```",
            "{{required}}",
            "```",
        ]
    details: dict[str, Any] = {"required": required}
    if client_id is not None:
        details["unsatisfied"] = unsatisfied
    return TaskclusterError("InsufficientScopes", "\n".join(lines), details)


def _detail(details: Mapping[str, Any], match: re.Match[str]) -> str:
    key = match.group(1)
    if key not in details:
        return match.group(0)
    value = details[key]
    # JSON.stringify(value, null, 2) for anything that is not already a string.
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
