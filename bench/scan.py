"""Scan round: one full scan of a running fleet, wm's scanner against the old per-worker scanner.

`python -m bench.scan` builds, for each size in `--workers` (default 1,000 and 10,000), a fleet
of that many running workers in the production mix (EC2 84 % over three regions, Azure 13 %,
GCE 3 %; bench/fleet.py): rows in a fresh database and VMs in the simulated clouds (in a process
of their own), a `--missing-share` of the rows without their VM. Every cloud call then takes
`--latency-ms` (default 50 ms). One scan round is measured per side:

- wm: the real `wm.scanning.scanner.Scanner` scanning every (provider, region) once, all units
  at once, as the scanner processes' per-region jobs do;
- baseline: `bench.baselines.old_scanner`, one loop over every worker with one cloud call and
  one database write per worker, two workers at a time.

Both go through wm's provider adapters, the real SDKs and the same gate (rate limit lifted).
The baseline of sizes above `--baseline-max-workers` (default 1,000) is not run: it is
extrapolated, linearly, from a measured run at that many workers, and the output says so.

Figures per size, the same names on both sides (see bench/README.md): api_calls (the sims'
own request counters), api_calls_expected (wm: list pages plus look-ups of missing rows; the
baseline: one per worker), wall_s, db_statements (SQLAlchemy's before_cursor_execute on the
engine), cpu_s (this process), sims_cpu_s (the simulated clouds answering), rows_stopped.

Results go to stdout and to bench/results/scan.json as {"wm": {SIZE: {...}}, "baseline":
{SIZE: {...}}, "ratio": {SIZE: {...}}, "extrapolated": {SIZE: {...}}, "params", "fleet",
"log_warnings"}, ratio = baseline / wm.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import RESULTS_DIR, fresh_database, sync_pools
from bench.fleet import (
    Fleet,
    FleetClouds,
    FleetHost,
    expected_wm_calls,
    extrapolate,
    extrapolation_note,
    fleet_config,
    fleet_providers,
    plan_fleet,
    round_figures,
    scan_round,
    seed_fleet,
    units,
    write_rows,
)
from bench.output import emit, ratios, table, wm_logging
from wmsim.postgres import PostgresServer, find_or_start

DEFAULT_SIZES = (1000, 10_000)
UNUSED_DB_URL = "postgresql://bench@127.0.0.1/unused"  # the fleet's plan needs no database
# Figures scaled with the number of workers when the baseline is extrapolated.
SCALED = ("api_calls", "wall_s", "db_statements", "cpu_s", "sims_cpu_s", "rows_stopped")


def missing_rows(workers: int, share: float) -> int:
    return round(workers * share)


def measure_side(
    side: str,
    server: PostgresServer,
    clouds: FleetClouds,
    fleet: Fleet,
    concurrency: int,
) -> dict[str, Any]:
    """One scan round of `side` over the fleet, on a fresh database holding its rows."""
    with fresh_database(server, f"scan_{side}", pool_size=len(units()) * 2 + 2) as (engine, url):
        config = fleet_config(clouds.endpoints, clouds.cert_path, url, fleet.workers)
        sync_pools(engine, config)
        write_rows(engine, config, fleet)
        with fleet_providers(config) as providers:
            result = scan_round(side, engine, providers, clouds, concurrency=concurrency)
    expected = expected_wm_calls(fleet.pools) if side == "wm" else fleet.workers
    return round_figures(result, expected)


def run(
    sizes: Sequence[int],
    latency_ms: float,
    baseline_max: int,
    missing_share: float,
    concurrency: int,
    server: PostgresServer,
) -> dict[str, Any]:
    baseline_of = {size: min(size, baseline_max) for size in sizes}
    results: dict[str, dict[str, Any]] = {"wm": {}, "baseline": {}}
    measured_baseline: dict[int, dict[str, Any]] = {}
    fleets: dict[str, Any] = {}
    for size in sorted(set(sizes) | set(baseline_of.values())):
        with FleetClouds.running(FleetHost) as clouds:
            config = fleet_config(clouds.endpoints, clouds.cert_path, UNUSED_DB_URL, size)
            print(f"{size} workers: seeding ...", file=sys.stderr, flush=True)
            fleet = seed_fleet(clouds, plan_fleet(config, size, missing_rows(size, missing_share)))
            clouds.set_latency(latency_ms)
            fleets[str(size)] = {**clouds.vms(), "missing": fleet.missing, "units": len(units())}
            if size in sizes:
                print(f"{size} workers: wm ...", file=sys.stderr, flush=True)
                results["wm"][str(size)] = measure_side("wm", server, clouds, fleet, concurrency)
            if size in baseline_of.values():
                print(f"{size} workers: baseline ...", file=sys.stderr, flush=True)
                measured_baseline[size] = measure_side(
                    "baseline", server, clouds, fleet, concurrency
                )
    extrapolated = {}
    for size in sorted(sizes):
        measured_size = baseline_of[size]
        if measured_size == size:
            results["baseline"][str(size)] = measured_baseline[size]
        else:
            results["baseline"][str(size)] = extrapolate(
                measured_baseline[measured_size],
                size / measured_size,
                SCALED,
                exact={"api_calls_expected": size},  # one call per worker
            )
            extrapolated[str(size)] = extrapolation_note(measured_size, size)
    return {
        "wm": results["wm"],
        "baseline": results["baseline"],
        "ratio": {s: ratios(results["wm"][s], results["baseline"][s]) for s in results["wm"]},
        "extrapolated": extrapolated,
        "fleet": {str(s): fleets[str(s)] for s in sorted(sizes)},
    }


def tables(result: dict[str, Any]) -> str:
    parts = []
    for size in result["wm"]:
        note = result["extrapolated"].get(size)
        heading = f"{int(size):,} workers"
        if note:
            heading += (
                f" (baseline EXTRAPOLATED x{note['factor']:g} from a measured run of "
                f"{note['from_workers']:,} workers)"
            )
        section = {key: result[key][size] for key in ("wm", "baseline", "ratio")}
        parts.append(f"{heading}\n{table(section)}")
    return "\n\n".join(parts)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scan", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=list(DEFAULT_SIZES),
        help="fleet sizes, one scan round each (e.g. --workers 1000 10000 50000)",
    )
    parser.add_argument("--latency-ms", type=float, default=50.0, help="per API call")
    parser.add_argument(
        "--baseline-max-workers",
        type=int,
        default=1000,
        help="largest fleet the baseline is run on; larger sizes are extrapolated from it",
    )
    parser.add_argument(
        "--missing-share", type=float, default=0.001, help="share of rows whose VM is gone"
    )
    parser.add_argument(
        "--baseline-concurrency", type=int, default=2, help="the old scanner's checks in flight"
    )
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "scan.json")
    parser.add_argument("--log", type=Path, default=None, help="wm's JSON log lines to this file")
    args = parser.parse_args(argv)
    if min(args.workers) < 1 or args.baseline_max_workers < 1 or args.baseline_concurrency < 1:
        parser.error("--workers, --baseline-max-workers, --baseline-concurrency must be >= 1")
    if args.latency_ms < 0 or not 0 <= args.missing_share < 1:
        parser.error("--latency-ms must be >= 0 and --missing-share in [0, 1)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        f"scan rounds of {', '.join(f'{n:,}' for n in sorted(set(args.workers)))} workers; "
        f"latency {args.latency_ms:g} ms, baseline run up to {args.baseline_max_workers:,} "
        f"workers, concurrency {args.baseline_concurrency}",
        file=sys.stderr,
    )
    server = find_or_start()
    try:
        with wm_logging(args.log) as events:
            result = run(
                sorted(set(args.workers)),
                args.latency_ms,
                args.baseline_max_workers,
                args.missing_share,
                args.baseline_concurrency,
                server,
            )
    finally:
        server.stop()
    result["params"] = {
        "workers": sorted(set(args.workers)),
        "latency_ms": args.latency_ms,
        "baseline_max_workers": args.baseline_max_workers,
        "missing_share": args.missing_share,
        "baseline_concurrency": args.baseline_concurrency,
        "units": [f"{p}/{r}" for p, r in units()],
    }
    result["log_warnings"] = dict(events.counts)
    emit(result, tables(result), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
