"""Every job in one process, for a laptop: the provisioner and a scanner for every cloud."""

from __future__ import annotations

from collections.abc import Sequence

from procs import provisioner, scanner
from procs.runtime import Runtime
from wm.config.loader import Config


def main(
    config: Config,
    *,
    kinds: Sequence[str] = (),
    excluded: Sequence[str] = (),
    metrics_port: int | None = None,
) -> int:
    runtime = Runtime("all", config)
    closers = [
        provisioner.add_jobs(runtime, config),
        scanner.add_jobs(runtime, config, kinds, excluded),
    ]
    try:
        return runtime.run(metrics_port)
    finally:
        for close in closers:
            close()
