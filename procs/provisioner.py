"""The provisioner process: one job per provider, woken early when tasks arrive.

When its providers are of more than one cloud, each cloud's passes run in a child process of
its own (`wm run provisioner --kind K`, procs/children.py): a pass spends CPU in its SDK and in
wm between its waits, and in one interpreter a cloud's CPU made another cloud's pass wait for
the interpreter's lock (with Azure healthy, AWS's submit-to-create p95 was 20 to 60 % slower
than with AWS alone, bench.isolation). The parent runs what belongs to no cloud (static
providers' expiry, pool errors' expiry) and serves the children's metrics on its port.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

from sqlalchemy import Engine

from procs.children import (
    Children,
    children_metrics_dir,
    children_registry,
    die_with_parent,
    forget_child_metrics,
)
from procs.ports import serve_metrics
from procs.providers import build_providers, launching_providers
from procs.runtime import Runtime
from wm.config.loader import Config, ProviderConfig, RetentionConfig, child_environment
from wm.db import pool_errors, scan_writes, worker_writes
from wm.db import pools as pool_store
from wm.db.notify import start_listener
from wm.db.tasks import TASKS_CHANNEL
from wm.kinds import KINDS, describe
from wm.ops.telemetry import log
from wm.provisioning.provisioner import Provisioner
from wm.queues import build_queue

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


def add_jobs(
    runtime: Runtime,
    config: Config,
    launching: Sequence[ProviderConfig] | None = None,
    *,
    housekeeping: bool = True,
) -> Callable[[], None]:
    """Schedule a provisioning job per launching provider (default: every one) and, with
    `housekeeping`, the expiry jobs of hand-made kinds' providers; return what closes the
    providers. Every provisioner expires old pool errors."""
    if launching is None:
        launching = launching_providers(config)
    providers = build_providers(
        launching, config.deployment_id, runtime.engine, runtime.stop, config.root_url
    )
    provisioner = Provisioner(
        runtime.engine,
        build_queue(config, runtime.engine),
        providers,
        runtime.stop,
        launch_choice=config.launch_choice,
    )
    for provider in launching:
        runtime.add_job(
            job_id(provider.id),
            lambda pid=provider.id: provisioner.run_pass(pid),
            config.provider_interval_s(provider),
            provider=provider.id,
        )
    if housekeeping:
        # A hand-made kind's provider has nothing to launch or estimate: its workers are made
        # by createWorker, and each stops when its `expires` passes.
        for provider in (p for p in config.providers if describe(p.kind).hand_made):
            runtime.add_job(
                hand_made_job_id(provider.id),
                lambda pid=provider.id: stop_lapsed(runtime.engine, pid, config.retention),
                config.provider_interval_s(provider),
                provider=provider.id,
            )
    runtime.add_job(
        EXPIRE_ERRORS_JOB,
        lambda: expire_errors(runtime.engine, config.retention),
        EXPIRE_ERRORS_INTERVAL_S,
    )
    if config.queue.source == "builtin" and providers:

        def load() -> dict[str, str]:
            return {p.pool_id: p.provider_id or "" for p in pool_store.load_pools(runtime.engine)}

        def wake(provider_id: str) -> None:
            runtime.wake(job_id(provider_id))  # a pass now, or right after the running one
            provisioner.news(provider_id)  # the running one, waiting on creates, plans again

        waker = PoolWaker(load, wake, set(providers))
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
    scan_writes.expire_stopped(engine, provider_id, retention.stopped_workers_s)
    return len(stopped)


def expire_errors(engine: Engine, retention: RetentionConfig) -> int:
    """Delete the pool errors past the configured retention; log how many."""
    deleted = pool_errors.expire_pool_errors(engine, retention)
    days = retention.pool_errors_s / 86400
    log("pool-errors-expired", deleted=deleted, retention_days=round(days, 3))
    return deleted


def main(
    config: Config,
    *,
    kinds: Sequence[str] = (),
    excluded: Sequence[str] = (),
    metrics_port: int | None = None,
    supervised_by: int | None = None,
) -> int:
    """`--kind`/`--except` choose the clouds whose pools this provisioner launches for;
    providers that launch nothing are looked after by a provisioner without `--kind`."""
    launching = launching_providers(config, kinds, excluded)
    clouds = [kind for kind in KINDS if any(p.kind == kind for p in launching)]
    if len(clouds) > 1:
        return _supervise(config, clouds, metrics_port, housekeeping=not kinds)
    if supervised_by is not None and not die_with_parent(supervised_by):
        return 0  # the parent is gone already: nothing to run for
    name = "provisioner-" + "-".join(kinds) if kinds else "provisioner"
    runtime = Runtime(name, config, parent_pid=supervised_by)
    close = add_jobs(runtime, config, launching, housekeeping=not kinds)
    try:
        return runtime.run(metrics_port)
    finally:
        close()


def _supervise(
    config: Config, clouds: Sequence[str], metrics_port: int | None, *, housekeeping: bool
) -> int:
    """Run each cloud's passes in a child process, and the rest here; serve their metrics."""
    runtime = Runtime("provisioner", config)
    close = add_jobs(runtime, config, [], housekeeping=housekeeping)
    with children_metrics_dir() as metrics_dir:
        children = Children(
            on_lost=lambda _name, code: runtime.fail(code),
            on_exit=lambda pid: forget_child_metrics(metrics_dir, pid),
            stopping=runtime.stop,
        )
        runtime.children = children
        env = child_environment({"PROMETHEUS_MULTIPROC_DIR": metrics_dir})
        try:
            if metrics_port:  # before any child starts: a port in use stops nothing half-run
                serve_metrics(metrics_port, runtime.name, children_registry(metrics_dir))
            for cloud in clouds:
                children.spawn(f"provisioner-{cloud}", child_argv(config, cloud), env)
            return runtime.run()
        finally:
            children.wait(0.0)  # stopped by now, unless start-up failed: then at once
            close()


def child_argv(config: Config, cloud: str) -> list[str]:
    """The command of the child that runs one cloud's passes: this config, this parent, and
    no metrics server of its own (the parent serves what the child records)."""
    return [
        sys.executable, "-m", "wm", "--config", config.source,
        "run", "provisioner", "--kind", cloud, "--metrics-port", "0",
        "--supervised-by", str(os.getpid()),
    ]  # fmt: skip
