"""GCE's REST conventions, as every route of the simulation answers them: JSON responses, the
checked requestId, list pages and their tokens, aggregated scopes, timestamps, fingerprints and
the numeric ids of what the simulation holds."""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from werkzeug.wrappers import Request, Response

from wmsim.gcp.errors import ApiError, invalid

API = "/compute/v1"
LIST_PAGE_SIZE_MAX = 500  # GCE's own cap on maxResults
INSTANCE_ID_BASE = 4_300_000_000_000_000_000  # GCE ids are large unsigned 64-bit numbers


def backend_error() -> ApiError:
    return ApiError(
        503, "backendError", "Internal error. Please try again or contact Google Support."
    )


def resource_id(path: str) -> str:
    """A stable numeric id for a network, subnetwork or image (GCE's are unsigned 64-bit)."""
    return str(int.from_bytes(hashlib.sha256(path.encode()).digest()[:8], "big"))


def json_body(request: Request) -> dict[str, Any]:
    body = request.get_json(force=True, silent=True)
    if not isinstance(body, dict):
        raise ApiError(400, "parseError", "Parse Error")
    return body


# -- request validation, as GCE does it ------------------------------------------------------------


def checked_request_id(request: Request) -> str | None:
    request_id = request.args.get("requestId")
    if request_id is None:
        return None
    try:
        parsed = uuid.UUID(request_id)
    except ValueError:
        parsed = None
    if parsed is None or parsed.int == 0:
        raise invalid(
            "requestId",
            request_id,
            "The request ID must be a valid UUID with the exception that zero UUID is not "
            "supported (00000000-0000-0000-0000-000000000000).",
        )
    return request_id


def page_of(
    items: list[dict[str, Any]], token: str, size: int, key: str
) -> tuple[list[dict[str, Any]], str]:
    """One page after `token` (the last key of the previous page, opaque to clients)."""
    if token:
        try:
            after = base64.urlsafe_b64decode(token.encode()).decode()
        except ValueError:
            raise invalid("pageToken", token, "Invalid page token.") from None
        items = [i for i in items if i[key] > after]
    page = items[:size]
    more = len(items) > size
    next_token = base64.urlsafe_b64encode(page[-1][key].encode()).decode() if more else ""
    return page, next_token


def scoped_list(zone: str, page: list[dict[str, Any]]) -> dict[str, Any]:
    """One zone's part of an aggregated page: its instances, or GCE's empty-scope warning."""
    instances = [without_key(i) for i in page if i["_key"].startswith(f"{zone}/")]
    if instances:
        return {"instances": instances}
    scope = f"zones/{zone}"
    return {
        "warning": {
            "code": "NO_RESULTS_ON_PAGE",
            "message": f"There are no results for scope '{scope}' on this page.",
            "data": [{"key": "scope", "value": scope}],
        }
    }


def without_key(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "_key"}


def base_url(request: Request) -> str:
    return request.host_url.rstrip("/") + API


def rfc3339(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def fingerprint(data: Any) -> str:
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def json_response(
    body: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        json.dumps(body), status=status, headers=dict(headers or {}), mimetype="application/json"
    )


def list_response(
    kind: str, resource: str, base: str, page: list[dict[str, Any]], token: str
) -> Response:
    """A zone's list call answered: its page of items (none: no `items`), and the token of the
    next page when more follow."""
    body: dict[str, Any] = {"kind": kind, "id": resource, "selfLink": f"{base}/{resource}"}
    if page:
        body["items"] = page
    if token:
        body["nextPageToken"] = token
    return json_response(body)
