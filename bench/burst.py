"""Provisioner burst: a burst of tasks at once, wm's provisioner against the old design.

`python -m bench.burst` submits `--tasks` tasks (default 1,000) at once to the builtin queue,
split over six pools in the production mix (EC2 84 %, Azure 13 %, GCE 3 %), and runs, one after
the other, each on a fresh database and fresh simulated clouds:

- wm: the real `Provisioner`, one pass per provider in a thread of its own every `--interval-s`,
  woken at once by the tasks' NOTIFY as the provisioner process is (`--no-wake`: interval only);
- baseline: `bench.baselines.old_provisioner`, the same passes counting only what a scanner
  loop (every `--baseline-scan-s`) recorded.

Both launch through the real provider adapters (default gate settings) against SimEc2, SimGce
and SimArm with `--boot-s` of boot time. Nothing registers the workers, so nothing claims a
task: that is what a real fleet sees too until its first VM boots, so each side is measured
from the submission for `--boot-s` seconds (at least MIN_WINDOW_S).

Figures, the same names on both sides (see bench/README.md):
- submit_to_create_p50_s / _p95_s / _max_s: per task, from the commit of its pool's tasks to
  the arrival at the simulated cloud of the create call for the VM that covers it (the k-th
  VM created for a pool covers its k-th task); taken by wrapping each sim's WSGI app;
- submit_to_create_p95_s_aws / _azure / _gcp: the same p95 over one cloud's tasks;
- tasks_uncovered: tasks no create call covered within the window (percentiles that fall on
  one of them are null);
- peak_capacity_ratio: peak of live (pending or running) VM capacity in the clouds divided by
  the demand, sampled every SAMPLE_S (1.0 is perfect, above is over-provisioning);
- peak_counted_ratio: the same for what the provisioner counted (wm: requested + running rows;
  baseline: the scanner's record);
- vms_created (and per cloud), create_calls, cloud_api_calls: from the sims' own counts;
- create_answer_mean_s: how long a sim took to answer a create call;
- provision_passes, pass_errors.

Results go to stdout (a table, then JSON) and to bench/results/burst.json as
{"wm": {...}, "baseline": {...}, "ratio": {...}, "params": {...}, "log_warnings": {...}},
where ratio = baseline / wm for each figure (null where wm's is 0 or either is null).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import astuple, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Engine

from bench.baselines.old_provisioner import OldProvisioner, scan_every
from bench.cloud_calls import CREATE_OPERATIONS, CreateCall, CreateRecorder, task_latencies
from bench.cloud_process import CloudProcess, wrap_app
from bench.common import (
    CLOUDS,
    DEPLOYMENT_ID,
    JOIN_TIMEOUT_S,
    MACHINES,
    POOL_MIX,
    PROVIDER_IDS,
    RESULTS_DIR,
    BenchConfig,
    PassLoops,
    fresh_database,
    parse_config,
    provider_entries,
    sync_pools,
)
from bench.output import emit, percentile, ratios, rounded, run_sides, table
from wm.config.loader import Config
from wm.db import tasks as task_store
from wm.db import workers
from wm.db.notify import start_listener
from wm.providers import build_provider
from wm.providers.base import Provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.behaviour import Behaviour
from wmsim.demo.workload import split
from wmsim.gcp.gce import SimGce
from wmsim.postgres import PostgresServer

# Every launch config has capacity 1, so a VM is one unit of capacity and covers one task.
CAPACITY_PER_WORKER = 1
MAX_CAPACITY_FACTOR = 2  # each pool's max: twice its share of the burst, never binding for wm
TASK_DURATION_S = 60.0  # recorded on the tasks; nothing runs them here
SAMPLE_S = 0.25  # capacity sampling period
CLOUD_OF_POOL = {pool_id: cloud for pool_id, cloud, _ in POOL_MIX}
MIN_WINDOW_S = 10.0  # shortest measurement window, whatever the boot time
WARMUP_TICKS = 1.5  # the burst lands half an interval after the second tick
BASELINE_SCAN_PHASE = 0.5  # the baseline's next scan comes half a scan interval after the burst
LIVE_VM_STATES = frozenset({"pending", "running"})


# -- the simulated clouds -----------------------------------------------------------------------


class SimHost:
    """The three simulated clouds, each behind a CreateRecorder (runs in the clouds' process)."""

    def __init__(self, boot_s: float, latency_ms: float, stack: contextlib.ExitStack) -> None:
        makers = {"aws": SimEc2, "azure": SimArm, "gcp": SimGce}
        self.sims: dict[str, Any] = {}
        self.recorders: dict[str, CreateRecorder] = {}
        for cloud in CLOUDS:
            sim = makers[cloud](Behaviour(boot_s=boot_s, latency_ms=latency_ms)).start()
            stack.callback(sim.stop)
            self.recorders[cloud] = wrap_app(sim, lambda app, c=cloud: CreateRecorder(c, app))
            self.sims[cloud] = sim

    def ready(self) -> dict[str, Any]:
        endpoints = {cloud: sim.endpoint for cloud, sim in self.sims.items()}
        return {"endpoints": endpoints, "cert_path": str(self.sims["azure"].cert_path)}

    def live_capacity(self) -> int:
        return CAPACITY_PER_WORKER * sum(
            1 for sim in self.sims.values() for vm in sim.instances() if vm.state in LIVE_VM_STATES
        )

    def vms_created(self) -> dict[str, int]:
        return {cloud: len(sim.instances()) for cloud, sim in self.sims.items()}

    def counts(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for sim in self.sims.values():
            total.update(sim.faults.counts())
        return dict(total)

    def reset_counts(self) -> None:
        for sim in self.sims.values():
            sim.faults.reset_counts()

    def create_calls(self) -> list[tuple]:
        # Plain tuples: a dataclass of a module run as __main__ does not unpickle across processes.
        return [astuple(call) for r in self.recorders.values() for call in list(r.calls)]


class Clouds(CloudProcess):
    """The burst's SimHost in a process of its own (bench.cloud_process.CloudProcess)."""

    def live_capacity(self) -> int:
        return self.ask("live_capacity")

    def vms_created(self) -> dict[str, int]:
        return self.ask("vms_created")

    def counts(self) -> dict[str, int]:
        return self.ask("counts")

    def reset_counts(self) -> None:
        self.ask("reset_counts")

    def create_calls(self) -> list[CreateCall]:
        return [CreateCall(*fields) for fields in self.ask("create_calls")]


# -- config -------------------------------------------------------------------------------------


def split_tasks(total: int) -> dict[str, int]:
    """Tasks per pool in the production mix, largest remainders first, summing to `total`."""
    return split(total, {pool: share for pool, _, share in POOL_MIX})


def bench_config(
    clouds: Clouds, demand: Mapping[str, int], db_url: str, interval_s: float
) -> BenchConfig:
    providers = provider_entries(clouds.endpoints, clouds.cert_path)
    pools = []
    for pool_id, cloud, _ in POOL_MIX:
        region, machine_type, image = MACHINES[cloud]
        pools.append(
            {
                "id": pool_id,
                "provider": PROVIDER_IDS[cloud],
                "max_capacity": max(MAX_CAPACITY_FACTOR * demand[pool_id], 1),
                "launch_configs": [
                    {
                        "region": region,
                        "machine_type": machine_type,
                        "image": image,
                        "capacity_per_worker": CAPACITY_PER_WORKER,
                    }
                ],
            }
        )
    raw = {
        "deployment_id": DEPLOYMENT_ID,
        "intervals": {"provision_s": interval_s},
        "providers": providers,
        "pools": pools,
    }
    return parse_config(raw, db_url, "bench/burst.py")


@dataclass
class Peaks:
    """Sampled every SAMPLE_S: the peaks of cloud and counted capacity."""

    cloud: int = 0
    counted: int = 0
    samples: int = 0

    def sample(self, clouds: Clouds, counted: Callable[[], int]) -> None:
        self.cloud = max(self.cloud, clouds.live_capacity())
        self.counted = max(self.counted, counted())
        self.samples += 1


@contextlib.contextmanager
def sampling(clouds: Clouds, counted: Callable[[], int]) -> Iterator[Peaks]:
    peaks, stop = Peaks(), threading.Event()

    def loop() -> None:
        while True:
            peaks.sample(clouds, counted)
            if stop.wait(SAMPLE_S):
                return

    thread = threading.Thread(target=loop, name="sampler", daemon=True)
    thread.start()
    try:
        yield peaks
    finally:
        stop.set()
        thread.join(JOIN_TIMEOUT_S)
    peaks.sample(clouds, counted)  # after every pass ended: what was created in the end


# -- the two sides ------------------------------------------------------------------------------


class Side(Protocol):
    def run_pass(self, provider_id: str) -> object: ...

    def counted_capacity(self) -> int: ...

    def start(self, loops: PassLoops) -> None:
        """Before the burst."""
        ...

    def submitted(self, at: float) -> None:
        """Right after the burst was committed."""
        ...

    def stop(self) -> None: ...


@dataclass
class WmSide:
    engine: Engine
    config: Config
    providers: Mapping[str, Provider]
    wake: bool
    _stop: threading.Event = field(default_factory=threading.Event)
    _listener: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.provisioner = Provisioner(
            self.engine,
            BuiltinQueue(self.engine),
            self.providers,
            self._stop,
        )
        self._pool_ids = [p.id for p in self.config.pools]

    def run_pass(self, provider_id: str) -> object:
        return self.provisioner.run_pass(provider_id)

    def counted_capacity(self) -> int:
        capacity = workers.capacity_by_pool(self.engine, self._pool_ids)
        return sum(c.requested + c.running for c in capacity.values())

    def start(self, loops: PassLoops) -> None:
        if not self.wake:
            return
        provider_of = {p.id: p.provider for p in self.config.pools}

        def wake(pool_id: str) -> None:  # as procs/provisioner.py wakes the process's passes
            provider_id = provider_of.get(pool_id, "")
            loops.wake(provider_id)
            self.provisioner.news(provider_id)

        self._listener = start_listener(self.engine, task_store.TASKS_CHANNEL, wake, self._stop)

    def submitted(self, at: float) -> None:
        pass

    def stop(self) -> None:
        self._stop.set()
        if self._listener is not None:
            self._listener.join(JOIN_TIMEOUT_S)


@dataclass
class BaselineSide:
    engine: Engine
    providers: Mapping[str, Provider]
    scan_s: float
    _stop: threading.Event = field(default_factory=threading.Event)
    _scanner: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.old = OldProvisioner(self.engine, BuiltinQueue(self.engine), self.providers)

    def run_pass(self, provider_id: str) -> object:
        return self.old.run_pass(provider_id)

    def counted_capacity(self) -> int:
        return self.old.recorded_capacity()

    def start(self, loops: PassLoops) -> None:
        self.old.scan()  # the record before the burst: nothing

    def submitted(self, at: float) -> None:
        first_at = at + BASELINE_SCAN_PHASE * self.scan_s
        self._scanner = threading.Thread(
            target=scan_every,
            args=(self.old, self._stop, first_at, self.scan_s),
            name="old-scanner",
            daemon=True,
        )
        self._scanner.start()

    def stop(self) -> None:
        self._stop.set()
        if self._scanner is not None:
            self._scanner.join(JOIN_TIMEOUT_S)


# -- one run ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunParams:
    tasks: int
    boot_s: float
    interval_s: float
    baseline_scan_s: float
    latency_ms: float
    wake: bool

    @property
    def window_s(self) -> float:
        return max(self.boot_s, MIN_WINDOW_S)


def run_side(name: str, params: RunParams, server: PostgresServer) -> dict[str, Any]:
    """Run one side on a fresh database and fresh clouds; return its figures."""
    demand = split_tasks(params.tasks)
    with contextlib.ExitStack() as stack:
        engine, db_url = stack.enter_context(fresh_database(server, name, pool_size=10))
        clouds = stack.enter_context(Clouds.running(SimHost, params.boot_s, params.latency_ms))
        config = bench_config(clouds, demand, db_url, params.interval_s)
        sync_pools(engine, config)
        providers = {p.id: build_provider(p, config.deployment_id) for p in config.providers}
        # At the window's end a call still waiting for its turn is not sent (the baseline's
        # over-provisioning can leave one waiting minutes for EC2's instance bucket).
        window_over = threading.Event()
        for provider in providers.values():
            stack.callback(provider.close)
            provider.gate.stop_on(window_over)
            for region in provider.regions:  # clients, connections and tokens made up front
                provider.list_instances(region)
        clouds.reset_counts()
        side: Side = (
            WmSide(engine, config, providers, params.wake)
            if name == "wm"
            else BaselineSide(engine, providers, params.baseline_scan_s)
        )
        started = time.monotonic()
        loops = PassLoops(side.run_pass, list(providers), params.interval_s, started)
        stack.callback(side.stop)  # on the way out of an error too; both stops are idempotent
        stack.callback(loops.stop)
        side.start(loops)
        loops.start()
        burst_at = started + WARMUP_TICKS * params.interval_s
        time.sleep(max(0.0, burst_at - time.monotonic()))
        passes_before = sum(loops.passes.values())
        with sampling(clouds, side.counted_capacity) as peaks:
            submitted = {}
            for pool_id, count in demand.items():
                task_store.submit_tasks(engine, pool_id, count, TASK_DURATION_S)
                submitted[pool_id] = time.monotonic()
            side.submitted(min(submitted.values()))
            time.sleep(max(0.0, min(submitted.values()) + params.window_s - time.monotonic()))
            window_over.set()
            stuck = loops.stop()
            side.stop()
        if stuck:
            print(f"warning: {name}: threads still running: {stuck}", file=sys.stderr)
        return figures(
            clouds,
            peaks,
            demand,
            submitted,
            passes=sum(loops.passes.values()) - passes_before,
            errors=sum(loops.errors.values()),
        )


def figures(
    clouds: Clouds,
    peaks: Peaks,
    demand: Mapping[str, int],
    submitted: Mapping[str, float],
    *,
    passes: int,
    errors: int,
) -> dict[str, Any]:
    total = sum(demand.values())
    calls = clouds.create_calls()
    latencies = sorted(task_latencies(calls, submitted, demand))
    counts = clouds.counts()
    created = clouds.vms_created()
    return {
        "submit_to_create_p50_s": rounded(percentile(latencies, 0.50)),
        "submit_to_create_p95_s": rounded(percentile(latencies, 0.95)),
        "submit_to_create_max_s": rounded(percentile(latencies, 1.0)),
        **{
            f"submit_to_create_p95_s_{cloud}": rounded(percentile(by_cloud, 0.95))
            for cloud, by_cloud in latencies_by_cloud(calls, submitted, demand).items()
        },
        "tasks_uncovered": sum(1 for v in latencies if math.isinf(v)),
        "peak_capacity_ratio": rounded(peaks.cloud / total if total else None),
        "peak_counted_ratio": rounded(peaks.counted / total if total else None),
        "vms_created": sum(created.values()),
        **{f"vms_created_{cloud}": created[cloud] for cloud in CLOUDS},
        "create_calls": sum(n for op, n in counts.items() if op in CREATE_OPERATIONS),
        "create_answer_mean_s": rounded(
            sum(c.answered - c.at for c in calls) / len(calls) if calls else None
        ),
        "cloud_api_calls": sum(counts.values()),
        "provision_passes": passes,
        "pass_errors": errors,
    }


def latencies_by_cloud(
    calls: list[CreateCall], submitted: Mapping[str, float], demand: Mapping[str, int]
) -> dict[str, list[float]]:
    """Each cloud's tasks' latencies, sorted: which cloud a burst's tail comes from."""
    return {
        cloud: sorted(
            task_latencies(
                calls, submitted, {p: n for p, n in demand.items() if CLOUD_OF_POOL[p] == cloud}
            )
        )
        for cloud in CLOUDS
    }


# -- output -------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.burst", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--tasks", type=int, default=1000, help="tasks in the burst")
    parser.add_argument("--boot-s", type=float, default=60.0, help="simulated VM boot time")
    parser.add_argument("--interval-s", type=float, default=2.0, help="provisioning interval")
    parser.add_argument(
        "--baseline-scan-s", type=float, default=30.0, help="the baseline scanner's interval"
    )
    parser.add_argument("--latency-ms", type=float, default=0.0, help="simulated API latency")
    parser.add_argument(
        "--no-wake", dest="wake", action="store_false", help="wm: no NOTIFY wake-up, interval only"
    )
    parser.add_argument(
        "--output", type=Path, default=RESULTS_DIR / "burst.json", help="results file"
    )
    parser.add_argument("--log", type=Path, default=None, help="wm's JSON log lines to this file")
    args = parser.parse_args(argv)
    if args.tasks < 1 or args.interval_s <= 0 or args.baseline_scan_s <= 0 or args.boot_s < 0:
        parser.error("--tasks must be >= 1; intervals > 0; --boot-s >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = RunParams(
        args.tasks, args.boot_s, args.interval_s, args.baseline_scan_s, args.latency_ms, args.wake
    )
    demand = split_tasks(params.tasks)
    by_cloud = Counter({cloud: 0 for cloud in CLOUDS})
    for pool_id, cloud, _ in POOL_MIX:
        by_cloud[cloud] += demand[pool_id]
    print(
        f"burst of {params.tasks} tasks ({', '.join(f'{c} {n}' for c, n in by_cloud.items())}); "
        f"boot {params.boot_s:g} s, window {params.window_s:g} s, interval "
        f"{params.interval_s:g} s, wake {'on' if params.wake else 'off'}, baseline scan "
        f"{params.baseline_scan_s:g} s",
        file=sys.stderr,
    )
    results, warnings = run_sides(lambda name, server: run_side(name, params, server), args.log)
    result = {
        "wm": results["wm"],
        "baseline": results["baseline"],
        "ratio": ratios(results["wm"], results["baseline"]),
        "params": {
            **{k: getattr(params, k) for k in RunParams.__dataclass_fields__},
            "window_s": params.window_s,
            "tasks_by_pool": demand,
        },
        "log_warnings": warnings,
    }
    emit(result, table(result), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
