"""A stand-in for Taskcluster's worker-manager API: the five routes a worker-runner calls, with
Taskcluster's paths (`<rootUrl>/api/worker-manager/v1/...`), bodies and error shape, and Hawk
checked (with mohawk) on everything but registerWorker, against the credentials it issued.

It lets the simulated worker be tested with the real taskcluster client before (and apart
from) wm's own API; it records every call for the test to look at.
"""

from __future__ import annotations

import json
import secrets
import threading
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import mohawk
import mohawk.exc

PREFIX = "/api/worker-manager/v1"
REGISTER_KEYS = {
    "workerPoolId",
    "providerId",
    "workerGroup",
    "workerId",
    "workerIdentityProof",
    "systemBootTime",
}


@dataclass(frozen=True)
class Call:
    name: str  # registerWorker, reregisterWorker, shouldWorkerTerminate, ...
    params: tuple[str, ...]  # path parameters, unescaped
    body: Any
    client_id: str | None  # whose Hawk credentials signed it (None: no Authorization)


@dataclass
class FakeWorkerManager:
    lifetime_s: float = 3.0  # of the credentials it issues (the worker's `expires`)
    register_statuses: list[int] = field(default_factory=list)  # answered first, in order
    refuse_register: tuple[int, str] | None = None  # (status, code) for every registration
    terminate: bool = False  # what shouldWorkerTerminate answers
    calls: list[Call] = field(default_factory=list)
    tokens: dict[str, str] = field(default_factory=dict)  # clientId -> accessToken issued
    secret: str | None = None
    worker: tuple[str, str, str, str] | None = None  # (provider, pool, group, id) registered
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def root_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeWorkerManager:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def names(self) -> list[str]:
        return [c.name for c in self.calls]

    def issue(self, worker: tuple[str, str, str, str]) -> dict[str, Any]:
        """New credentials, secret and expiry, as registerWorker answers them."""
        provider, pool, group, worker_id = worker
        client_id = f"worker/{provider}/{pool}/{group}/{worker_id}/{secrets.token_hex(4)}"
        access_token = secrets.token_urlsafe(33)
        self.tokens[client_id] = access_token
        self.secret = secrets.token_urlsafe(33)[:44]
        expires = datetime.now(UTC) + timedelta(seconds=self.lifetime_s)
        return {
            "expires": expires.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "credentials": {"clientId": client_id, "accessToken": access_token},
            "secret": self.secret,
        }

    def route(
        self, method: str, parts: list[str], body: Any, client_id: str | None
    ) -> tuple[int, Any]:
        """(status, body) for one authenticated (or anonymous) request."""
        match method, parts:
            case "POST", ["worker", "register"]:
                self.calls.append(Call("registerWorker", (), body, client_id))
                if set(body) - REGISTER_KEYS or not REGISTER_KEYS - {"systemBootTime"} <= set(body):
                    return _error(400, "InputValidationError", f"bad keys {sorted(body)}")
                if self.register_statuses:
                    status = self.register_statuses.pop(0)
                    return _error(status, "ServiceUnavailable", "try again")
                if self.refuse_register:
                    return _error(*self.refuse_register, "refused")
                worker = (
                    body["providerId"],
                    body["workerPoolId"],
                    body["workerGroup"],
                    body["workerId"],
                )
                self.worker = worker
                return 200, {**self.issue(worker), "workerConfig": {}}
            case "POST", ["worker", "reregister"]:
                self.calls.append(Call("reregisterWorker", (), body, client_id))
                if client_id is None:
                    return _error(403, "InsufficientScopes", "no credentials")
                if body.get("secret") != self.secret:
                    return _error(400, "InputError", "Could not generate credentials")
                assert self.worker is not None
                return 200, self.issue(self.worker)
            case "GET", ["workers", pool, group, worker_id, "should-terminate"]:
                self.calls.append(
                    Call("shouldWorkerTerminate", (pool, group, worker_id), None, client_id)
                )
                reason = "launch config archived" if self.terminate else "none"
                return 200, {"terminate": self.terminate, "reason": reason}
            case "POST", ["worker-pool-errors", pool]:
                self.calls.append(Call("reportWorkerError", (pool,), body, client_id))
                return 200, {
                    "workerPoolId": pool,
                    "errorId": secrets.token_urlsafe(16)[:22],
                    "reported": datetime.now(UTC).isoformat(),
                    **{k: body[k] for k in ("kind", "title", "description", "extra")},
                }
            case "DELETE", ["workers", pool, group, worker_id]:
                self.calls.append(Call("removeWorker", (pool, group, worker_id), None, client_id))
                return 200, {}
        return _error(404, "ResourceNotFound", f"no route {method} /{'/'.join(parts)}")


def _error(status: int, code: str, message: str) -> tuple[int, Any]:
    return status, {"code": code, "message": message, "requestInfo": {}}


def _handler(fake: FakeWorkerManager) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            if not path.startswith(PREFIX + "/"):
                return self._reply(*_error(404, "ResourceNotFound", path))
            parts = [urllib.parse.unquote(p) for p in path[len(PREFIX) + 1 :].split("/")]
            client_id = None
            header = self.headers.get("Authorization")
            if header:
                try:
                    receiver = mohawk.Receiver(
                        lambda client: {
                            "id": client,
                            "key": fake.tokens[client],
                            "algorithm": "sha256",
                        },
                        header,
                        fake.root_url + self.path,
                        method,
                        content=raw.decode(),
                        content_type=self.headers.get("Content-Type", ""),
                    )
                except (mohawk.exc.HawkFail, KeyError) as error:
                    return self._reply(*_error(401, "AuthenticationFailed", repr(error)))
                client_id = receiver.resource.credentials["id"]
            body = json.loads(raw) if raw else None
            with fake._lock:
                status, answer = fake.route(method, parts, body, client_id)
            self._reply(status, answer)

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
