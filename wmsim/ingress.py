"""The rootUrl's ingress, as a deployment routes `<rootUrl>/api/worker-manager/` to one service:
the demo's take-over (`wmsim demo --take-over`) points it first at the legacy worker-manager,
then switches it to wm's web process, as an operator switches the route.

Each request goes to the upstream as received: method, path, query, body, and the `Host`
header (Hawk signs the host and port the client called: the rootUrl's), so either service
checks the signature as if it had been called directly; the answer comes back as given.
Anything outside worker-manager's prefix is 404, as an ingress with that one rule answers.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

from wmsim.http_handler import ApiRequestHandler

WORKER_MANAGER = "/api/worker-manager/"
HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
)
UPSTREAM_TIMEOUT_S = 60.0
UNAVAILABLE = 502  # no upstream answered


class Ingress:
    """Start with `with Ingress() as ingress:`; `ingress.root_url` is the deployment's rootUrl;
    `route_to(name, url)` switches every request after it to that upstream."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._upstream: tuple[str, str] | None = None  # (name, base URL)
        self.routed: Counter[str] = Counter()  # upstream name -> requests it was sent
        ingress = self

        class Handler(ApiRequestHandler):
            def _reply(self, status: int, body: bytes, headers: Sequence[tuple[str, str]]) -> None:
                self.send_response(status)
                for name, value in headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def handle_method(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream = ingress.upstream
                if not self.path.startswith(WORKER_MANAGER) or upstream is None:
                    error = {"code": "ResourceNotFound", "message": f"no route for {self.path}"}
                    self._reply(404, json.dumps(error).encode(), _JSON)
                    return
                name, url = upstream
                with ingress._lock:
                    ingress.routed[name] += 1
                try:
                    status, headers, answer = forward(
                        url, self.command, self.path, dict(self.headers.items()), body
                    )
                except OSError as failure:
                    error = {"code": "InternalServerError", "message": f"{name}: {failure}"}
                    self._reply(UNAVAILABLE, json.dumps(error).encode(), _JSON)
                    return
                self._reply(status, answer, headers)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.root_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def upstream(self) -> tuple[str, str] | None:
        with self._lock:
            return self._upstream

    def route_to(self, name: str, url: str) -> None:
        with self._lock:
            self._upstream = (name, url)

    def __enter__(self) -> Ingress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


_JSON = (("Content-Type", "application/json"),)


def forward(
    base_url: str, method: str, path: str, headers: Mapping[str, str], body: bytes
) -> tuple[int, list[tuple[str, str]], bytes]:
    """The request to the upstream as received, Host header included, and its answer."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=UPSTREAM_TIMEOUT_S)
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
