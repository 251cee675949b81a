"""The stand-in worker-manager over HTTP: a threaded server answering at
`<base>/api/worker-manager/v1/` for a Deployment, every failure in worker-manager's error shape."""

from __future__ import annotations

import json
import logging
import threading
import urllib.parse
from datetime import UTC, datetime
from http.server import ThreadingHTTPServer
from typing import Any

from wmsim.http_handler import ApiRequestHandler
from wmsim.legacy.routes import ERROR_STATUS, ApiError, check_query
from wmsim.legacy.service import Deployment
from wmsim.legacy.store import js_time

PREFIX = "/api/worker-manager/v1/"


def serve(deployment: Deployment) -> ThreadingHTTPServer:
    """A started threaded HTTP server for the deployment on 127.0.0.1 (a free port)."""

    class Handler(ApiRequestHandler):
        def handle_method(self, method: str) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                answer = self._answer(method, raw)
                status = 200
            except Exception as failure:  # every failure answers, as express does
                error = (
                    failure
                    if isinstance(failure, ApiError)
                    else ApiError("InternalServerError", f"Internal Server Error: {failure!r}")
                )
                status = ERROR_STATUS.get(error.code, 500)
                answer = {
                    "code": error.code,
                    "message": error.message,
                    "requestInfo": {
                        "method": method,
                        "params": {},
                        "payload": {},
                        "time": js_time(datetime.now(UTC)),
                        **({"details": error.details} if error.details else {}),
                    },
                }
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _answer(self, method: str, raw: bytes) -> dict[str, Any]:
            path, _, query_string = self.path.partition("?")
            if not path.startswith(PREFIX):
                raise ApiError("ResourceNotFound", f"no such API: {path}")
            parts = [urllib.parse.unquote(p) for p in path[len(PREFIX) :].split("/")]
            query = dict(urllib.parse.parse_qsl(query_string, keep_blank_values=True))
            check_query(query)
            host = self.headers.get("Host") or f"127.0.0.1:{self.server.server_address[1]}"
            client_id, scopes = deployment.authenticate(
                method,
                f"http://{host}{self.path}",
                self.headers.get("Authorization"),
                raw,
                self.headers.get("Content-Type", ""),
            )
            try:
                body = json.loads(raw) if raw else None
            except ValueError as error:
                raise ApiError("MalformedPayload", f"Failed to parse JSON: {error}") from None
            return deployment.handle(method, parts, query, body, client_id, scopes)

    logging.getLogger("mohawk").setLevel(logging.ERROR)  # nonces are not tracked here
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="legacy-wm-http").start()
    return server
