"""Issue 40's benchmark, layer 2: the launch choice end to end, wm's real processes against the
simulated market on a compressed clock.

`python -m bench.launch_choice_e2e` runs, for each scenario (default S0, the control, and S1,
a zone runs dry), three arms one after the other on the same scenario and seed, each on a fresh
database and on the simulated clouds emptied and given a fresh market (same scenario, seed and
start: the same prices, regimes, dry spells and reclaims whoever launches in it):

- wm-weights: `python -m wm run provisioner`, `[launch_choice] default = "weights"`;
- wm-cost: the same with `default = "cost"` (the config is the only difference), its signal
  cadences the sources' own on the market's clock (`[providers.signals]`);
- worker-manager: `python -m bench.baselines.worker_manager_process`, wm's pass making
  worker-manager's choices (bench/baselines/worker_manager_selector.py, unchanged: EC2's even
  split, all-or-nothing creates and abort on the first refusal, the weighted draw elsewhere).

Beside the provisioner, as the Procfile runs them: `wm run web` (the workers register
through it), and `wm run scanner --kind K` per cloud (scans, pre-emption detection, late
refusals, and the signals job when a pool chooses by cost). The clouds are `wmsim serve` (its
own process) obeying the market at `--speed` market seconds a real second, from `--start-min`
of the scenario for `--minutes`. Tasks arrive in wm's builtin queue on a schedule seeded from
the scenario's pools (Poisson, plus each pool's burst), `--scale` of their rates and maximum
capacity, each running its gamma-drawn duration; simulated workers (wmsim.fleet: one agent a
VM, reading its metadata, registering with the real taskcluster client, claiming and running
tasks, giving them back on a termination notice, removing itself when idle) boot on the VMs.

Figures per arm (the names of layer 1, bench/launch_choice.py), in market time:
- cost_per_task_hour: the sims' ledgers ($, per second, 60 s minimum) over the hours of
  completed tasks' run time;
- time_to_capacity_p50_s / _p95_s: tasks whose demand (arrival, or re-queue after a
  pre-emption) falls within 30 min after a watched place its pool launches in runs dry, from
  that demand to the claim (or the run's end);
- preemptions_per_1000_worker_hours: wm's rows with `preempted_at` over the ledger's hours;
- capacity_errors_per_100_creates: capacity and quota refusals (wm's pool errors: one per
  EC2 RunInstances, one per GCE insert or Azure VM) over the create calls the sims counted;
- never_registered: launches whose VM ran and never registered (older than the pool's
  registration timeout at the end);
- signal_api_calls_per_hour: the signal operations the sims counted, per market hour.
`ratio` is worker-manager's figure over each wm arm's (bench/README.md: baseline / wm).

wm's clock does not know the market's: its own time constants (the bench TTL of a refused
offering, 3 min; the one-hour window of recent errors; its evidence half-lives) run in real
seconds, 60 times longer in market time at the default speed. The baseline's one-hour error
window is an hour of market time (it is told the speed). bench/README.md says what that does.

    .venv/bin/python -m bench.launch_choice_e2e                       # S0, S1
    .venv/bin/python -m bench.launch_choice_e2e --scenarios S1 --minutes 125 --scale 0.25
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from bench.baselines.worker_manager_process import SEED_ENV, SPEED_ENV
from bench.common import (
    AZURE_RESOURCE_GROUP,
    AZURE_SUBSCRIPTION,
    PROVIDER_IDS,
    REPO_DIR,
    RESULTS_DIR,
    fresh_database,
    provider_entries,
    toml_text,
)
from bench.output import cell, emit, percentile, ratios, rounded
from wm.config import loader as config_module
from wm.db import tasks as task_store
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wmsim.agent import AgentSettings
from wmsim.aws.run_instances import example_launch_config as ec2_launch_config
from wmsim.azure.launch_configs import example_launch_config as arm_launch_config
from wmsim.config import NO_METADATA_PROBES, child_environment
from wmsim.control import SimClient
from wmsim.fleet import Fleet, vm_provider
from wmsim.gcp.launch_config import example_launch_config as gce_launch_config
from wmsim.market import Market
from wmsim.market.scenario import PoolSpec, Scenario, load
from wmsim.postgres import PostgresServer, find_or_start, free_port
from wmsim.serve import SimEndpoint

ARMS = ("worker-manager", "wm-weights", "wm-cost")
BASELINE = "worker-manager"
SCENARIOS = ("S0", "S1")
FIGURES = (
    "cost_per_task_hour",
    "time_to_capacity_p50_s",
    "time_to_capacity_p95_s",
    "preemptions_per_1000_worker_hours",
    "capacity_errors_per_100_creates",
    "never_registered",
    "signal_api_calls_per_hour",
)
CONTROL_FIGURES = tuple(f for f in FIGURES if f != "signal_api_calls_per_hour")
# Where each scenario's run starts and how long it lasts, in market minutes, by default: S1
# from 25 min before EC2's first dry spell (minute 120 to 160; the task stream warms the fleet
# meanwhile) to 10 min after the 30 min in which demand is timed (GCE's
# spell, minute 180, needs --minutes 125).
DEFAULT_WINDOW_MIN = {"S0": (30.0, 30.0), "S1": (95.0, 65.0)}
OTHER_WINDOW_MIN = (0.0, 60.0)
DRY_WINDOW_S = 1800.0  # demand this long after a place runs dry is timed (layer 1's)
REGISTRATION_TIMEOUT_S = 900.0  # market seconds: a VM not registered by then never will
IDLE_TIMEOUT_S = 600.0  # market seconds a worker waits idle before it removes itself
PASS_S = 60.0  # market seconds between provisioning passes (layer 1's)
SCAN_S = 120.0  # market seconds between scans of a region
# Each source's own cadence (wm/providers/signal_sources.py), in market seconds.
SIGNAL_CADENCE_S = {"price_interval_s": 600.0, "capacity_interval_s": 900.0,
                    "preemption_interval_s": 86400.0, "retry_s": 120.0}  # fmt: skip
SETTLE_S = 1.0  # real seconds between the market given afresh and the run
TICK_S = 0.25  # real seconds between the driver's looks (tasks due, VMs booted)
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0
IMAGE = {"aws": None, "gcp": None, "azure": None}  # each sim's default image
CREATE_OPERATIONS = {
    "aws": ("RunInstances",),
    "gcp": ("instances.insert",),
    "azure": ("VirtualMachines_CreateOrUpdate", "Deployments_CreateOrUpdate"),
}
SIGNAL_OPERATIONS = {
    "aws": ("DescribeSpotPriceHistory", "GetSpotPlacementScores"),
    "gcp": ("skus.list", "advice.capacity"),
    "azure": ("RetailPrices_List", "Resources_Query", "SpotPlacementScores_Post"),
}
CLOUD_BOOT_MARKET_S = {"aws": 75.0, "gcp": 60.0, "azure": 180.0}


@dataclass(frozen=True)
class Params:
    scenarios: tuple[str, ...]
    seed: int
    speed: float
    scale: float
    start_min: float | None
    minutes: float | None
    latency_ms: float
    arms: tuple[str, ...] = ARMS
    keep_logs: Path | None = None


@dataclass(frozen=True)
class Arrival:
    at_s: float  # market seconds since the run's start
    pool_id: str
    duration_s: float  # market seconds


# -- the workload ----------------------------------------------------------------------------


def scaled_pools(scenario: Scenario, scale: float) -> list[PoolSpec]:
    return [
        PoolSpec(
            p.pool_id,
            max(2, round(p.max_capacity * scale)),
            p.tasks_per_hour * scale,
            p.task_min,
            p.burst_every_h,
            max(1, round(p.burst_tasks * scale)) if p.burst_tasks else 0,
            p.launch_configs,
        )
        for p in scenario.pools
    ]


def arrivals(pools: Sequence[PoolSpec], seed: int, start_s: float, span_s: float) -> list[Arrival]:
    """Every task of the run, in order: each pool's Poisson stream and its bursts (every
    `burst_every_h`, half a period into each, as layer 1's), durations gamma(2) around the
    pool's `task_min`; seeded per pool, the same for every arm."""
    out: list[Arrival] = []
    for pool in pools:
        rng = random.Random(f"e2e-tasks:{seed}:{pool.pool_id}")
        times: list[float] = []
        t = start_s
        while pool.tasks_per_hour > 0:
            t += rng.expovariate(pool.tasks_per_hour / 3600)
            if t >= start_s + span_s:
                break
            times.append(t)
        if pool.burst_every_h > 0 and pool.burst_tasks > 0:
            period = pool.burst_every_h * 3600
            b = period / 2
            while b < start_s + span_s:
                if b >= start_s:
                    times += [b] * pool.burst_tasks
                b += period
        for at in sorted(times):
            duration = rng.gammavariate(2.0, pool.task_min * 60 / 2)
            out.append(Arrival(at - start_s, pool.pool_id, duration))
    return sorted(out, key=lambda a: (a.at_s, a.pool_id))


# -- pools as Taskcluster definitions ---------------------------------------------------------


def definitions(pools: Sequence[PoolSpec], speed: float) -> list[tuple[str, dict[str, Any]]]:
    """Each scenario pool as a createWorkerPool body on its cloud's provider: a spot launch
    config per offering, in its zone (EC2 Placement, GCE zone) or location (Azure)."""
    out = []
    for pool in pools:
        kind = pool.launch_configs[0].offering.cloud
        configs = []
        for lc in pool.launch_configs:
            o = lc.offering
            common = {
                "launch_config_id": lc.launch_config_id,
                "weight": lc.weight,
                "capacity": lc.capacity_per_worker,
                "max_capacity": lc.max_capacity,
                "spot": True,
            }
            if kind == "aws":
                config = ec2_launch_config(o.region, instance_type=o.instance_type, **common)
                if o.zone:
                    config["launchConfig"]["Placement"] = {"AvailabilityZone": o.zone}
            elif kind == "gcp":
                config = gce_launch_config(o.zone or "", machine_type=o.instance_type, **common)
            else:
                config = arm_launch_config(
                    o.region,
                    vm_size=o.instance_type,
                    subscription_id=AZURE_SUBSCRIPTION,
                    resource_group=AZURE_RESOURCE_GROUP,
                    **common,
                )
            configs.append(config)
        body = {
            "providerId": PROVIDER_IDS[kind],
            "description": f"issue 40 end to end: {pool.pool_id}",
            "owner": "bench@example.com",
            "emailOnError": False,
            "config": {
                "minCapacity": 0,
                "maxCapacity": pool.max_capacity,
                "scalingRatio": 1.0,
                "lifecycle": {"registrationTimeout": max(1, round(REGISTRATION_TIMEOUT_S / speed))},
                "launchConfigs": configs,
            },
        }
        out.append((pool.pool_id, body))
    return out


def regions(pools: Sequence[PoolSpec]) -> dict[str, list[str]]:
    """Each cloud's regions (GCE: zones) the pools launch in."""
    out: dict[str, set[str]] = {}
    for pool in pools:
        for lc in pool.launch_configs:
            o = lc.offering
            out.setdefault(o.cloud, set()).add(o.zone if o.cloud == "gcp" and o.zone else o.region)
    return {kind: sorted(values) for kind, values in out.items()}


# -- the clouds ---------------------------------------------------------------------------------


class Clouds:
    """`wmsim serve` in a process of its own, and a client of each sim's control endpoints."""

    def __init__(self, tmp: Path, speed: float, latency_ms: float) -> None:
        sim: dict[str, Any] = {"state_dir": str(tmp / "sim")}
        for kind, boot in CLOUD_BOOT_MARKET_S.items():
            sim[kind] = {"port": 0, "boot_s": boot / speed, "latency_ms": latency_ms}
        config = tmp / "sim.toml"
        config.write_text(toml_text({"deployment_id": "wm-bench-e2e", "sim": sim}))
        endpoints_file = tmp / "endpoints.json"
        self.log = open(tmp / "clouds.log", "w")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "wmsim", "--config", str(config), "serve",
             "--endpoints-file", str(endpoints_file)],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO_DIR,
            env=child_environment(dict(NO_METADATA_PROBES)),
        )  # fmt: skip
        deadline = time.monotonic() + START_TIMEOUT_S
        while not endpoints_file.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    "the simulated clouds did not start:\n" + (tmp / "clouds.log").read_text()
                )
            time.sleep(0.1)
        self.endpoints = {
            e["kind"]: SimEndpoint(**e) for e in json.loads(endpoints_file.read_text())
        }
        self.clients = {
            kind: SimClient(kind, e.endpoint, e.cert_path) for kind, e in self.endpoints.items()
        }

    def reset(self) -> None:
        for client in self.clients.values():
            client.control("reset", {})
            client.control("requests/reset", {})

    def use_market(self, scenario: str, seed: int, speed: float, start_s: float) -> float:
        """Give every sim the market; the wall-clock time its clock started (a few ms
        apart between the sims)."""
        attached = time.time()
        for client in self.clients.values():
            client.use_market(scenario, seed=seed, speed=speed, start_s=start_s)
        return attached

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(STOP_TIMEOUT_S)
        self.log.close()


# -- wm's processes -------------------------------------------------------------------------------


class Processes:
    """An arm's OS processes on one config and database, each logging to a file of its own."""

    def __init__(self, tmp: Path, config_path: Path, db_url: str, web_port: int) -> None:
        self.tmp = tmp
        self.env = child_environment(
            {"WM_CONFIG": str(config_path), "DATABASE_URL": db_url, "PORT": str(web_port),
             "PYTHONUNBUFFERED": "1", **NO_METADATA_PROBES},
        )  # fmt: skip
        self.env.pop("SENTRY_DSN", None)
        self.running: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: Sequence[str], extra_env: Mapping[str, str] = {}) -> None:
        log = open(self.tmp / f"{name}.log", "w")  # noqa: SIM115 (the child holds it)
        self.running[name] = subprocess.Popen(
            [sys.executable, *args], stdout=log, stderr=subprocess.STDOUT, cwd=REPO_DIR,
            env={**self.env, **extra_env},
        )  # fmt: skip
        log.close()

    def entries(self, name: str) -> Iterator[dict[str, Any]]:
        path = self.tmp / f"{name}.log"
        for line in path.read_text().splitlines() if path.exists() else []:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    yield entry

    def crashed(self) -> str | None:
        for name, process in self.running.items():
            if process.poll() is not None:
                tail = (self.tmp / f"{name}.log").read_text()[-3000:]
                return f"{name} exited ({process.returncode}):\n{tail}"
        return None

    def stop(self) -> None:
        for process in self.running.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)

    def warnings(self) -> dict[str, int]:
        counts: Counter[str] = Counter()
        for name in self.running:
            for entry in self.entries(name):
                if entry.get("level") in ("warning", "error", "critical"):
                    counts[f"{entry['level']}:{entry.get('event')}"] += 1
        return dict(counts)


def wait_until(check: Any, what: str, processes: Processes) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if check():
            return
        if crash := processes.crashed():
            raise RuntimeError(crash)
        time.sleep(0.2)
    raise RuntimeError(f"{what}: not within {START_TIMEOUT_S:g} s")


def web_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


# -- one arm ----------------------------------------------------------------------------------


def arm_config(
    arm: str, clouds: Clouds, pools: Sequence[PoolSpec], web_url: str, speed: float
) -> dict[str, Any]:
    kinds = sorted({p.launch_configs[0].offering.cloud for p in pools})
    cert = clouds.endpoints["azure"].cert_path or ""
    providers = provider_entries(
        {k: e.endpoint for k, e in clouds.endpoints.items()}, cert, regions(pools), clouds=kinds
    )
    signals = {key: value / speed for key, value in SIGNAL_CADENCE_S.items()}
    for provider in providers:
        provider.update(clouds.endpoints[provider["kind"]].provider_settings())
        provider["scan_interval_s"] = SCAN_S / speed
        provider["signals"] = signals
    return {
        "deployment_id": f"wm-bench-e2e-{arm}",
        "root_url": web_url,
        "intervals": {"provision_s": PASS_S / speed},
        "metrics": {"port": 0},
        "web": {"port": int(web_url.rsplit(":", 1)[1])},
        "launch_choice": {"default": "cost" if arm == "wm-cost" else "weights"},
        "providers": providers,
    }


def apply_pools(
    engine: Engine, raw: Mapping[str, Any], pools: Sequence[PoolSpec], speed: float
) -> None:
    kinds = {p["id"]: p["kind"] for p in raw["providers"]}
    parsed = [
        parse_pool_definition(pool_id, body, kinds) for pool_id, body in definitions(pools, speed)
    ]
    outcome = apply_change(
        engine, ApplyDefinitions(tuple(parsed)), workers_register=dict.fromkeys(kinds, True)
    )
    if getattr(outcome, "problems", None):
        raise RuntimeError(f"pools not applied: {outcome}")


def run_arm(
    arm: str,
    scenario_name: str,
    params: Params,
    clouds: Clouds,
    server: PostgresServer,
    window: tuple[float, float],
) -> dict[str, Any]:
    scenario = load(scenario_name)
    pools = scaled_pools(scenario, params.scale)
    start_s, span_s = window[0] * 60, window[1] * 60
    schedule = arrivals(pools, params.seed, start_s, span_s)
    speed = params.speed
    clouds.reset()
    began = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix=f"wm-bench-e2e-{arm}-") as tmp_name,
        fresh_database(server, f"e2e_{arm.replace('-', '_')}") as (engine, db_url),
    ):
        tmp = Path(tmp_name)
        web_port = free_port()
        web_url = f"http://127.0.0.1:{web_port}"
        raw = arm_config(arm, clouds, pools, web_url, speed)
        config_path = tmp / "config.toml"
        config_path.write_text(toml_text(raw))
        apply_pools(engine, raw, pools, speed)
        config = config_module.load(config_path, environ={"DATABASE_URL": db_url})
        processes = Processes(tmp, config_path, db_url, web_port)
        kinds = sorted({p["kind"] for p in raw["providers"]})
        fleet: Fleet | None = None
        # The market runs while the processes start (the signals wm-cost reads at its start
        # come from it: no scenario here moves before its first event), and is given again,
        # afresh, once they are ready, to start the run on time whatever the start-up took.
        attached = clouds.use_market(scenario_name, params.seed, speed, max(0.0, start_s - 60))
        try:
            processes.start("web", ["-m", "wm", "run", "web"])
            if arm == BASELINE:
                processes.start(
                    "provisioner",
                    ["-m", "bench.baselines.worker_manager_process"],
                    {SPEED_ENV: str(speed), SEED_ENV: str(params.seed)},
                )
            else:
                processes.start("provisioner", ["-m", "wm", "run", "provisioner"])
            for kind in kinds:
                processes.start(f"scanner-{kind}", ["-m", "wm", "run", "scanner", "--kind", kind])
            wait_until(lambda: web_ready(web_url), "the web process", processes)
            provider_ids = {p["id"] for p in raw["providers"]}
            wait_until(
                lambda: provider_ids
                <= {e.get("provider") for e in processes.entries("provisioner")
                    if e.get("event") == "provision-pass"},
                "every provider's first pass", processes,
            )  # fmt: skip
            ready = time.perf_counter()
            origin = max(0.0, start_s - SETTLE_S * speed)
            attached = clouds.use_market(scenario_name, params.seed, speed, origin)
            clock = MarketClock(attached, origin, speed)
            fleet = make_fleet(config, engine, clouds, speed)
            drive(engine, fleet, schedule, clock, start_s, span_s, processes)
            ended, ran = time.time(), time.perf_counter()
            figures = measure(engine, clouds, scenario, pools, clock, ended, start_s, kinds)
        finally:
            if fleet is not None:
                fleet.halt()
            processes.stop()
        if params.keep_logs is not None:
            kept = params.keep_logs / scenario_name / arm
            kept.mkdir(parents=True, exist_ok=True)
            for log in tmp.glob("*.log"):
                shutil.copy(log, kept / log.name)
        figures["phases_s"] = {
            "start": round(ready - began, 1),
            "run": round(ran - ready, 1),
            "stop": round(time.perf_counter() - ran, 1),
        }
        figures["log_warnings"] = processes.warnings()
        clouds.reset()
        return figures


def make_fleet(config: Any, engine: Engine, clouds: Clouds, speed: float) -> Fleet:
    kinds = {p.id: p.kind for p in config.providers}

    def running_vms() -> dict[str, set[str]]:
        vms = {kind: clouds.clients[kind].instances() for kind in set(kinds.values())}
        return {
            pid: {
                vm.cloud_id
                for vm in vms[kind]
                if vm.state == "running" and vm_provider(kind, vm.tags) == pid
            }
            for pid, kind in kinds.items()
        }

    settings = AgentSettings(
        idle_timeout_s=IDLE_TIMEOUT_S / speed,
        should_terminate_every_s=max(0.5, 30 / speed),
        notice_every_s=max(0.25, 5 / speed),
        give_up_s=600.0,
        poll_s=0.25,
    )
    return Fleet(config, engine, settings, running_vms=running_vms)


@dataclass(frozen=True)
class MarketClock:
    """The market's time (seconds since its scenario starts) at a wall-clock time."""

    attached: float  # wall clock when the sims were given the market
    origin: float  # the market's time then
    speed: float

    def at(self, wall: float) -> float:
        return self.origin + (wall - self.attached) * self.speed

    def now(self) -> float:
        return self.at(time.time())


def drive(
    engine: Engine,
    fleet: Fleet,
    schedule: Sequence[Arrival],
    clock: MarketClock,
    start_s: float,
    span_s: float,
    processes: Processes,
) -> None:
    """Submit each task when the market's clock reaches it, boot workers on the VMs that run,
    until the run's span has passed."""
    index = 0
    while True:
        elapsed = clock.now() - start_s
        if elapsed >= span_s:
            return
        while index < len(schedule) and schedule[index].at_s <= elapsed:
            arrival = schedule[index]
            task_store.submit_tasks(engine, arrival.pool_id, 1, arrival.duration_s / clock.speed)
            index += 1
        fleet.sync()
        if crash := processes.crashed():
            raise RuntimeError(crash)
        time.sleep(TICK_S)


# -- figures ------------------------------------------------------------------------------------


def measure(
    engine: Engine,
    clouds: Clouds,
    scenario: Scenario,
    pools: Sequence[PoolSpec],
    clock: MarketClock,
    ended: float,
    start_s: float,
    kinds: Sequence[str],
) -> dict[str, Any]:
    """The arm's figures, read from the sims and wm's database at the run's end."""
    speed = clock.speed

    def market(at: datetime | None) -> float | None:
        return None if at is None else clock.at(at.timestamp())

    end_market = clock.at(ended)
    ledgers = {kind: clouds.clients[kind].ledger() for kind in kinds}
    counts = {kind: clouds.clients[kind].request_counts() for kind in kinds}
    cost = sum(float(ledger["total"]) for ledger in ledgers.values())
    worker_s = sum(
        float(row["billed_s"]) for ledger in ledgers.values() for row in ledger["instances"]
    )
    with engine.connect() as conn:
        tasks = conn.execute(
            text(
                "SELECT pool_id, state, duration_s, created, claimed_at, requeued_at,"
                " completed_at FROM tasks"
            )
        ).all()
        worker_rows = conn.execute(
            text("SELECT provider_id, cloud_id, created, registered_at, preempted_at FROM workers")
        ).all()
        errors = conn.execute(
            text("SELECT provider_id, kind, title, extra FROM worker_pool_errors "
                 "WHERE kind IN ('capacity', 'quota')")
        ).all()  # fmt: skip
    completed_s = sum(t.duration_s * speed for t in tasks if t.state == "completed")
    kind_of = {PROVIDER_IDS[k]: k for k in PROVIDER_IDS}
    refused = 0
    for row in errors:
        if row.title.endswith("PartialLaunch"):
            continue  # a RunInstances that launched some of its instances was not refused
        extra = row.extra or {}
        refused += 1 if kind_of.get(row.provider_id) == "aws" else int(extra.get("workers", 1))
    creates = sum(counts[k].get(op, 0) for k in kinds for op in CREATE_OPERATIONS[k])
    signal_calls = sum(counts[k].get(op, 0) for k in kinds for op in SIGNAL_OPERATIONS[k])
    preemptions = sum(1 for w in worker_rows if w.preempted_at is not None)
    timeout_real = REGISTRATION_TIMEOUT_S / speed
    never = sum(
        1
        for w in worker_rows
        if w.cloud_id and w.registered_at is None and w.preempted_at is None
        and w.created.timestamp() < ended - timeout_real
    )  # fmt: skip
    waits = sorted(dry_waits(scenario, pools, tasks, market, end_market))
    worker_h = worker_s / 3600
    hours = (end_market - start_s) / 3600
    return {
        "cost_per_task_hour": rounded(cost / (completed_s / 3600), 4) if completed_s else None,
        "time_to_capacity_p50_s": rounded(percentile(waits, 0.5), 1),
        "time_to_capacity_p95_s": rounded(percentile(waits, 0.95), 1),
        "preemptions_per_1000_worker_hours": rounded(preemptions / worker_h * 1000, 2)
        if worker_h
        else None,
        "capacity_errors_per_100_creates": rounded(refused / creates * 100, 2) if creates else None,
        "never_registered": never,
        "signal_api_calls_per_hour": rounded(signal_calls / hours, 2) if hours else None,
        # the sums the figures come from
        "cost_usd": rounded(cost, 2),
        "completed_task_hours": rounded(completed_s / 3600, 2),
        "tasks_submitted": len(tasks),
        "tasks_completed": sum(1 for t in tasks if t.state == "completed"),
        "worker_hours": rounded(worker_h, 2),
        "creates": creates,
        "capacity_errors": refused,
        "preemptions": preemptions,
        "signal_api_calls": signal_calls,
        "tasks_timed_after_dry": len(waits),
        "waits_after_dry_s": [round(w, 1) for w in waits],
        "market_hours": rounded(hours, 3),
        "operation_counts": {k: dict(sorted(counts[k].items())) for k in kinds},
    }


def dry_waits(
    scenario: Scenario, pools: Sequence[PoolSpec], tasks: Sequence[Any], market: Any, end: float
) -> list[float]:
    """Per task whose demand falls within DRY_WINDOW_S after a watched place its pool launches
    in runs dry: from the demand to its claim (the run's end if unclaimed), market seconds."""
    model = Market(scenario, 0)  # dry spells are scripted events: the seed does not move them
    model.advance(end)
    places = {
        p.pool_id: {lc.offering.place for lc in p.launch_configs} & set(scenario.dry_watch)
        for p in pools
    }
    out = []
    for task in tasks:
        demand = market(task.requeued_at or task.created)
        claimed = market(task.claimed_at)
        starts = [s for s, place in model.dry_starts if place in places.get(task.pool_id, set())]
        if demand is None or not any(s <= demand < s + DRY_WINDOW_S for s in starts):
            continue
        out.append((claimed if claimed is not None and claimed >= demand else end) - demand)
    return out


def control_deviation(result: Mapping[str, Any]) -> dict[str, float]:
    """Per wm arm, the largest |arm / worker-manager - 1| over the control's figures (layer
    1's rule: two zeros or nulls agree, a zero or null against a number is a full deviation)."""
    out = {}
    for arm in ARMS:
        if arm == BASELINE:
            continue
        worst = 0.0
        for name in CONTROL_FIGURES:
            ours, theirs = result[arm][name], result[BASELINE][name]
            if ours == theirs:
                continue
            if not ours or not theirs:
                worst = 1.0
                continue
            worst = max(worst, abs(ours / theirs - 1))
        out[arm] = round(worst, 4)
    return out


# -- the run ------------------------------------------------------------------------------------


def table(name: str, title: str, result: Mapping[str, Any]) -> str:
    rows = [("figure", *ARMS, "wm-weights ratio", "wm-cost ratio")]
    for fig in FIGURES:
        rows.append(
            (
                fig,
                *(cell(result[arm][fig]) for arm in ARMS),
                cell(result["ratio"]["wm-weights"][fig]),
                cell(result["ratio"]["wm-cost"][fig]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    deviation = ", ".join(f"{a} {v:g}" for a, v in result["control_deviation"].items())
    lines = [f"{name} end to end: {title} (largest deviation from worker-manager: {deviation})"]
    lines += [
        r[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(r[1:], widths[1:], strict=True))
        for r in rows
    ]
    return "\n".join(lines)


def window_of(name: str, params: Params) -> tuple[float, float]:
    start, minutes = DEFAULT_WINDOW_MIN.get(name, OTHER_WINDOW_MIN)
    return (
        start if params.start_min is None else params.start_min,
        minutes if params.minutes is None else params.minutes,
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.launch_choice_e2e", description=__doc__.split("\n\n")[0]
    )
    add = parser.add_argument
    add("--scenarios", nargs="+", default=list(SCENARIOS))
    add("--seed", type=int, default=1)
    add("--speed", type=float, default=60.0, help="market seconds a real second")
    add("--scale", type=float, default=0.5, help="of each pool's task rates and max capacity")
    add("--start-min", type=float, help="market minute each run starts at (default: per scenario)")
    add("--minutes", type=float, help="market minutes each arm runs (default: per scenario)")
    add("--latency-ms", type=float, default=5.0, help="every simulated cloud's call latency")
    add("--arms", nargs="+", default=list(ARMS), choices=ARMS, help="(ratios need all three)")
    add("--keep-logs", type=Path, help="copy each arm's process logs under this directory")
    add("--output", type=Path, default=RESULTS_DIR / "launch_choice_e2e.json")
    args = parser.parse_args(argv)
    if args.speed <= 0 or not 0 < args.scale <= 1:
        parser.error("--speed must be > 0 and --scale in (0, 1]")
    if (args.minutes is not None and args.minutes <= 0) or (
        args.start_min is not None and args.start_min < 0
    ):
        parser.error("--minutes must be > 0 and --start-min >= 0")
    for name in args.scenarios:
        try:
            load(name)
        except ValueError as exc:
            parser.error(f"--scenarios: {exc}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    params = Params(
        tuple(args.scenarios), args.seed, args.speed, args.scale, args.start_min, args.minutes,
        args.latency_ms, tuple(args.arms), args.keep_logs,
    )  # fmt: skip
    started = time.perf_counter()
    scenarios: dict[str, Any] = {}
    tables = []
    server = find_or_start()
    try:
        with tempfile.TemporaryDirectory(prefix="wm-bench-e2e-clouds-") as tmp:
            clouds = Clouds(Path(tmp), params.speed, params.latency_ms)
            try:
                for name in params.scenarios:
                    window = window_of(name, params)
                    result: dict[str, Any] = {}
                    for arm in params.arms:
                        began = time.perf_counter()
                        result[arm] = run_arm(arm, name, params, clouds, server, window)
                        print(
                            f"  {name} {arm}: {time.perf_counter() - began:.1f} s",
                            file=sys.stderr, flush=True,
                        )  # fmt: skip
                    if set(params.arms) != set(ARMS):
                        scenarios[name] = result
                        continue
                    result["ratio"] = {
                        arm: ratios(
                            {f: result[arm][f] for f in FIGURES},
                            {f: result[BASELINE][f] for f in FIGURES},
                        )
                        for arm in ARMS
                        if arm != BASELINE
                    }
                    result["control_deviation"] = control_deviation(result)
                    title = load(name).title
                    result["title"] = title
                    result["window_min"] = list(window)
                    scenarios[name] = result
                    tables.append(table(name, title, result))
            finally:
                clouds.stop()
    finally:
        server.stop()
    output = {
        "params": {
            "seed": params.seed, "speed": params.speed, "scale": params.scale,
            "latency_ms": params.latency_ms,
        },
        "wall_s": round(time.perf_counter() - started, 1),
        "scenarios": scenarios,
    }  # fmt: skip
    emit(output, "\n\n".join(tables), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
