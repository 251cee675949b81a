"""A legacy worker-manager as the forwarding sees it: a real HTTP server that records every
request exactly as it arrived (method, raw target, headers, body bytes) and answers as
worker-manager answers: its pools and providers, paged with tokens of its own, a pool by id,
Taskcluster's error body for anything it does not hold, and any answer a test sets for a path.

(Not the legacy stand-in of wmsim/legacy/: only what the web process's forwarding meets.)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

PREFIX = "/api/worker-manager/v1"


@dataclass(frozen=True)
class Recorded:
    method: str
    target: str  # the raw path and query, as sent
    headers: list[tuple[str, str]]  # in order, as sent
    body: bytes

    def header(self, name: str) -> str | None:
        found = [v for k, v in self.headers if k.lower() == name.lower()]
        return found[0] if found else None


@dataclass
class RecordingUpstream:
    pools: Sequence[Mapping[str, Any]] = ()  # worker pool answers (workerPoolId, providerId, …)
    providers: Sequence[Mapping[str, Any]] = ()  # {providerId, providerType}
    error_totals: Mapping[str, Any] = field(default_factory=dict)
    # (method, path below the prefix, unescaped) -> (status, body, extra headers)
    answers: dict[tuple[str, str], tuple[int, Any, Mapping[str, str]]] = field(default_factory=dict)
    delay_s: float = 0.0  # every answer waits this long (a legacy that hangs)
    # Clients it refuses (403 InsufficientScopes), as a deployment whose worker-manager client
    # holds no list scopes refuses it.
    refused_clients: set[str] = field(default_factory=set)
    # Paths (below the prefix) whose requests it reads and then drops without an answer.
    dropped: set[str] = field(default_factory=set)
    requests: list[Recorded] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> RecordingUpstream:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                upstream._handle(self)

            do_PUT = do_POST = do_DELETE = do_PATCH = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    def recorded(self, method: str, path_start: str) -> list[Recorded]:
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == method and r.target.startswith(PREFIX + path_start)
            ]

    # -- answers -------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        record = Recorded(handler.command, handler.path, list(handler.headers.items()), body)
        with self._lock:
            self.requests.append(record)
        if self.delay_s:
            time.sleep(self.delay_s)
        if unquote(urlsplit(record.target).path.removeprefix(PREFIX)) in self.dropped:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        status, answer, headers = self._answer(record)
        data = json.dumps(answer).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("X-Legacy", "yes")  # a header of its own, to be passed on
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _answer(self, record: Recorded) -> tuple[int, Any, Mapping[str, str]]:
        parts = urlsplit(record.target)
        path = unquote(parts.path.removeprefix(PREFIX))
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        signer = (record.header("Authorization") or "").partition('id="')[2].partition('"')[0]
        if signer in self.refused_clients:
            return 403, error("InsufficientScopes", f"{signer} lacks scopes"), {}
        if (record.method, path) in self.answers:
            return self.answers[(record.method, path)]
        if record.method == "GET" and path == "/worker-pools":
            return 200, self._page("workerPools", list(self.pools), query), {}
        if record.method == "GET" and path == "/worker-pools/stats":
            stats = [_stats(p) for p in self.pools]
            return 200, self._page("workerPoolsStats", stats, query), {}
        if record.method == "GET" and path == "/providers":
            return 200, self._page("providers", list(self.providers), query), {}
        if record.method == "GET" and path == "/worker-pool-errors/stats":
            return 200, {"workerPoolId": "", "totals": dict(self.error_totals)}, {}
        if record.method == "GET" and path.startswith("/worker-pool/"):
            pool_id = path.removeprefix("/worker-pool/")
            for pool in self.pools:
                if pool["workerPoolId"] == pool_id:
                    return 200, dict(pool), {}
        return 404, error("ResourceNotFound", "Worker pool does not exist"), {}

    @staticmethod
    def _page(key: str, rows: list[Any], query: Mapping[str, str]) -> dict[str, Any]:
        # Tokens of its own making, opaque to its clients ("L<offset>"), but listProviders':
        # worker-manager's are the plain offset there.
        mark = "" if key == "providers" else "L"
        start = int(query.get("continuationToken", f"{mark}0")[len(mark) :])
        size = int(query.get("limit", "1000"))
        page = rows[start : start + size]
        answer: dict[str, Any] = {key: page}
        if start + size < len(rows):
            answer["continuationToken"] = f"{mark}{start + size}"
        return answer


def _stats(pool: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "workerPoolId": pool["workerPoolId"],
        "providerId": pool["providerId"],
        "currentCapacity": 0,
        "requestedCount": 0,
        "runningCount": 0,
        "stoppingCount": 0,
        "stoppedCount": 0,
        "requestedCapacity": 0,
        "runningCapacity": 0,
        "stoppingCapacity": 0,
        "stoppedCapacity": 0,
    }


def error(code: str, message: str) -> dict[str, Any]:
    return {
        "code": code,
        "message": message,
        "requestInfo": {"method": "legacy", "params": {}, "payload": {}, "time": "t"},
    }


def legacy_pool(pool_id: str, provider_id: str) -> dict[str, Any]:
    """A worker pool as worker-manager answers it."""
    return {
        "workerPoolId": pool_id,
        "providerId": provider_id,
        "description": "legacy",
        "config": {},
        "created": "2026-01-01T00:00:00.000Z",
        "lastModified": "2026-01-01T00:00:00.000Z",
        "owner": "legacy@example.com",
        "emailOnError": False,
        **_stats({"workerPoolId": pool_id, "providerId": provider_id}),
    }
