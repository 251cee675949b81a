"""A threaded WSGI server for the simulated clouds, on 127.0.0.1, http or https."""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]


class QuietHandler(WSGIRequestHandler):
    """Keep-alive, as the real clouds' front ends keep a client's connections open.

    Werkzeug (3.x) closes the connection after every response: its request handling drains
    whatever the client sent after the request it answered. Without keep-alive each SDK call
    would pay a new TCP connection, and a TLS handshake on the simulated ARM: client CPU
    (several ms a call) the real clouds never charge, which the benchmarks would count as
    wm's. So this handler runs the app itself: it reads the request's body by its
    Content-Length before the app runs, and answers with a Content-Length, on a connection
    that stays open for the client's next request. A chunked request body is left to
    werkzeug's own handling, which closes the connection."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # otherwise delayed ACKs add ~40 ms to every response
    server: KeepAliveServer

    def setup(self) -> None:
        super().setup()
        self.server.track(self.connection)

    def finish(self) -> None:
        self.server.untrack(self.connection)
        super().finish()

    def run_wsgi(self) -> None:
        chunked = "chunked" in self.headers.get("Transfer-Encoding", "").lower()
        expects = self.headers.get("Expect", "").lower().strip(" \t") == "100-continue"
        if chunked or expects or self.server.stopping:
            super().run_wsgi()
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            super().run_wsgi()
            return
        self.environ = environ = self.make_environ()
        environ["wsgi.input"] = io.BytesIO(self.rfile.read(length) if length > 0 else b"")
        answer: list[tuple[str, list[tuple[str, str]]]] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            answer[:] = [(status, headers)]
            return lambda data: body.append(data)

        body: list[bytes] = []
        try:
            chunks = self.server.app(environ, start_response)
            try:
                body.extend(chunks)
            finally:
                if hasattr(chunks, "close"):
                    chunks.close()
        except Exception:
            self.server.log("error", "error in a simulated cloud", exc_info=True)
            answer[:] = [("500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain")])]
            body[:] = [b"internal error"]
        status, headers = answer[0]
        data = b"".join(body)
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        for key, value in headers:
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        no_body = self.command == "HEAD" or int(code) in (204, 304) or 100 <= int(code) < 200
        if not no_body:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if data and not no_body:
            self.wfile.write(data)

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


class KeepAliveServer(ThreadedWSGIServer):
    """Remembers its open connections, so that stopping closes the kept-alive ones too: a
    stopped sim answers nothing, on new connections or old."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stopping = False
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def track(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def untrack(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def close_connections(self) -> None:
        self.stopping = True
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class ServerThread:
    """Serves one WSGI app in a background thread until `stop`."""

    def __init__(
        self,
        app: WsgiApp,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = KeepAliveServer(
            host, port, app, handler=QuietHandler, ssl_context=ssl_context
        )
        self._server.daemon_threads = True
        scheme = "https" if ssl_context else "http"
        self.host = host
        self.port = self._server.socket.getsockname()[1]
        self.base_url = f"{scheme}://{host}:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def start(self) -> ServerThread:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._thread.join(timeout=5)
