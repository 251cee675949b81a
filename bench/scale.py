"""Scale: how wm's cost grows with pools and with workers, at zero cloud latency.

`python -m bench.scale` measures, with every simulated cloud answering at once (latency 0, so
the figures are wm's own work, the database's and the simulation's), two growths:

- pools (`--pools`, default 10, 100, 1,000; EC2 84 %, Azure 13 %, GCE 3 % of them, at least
  one each): one task arrives in every pool, then one provisioning pass per provider, all
  providers at once (the launch pass: one worker per pool), then the pass right after (the
  steady pass: nothing to launch). wm: the real `Provisioner`. baseline:
  `bench.baselines.old_provisioner` (wm's planning, no intent rows, no claims, no scale-down
  advice; its steady pass is measured after a scan recorded the launched VMs, at its best).
  These runs share one set of simulated clouds, emptied before each run.
- workers (`--workers`, default 1,000, 10,000, 100,000 running workers in the fleet of
  bench/fleet.py, as many pending tasks as workers): one scan round (every (provider, region)
  at once) and one steady provisioning pass over that fleet. wm: the real `Scanner` and
  `Provisioner`. baseline: the old per-worker scanner (bench.baselines.old_scanner), run up
  to `--baseline-max-workers` (default 1,000) and extrapolated linearly above, as bench.scan
  does; and the old provisioner's pass, which reads its scanner's record instead of rows.

Memory is this process's resident set: its growth over the measured block (VmHWM reset
before it, see bench.measure.peak_memory); null where the baseline is extrapolated. A pass's
`_db_rows_read` counts the rows its SELECTs returned to this process: what a pass reads per
pool in aggregate, not per worker. Issue 28's goals on these figures (bench/README.md's "Goals"
table) are printed after the tables, each beside wm's figure, and kept under "goals" in the JSON.

Results go to stdout and to bench/results/scale.json as {"wm": {"pools": {P: {...}},
"workers": {N: {...}}}, "baseline": {...}, "ratio": {...}, "extrapolated", "params",
"log_warnings", "goals"}.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlalchemy import event as sa_event

from bench.baselines.old_provisioner import OldProvisioner
from bench.check import MET, NO_FIGURE, README, evaluate, parse_goals
from bench.common import (
    CLOUDS,
    MACHINES,
    POOL_MIX,
    PROVIDER_IDS,
    RESULTS_DIR,
    BenchConfig,
    fresh_database,
    parse_config,
    provider_entries,
    sync_pools,
)
from bench.fleet import (
    GATE,
    Fleet,
    FleetClouds,
    FleetHost,
    Round,
    extrapolate,
    extrapolation_note,
    fleet_config,
    fleet_providers,
    measured,
    plan_fleet,
    scan_round,
    seed_fleet,
    units,
    write_rows,
)
from bench.output import emit, ratios, rounded, table, wm_logging
from wm.config.loader import Config
from wm.db import tasks as task_store
from wm.db.workers import PoolCapacity
from wm.providers.base import Provider
from wm.provisioning.provisioner import Provisioner
from wm.queues.builtin import BuiltinQueue
from wmsim.demo.workload import split
from wmsim.postgres import PostgresServer, find_or_start

DEFAULT_POOLS = (10, 100, 1000)
DEFAULT_WORKERS = (1000, 10_000, 100_000)
CLOUD_SHARES = {cloud: sum(s for _, c, s in POOL_MIX if c == cloud) for cloud in CLOUDS}
TASK_DURATION_S = 600.0  # recorded on the tasks; nothing runs them here
MISSING_SHARE = 0.001
# Scan figures scaled with the workers when the baseline's scan is extrapolated.
SCALED_SCAN = ("scan_wall_s", "scan_cpu_s", "scan_sims_cpu_s", "scan_api_calls")
SCALED_SCAN += ("scan_db_statements",)


def mib(value: float | None) -> float | None:
    return rounded(value, 1)


# -- passes, all providers at once ---------------------------------------------------------------


def all_passes(run_pass: Callable[[str], object], provider_ids: Sequence[str]) -> None:
    """One pass per provider, concurrently (the provisioner process's per-provider jobs)."""
    with ThreadPoolExecutor(len(provider_ids)) as pool:
        list(pool.map(run_pass, provider_ids))


class RowsRead:
    """Rows the engine's SELECTs returned to this process (SQLAlchemy's after_cursor_execute
    event: a client-side cursor's rowcount is every row of the result), while entered;
    thread-safe, so the providers' concurrent passes count together."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.count = 0
        self._lock = threading.Lock()

    def _seen(self, _conn: object, cursor: Any, statement: str, *_args: object) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")) and cursor.rowcount > 0:
            with self._lock:
                self.count += cursor.rowcount

    def __enter__(self) -> RowsRead:
        sa_event.listen(self.engine, "after_cursor_execute", self._seen)
        return self

    def __exit__(self, *_exc: object) -> None:
        sa_event.remove(self.engine, "after_cursor_execute", self._seen)


def pass_figures(prefix: str, result: Round, rows: RowsRead) -> dict[str, Any]:
    assert result.memory is not None
    return {
        f"{prefix}_s": rounded(result.wall_s, 3),
        f"{prefix}_db_statements": result.db_statements,
        f"{prefix}_db_rows_read": rows.count,
        f"{prefix}_api_calls": result.api_calls,
        f"{prefix}_rss_growth_mib": mib(result.memory.growth_mib),
    }


# -- pools ---------------------------------------------------------------------------------------


def pools_config(clouds: FleetClouds, db_url: str, pools: int, deployment_id: str) -> BenchConfig:
    # At least one pool per cloud; the rest in the mix.
    per_cloud = split(pools - len(CLOUDS), CLOUD_SHARES)
    entries = []
    for cloud in CLOUDS:
        region, machine_type, image = MACHINES[cloud]
        for n in range(per_cloud[cloud] + 1):
            entries.append(
                {
                    "id": f"proj-scale/{cloud}-{n:04d}",
                    "provider": PROVIDER_IDS[cloud],
                    "max_capacity": 10,
                    "requires_registration": False,
                    "launch_configs": [
                        {"region": region, "machine_type": machine_type, "image": image}
                    ],
                }
            )
    raw = {
        "deployment_id": deployment_id,
        "providers": provider_entries(clouds.endpoints, clouds.cert_path, gate=GATE),
        "pools": entries,
    }
    return parse_config(raw, db_url, "bench/scale.py")


def measure_pools(
    side: str, pools: int, clouds: FleetClouds, server: PostgresServer
) -> dict[str, Any]:
    """One launch pass and one steady pass over `pools` pools, on emptied simulated clouds (a
    cloud's answers slow down with the VMs it holds) and under a deployment id of its own."""
    deployment_id = f"scale-{side}-{pools}"
    clouds.reset()
    with contextlib.ExitStack() as stack:
        engine, db_url = stack.enter_context(fresh_database(server, f"scale_pools_{side}"))
        config = pools_config(clouds, db_url, pools, deployment_id)
        sync_pools(engine, config)
        providers = stack.enter_context(fleet_providers(config))
        for pool in config.pools:
            task_store.submit_tasks(engine, pool.id, 1, TASK_DURATION_S)
        ids = list(providers)
        if side == "wm":
            provisioner = Provisioner(engine, BuiltinQueue(engine), providers)
            run_pass: Callable[[str], object] = provisioner.run_pass
        else:
            old = OldProvisioner(engine, BuiltinQueue(engine), providers)
            run_pass = old.run_pass
        with RowsRead(engine) as launch_rows, measured(engine, clouds) as launch:
            all_passes(run_pass, ids)
        if side == "baseline":
            old.scan()  # the record it counts: at its best, right after the launches
        with RowsRead(engine) as steady_rows, measured(engine, clouds) as steady:
            all_passes(run_pass, ids)
        vms = sum(clouds.vms(deployment_id).values())
    return {
        **pass_figures("launch_pass", launch, launch_rows),
        **pass_figures("steady_pass", steady, steady_rows),
        "vms_created": vms,
    }


# -- workers -------------------------------------------------------------------------------------


@contextlib.contextmanager
def fleet_database(
    server: PostgresServer, side: str, clouds: FleetClouds, fleet: Fleet
) -> Iterator[tuple[Engine, Config]]:
    with fresh_database(server, f"scale_{side}", pool_size=len(units()) * 2 + 2) as (engine, url):
        config = fleet_config(clouds.endpoints, clouds.cert_path, url, fleet.workers)
        sync_pools(engine, config)
        write_rows(engine, config, fleet)
        yield engine, config


def steady_pass(
    side: str,
    engine: Engine,
    config: Config,
    providers: Mapping[str, Provider],
    clouds: FleetClouds,
    fleet: Fleet,
) -> dict[str, Any]:
    """A provisioning pass over the fleet whose demand its running workers cover."""
    running = {p.pool_id: len(p.worker_ids) + len(p.missing_ids) for p in fleet.pools}
    if side == "wm":
        run_pass: Callable[[str], object] = Provisioner(
            engine, BuiltinQueue(engine), providers
        ).run_pass
    else:
        old = OldProvisioner(engine, BuiltinQueue(engine), providers)
        for provider_id in providers:  # what its scanner's last loop recorded
            old.record(
                provider_id,
                {
                    p.id: PoolCapacity(running=running[p.id])
                    for p in config.pools
                    if p.provider == provider_id
                },
            )
        run_pass = old.run_pass
    with RowsRead(engine) as rows, measured(engine, clouds) as result:
        all_passes(run_pass, list(providers))
    return pass_figures("pass", result, rows)


def scan_figures(result: Round) -> dict[str, Any]:
    assert result.memory is not None
    return {
        "scan_wall_s": rounded(result.wall_s, 2),
        "scan_cpu_s": rounded(result.cpu_s, 2),
        "scan_sims_cpu_s": rounded(result.sims_cpu_s, 2),
        "scan_api_calls": result.api_calls,
        "scan_db_statements": result.db_statements,
        "scan_rss_growth_mib": mib(result.memory.growth_mib),
    }


def measure_workers(
    sizes: Sequence[int], baseline_max: int, server: PostgresServer
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    wm: dict[str, Any] = {}
    baseline: dict[str, Any] = {}
    extrapolated: dict[str, Any] = {}
    measured_scans: dict[int, dict[str, Any]] = {}
    for size in sorted(set(sizes) | {min(s, baseline_max) for s in sizes}):
        with FleetClouds.running(FleetHost) as clouds:
            config = fleet_config(clouds.endpoints, clouds.cert_path, "postgresql://x@h/x", size)
            print(f"{size} workers: seeding ...", file=sys.stderr, flush=True)
            fleet = seed_fleet(clouds, plan_fleet(config, size, round(size * MISSING_SHARE)))
            if size in sizes:
                print(f"{size} workers: wm ...", file=sys.stderr, flush=True)
                with fleet_database(server, "wm", clouds, fleet) as (engine, config):
                    for pool in fleet.pools:
                        count = len(pool.worker_ids) + len(pool.missing_ids)
                        task_store.submit_tasks(engine, pool.pool_id, count, TASK_DURATION_S)
                    with fleet_providers(config) as providers:
                        wm_pass = steady_pass("wm", engine, config, providers, clouds, fleet)
                        base_pass = steady_pass(
                            "baseline", engine, config, providers, clouds, fleet
                        )
                        wm[str(size)] = {
                            **scan_figures(scan_round("wm", engine, providers, clouds)),
                            **wm_pass,
                        }
                        baseline[str(size)] = dict(base_pass)
            if size <= baseline_max:
                print(f"{size} workers: baseline scan ...", file=sys.stderr, flush=True)
                with (
                    fleet_database(server, "baseline", clouds, fleet) as (engine, config),
                    fleet_providers(config) as providers,
                ):
                    measured_scans[size] = scan_figures(
                        scan_round("baseline", engine, providers, clouds)
                    )
    for size in sizes:
        measured_size = min(size, baseline_max)
        scan = dict(measured_scans[measured_size])
        if measured_size != size:
            # Memory is not a cost per worker: it is not extrapolated.
            scan = extrapolate(
                scan, size / measured_size, SCALED_SCAN, unknown=("scan_rss_growth_mib",)
            )
            extrapolated[str(size)] = extrapolation_note(measured_size, size)
        baseline[str(size)] = {**scan, **baseline[str(size)]}
    return wm, baseline, extrapolated


# -- output --------------------------------------------------------------------------------------


def tables(result: Mapping[str, Any]) -> str:
    parts = []
    for axis, unit in (("pools", "pools"), ("workers", "workers")):
        for size in result["wm"][axis]:
            heading = f"{int(size):,} {unit}"
            note = result["extrapolated"].get(size) if axis == "workers" else None
            if note:
                heading += (
                    f" (baseline scan EXTRAPOLATED x{note['factor']:g} from a measured run of "
                    f"{note['from_workers']:,} workers)"
                )
            section = {key: result[key][axis][size] for key in ("wm", "baseline", "ratio")}
            parts.append(f"{heading}\n{table(section)}")
    return "\n\n".join(parts)


def goal_rows(wm: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each of issue 28's goals on this benchmark's wm figures (the "## Goals" table of
    bench/README.md, their one copy, as bench.check reads them) beside what wm measured (null
    where the size was not run), and whether a pass's statements stayed flat over every size
    run on each axis."""
    rows = []
    for goal in parse_goals(README.read_text()):
        if goal.benchmark != "scale" or goal.path[0] != "wm":
            continue
        outcome = evaluate(goal, {"wm": wm})
        met = None if outcome.status == NO_FIGURE else outcome.status == MET
        value = None if outcome.value is None else round(outcome.value, 3)
        rows.append(
            {
                "figure": goal.figure,
                "wm": value,
                "goal": f"{goal.relation} {goal.bound:g}",
                "met": met,
            }
        )
    for axis, figure in (("pools", "steady_pass_db_statements"), ("workers", "pass_db_statements")):
        counts = [wm[axis][size][figure] for size in wm[axis]]
        rows.append(
            {
                "figure": f"{figure} over {', '.join(f'{int(s):,}' for s in wm[axis])} {axis}",
                "wm": counts,
                "goal": "flat",
                "met": len(set(counts)) <= 1 if counts else None,
            }
        )
    return rows


def goals_table(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [("goal", "wm", "goal", "met")]
    for row in rows:
        met = {True: "yes", False: "NO", None: "not run"}[row["met"]]
        value = row["wm"]
        shown = (
            "-"
            if value is None
            else (", ".join(map(str, value)) if isinstance(value, list) else str(value))
        )
        lines.append((row["figure"], shown, row["goal"], met))
    widths = [max(len(line[i]) for line in lines) for i in range(4)]
    return "\n".join(
        line[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(line[1:], widths[1:], strict=True))
        for line in lines
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pools", type=int, nargs="*", default=list(DEFAULT_POOLS))
    parser.add_argument("--workers", type=int, nargs="*", default=list(DEFAULT_WORKERS))
    parser.add_argument(
        "--baseline-max-workers",
        type=int,
        default=1000,
        help="largest fleet the per-worker scanner is run on; larger ones are extrapolated",
    )
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "scale.json")
    parser.add_argument("--log", type=Path, default=None, help="wm's JSON log lines to this file")
    args = parser.parse_args(argv)
    if any(p < len(CLOUDS) for p in args.pools):
        parser.error(f"--pools must be >= {len(CLOUDS)} (one per cloud at least)")
    if any(w < 1 for w in args.workers) or args.baseline_max_workers < 1:
        parser.error("--workers and --baseline-max-workers must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pools, workers = sorted(set(args.pools)), sorted(set(args.workers))
    print(
        f"scale: pools {pools}, workers {workers}, latency 0, baseline scans up to "
        f"{args.baseline_max_workers:,} workers",
        file=sys.stderr,
    )
    results: dict[str, dict[str, Any]] = {"wm": {"pools": {}}, "baseline": {"pools": {}}}
    server = find_or_start()
    try:
        with wm_logging(args.log) as events:
            with FleetClouds.running(FleetHost) as clouds:
                for count in pools:
                    for side in ("wm", "baseline"):
                        print(f"{count} pools: {side} ...", file=sys.stderr, flush=True)
                        results[side]["pools"][str(count)] = measure_pools(
                            side, count, clouds, server
                        )
            wm, baseline, extrapolated = measure_workers(workers, args.baseline_max_workers, server)
    finally:
        server.stop()
    results["wm"]["workers"], results["baseline"]["workers"] = wm, baseline
    result = {
        "wm": results["wm"],
        "baseline": results["baseline"],
        "ratio": {
            axis: {
                size: ratios(results["wm"][axis][size], results["baseline"][axis][size])
                for size in results["wm"][axis]
            }
            for axis in ("pools", "workers")
        },
        "extrapolated": extrapolated,
        "params": {
            "pools": pools,
            "workers": workers,
            "baseline_max_workers": args.baseline_max_workers,
            "missing_share": MISSING_SHARE,
            "latency_ms": 0,
        },
        "log_warnings": dict(events.counts),
        "goals": goal_rows(results["wm"]),
    }
    goals = goals_table(result["goals"])
    printed = f"{tables(result)}\n\nissue 28's goals on these figures (bench/README.md)\n{goals}"
    emit(result, printed, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
