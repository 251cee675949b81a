"""CI figures: counts and bytes that do not depend on the machine's load, each against its bound.

`python -m bench.ci` runs a few small rounds of the benchmarks' own machinery (bench/fleet.py,
bench/scale.py, bench/burst.py) and holds each figure to its bound in BOUNDS below (the same
table is bench/README.md's "CI figures"): a change that makes a scan issue more cloud calls, a
pass more statements, a burst more VMs or a scan more memory fails `make test` instead of
landing. Only counts and bytes: no wall time, no CPU time, no ratio of timings (those stay in
`make bench`), so the figures are the same run to run, on a quiet machine or a busy one.

The rounds, on a Postgres found or started (and stopped after) and the simulated clouds in a
process of their own, every cloud answering at once:

- scan: SCAN_WORKERS running workers in SCAN_MIX (enough that every cloud's list has two
  pages), SCAN_MISSING of them without their VM; one scan round of wm's `Scanner`, every
  (provider, region) at once as the scanner processes' jobs do: its cloud calls against
  `expected_wm_calls` of that fleet, its statements, the rows it stopped. Then the same fleet's
  rows in a fresh database scanned again one unit after the other under tracemalloc: the peak
  of memory allocated over what was allocated before, per worker of the fleet (one unit at a
  time, so the peak does not depend on how the units' scans interleave).
- pools: `bench.scale.measure_pools` at 10 and 100 pools: a launch pass (a task in every pool)
  and the steady pass right after: statements of each, cloud calls per VM launched.
- burst: BURST_TASKS tasks at once in the production mix, wm's provisioner passes woken by the
  tasks' NOTIFY as in `bench.burst`, until the clouds hold a live VM for every task and every
  provider has passed twice more: the peak of live capacity over demand, VMs created.

Results go to stdout (a table of figure, value, bound, met) and to bench/results/ci.json as
{"figures": {NAME: {"value", "relation", "bound", "against", "met"}}, "params", "misses"}; the
exit status is 1 when a figure misses its bound, after one line per miss on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import sys
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import scale
from bench.burst import (
    TASK_DURATION_S,
    Clouds,
    SimHost,
    WmSide,
    bench_config,
    sampling,
    split_tasks,
)
from bench.check import RELATIONS
from bench.common import PROVIDER_IDS, RESULTS_DIR, PassLoops, fresh_database, sync_pools
from bench.fleet import (
    FleetClouds,
    FleetHost,
    expected_wm_calls,
    fleet_config,
    fleet_providers,
    plan_fleet,
    scan_round,
    seed_fleet,
    units,
)
from bench.output import measured_on, wm_logging
from wm.db import tasks as task_store
from wm.providers import build_provider
from wm.provisioning.creates_in_flight import ANSWERS_EVERY_S
from wm.scanning.scanner import Scanner
from wmsim.postgres import PostgresServer, find_or_start

# -- the rounds' sizes ----------------------------------------------------------------------------

SCAN_WORKERS = 3000
SCAN_MISSING = 30  # rows whose VM is gone, split as the fleet: some on every cloud
# Not the production mix (EC2 84 %): at 3,000 workers that leaves GCE and Azure one page each.
# These shares give every cloud a list of two pages (EC2's us-east-1 1,110 VMs in pages of 1,000,
# Azure's 1,050 in pages of 1,000, GCE's 600 in pages of 500) at a size scanned in seconds.
SCAN_MIX = {
    "proj-ci/linux-large": 0.37,
    "proj-ci/linux-small": 0.04,
    "proj-ci/linux-gpu": 0.04,
    "proj-ci/win-2022": 0.25,
    "proj-ci/win-11": 0.10,
    "proj-ci/gce-linux": 0.20,
}
EC2_SEED = 39  # moto's random ids and addresses, the same every run
POOL_SIZES = (10, 100)
BURST_TASKS = 200
BURST_BOOT_S = 600.0  # VMs stay pending: every VM created is live capacity to the end
BURST_INTERVAL_S = 1.0
BURST_PASSES_AFTER = 2  # passes of each provider after the demand is covered
BURST_DEADLINE_S = 180.0  # for each wait: generous, a busy machine is slow, not wrong
UNUSED_DB_URL = "postgresql://bench@127.0.0.1/unused"  # the fleet's plan needs no database


# -- bounds ---------------------------------------------------------------------------------------

LAUNCH_PASS_STATEMENTS = 42  # measured on 4b8386d, the pass's answers recorded at its end


def answer_records_allowed(pass_s: float) -> int:
    """Statements a launch pass lasting `pass_s` may add by recording its creates' answers
    while others are still out: one a second per provider, beyond the one at its end."""
    return len(PROVIDER_IDS) * math.floor(pass_s / ANSWERS_EVERY_S)


@dataclass(frozen=True)
class Bound:
    """A figure's bound: `relation` against `limit`, or, where `limit` is None, against a
    figure of the same run (named by `against`)."""

    relation: str  # a key of bench.check.RELATIONS
    limit: float | None
    against: str = ""


# The one table of bounds (bench/README.md's "CI figures" says the same). A count measured by
# this module is bound to what it measured, not with slack: one more statement or call is the
# change this check exists to show; a change that means it raises the bound here and in
# bench/README.md and says why in its commit.
BOUNDS: dict[str, Bound] = {
    # The scan's calls are exactly the list pages of each unit plus the look-ups of the rows
    # whose VM is gone (bench.fleet.expected_wm_calls); 21 for 18 at 10,000 workers was an
    # Azure row with a cloud id searched for among every group's deployments.
    "scan_api_calls": Bound("==", None, "expected_wm_calls of the fleet"),
    # Measured on 4b8386d: 50 (bench.scan at 10,000 workers in the production mix: 49; a
    # scan's statements grow with its units and pages, not its rows).
    "scan_db_statements": Bound("<=", 50),
    # Every row whose VM is gone is stopped, and no other.
    "scan_rows_stopped": Bound("==", None, "rows without their VM"),
    # Measured on 4b8386d: 4,762 to 4,768 bytes a worker in ten runs (14.3 MB at the peak,
    # Azure's unit of 1,050 VMs; a few kB move between runs, the look-ups' threads, the only
    # figure here that is not the same to the unit every time). The bound is a quarter above:
    # room for a library's drift, not for a scan that keeps a record a row or a second page of
    # answers.
    "scan_memory_peak_bytes_per_worker": Bound("<=", 6000),
    # Measured on 4b8386d: 42, a launch pass of 10 pools, one VM each, every provider's pass
    # at once, plus what a pass writes while its creates are out: the VMs the cloud took, at
    # most once a second a provider (wm/provisioning/creates_in_flight.py ANSWERS_EVERY_S; a
    # pass all answered within the second writes them once, at its end, as it always did).
    "launch_pass_db_statements_10_pools": Bound(
        "<=", None, f"{LAUNCH_PASS_STATEMENTS} + answers recorded while creates were out"
    ),
    # A pass reads and writes every pool at once (array parameters): as many statements at 100
    # pools as at 10, but for the records of answers of a pass that takes longer.
    "launch_pass_db_statements_100_pools": Bound(
        "<=", None, "launch_pass_db_statements_10_pools + answers recorded while creates were out"
    ),
    # Measured on 4b8386d: 30, every provider's pass at once (bench.scale: 30 at 10, 100 and
    # 1,000 pools).
    "steady_pass_db_statements_10_pools": Bound("<=", 30),
    "steady_pass_db_statements_100_pools": Bound("==", None, "steady_pass_db_statements_10_pools"),
    # One create call a VM at one VM a pool: EC2's RunInstances, GCE's insert, Azure's VM PUT
    # (bench.scale's first launch of 1,000 pools: 1,000 calls).
    "launch_api_calls_per_vm_100_pools": Bound("<=", 1),
    # A pass with nothing to launch asks the clouds nothing.
    "steady_pass_api_calls_100_pools": Bound("==", 0),
    # DESIGN.md's first flaw: launching for demand already covered. bench.burst's goal.
    "burst_peak_capacity_over_demand": Bound("<=", 1),
    # Every task covered by a VM (else the peak above would be met by doing nothing).
    "burst_vms_created": Bound("==", None, "tasks in the burst"),
    "burst_pass_errors": Bound("==", 0),
}


# -- the check (pure) -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """A figure of this run; `baseline` is the same run's value a bound without a limit is
    held to."""

    name: str
    value: float | None
    baseline: float | None = None


@dataclass(frozen=True)
class Verdict:
    name: str
    value: float | None
    relation: str
    bound: float | None
    against: str
    met: bool
    problem: str  # empty when met


def _shown(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def judge(figures: Sequence[Measured], bounds: Mapping[str, Bound]) -> list[Verdict]:
    """Each figure against its bound, in the bounds' order; a bound with no figure, a figure
    with no bound, and a figure or bound that is missing are misses too (a check that quietly
    skips a figure is no check)."""
    by_name = {figure.name: figure for figure in figures}
    verdicts = []
    for name, bound in bounds.items():
        figure = by_name.get(name)
        value = None if figure is None else figure.value
        limit = bound.limit if bound.limit is not None else (figure and figure.baseline)
        if figure is None:
            met, problem = False, "not measured"
        elif bound.relation not in RELATIONS:
            met, problem = False, f"unknown relation {bound.relation!r}"
        elif value is None or limit is None:
            met, problem = False, f"no value ({_shown(value)}) or no bound ({_shown(limit)})"
        else:
            met = RELATIONS[bound.relation](value, limit)
            problem = "" if met else "missed its bound"
        verdicts.append(Verdict(name, value, bound.relation, limit, bound.against, met, problem))
    for figure in figures:
        if figure.name not in bounds:
            verdicts.append(
                Verdict(figure.name, figure.value, "", None, "", False, "not in BOUNDS")
            )
    return verdicts


def bound_text(verdict: Verdict) -> str:
    if not verdict.relation:
        return "no bound"
    against = f" ({verdict.against})" if verdict.against else ""
    return f"bound {verdict.relation} {_shown(verdict.bound)}{against}"


def miss_line(verdict: Verdict) -> str:
    """One line naming the figure, its value and its bound."""
    return (
        f"bench.ci: {verdict.name} = {_shown(verdict.value)}, {bound_text(verdict)}: "
        f"{verdict.problem}"
    )


def bound_cell(bound: Bound) -> str:
    """A bound as bench/README.md's "CI figures" table writes it."""
    if bound.limit is None:
        return f"{bound.relation} {bound.against}"
    return f"{bound.relation} {bound.limit:g}"


def misses(verdicts: Sequence[Verdict]) -> list[str]:
    return [miss_line(v) for v in verdicts if not v.met]


def verdict_table(verdicts: Sequence[Verdict]) -> str:
    rows = [("figure", "value", "bound", "met")]
    for v in verdicts:
        bound = bound_text(v).removeprefix("bound ")
        rows.append((v.name, _shown(v.value), bound, "yes" if v.met else "NO"))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join(
        row[0].ljust(widths[0])
        + "".join(c.rjust(w + 2) for c, w in zip(row[1:], widths[1:], strict=True))
        for row in rows
    )


# -- the rounds -----------------------------------------------------------------------------------


def scan_figures(server: PostgresServer, clouds: FleetClouds) -> list[Measured]:
    planned = fleet_config(clouds.endpoints, clouds.cert_path, UNUSED_DB_URL, SCAN_WORKERS)
    seed_ec2_ids(clouds.endpoints["aws"])
    fleet = seed_fleet(clouds, plan_fleet(planned, SCAN_WORKERS, SCAN_MISSING, SCAN_MIX))
    with (
        scale.fleet_database(server, "ci_scan", clouds, fleet) as (engine, config),
        fleet_providers(config) as providers,
    ):
        result = scan_round("wm", engine, providers, clouds)
    with (
        scale.fleet_database(server, "ci_memory", clouds, fleet) as (engine, config),
        fleet_providers(config) as providers,
    ):
        scanner = Scanner(engine, providers, replica="bench", missing_grace_s=0.0)
        peak = traced_peak(lambda: [scanner.scan(*unit) for unit in units()])
    return [
        Measured("scan_api_calls", result.api_calls, expected_wm_calls(fleet.pools)),
        Measured("scan_db_statements", result.db_statements),
        Measured("scan_rows_stopped", result.rows_stopped, fleet.missing),
        Measured("scan_memory_peak_bytes_per_worker", round(peak / fleet.workers)),
    ]


def seed_ec2_ids(endpoint: str) -> None:
    """The same instance ids and addresses every run (moto draws them at random, and an
    address's length is bytes in the scan's answers): moto's own seed, through its API."""
    request = urllib.request.Request(f"{endpoint}/moto-api/seed?a={EC2_SEED}", method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        answer.read()


def traced_peak(work: Callable[[], object]) -> int:
    """Bytes allocated at the peak of `work` over those allocated before it (tracemalloc:
    Python's own count, whatever else the machine runs)."""
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - before


def pool_figures(server: PostgresServer, clouds: FleetClouds) -> list[Measured]:
    """After the scan: measure_pools empties the clouds first."""
    runs = {pools: scale.measure_pools("wm", pools, clouds, server) for pools in POOL_SIZES}
    small, large = runs[POOL_SIZES[0]], runs[POOL_SIZES[-1]]
    launched = large["vms_created"]
    return [
        Measured(
            "launch_pass_db_statements_10_pools",
            small["launch_pass_db_statements"],
            LAUNCH_PASS_STATEMENTS + answer_records_allowed(small["launch_pass_s"]),
        ),
        Measured(
            "launch_pass_db_statements_100_pools",
            large["launch_pass_db_statements"],
            small["launch_pass_db_statements"] + answer_records_allowed(large["launch_pass_s"]),
        ),
        Measured("steady_pass_db_statements_10_pools", small["steady_pass_db_statements"]),
        Measured(
            "steady_pass_db_statements_100_pools",
            large["steady_pass_db_statements"],
            small["steady_pass_db_statements"],
        ),
        Measured(
            "launch_api_calls_per_vm_100_pools",
            round(large["launch_pass_api_calls"] / launched, 3) if launched else None,
        ),
        Measured("steady_pass_api_calls_100_pools", large["steady_pass_api_calls"]),
    ]


def wait_for(condition: Callable[[], bool], deadline_s: float) -> bool:
    deadline = time.monotonic() + deadline_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def burst_figures(server: PostgresServer) -> list[Measured]:
    demand = split_tasks(BURST_TASKS)
    total = sum(demand.values())
    with contextlib.ExitStack() as stack:
        engine, db_url = stack.enter_context(fresh_database(server, "ci_burst"))
        clouds = stack.enter_context(Clouds.running(SimHost, BURST_BOOT_S, 0.0))
        config = bench_config(clouds, demand, db_url, BURST_INTERVAL_S)
        sync_pools(engine, config)
        providers = {p.id: build_provider(p, config.deployment_id) for p in config.providers}
        for provider in providers.values():
            stack.callback(provider.close)
        side = WmSide(engine, config, providers, wake=True)
        loops = PassLoops(side.run_pass, list(providers), BURST_INTERVAL_S, time.monotonic())
        stack.callback(side.stop)
        stack.callback(loops.stop)
        side.start(loops)
        loops.start()
        wait_for(lambda: all(loops.passes[p] for p in providers), BURST_DEADLINE_S)
        with sampling(clouds, side.counted_capacity) as peaks:
            for pool_id, count in demand.items():
                task_store.submit_tasks(engine, pool_id, count, TASK_DURATION_S)
            wait_for(lambda: clouds.live_capacity() >= total, BURST_DEADLINE_S)
            after = dict(loops.passes)
            wait_for(
                lambda: all(loops.passes[p] >= after[p] + BURST_PASSES_AFTER for p in providers),
                BURST_DEADLINE_S,
            )
            loops.stop()
            side.stop()
        created = sum(clouds.vms_created().values())
    return [
        Measured("burst_peak_capacity_over_demand", round(peaks.cloud / total, 3)),
        Measured("burst_vms_created", created, total),
        Measured("burst_pass_errors", sum(loops.errors.values())),
    ]


# -- output ---------------------------------------------------------------------------------------


def run(server: PostgresServer) -> list[Measured]:
    """Every round; how long each took goes to stderr (a figure of the machine, not checked)."""
    figures: list[Measured] = []

    def measure(name: str, round_figures: Callable[[], list[Measured]]) -> None:
        started = time.monotonic()
        print(f"bench.ci: {name} ...", file=sys.stderr, flush=True)
        figures.extend(round_figures())
        print(f"bench.ci: {name}: {time.monotonic() - started:.0f} s", file=sys.stderr)

    with FleetClouds.running(FleetHost) as clouds:  # the scan's, then the pools'
        measure("scan", lambda: scan_figures(server, clouds))
        measure("pools", lambda: pool_figures(server, clouds))
    measure("burst", lambda: burst_figures(server))
    return figures


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ci", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "ci.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    server = find_or_start()
    try:
        with wm_logging(None) as events:
            figures = run(server)
    finally:
        server.stop()
    verdicts = judge(figures, BOUNDS)
    missed = misses(verdicts)
    result = {
        "figures": {
            v.name: {
                "value": v.value,
                "relation": v.relation,
                "bound": v.bound,
                "against": v.against or None,
                "met": v.met,
            }
            for v in verdicts
        },
        "params": {
            "scan_workers": SCAN_WORKERS,
            "scan_missing": SCAN_MISSING,
            "scan_mix": SCAN_MIX,
            "pools": list(POOL_SIZES),
            "burst_tasks": BURST_TASKS,
            "burst_passes_after": BURST_PASSES_AFTER,
        },
        "misses": missed,
        "log_warnings": dict(events.counts),
    }
    result["commit"] = measured_on()
    print(verdict_table(verdicts))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.output}", file=sys.stderr)
    for line in missed:
        print(line, file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
