"""The scanner process: one job per (provider, region), for the clouds it is asked to scan, and
one per provider reading the launch choice's signals when a pool chooses by cost.

`--kind aws` scans only AWS providers (Procfile `scanner-aws`); `--except azure` scans all
but Azure (the migration path: `scanner` plus `scanner-azure`). Replicas of one scanner type
split regions between them through `claim_scan`; two never scan the same region at once.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence

from procs.providers import build_providers, launching_providers
from procs.runtime import Runtime
from wm.config.launch_choice import ChoiceMode
from wm.config.loader import Config, ProviderConfig
from wm.db import pool_errors, scan_writes
from wm.db import pools as pool_store
from wm.providers import build_signals
from wm.providers.base import Provider
from wm.providers.signal_sources import Cadence, SignalCollector
from wm.queues import build_queue
from wm.queues.base import QueueSource
from wm.scanning.scanner import Scanner
from wm.scanning.signals_job import SIGNALS_TICK_S, SignalsJob, wanted_offerings

HOUSEKEEPING_INTERVAL_S = 600.0
# A region whose scan started less than this share of its interval ago is left to the replica
# that scanned it: each region is scanned about once per interval however many replicas run.
SCAN_GAP_FRACTION = 0.5


def add_jobs(
    runtime: Runtime, config: Config, kinds: Sequence[str] = (), excluded: Sequence[str] = ()
) -> Callable[[], None]:
    """Schedule a scan job per (provider, region), housekeeping and signal reads per provider;
    return what closes the providers and their signal collectors."""
    # Only scanned kinds' (never static's: it has no cloud to list).
    chosen = launching_providers(config, kinds, excluded)
    _ensure_scan_units(runtime, config)
    providers = build_providers(
        chosen, config.deployment_id, runtime.engine, runtime.stop, config.root_url
    )
    queue = build_queue(config, runtime.engine)
    scanner = Scanner(
        runtime.engine,
        providers,
        replica=f"{socket.gethostname()}:{os.getpid()}",
        max_scan_s={p.id: p.max_scan_s for p in chosen},
        min_gap_s={p.id: p.scan_interval_s * SCAN_GAP_FRACTION for p in chosen},
        missing_grace_s=config.intervals.missing_grace_s,
        orphan_grace_s=config.intervals.orphan_grace_s,
        stop=runtime.stop,
        queue=queue,
    )
    collectors: list[SignalCollector] = []
    for provider in chosen:
        for region in provider.regions:
            runtime.add_job(
                f"scan:{provider.id}:{region}",
                lambda pid=provider.id, r=region: scanner.scan(pid, r),
                provider.scan_interval_s,
                spread=True,
                provider=provider.id,
                region=region,
            )
        runtime.add_job(
            f"housekeeping:{provider.id}",
            lambda pid=provider.id: _housekeeping(runtime, config, pid),
            HOUSEKEEPING_INTERVAL_S,
            provider=provider.id,
        )
        collector = _add_signals_job(runtime, config, provider, providers[provider.id], queue)
        if collector is not None:
            collectors.append(collector)

    def close() -> None:
        for collector in collectors:
            collector.close()
        for provider in providers.values():
            provider.close()

    return close


def _add_signals_job(
    runtime: Runtime,
    config: Config,
    provider_config: ProviderConfig,
    provider: Provider,
    queue: QueueSource,
) -> SignalCollector | None:
    """The provider's signal reads (wm/scanning/signals_job.py), when something reads them:
    a pool in shadow or cost mode, or the provider's `signals.enabled`; return its collector."""
    signals = provider_config.signals
    if signals.enabled is False or (signals.enabled is None and config.launch_choice.all_weights):
        return None
    collector = build_signals(provider_config, provider)
    if collector is None:
        return None

    def chooses_by_cost(pool_id: str) -> bool:
        mode = config.launch_choice.for_pool(pool_id).mode
        return signals.enabled is True or mode != ChoiceMode.WEIGHTS

    job = SignalsJob(
        runtime.engine,
        collector,
        lambda: wanted_offerings(
            runtime.engine,
            provider.id,
            chooses_by_cost,
            lambda lc: provider.offering(lc.configuration, lc.region),
            queue,
        ),
        {
            Cadence.PRICE: signals.price_interval_s,
            Cadence.CAPACITY: signals.capacity_interval_s,
            Cadence.PREEMPTION: signals.preemption_interval_s,
        },
        signals.retry_s,
    )
    # Often enough to retry a failed source on time; a run with nothing due asks nothing.
    tick_s = min(SIGNALS_TICK_S, signals.retry_s)
    runtime.add_job(f"signals:{provider.id}", job.run, tick_s, spread=True, provider=provider.id)
    return collector


def _ensure_scan_units(runtime: Runtime, config: Config) -> None:
    # Regions are the deployment's: the config lists them, and each gets its claim row here.
    pool_store.ensure_scan_units(
        runtime.engine, [(p.id, region) for p in config.providers for region in p.regions]
    )


def _housekeeping(runtime: Runtime, config: Config, provider_id: str) -> None:
    scan_writes.expire_stopped(runtime.engine, provider_id, config.retention.stopped_workers_s)
    pool_errors.expire_pool_errors(runtime.engine, config.retention)


def main(
    config: Config,
    *,
    kinds: Sequence[str] = (),
    excluded: Sequence[str] = (),
    metrics_port: int | None = None,
) -> int:
    name = "scanner-" + "-".join(kinds) if kinds else "scanner"
    runtime = Runtime(name, config)
    close = add_jobs(runtime, config, kinds, excluded)
    try:
        return runtime.run(metrics_port)
    finally:
        close()
