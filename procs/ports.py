"""The ports wm's processes listen on, and binding them with an error that says what to change.

The Procfile's processes may share one host (honcho, foreman, systemd units) or run one to a
container or dyno. So that both work without a change, each process type serves Prometheus
metrics on a port of its own by default: `[metrics] port` plus the type's slot below, a fixed
address for Prometheus to scrape either way. The web process serves /metrics on its own port.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Sequence

from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

from wm.errors import WmError

# (process, its one --kind or None) -> offset from [metrics] port. The Procfile's four come
# first; then the alternatives an operator may run instead (README: "Metrics").
METRICS_SLOTS: dict[tuple[str, str | None], int] = {
    ("provisioner", None): 0,
    ("scanner", "aws"): 1,
    ("scanner", "gcp"): 2,
    ("scanner", "azure"): 3,
    ("scanner", None): 4,  # every cloud, or --except
    ("provisioner", "aws"): 5,
    ("provisioner", "gcp"): 6,
    ("provisioner", "azure"): 7,
    ("all", None): 8,
}
METRICS_PORTS = max(METRICS_SLOTS.values()) + 1  # how many ports from [metrics] port on
ADDRESS = "0.0.0.0"


class PortTaken(WmError):
    """A port a process must listen on is held by another process on this host."""


def metrics_port(base: int, process: str, kinds: Sequence[str] = ()) -> int:
    """The port `wm run <process> [--kind K]` serves metrics on by default; 0 (none) when
    `[metrics] port` is 0, and for the web process, which serves /metrics on its own port."""
    if not base or (process, None) not in METRICS_SLOTS:
        return 0
    kind = kinds[0] if len(kinds) == 1 else None
    slot = METRICS_SLOTS.get((process, kind), METRICS_SLOTS[(process, None)])
    return base + slot


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
