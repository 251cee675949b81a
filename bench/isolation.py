"""Isolation: how long AWS demand waits while Azure is sick, wm's provisioner against one loop.

`python -m bench.isolation` submits, every `--wave-s` for `--waves` waves, `--aws-tasks` tasks
for an EC2 pool and `--azure-tasks` tasks for an Azure pool (a fresh pool each wave, so every
wave is new demand), and measures per AWS task the time from its submission to the arrival at
the simulated EC2 of the create call that covers it. Six runs, each on a fresh database, with
pools and a deployment id of its own, on the same simulated clouds emptied before each run (in
a process of their own, every call taking `--latency-ms`):

- wm, idle / healthy / sick: wm's real provisioner (`python -m wm run provisioner`: each cloud's
  passes in a child process of its own, one APScheduler job per provider, woken by the tasks'
  NOTIFY), measured once every provider has passed once;
- baseline, idle / healthy / sick: `bench.baselines.single_loop`, wm's passes for every provider one
  after the other in one loop (woken by NOTIFY as well), run as wm's is: a fresh OS process
  (`python -m bench.baselines.loop_process`) on the same config, measured once it has passed.

Idle: Azure healthy, and no Azure tasks (the control: what the way passes are run costs AWS by
itself). Healthy: the Azure tasks go in with each wave, right after the AWS ones. Sick: Azure
answers every call after `--sick-latency-ms` (20 s) and `--sick-failure-rate`
(30 %) of them with a 5xx (an even, repeatable spread). After the last wave each run waits up to
`--drain-s` for the AWS tasks still uncovered, Azure still sick; then Azure heals so in-flight
passes end, and the run stops.

Figures per run (see bench/README.md): aws_submit_to_create_p50_s / _p95_s / _max_s,
aws_tasks_uncovered, azure_vms_created. Results go to stdout and to
bench/results/isolation.json as {"wm": {"idle", "healthy", "sick"}, "baseline": {...}, "ratio":
{...}, "sick_over_healthy": {"wm", "baseline"}, "healthy_over_idle": {...}, "params",
"log_warnings"}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import astuple, dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.cloud_calls import CreateCall, CreateRecorder, task_latencies
from bench.cloud_process import CloudProcess, wrap_app
from bench.common import (
    MACHINES,
    PROVIDER_IDS,
    RESULTS_DIR,
    fresh_database,
    parse_config,
    provider_entries,
    sync_pools,
    toml_text,
)
from bench.output import emit, percentile, ratios, rounded, table, wm_logging
from wm.db import tasks as task_store
from wm.providers.base import TAG_DEPLOYMENT
from wmsim.aws.ec2 import SimEc2
from wmsim.azure.arm import SimArm
from wmsim.behaviour import Behaviour
from wmsim.config import simulated_child_environment
from wmsim.gcp.gce import SimGce
from wmsim.postgres import PostgresServer, find_or_start

REPO = Path(__file__).resolve().parents[1]
TASK_DURATION_S = 600.0  # recorded on the tasks; nothing runs them here
READY_TIMEOUT_S = 60.0  # the provisioner's first passes, after the process starts
STOP_TIMEOUT_S = 30.0
POLL_S = 0.1
HEALTHS = ("idle", "healthy", "sick")  # Azure's, in each run


def aws_pool(run: str, wave: int) -> str:
    return f"iso-{run}/aws-{wave:02d}"


def azure_pool(run: str, wave: int) -> str:
    return f"iso-{run}/azure-{wave:02d}"


def deployment(run: str) -> str:
    return f"iso-{run}"


@dataclass(frozen=True)
class Params:
    waves: int
    wave_s: float
    aws_tasks: int
    azure_tasks: int
    interval_s: float
    latency_ms: float
    sick_latency_ms: float
    sick_failure_rate: float
    drain_s: float


# -- the simulated clouds ------------------------------------------------------------------------


class IsoHost:
    """The three sims (the clouds' process); EC2's create calls are recorded."""

    def __init__(self, latency_ms: float, stack: contextlib.ExitStack) -> None:
        self.ec2 = SimEc2(Behaviour(latency_ms=latency_ms)).start()
        self.gce = SimGce(Behaviour(latency_ms=latency_ms)).start()
        self.arm = SimArm(Behaviour(latency_ms=latency_ms)).start()
        for sim in (self.ec2, self.gce, self.arm):
            stack.callback(sim.stop)
        self.recorder = wrap_app(self.ec2, lambda app: CreateRecorder("aws", app))

    def ready(self) -> dict[str, Any]:
        endpoints = {"aws": self.ec2.endpoint, "gcp": self.gce.endpoint, "azure": self.arm.endpoint}
        return {"endpoints": endpoints, "cert_path": str(self.arm.cert_path)}

    def reset(self) -> None:
        """Forget every VM, count and recorded call: the next run meets empty clouds."""
        for sim in (self.ec2, self.gce, self.arm):
            sim.reset()
        self.recorder.calls.clear()

    def set_azure(self, latency_ms: float, failure_rate: float) -> None:
        self.arm.faults.behaviour.update(
            latency_ms=latency_ms, failure_rate=failure_rate, fault_spread="even"
        )
        self.arm.faults.reset_counts()  # the even fault sequence starts again

    def create_calls(self) -> list[tuple]:
        return [astuple(call) for call in list(self.recorder.calls)]

    def azure_vms(self, deployment_id: str) -> int:
        return sum(1 for vm in self.arm.instances() if vm.tags.get(TAG_DEPLOYMENT) == deployment_id)


class IsoClouds(CloudProcess):
    def reset(self) -> None:
        self.ask("reset")

    def set_azure(self, latency_ms: float, failure_rate: float) -> None:
        self.ask("set_azure", latency_ms, failure_rate)

    def create_calls(self) -> list[CreateCall]:
        return [CreateCall(*fields) for fields in self.ask("create_calls")]

    def azure_vms(self, deployment_id: str) -> int:
        return self.ask("azure_vms", deployment_id)


def iso_raw_config(clouds: IsoClouds, params: Params, run: str) -> dict[str, Any]:
    """Pools and a deployment id of the run's own: runs share the simulated clouds."""

    def pool(pool_id: str, cloud: str, demand: int) -> dict[str, Any]:
        region, machine_type, image = MACHINES[cloud]
        return {
            "id": pool_id,
            "provider": PROVIDER_IDS[cloud],
            "max_capacity": max(2 * demand, 1),
            "launch_configs": [{"region": region, "machine_type": machine_type, "image": image}],
        }

    pools = [pool(f"iso-{run}/gce", "gcp", 0)]
    for wave in range(params.waves):
        pools.append(pool(aws_pool(run, wave), "aws", params.aws_tasks))
        pools.append(pool(azure_pool(run, wave), "azure", params.azure_tasks))
    return {
        "deployment_id": deployment(run),
        "intervals": {"provision_s": params.interval_s},
        "providers": provider_entries(clouds.endpoints, clouds.cert_path),
        "pools": pools,
    }


# -- the two provisioners ------------------------------------------------------------------------


WM_COMMAND = ("-m", "wm", "run", "provisioner")
LOOP_COMMAND = ("-m", "bench.baselines.loop_process")


@contextlib.contextmanager
def provisioner_process(
    command: tuple[str, ...], raw: Mapping[str, Any], db_url: str
) -> Iterator[Counter[str]]:
    """A side's provisioner as a fresh OS process on this config (wm's `wm run provisioner`,
    or the single loop's), ready (a first pass of every provider logged) when entered, stopped
    with SIGTERM on the way out; yields the count of its log lines at warning and above, by
    event, filled in when it has stopped."""
    with tempfile.TemporaryDirectory(prefix="wm-bench-iso-") as tmp:
        config_path, log_path = Path(tmp) / "config.toml", Path(tmp) / "provisioner.log"
        # Pools are applied to the database, never part of config.toml.
        config_path.write_text(toml_text({k: v for k, v in raw.items() if k != "pools"}))
        env = simulated_child_environment(config_path, db_url)
        with open(log_path, "w") as log_file:
            process = subprocess.Popen(
                [sys.executable, *command],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
        warnings: Counter[str] = Counter()
        try:
            # Every provider's first pass: wm's provisioner runs each cloud in a process of its
            # own, and one still starting (importing its SDK) would take CPU from the waves.
            _wait_for_passes(process, log_path, {p["id"] for p in raw["providers"]})
            yield warnings
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(STOP_TIMEOUT_S)
            for entry in _log_entries(log_path):
                if entry.get("level") in ("warning", "error", "critical"):
                    warnings[f"{entry['level']}:{entry.get('event')}"] += 1


def _log_entries(log_path: Path) -> Iterator[dict[str, Any]]:
    for line in log_path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                yield entry


def _wait_for_passes(process: subprocess.Popen, log_path: Path, providers: set[str]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        seen = {
            entry.get("provider")
            for entry in _log_entries(log_path)
            if entry.get("event") == "provision-pass"
        }
        if providers <= seen:
            return
        if process.poll() is not None:
            tail = log_path.read_text()[-3000:]
            raise RuntimeError(f"{process.args} exited ({process.returncode}):\n{tail}")
        time.sleep(POLL_S)
    raise RuntimeError(f"{process.args}: no first passes within {READY_TIMEOUT_S:g} s")


# -- one run -------------------------------------------------------------------------------------


def run_once(
    side: str, health: str, params: Params, clouds: IsoClouds, server: PostgresServer
) -> tuple[dict[str, Any], Counter[str]]:
    """One run's figures, and the count of the side's process's warnings."""
    run = f"{side}-{health}"
    clouds.reset()
    clouds.set_azure(params.latency_ms, 0.0)
    with fresh_database(server, f"iso_{side}_{health}") as (engine, db_url):
        raw = iso_raw_config(clouds, params, run)
        sync_pools(engine, parse_config(raw, db_url, "bench/isolation.py"))
        command = WM_COMMAND if side == "wm" else LOOP_COMMAND
        provisioner = provisioner_process(command, raw, db_url)
        with provisioner as process_warnings:
            if health == "sick":
                clouds.set_azure(params.sick_latency_ms, params.sick_failure_rate)
            azure_tasks = 0 if health == "idle" else params.azure_tasks
            submitted, demand = submit_waves(engine, params, run, azure_tasks)
            drain_until = time.monotonic() + params.drain_s
            while time.monotonic() < drain_until and uncovered(clouds, submitted, demand):
                time.sleep(POLL_S)
            calls, azure_vms = clouds.create_calls(), clouds.azure_vms(deployment(run))
            clouds.set_azure(0.0, 0.0)  # in-flight passes end quickly; the run stops
        latencies = sorted(task_latencies(calls, submitted, demand))
        figures = {
            # Each wave's own p95 (its AWS tasks), the median over the waves: one slow wave
            # (a process's first launch) is one wave of 30, where the run's p95 is that wave.
            "aws_wave_p95_median_s": rounded(wave_p95_median(calls, submitted, demand)),
            "aws_submit_to_create_p50_s": rounded(percentile(latencies, 0.50)),
            "aws_submit_to_create_p95_s": rounded(percentile(latencies, 0.95)),
            "aws_submit_to_create_max_s": rounded(percentile(latencies, 1.0)),
            "aws_tasks_uncovered": sum(1 for v in latencies if v == float("inf")),
            "azure_vms_created": azure_vms,
        }
    return figures, process_warnings


def submit_waves(
    engine: Engine, params: Params, run: str, azure_tasks: int
) -> tuple[dict[str, float], dict[str, int]]:
    """Every wave's tasks, AWS first, on the wave's schedule; when each AWS wave went in."""
    submitted: dict[str, float] = {}
    demand: dict[str, int] = {}
    start = time.monotonic()
    for wave in range(params.waves):
        time.sleep(max(0.0, start + wave * params.wave_s - time.monotonic()))
        aws, azure = aws_pool(run, wave), azure_pool(run, wave)
        task_store.submit_tasks(engine, aws, params.aws_tasks, TASK_DURATION_S)
        submitted[aws] = time.monotonic()
        demand[aws] = params.aws_tasks
        if azure_tasks:
            task_store.submit_tasks(engine, azure, azure_tasks, TASK_DURATION_S)
    return submitted, demand


def wave_p95_median(
    calls: list[CreateCall], submitted: Mapping[str, float], demand: Mapping[str, int]
) -> float | None:
    """The median over waves of each wave's p95 submit-to-create; None if a wave's p95 is
    an uncovered task."""
    per_wave = [
        percentile(sorted(task_latencies(calls, submitted, {pool: wanted})), 0.95)
        for pool, wanted in demand.items()
    ]
    if not per_wave or any(p is None or p == float("inf") for p in per_wave):
        return None
    return percentile(sorted(per_wave), 0.5)


def uncovered(clouds: IsoClouds, submitted: Mapping[str, float], demand: Mapping[str, int]) -> int:
    latencies = task_latencies(clouds.create_calls(), submitted, demand)
    return sum(1 for v in latencies if v == float("inf"))


# -- output --------------------------------------------------------------------------------------


def tables(result: Mapping[str, Any]) -> str:
    parts = []
    for health in HEALTHS:
        section = {key: result[key][health] for key in ("wm", "baseline", "ratio")}
        parts.append(f"Azure {health}\n{table(section)}")
    lines = []
    for key, title in (
        ("healthy_over_idle", "healthy / idle (how much Azure's launches at once slow AWS down)"),
        ("sick_over_healthy", "sick / healthy (how much a sick Azure slows AWS down)"),
    ):
        lines.append(title)
        for side in ("wm", "baseline"):
            p50, p95 = (
                _cell(result[key][side][f"aws_submit_to_create_{q}_s"]) for q in ("p50", "p95")
            )
            lines.append(f"  {side:<9} p50 x{p50}   p95 x{p95}")
    return "\n\n".join(parts) + "\n\n" + "\n".join(lines)


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.isolation", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("--waves", type=int, default=30, help="waves of tasks")
    add("--wave-s", type=float, default=3.0, help="seconds between waves")
    add("--aws-tasks", type=int, default=5, help="AWS tasks per wave")
    add("--azure-tasks", type=int, default=3, help="Azure tasks per wave")
    add("--interval-s", type=float, default=2.0, help="provisioning interval")
    add("--latency-ms", type=float, default=50.0, help="every cloud's latency per call")
    add("--sick-latency-ms", type=float, default=20_000.0, help="sick Azure's latency per call")
    add("--sick-failure-rate", type=float, default=0.3, help="sick Azure's share of 5xx")
    add(
        "--drain-s",
        type=float,
        default=30.0,
        help="wait for uncovered AWS tasks after the last wave",
    )
    add("--output", type=Path, default=RESULTS_DIR / "isolation.json")
    add("--log", type=Path, default=None, help="the baseline's JSON log lines to this file")
    args = parser.parse_args(argv)
    if args.waves < 1 or args.aws_tasks < 1 or args.azure_tasks < 0:
        parser.error("--waves and --aws-tasks must be >= 1, --azure-tasks >= 0")
    if min(args.wave_s, args.interval_s) <= 0 or min(args.latency_ms, args.drain_s) < 0:
        parser.error("--wave-s and --interval-s must be > 0; --latency-ms, --drain-s >= 0")
    if not 0 <= args.sick_failure_rate <= 1 or args.sick_latency_ms < 0:
        parser.error("--sick-failure-rate must be in [0, 1], --sick-latency-ms >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = Params(
        args.waves,
        args.wave_s,
        args.aws_tasks,
        args.azure_tasks,
        args.interval_s,
        args.latency_ms,
        args.sick_latency_ms,
        args.sick_failure_rate,
        args.drain_s,
    )
    print(
        f"{params.waves} waves every {params.wave_s:g} s of {params.aws_tasks} AWS and "
        f"{params.azure_tasks} Azure tasks; sick Azure: {params.sick_latency_ms:g} ms, "
        f"{params.sick_failure_rate:.0%} 5xx",
        file=sys.stderr,
    )
    results: dict[str, dict[str, Any]] = {"wm": {}, "baseline": {}}
    warnings: dict[str, dict[str, int]] = {}
    server = find_or_start()
    try:
        with IsoClouds.running(IsoHost, params.latency_ms) as clouds:
            for side in ("wm", "baseline"):
                for health in HEALTHS:
                    print(f"running {side}, Azure {health} ...", file=sys.stderr, flush=True)
                    log = args.log.with_suffix(f".{side}-{health}.log") if args.log else None
                    with wm_logging(log) as events:
                        results[side][health], logged = run_once(
                            side, health, params, clouds, server
                        )
                    warnings[f"{side}-{health}"] = dict(events.counts + logged)
    finally:
        server.stop()
    result = {
        "wm": results["wm"],
        "baseline": results["baseline"],
        "ratio": {h: ratios(results["wm"][h], results["baseline"][h]) for h in HEALTHS},
        "sick_over_healthy": {
            side: ratios(results[side]["healthy"], results[side]["sick"]) for side in results
        },
        "healthy_over_idle": {
            side: ratios(results[side]["idle"], results[side]["healthy"]) for side in results
        },
        "params": {k: getattr(params, k) for k in Params.__dataclass_fields__},
        "log_warnings": warnings,
    }
    emit(result, tables(result), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
