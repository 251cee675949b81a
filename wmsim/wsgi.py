"""A threaded WSGI server for the simulated clouds, on 127.0.0.1, http or https."""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Any]


class QuietHandler(WSGIRequestHandler):
    # Keep-alive without Nagle: otherwise delayed ACKs add ~40 ms to every response.
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        pass


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
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=QuietHandler, ssl_context=ssl_context
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
        self._server.server_close()
        self._thread.join(timeout=5)
