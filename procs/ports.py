"""Binding the ports wm's processes listen on, with an error that says what to change (which
port each serves metrics on: wm/ops/metrics_ports.py)."""

from __future__ import annotations

import errno
import socket

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from wm.errors import PortTaken

ADDRESS = "0.0.0.0"


def serve_metrics(port: int, process: str, registry: CollectorRegistry = REGISTRY) -> None:
    """Serve `registry` at http://<host>:<port>/metrics from a thread of this process."""
    try:
        start_http_server(port, addr=ADDRESS, registry=registry)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise PortTaken(
            f"{process}: metrics port {port} is in use by another process on this host; "
            "set [metrics] port in the config (the first of the processes' ports) or give "
            "this process --metrics-port N (0: no metrics)"
        ) from None


def bind_web(port: int) -> socket.socket:
    """The web process's listening socket, bound before the server starts so that a port in
    use is one clear error rather than the server's log line and exit 1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((ADDRESS, port))
    except OSError as exc:
        sock.close()
        if exc.errno != errno.EADDRINUSE:
            raise
        raise PortTaken(
            f"web: port {port} is in use by another process on this host; "
            "set $PORT or [web] port in the config"
        ) from None
    return sock
