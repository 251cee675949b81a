"""The single loop as an OS process of its own: `python -m bench.baselines.loop_process`.

bench.isolation runs it exactly as it runs wm's provisioner (a fresh process on the same
config.toml and DATABASE_URL, logging JSON lines, stopped by SIGTERM), so that the two sides
differ in how their passes are run and in nothing else: not in a process's first launch, which
in a warm benchmark process cost the loop less than in wm's fresh one. Like procs/runtime.py it
keeps what start-up made out of the collector's full collections.
"""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time

from bench.baselines.single_loop import LOOP_KEY, single_loop_pass
from bench.common import JOIN_TIMEOUT_S, PassLoops
from procs.providers import build_providers, launching_providers
from wm.config import loader as config_module
from wm.db import tasks as task_store
from wm.db.engine import make_engine
from wm.db.notify import start_listener
from wm.ops.telemetry import configure_logging, log
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue

STOP_POLL_S = 0.2


def main() -> int:
    configure_logging()
    config = config_module.load()
    if not config.env.database_url:
        print("DATABASE_URL is not set", file=sys.stderr)
        return 2
    engine = make_engine(config.env.database_url, application_name="bench-single-loop")
    stop = threading.Event()
    providers = build_providers(launching_providers(config), config.deployment_id, engine, stop)
    provisioner = Provisioner(engine, BuiltinQueue(engine), providers, stop)
    run_all = single_loop_pass(provisioner, list(providers))
    loops = PassLoops(run_all, [LOOP_KEY], config.intervals.provision_s, time.monotonic())
    listener = start_listener(
        engine, task_store.TASKS_CHANNEL, lambda _pool: loops.wake(LOOP_KEY), stop
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    gc.freeze()
    log("process-started", process="single-loop", providers=sorted(providers))
    loops.start()
    while not stop.wait(STOP_POLL_S):
        pass
    stuck = loops.stop()
    listener.join(JOIN_TIMEOUT_S)
    for provider in providers.values():
        provider.close()
    engine.dispose()
    log("process-stopped", process="single-loop", stuck=stuck)
    return 0


if __name__ == "__main__":
    sys.exit(main())
