"""EC2's wire, where the sim speaks it itself: a Query API request's body, region and integer
parameters as the middleware reads them, and answers in EC2's XML error shape (or JSON, for the
/_sim/ control endpoints)."""

from __future__ import annotations

import io
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape

from wmsim.aws.moto_models import DEFAULT_REGION


@dataclass(frozen=True)
class Answer:
    """One HTTP answer the middleware gives (its own, or moto's as captured)."""

    status: str
    headers: list[tuple[str, str]]
    body: bytes


def error_code(answer: Answer) -> str | None:
    if answer.status.startswith("200"):
        return None
    found = re.search(rb"<Code>([^<]+)</Code>", answer.body)
    return found.group(1).decode() if found else answer.status


def instance_ids(answer: Answer) -> tuple[str, ...]:
    if not answer.status.startswith("200"):
        return ()
    found = re.findall(rb"<instanceId>(i-[0-9a-f]+)</instanceId>", answer.body)
    return tuple(dict.fromkeys(i.decode() for i in found))


def region_of(environ: dict[str, Any]) -> str:
    # SigV4: "AWS4-HMAC-SHA256 Credential=AKID/20261202/us-east-1/ec2/aws4_request, ..."
    match = re.search(r"Credential=[^/]+/\d+/([a-z0-9-]+)/", environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else DEFAULT_REGION


def int_param(params: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(params.get(name, default))
    except ValueError:
        return default  # moto answers the malformed request itself


def read_body(environ: dict[str, Any]) -> bytes:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length > 0 else b""
    # Put it back for moto, which reads the form itself.
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    return body


def ec2_error(
    status: int, code: str, message: str, headers: list[tuple[str, str]] | None = None
) -> Answer:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{code}</Code><Message>{escape(message)}</Message>"
        "</Error>"
        f"</Errors><RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()
    reason = {400: "Bad Request", 500: "Internal Server Error", 503: "Service Unavailable"}
    all_headers = [("Content-Type", "text/xml;charset=UTF-8"), *(headers or [])]
    return Answer(f"{status} {reason.get(status, 'Error')}", all_headers, body)


def not_found(ids: list[str]) -> Answer:
    if len(ids) == 1:
        message = f"The instance ID '{ids[0]}' does not exist"
    else:
        message = f"The instance IDs '{', '.join(ids)}' do not exist"
    return ec2_error(400, "InvalidInstanceID.NotFound", message)


def json_answer(data: Any, status: str = "200 OK") -> Answer:
    return Answer(status, [("Content-Type", "application/json")], json.dumps(data).encode())


def respond(start_response: Callable[..., Any], answer: Answer) -> list[bytes]:
    start_response(answer.status, [*answer.headers, ("Content-Length", str(len(answer.body)))])
    return [answer.body]
