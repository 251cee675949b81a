"""Where a scan's CPU goes: cProfile of wm's process during one scan round of a fleet.

`python -m bench.scan_profile --workers 10000 --output scan.prof` builds the fleet of
`bench.scan` (no latency), then scans its five units one after the other with a profiler on
every thread of this process (the gates' threads, where the SDKs parse the clouds' answers, as
well as the scan's own), each on that thread's CPU clock, so that the simulated clouds (another
process) and a busy machine's waits are left out. It prints the round's CPU, wall and the
sims' CPU, and the functions by cumulative time; `--output` keeps the merged profile for
`python -m pstats`. A profiler, not a benchmark: profiling inflates Python-heavy code, so read
its shares, not its seconds (bench/README.md, "scan").
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import fresh_database, sync_pools
from bench.fleet import (
    FleetClouds,
    FleetHost,
    fleet_config,
    fleet_providers,
    plan_fleet,
    seed_fleet,
    units,
    write_rows,
)
from bench.scan import UNUSED_DB_URL, missing_rows
from wm.scanning.scanner import Scanner
from wmsim.postgres import find_or_start


def profile_round(workers: int, missing_share: float, top: int, output: Path | None) -> None:
    server = find_or_start()
    profiles: list[cProfile.Profile] = []

    def on_new_thread(_frame: Any, _event: str, _arg: Any) -> None:
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        sys.setprofile(None)
        profile.enable()

    try:
        with FleetClouds.running(FleetHost) as clouds:
            config = fleet_config(clouds.endpoints, clouds.cert_path, UNUSED_DB_URL, workers)
            plan = plan_fleet(config, workers, missing_rows(workers, missing_share))
            fleet = seed_fleet(clouds, plan)
            with fresh_database(server, "scan_profile", pool_size=12) as (engine, url):
                config = fleet_config(clouds.endpoints, clouds.cert_path, url, fleet.workers)
                sync_pools(engine, config)
                write_rows(engine, config, fleet)
                threading.setprofile(on_new_thread)  # the providers' gate threads start later
                try:
                    with fleet_providers(config) as providers:
                        scanner = Scanner(engine, providers, replica="bench", missing_grace_s=0)
                        main = cProfile.Profile(time.thread_time)
                        sims_before = clouds.cpu_s()
                        cpu_before, started = time.process_time(), time.monotonic()
                        main.enable()
                        for unit in units():
                            print(scanner.scan(*unit), file=sys.stderr)
                        main.disable()
                        cpu, wall = time.process_time() - cpu_before, time.monotonic() - started
                        sims = clouds.cpu_s() - sims_before
                finally:
                    threading.setprofile(None)
    finally:
        server.stop()
    stats = pstats.Stats(main)
    for profile in profiles:  # their threads have ended with the providers
        stats.add(profile)
    print(f"{workers:,} workers: cpu {cpu:.2f} s, wall {wall:.2f} s, sims' cpu {sims:.2f} s")
    stats.sort_stats("cumulative").print_stats(top)
    if output is not None:
        stats.dump_stats(output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scan_profile", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--missing-share", type=float, default=0.001)
    parser.add_argument("--top", type=int, default=40, help="functions printed")
    parser.add_argument("--output", type=Path, default=None, help="the merged profile")
    args = parser.parse_args(argv)
    profile_round(args.workers, args.missing_share, args.top, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
