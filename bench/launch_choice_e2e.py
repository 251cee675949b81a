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
The arm's world (tasks, pool definitions, the clouds, its processes) is
bench/launch_e2e_world.py, its figures bench/launch_e2e_figures.py.

wm's launch-choice durations (the bench TTL of a refused offering, 3 min; the one-hour window
of recent errors and pre-emptions; its evidence half-lives) run on the market's clock:
`[launch_choice] clock_speed` is the market's speed. The baseline's one-hour error window is
an hour of market time too (it is told the speed).

    .venv/bin/python -m bench.launch_choice_e2e                       # S0, S1
    .venv/bin/python -m bench.launch_choice_e2e --scenarios S1 --minutes 125 --scale 0.25
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from bench.baselines.worker_manager_process import SEED_ENV, SPEED_ENV
from bench.common import RESULTS_DIR, fresh_database, provider_entries, toml_text
from bench.launch_e2e_figures import (
    ARMS,
    BASELINE,
    FIGURES,
    MarketClock,
    control_deviation,
    measure,
)
from bench.launch_e2e_world import (
    Arrival,
    Clouds,
    Processes,
    arrivals,
    definitions,
    regions,
    scaled_pools,
    wait_until,
    web_ready,
)
from bench.output import aligned, cell, emit, ratios
from wm.config import loader as config_module
from wm.db import tasks as task_store
from wm.pools.changes import ApplyDefinitions, apply_change
from wm.pools.definition import parse_pool_definition
from wmsim.agent import AgentSettings
from wmsim.fleet import Fleet, vm_provider
from wmsim.market.scenario import PoolSpec, load
from wmsim.postgres import PostgresServer, find_or_start, free_port

SCENARIOS = ("S0", "S1")
# Where each scenario's run starts and how long it lasts, in market minutes, by default: S1
# from 25 min before EC2's first dry spell (minute 120 to 160; the task stream warms the fleet
# meanwhile) to 10 min after the 30 min in which demand is timed (GCE's
# spell, minute 180, needs --minutes 125).
DEFAULT_WINDOW_MIN = {"S0": (30.0, 30.0), "S1": (95.0, 65.0)}
OTHER_WINDOW_MIN = (0.0, 60.0)
IDLE_TIMEOUT_S = 600.0  # market seconds a worker waits idle before it removes itself
PASS_S = 60.0  # market seconds between provisioning passes (layer 1's)
SCAN_S = 120.0  # market seconds between scans of a region
# Each source's own cadence (wm/providers/signal_sources.py), in market seconds.
SIGNAL_CADENCE_S = {"price_interval_s": 600.0, "capacity_interval_s": 900.0,
                    "preemption_interval_s": 86400.0, "retry_s": 120.0}  # fmt: skip
SETTLE_S = 1.0  # real seconds between the market given afresh and the run
TICK_S = 0.25  # real seconds between the driver's looks (tasks due, VMs booted)


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


# -- the workload ----------------------------------------------------------------------------


# -- pools as Taskcluster definitions ---------------------------------------------------------


# -- the clouds ---------------------------------------------------------------------------------


# -- wm's processes -------------------------------------------------------------------------------


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
        # wm's launch-choice durations on the market's clock, as worker-manager's hour is.
        "launch_choice": {
            "default": "cost" if arm == "wm-cost" else "weights",
            "clock_speed": speed,
        },
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
    deviation = ", ".join(f"{a} {v:g}" for a, v in result["control_deviation"].items())
    lines = [f"{name} end to end: {title} (largest deviation from worker-manager: {deviation})"]
    lines += aligned(rows)
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
