"""The request handler the stand-ins served with http.server share (the ingress, the legacy
worker-manager): HTTP/1.1 keep-alive, no log lines, each method to one `handle_method`."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler
from typing import Any


class ApiRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.handle_method("GET")

    def do_PUT(self) -> None:
        self.handle_method("PUT")

    def do_POST(self) -> None:
        self.handle_method("POST")

    def do_DELETE(self) -> None:
        self.handle_method("DELETE")

    def handle_method(self, method: str) -> None:
        """Read the request, send the whole answer."""
        raise NotImplementedError
