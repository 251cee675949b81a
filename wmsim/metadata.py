"""Per-VM metadata services: how one simulated cloud serves the metadata of each of its VMs.

A real VM reaches its metadata service at a fixed address (169.254.169.254,
metadata.google.internal); the simulated clouds serve every VM's metadata on their own port,
one VM per path prefix:

    <sim endpoint>/_vm/<vm key>             the VM's metadata base URL
    EC2:   <base>/latest/...                 worker-runner's EC2MetadataBaseURL is <base>/latest
    GCE:   <base>/computeMetadata/v1/...     worker-runner's metadataBaseURL
    Azure: <base>/metadata/...               worker-runner's MetadataBaseURL is <base>

The VM key is what worker-runner's workerId is on that cloud: the EC2 instance id, the GCE
numeric instance id, the Azure VM name (each sim also accepts the other names it finds a VM by).
Below the prefix each cloud's own paths, headers and status codes hold (wmsim/<cloud>/imds.py).
Metadata requests are neither counted nor faulted: a metadata service is not the cloud's API.
A VM that does not exist (or no longer runs) has no metadata service: 404.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

VM_PREFIX = "/_vm/"


@dataclass(frozen=True)
class MetaAnswer:
    """One metadata answer, whatever WSGI framework the sim is written in."""

    status: int
    body: bytes
    content_type: str = "text/plain"
    headers: tuple[tuple[str, str], ...] = ()


REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
}


def text(body: str, status: int = 200, *headers: tuple[str, str]) -> MetaAnswer:
    return MetaAnswer(status, body.encode(), "text/plain", tuple(headers))


def json_answer(body: Any, status: int = 200, *headers: tuple[str, str]) -> MetaAnswer:
    return MetaAnswer(status, json.dumps(body).encode(), "application/json", tuple(headers))


def not_found(*headers: tuple[str, str]) -> MetaAnswer:
    return text("Not Found", 404, *headers)


def vm_path(path: str) -> tuple[str, str] | None:
    """`/_vm/<key>/<rest>` -> (key, "/<rest>"); None for any other path."""
    if not path.startswith(VM_PREFIX):
        return None
    key, _, rest = path[len(VM_PREFIX) :].partition("/")
    return unquote(key), "/" + rest


def base_url(endpoint: str, vm_key: str) -> str:
    """The metadata base URL of one VM of the sim at `endpoint`."""
    return f"{endpoint.rstrip('/')}{VM_PREFIX}{quote(vm_key, safe='')}"


def respond(start_response: Callable[..., Any], answer: MetaAnswer) -> Iterable[bytes]:
    headers = [
        ("Content-Type", answer.content_type),
        ("Content-Length", str(len(answer.body))),
        *answer.headers,
    ]
    start_response(f"{answer.status} {REASONS.get(answer.status, 'Error')}", headers)
    return [answer.body]


def query_args(query_string: str) -> dict[str, str]:
    return dict(parse_qsl(query_string, keep_blank_values=True))


def headers_of(environ: dict[str, Any]) -> dict[str, str]:
    """A WSGI request's headers, names lower-cased with dashes (`x-aws-ec2-metadata-token`)."""
    return {
        name[5:].replace("_", "-").lower(): value
        for name, value in environ.items()
        if name.startswith("HTTP_")
    }


def tree_answer(tree: dict[str, str], path: str) -> MetaAnswer | None:
    """A value of a flat tree {"a/b": value}, or the listing of a directory in it (one name a
    line, directories with a trailing slash), as EC2's and GCE's metadata servers list them;
    None when nothing is there."""
    wanted = path.strip("/")
    if wanted in tree:
        return text(tree[wanted])
    prefix = f"{wanted}/" if wanted else ""
    names: list[str] = []
    for key in tree:
        if key.startswith(prefix):
            head, slash, _ = key[len(prefix) :].partition("/")
            entry = head + slash
            if entry not in names:
                names.append(entry)
    return text("\n".join(names)) if names else None


def announced(due_at: float | None, notice_s: float) -> datetime | None:
    """The wall-clock time (UTC) of a pre-emption due at monotonic `due_at`, once it is within
    the cloud's notice period; None before that or when none is due."""
    if due_at is None:
        return None
    left_s = due_at - time.monotonic()
    if left_s > notice_s:
        return None
    return datetime.now(UTC) + timedelta(seconds=max(0.0, left_s))
