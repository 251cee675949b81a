"""A small Taskcluster deployment on 127.0.0.1 for tests of wm behind Taskcluster: its auth
service's `authenticateHawk`, and `<rootUrl>/api/worker-manager/` routed to wm's web process,
as an operator routes it.

`authenticateHawk` answers as TC `services/auth/src/api.js` and `signaturevalidator.js` do
(taskcluster/taskcluster @ 9d59eb59), for the permanent clients it is given: it really checks
the Hawk MAC (computed with `mohawk`, not wm's code) over the method, resource, host and port it
is sent, the 15 minutes of timestamp skew, and answers `{status: 'auth-success', scopes,
clientId, expires, scheme: 'hawk', hash?}`, `{status: 'auth-failed', message}`, or for a request
without credentials `{status: 'no-auth', scheme: 'none', scopes, expires}` with the `anonymous`
role's scopes. Every request body and answer is checked against the auth service's schemas.
Temporary credentials (a certificate in `ext`) are not its business here: wm checks the ones it
issued itself, and the tests count that they never arrive.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import mohawk.util
from mohawk.base import Resource

from tests.support.tc_schemas import check

AUTHENTICATE_HAWK = "/api/auth/v1/authenticate-hawk"
WORKER_MANAGER = "/api/worker-manager/"
SKEW_S = 15 * 60  # signaturevalidator.js timestampSkewSec
ANONYMOUS_LIFETIME = timedelta(minutes=15)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


@dataclass(frozen=True)
class FakeClient:
    access_token: str = field(repr=False)
    scopes: tuple[str, ...]
    expires: datetime = datetime(3000, 1, 1, tzinfo=UTC)


class FakeTaskcluster:
    """Start with `with FakeTaskcluster(...) as tc:`; `tc.root_url` is the deployment's root."""

    def __init__(
        self,
        clients: Mapping[str, FakeClient],
        *,
        roles: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.clients = dict(clients)
        self.roles = {name: list(scopes) for name, scopes in (roles or {}).items()}
        self.auth_requests: list[dict[str, Any]] = []  # what wm asked authenticateHawk
        self.auth_answers: list[dict[str, Any]] = []
        self.routed: list[str] = []  # "<METHOD> <path>" routed to worker-manager
        self.upstream: str | None = None  # wm's base URL, once it runs
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._route()

            def do_PUT(self) -> None:
                self._route()

            def do_DELETE(self) -> None:
                self._route()

            def do_POST(self) -> None:
                if self.path == AUTHENTICATE_HAWK:
                    self._authenticate_hawk()
                else:
                    self._route()

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _reply(self, status: int, body: bytes, headers: Sequence[tuple[str, str]]) -> None:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _authenticate_hawk(self) -> None:
                request = json.loads(self._body())
                with fake._lock:
                    fake.auth_requests.append(request)
                check("authenticate-hawk-request", request)
                answer = fake.authenticate(request)
                check("authenticate-hawk-response", answer)
                with fake._lock:
                    fake.auth_answers.append(answer)
                data = json.dumps(answer).encode()
                self._reply(200, data, [("Content-Type", "application/json")])

            def _route(self) -> None:
                if not self.path.startswith(WORKER_MANAGER) or fake.upstream is None:
                    body = json.dumps({"code": "ResourceNotFound", "message": self.path}).encode()
                    self._reply(404, body, [("Content-Type", "application/json")])
                    return
                with fake._lock:
                    fake.routed.append(f"{self.command} {self.path}")
                status, headers, body = fake.forward(
                    self.command, self.path, dict(self.headers.items()), self._body()
                )
                self._reply(status, body, headers)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.root_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeTaskcluster:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the auth service ------------------------------------------------------------------------

    def authenticate(self, request: Mapping[str, Any]) -> dict[str, Any]:
        authorization = request.get("authorization")
        if not authorization:
            return {
                "status": "no-auth",
                "scheme": "none",
                "scopes": self.expand(["assume:anonymous"]),
                "expires": _js_time(datetime.now(UTC) + ANONYMOUS_LIFETIME),
            }
        try:
            return self._hawk(request, authorization)
        except _Refused as refused:
            return {"status": "auth-failed", "message": str(refused)}

    def _hawk(self, request: Mapping[str, Any], authorization: str) -> dict[str, Any]:
        try:
            attributes = mohawk.util.parse_authorization_header(authorization)
        except Exception as error:
            raise _Refused("Bad Request: Invalid header syntax") from error
        client_id = attributes.get("id", "")
        if attributes.get("ext") and "certificate" in _ext(attributes["ext"]):
            raise _Refused("this fake auth service knows permanent clients only")
        client = self.clients.get(client_id)
        if client is None:
            raise _Refused(f"Client with clientId '{client_id}' not found")
        resource = Resource(
            credentials={"id": client_id, "key": client.access_token, "algorithm": "sha256"},
            url=f"http://{request['host']}:{request['port']}{request['resource']}",
            method=request["method"].upper(),
            timestamp=attributes["ts"],
            nonce=attributes["nonce"],
            ext=attributes.get("ext"),
            app=attributes.get("app"),
            dlg=attributes.get("dlg"),
        )
        mac = mohawk.util.calculate_mac("header", resource, attributes.get("hash"))
        if not mohawk.util.strings_match(mac, attributes.get("mac", "")):
            raise _Refused("Unauthorized: Bad mac")
        if abs(int(attributes["ts"]) - time.time()) > SKEW_S:
            raise _Refused("Unauthorized: Stale timestamp")
        answer = {
            "status": "auth-success",
            "scheme": "hawk",
            "scopes": self.expand([*client.scopes, "assume:anonymous"]),
            "clientId": client_id,
            "expires": _js_time(client.expires),
        }
        if attributes.get("hash"):
            answer["hash"] = attributes["hash"]
        return answer

    def expand(self, scopes: Sequence[str]) -> list[str]:
        """The scopes with the roles they assume added (one level is all these tests use)."""
        expanded = set(scopes)
        for scope in scopes:
            if scope.startswith("assume:"):
                expanded.update(self.roles.get(scope.removeprefix("assume:"), ()))
        return sorted(expanded)

    # -- the ingress -----------------------------------------------------------------------------

    def forward(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """The request to wm as received, Host header included (Hawk signs the host and port
        the client used: the deployment's), and wm's answer back."""
        assert self.upstream is not None
        parts = urlsplit(self.upstream)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        sent = {k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP}
        try:
            connection.request(method, path, body=body or None, headers=sent)
            response = connection.getresponse()
            data = response.read()
            kept = [
                (k, v)
                for k, v in response.getheaders()
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length"
            ]
            return response.status, kept, data
        finally:
            connection.close()


class _Refused(Exception):
    """authenticateHawk's `auth-failed`; the message is what it answers."""


def _ext(ext: str) -> dict[str, Any]:
    try:
        decoded = json.loads(base64.b64decode(ext + "=" * (-len(ext) % 4), altchars=b"-_"))
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _js_time(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
