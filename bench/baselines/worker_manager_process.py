"""The worker-manager arm's provisioner as an OS process of its own:
`python -m bench.baselines.worker_manager_process`.

bench.launch_choice_e2e runs it where the wm arms run `python -m wm run provisioner`: the same
config.toml and DATABASE_URL, wm's process runtime (procs/runtime.py: a job per provider on an
executor of its own, woken by the tasks' NOTIFY, stopped by SIGTERM), wm's providers and gate,
and the pass of bench/baselines/worker_manager_pass.py, which makes worker-manager's launch
config choices. Every provider's passes run in this one process (wm's provisioner runs each
cloud's in a child process): the arms differ in their choice, not in their CPU, which a
provisioning pass every few seconds hardly uses.

Environment: WM_BENCH_MARKET_SPEED (market seconds a real second; worker-manager's one-hour
error window is an hour of the market's time), WM_BENCH_SEED (its draws and shuffles).
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

from bench.baselines.worker_manager_pass import WorkerManagerProvisioner, make_all_or_nothing
from procs.providers import build_providers, launching_providers
from procs.provisioner import PoolWaker, expire_errors, job_id
from procs.runtime import Runtime
from wm.config import loader as config_module
from wm.db import pools as pool_store
from wm.db.notify import start_listener
from wm.db.tasks import TASKS_CHANNEL
from wm.queues import build_queue

SPEED_ENV = "WM_BENCH_MARKET_SPEED"
SEED_ENV = "WM_BENCH_SEED"
EXPIRE_ERRORS_INTERVAL_S = 3600.0


def main() -> int:
    config = config_module.load()
    speed = float(os.environ.get(SPEED_ENV, "1"))
    seed = int(os.environ.get(SEED_ENV, "1"))
    if speed <= 0:
        print(f"{SPEED_ENV} must be above 0", file=sys.stderr)
        return 2
    runtime = Runtime("worker-manager-provisioner", config)
    launching = launching_providers(config)
    providers = build_providers(
        launching, config.deployment_id, runtime.engine, runtime.stop, config.root_url
    )
    even_split = frozenset(p.id for p in launching if p.kind == "aws")
    for provider_id in even_split:
        make_all_or_nothing(providers[provider_id])
    provisioner = WorkerManagerProvisioner(
        runtime.engine,
        build_queue(config, runtime.engine),
        providers,
        runtime.stop,
        even_split=even_split,
        error_window=timedelta(hours=1) / speed,
        seed=seed,
    )
    for provider in launching:
        runtime.add_job(
            job_id(provider.id),
            lambda pid=provider.id: provisioner.run_pass(pid),
            config.provider_interval_s(provider),
            provider=provider.id,
        )
    runtime.add_job(
        "expire-pool-errors",
        lambda: expire_errors(runtime.engine, config.retention),
        EXPIRE_ERRORS_INTERVAL_S,
    )

    def load() -> dict[str, str]:
        return {p.pool_id: p.provider_id or "" for p in pool_store.load_pools(runtime.engine)}

    waker = PoolWaker(load, lambda pid: runtime.wake(job_id(pid)), set(providers))
    start_listener(runtime.engine, TASKS_CHANNEL, waker, runtime.stop)
    try:
        return runtime.run()
    finally:
        for provider in providers.values():
            provider.close()


if __name__ == "__main__":
    sys.exit(main())
