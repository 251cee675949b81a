"""Which port each process type serves Prometheus metrics on by default.

The Procfile's processes may share one host (honcho, foreman, systemd units) or run one to a
container or dyno. So that both work without a change, each process type serves metrics on a
port of its own: `[metrics] port` plus the type's slot below, a fixed address for Prometheus
to scrape either way. The web process serves /metrics on its own port.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def metrics_port(base: int, process: str, kinds: Sequence[str] = ()) -> int:
    """The port `wm run <process> [--kind K]` serves metrics on by default; 0 (none) when
    `[metrics] port` is 0, and for the web process, which serves /metrics on its own port."""
    if not base or (process, None) not in METRICS_SLOTS:
        return 0
    kind = kinds[0] if len(kinds) == 1 else None
    slot = METRICS_SLOTS.get((process, kind), METRICS_SLOTS[(process, None)])
    return base + slot
