"""A small local HTTP server that answers like the Taskcluster queue's count endpoints."""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PREFIX = "/api/queue/v1/task-queues/"


class FakeQueue:
    def __init__(self, *, batch_supported: bool = True, fail_with: int | None = None) -> None:
        self.counts: dict[str, tuple[int, int]] = {}
        self.batch_supported = batch_supported
        self.fail_with = fail_with
        self.requests: list[str] = []
        self.auth_headers: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:
                pass

            def _reply(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                fake.requests.append(f"GET {self.path}")
                fake.auth_headers.append(self.headers.get("Authorization", ""))
                if fake.fail_with:
                    return self._reply(
                        fake.fail_with, {"code": "InternalServerError", "message": "x"}
                    )
                if not (self.path.startswith(PREFIX) and self.path.endswith("/counts")):
                    return self._reply(404, {"code": "ResourceNotFound", "message": self.path})
                queue = urllib.parse.unquote(self.path[len(PREFIX) : -len("/counts")])
                pending, claimed = fake.counts.get(queue, (0, 0))
                self._reply(
                    200, {"taskQueueId": queue, "pendingTasks": pending, "claimedTasks": claimed}
                )

            def do_POST(self) -> None:
                fake.requests.append(f"POST {self.path}")
                fake.auth_headers.append(self.headers.get("Authorization", ""))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if fake.fail_with:
                    return self._reply(
                        fake.fail_with, {"code": "InternalServerError", "message": "x"}
                    )
                if self.path != PREFIX + "counts" or not fake.batch_supported:
                    return self._reply(404, {"code": "ResourceNotFound", "message": self.path})
                items = [
                    {
                        "taskQueueId": q,
                        "pendingTasks": fake.counts.get(q, (0, 0))[0],
                        "claimedTasks": fake.counts.get(q, (0, 0))[1],
                    }
                    for q in body["taskQueueIds"]
                ]
                self._reply(200, {"taskQueueCounts": items})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.root_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> FakeQueue:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
