"""GCE's error shape: `{"error": {"code", "message", "errors": [{"message", "domain",
"reason"}]}}`, and the two the simulation answers most (`invalid`, `notFound`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from werkzeug.wrappers import Response


class ApiError(Exception):
    """An error answered in GCE's wire shape."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        domain: str = "global",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.domain = domain
        self.headers: dict[str, str] = dict(headers or {})

    def response(self) -> Response:
        body = {
            "error": {
                "code": self.status,
                "message": self.message,
                "errors": [{"message": self.message, "domain": self.domain, "reason": self.reason}],
            }
        }
        return Response(
            json.dumps(body),
            status=self.status,
            headers=self.headers,
            mimetype="application/json",
        )


def invalid(field_name: str, value: Any, why: str) -> ApiError:
    return ApiError(400, "invalid", f"Invalid value for field '{field_name}': '{value}'. {why}")


def not_found(path: str) -> ApiError:
    return ApiError(404, "notFound", f"The resource '{path}' was not found")
