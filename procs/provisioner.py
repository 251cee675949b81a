"""The provisioner process: one job per provider, woken early when tasks arrive."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine

from procs.providers import build_providers
from procs.runtime import Runtime
from wm.config import Config, RetentionConfig
from wm.db import pool_errors, worker_writes
from wm.db import pools as pool_store
from wm.db.notify import start_listener
from wm.db.tasks import TASKS_CHANNEL
from wm.kinds import describe
from wm.provisioner import Provisioner
from wm.queues import build_queue
from wm.telemetry import log

# Worker-manager expires errors once a day; hourly keeps each DELETE small. Every replica runs
# it: a second DELETE finds nothing left to delete.
EXPIRE_ERRORS_INTERVAL_S = 3600.0
EXPIRE_ERRORS_JOB = "expire-pool-errors"


def job_id(provider_id: str) -> str:
    return f"provision:{provider_id}"


class PoolWaker:
    """Wakes the provider job of the pool whose tasks arrived. Pools are read when the process
    starts and again when news comes of a pool it does not know, so a pool made since (by the
    API, or `wm pools apply`) has its first tasks launched at once, not at the next interval."""

    def __init__(
        self,
        load: Callable[[], dict[str, str]],
        wake: Callable[[str], None],
        providers: set[str],
    ) -> None:
        self._load = load
        self._wake = wake
        self._providers = providers
        self._provider_of = load()

    def __call__(self, pool_id: str) -> None:
        provider_id = self._provider_of.get(pool_id)
        if provider_id is None:
            self._provider_of = self._load()  # one read, for a pool new to this process
            provider_id = self._provider_of.get(pool_id)
        if provider_id in self._providers:
            self._wake(provider_id)


def add_jobs(runtime: Runtime, config: Config) -> Callable[[], None]:
    """Schedule a provisioning job per provider; return what closes the providers."""
    providers = build_providers(
        config.providers, config.deployment_id, runtime.engine, runtime.stop, config.root_url
    )
    provisioner = Provisioner(
        runtime.engine,
        build_queue(config, runtime.engine),
        providers,
        runtime.stop,
    )
    for provider in config.providers:
        if not describe(provider.kind).launches:
            # Nothing to launch or estimate: its workers are made by createWorker. What is
            # left is theirs to keep: each stops when its `expires` passes.
            runtime.add_job(
                hand_made_job_id(provider.id),
                lambda pid=provider.id: stop_lapsed(runtime.engine, pid, config.retention),
                config.provider_interval_s(provider),
                provider=provider.id,
            )
            continue
        runtime.add_job(
            job_id(provider.id),
            lambda pid=provider.id: provisioner.run_pass(pid),
            config.provider_interval_s(provider),
            provider=provider.id,
        )
    runtime.add_job(
        EXPIRE_ERRORS_JOB,
        lambda: expire_errors(runtime.engine, config.retention),
        EXPIRE_ERRORS_INTERVAL_S,
    )
    if config.queue.source == "builtin":

        def load() -> dict[str, str]:
            return {p.pool_id: p.provider_id or "" for p in pool_store.load_pools(runtime.engine)}

        waker = PoolWaker(load, lambda pid: runtime.wake(job_id(pid)), set(providers))
        start_listener(runtime.engine, TASKS_CHANNEL, waker, runtime.stop)
    return lambda: [p.close() for p in providers.values()]


def hand_made_job_id(provider_id: str) -> str:
    return f"hand-made:{provider_id}"


def stop_lapsed(engine: Engine, provider_id: str, retention: RetentionConfig) -> int:
    """Stop the provider's workers past their `expires` (nothing in a cloud to delete) and
    forget its stopped ones past the retention, as a scanner's housekeeping does for a
    cloud's; return how many stopped."""
    stopped = worker_writes.stop_lapsed(engine, provider_id)
    for worker in stopped:
        log("worker-expired", worker=worker.worker_id, pool=worker.pool_id, provider=provider_id)
    worker_writes.expire_stopped(engine, provider_id, retention.stopped_workers_s)
    return len(stopped)


def expire_errors(engine: Engine, retention: RetentionConfig) -> int:
    """Delete the pool errors past the configured retention; log how many."""
    deleted = pool_errors.expire_pool_errors(engine, retention)
    days = retention.pool_errors_s / 86400
    log("pool-errors-expired", deleted=deleted, retention_days=round(days, 3))
    return deleted


def main(config: Config, *, metrics_port: int | None = None) -> int:
    runtime = Runtime("provisioner", config)
    close = add_jobs(runtime, config)
    try:
        return runtime.run(metrics_port)
    finally:
        close()
