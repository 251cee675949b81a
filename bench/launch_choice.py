"""Issue 40's benchmark, layer 1: the launch choice's policy simulation. Three arms and a
reference launch for the same pools in the same seeded market (wmsim.market), one after the
other, each in a market of its own made from the same scenario and seed (so prices, regimes
and events are the same):

- worker-manager: Taskcluster's selector reproduced (bench/baselines/worker_manager_selector.py):
  on a cloud whose clouds.toml entry says `even_split_abort` (EC2) the configs with weight > 0
  shuffled, an even share each, one all-or-nothing create per config, the first refusal ending
  the pass and filed without a config id; elsewhere one weighted draw per instance, each
  refusal filed with its config id when the cloud reports it. Its evidence: each config's
  non-stopped capacity and the pool's errors of the last hour.
- wm-weights: today's wm (wm.provisioning.launch_choice.choose, no spread): weights lowered by
  each config's refusals and pre-emptions of the last hour; creates take what the cloud gives
  (EC2 MinCount 1) and a refusal does not end the pass.
- wm-cost: wm.provisioning.cost_choice.score over what wm would know (its bench of refused
  offerings, its own decayed evidence, and the signals its collectors read from the market at
  their cadence, with the market's noise), then choose(spread=...) by the final weights
  (beta and spread: wm's [launch_choice] defaults, or --beta/--spread for a side run).
- oracle (a reference, not a policy): each worker of a pass to the offering cheapest per
  useful capacity-hour by the market's true price, obtainable capacity and hazard now, no
  spread cap. What launching by perfect knowledge of the present reaches: a goal beyond it is
  beyond any policy (the future, a dry spell to come, it does not know either).

The pools (per scenario file): tasks arrive (Poisson, plus a burst every few hours), seeded per
pool and the same for every arm; every PASS_S the demand not covered by idle or booting
workers is launched for; a granted instance boots (the cloud's boot_s), registers (unless the
offering's `unregistered` share says it never will: then it is stopped after
REGISTRATION_TIMEOUT_S), claims tasks, and stops after IDLE_TIMEOUT_S idle. The market's
hazard pre-empts running spot: each worker runs an exponential clock in integrated hazard, the
pool's n-th launch getting the same clock in every arm (common random numbers), so two arms
running the same workers meet the same pre-emptions; a pre-empted task's work is lost and
it is queued again. The market's ledger bills every instance (per second, 60 s minimum).

Figures per arm (issue 40 §4), over every pool of the scenario:
cost_per_task_hour ($ billed / hours of completed tasks' run time), time_to_capacity_p50_s and
_p95_s (from a task's demand to its claim, for demand arising within 30 min after a place the
pool launches in runs dry: tasks arriving, and tasks re-queued by a pre-emption),
preemptions_per_1000_worker_hours, capacity_errors_per_100_creates (capacity and quota
refusals; a create is one call: EC2's RunInstances, one instance on GCE and Azure),
never_registered (launches), signal_api_calls_per_hour. `ratio` is worker-manager's figure
over the arm's (bench/README.md's baseline / wm).

    .venv/bin/python -m bench.launch_choice                  # S0..S5, seeds 1 to 3
    .venv/bin/python -m bench.launch_choice --scenarios S1 S3 --seeds 7 --hours 6
"""

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import REPO_DIR
from bench.launch_arms import ARM_CLASSES, SETTINGS
from bench.launch_sim import Sim
from bench.output import aligned, cell, emit, largest_deviation, percentile, ratios, rounded
from wm.config.launch_choice import DEFAULT_BETA, DEFAULT_SPREAD
from wmsim.market import Market
from wmsim.market.scenario import load

SCENARIOS = ("S0", "S1", "S2", "S3", "S4", "S5")
SEEDS = (1, 2, 3)  # the figures are means over these: one seed's run swings (README)
ARMS = ("worker-manager", "wm-weights", "wm-cost", "oracle")
BASELINE = "worker-manager"
FIGURES = (
    "cost_per_task_hour",
    "time_to_capacity_p50_s",
    "time_to_capacity_p95_s",
    "preemptions_per_1000_worker_hours",
    "preemption_exposure_per_1000_worker_hours",
    "capacity_errors_per_100_creates",
    "never_registered",
    "signal_api_calls_per_hour",
)
# The control's deviation: worker-manager reads no signals, so that figure is left out; and
# pre-emptions are counted by their expectation (the hazard integrated over the same running
# workers) rather than by the draws: about 16 a seed in S0, where one pre-emption is 6 %, so
# the realised count cannot show a 2 % difference in any run that fits the benchmark, while
# the expectation shows it exactly. The realised count stays in the table beside it.
CONTROL_FIGURES = tuple(
    f
    for f in FIGURES
    if f not in ("signal_api_calls_per_hour", "preemptions_per_1000_worker_hours")
)
# What the undisturbed run (the scenario without its scripted events, bench.launch_sim.Sim)
# reports: the waits of the same tasks had nothing run dry.
UNDISTURBED_FIGURES = ("time_to_capacity_p50_s", "time_to_capacity_p95_s", "tasks_timed_after_dry")
RESULTS = REPO_DIR / "bench" / "results" / "launch_choice.json"

# -- figures -------------------------------------------------------------------------------


def run_arm(
    scenario: str, arm: str, seed: int, hours: float | None, *, undisturbed: bool = False
) -> dict[str, Any]:
    sim = Sim(scenario, seed, hours, ARM_CLASSES[arm](seed), undisturbed=undisturbed)
    counts = sim.run()
    cost = sim.market.cost(sim.end)
    waits = sorted(counts.waits_after_dry)
    worker_h = counts.worker_s / 3600
    return {
        "cost_per_task_hour": rounded(cost / (counts.completed_task_s / 3600), 4)
        if counts.completed_task_s
        else None,
        "time_to_capacity_p50_s": rounded(percentile(waits, 0.5), 1),
        "time_to_capacity_p95_s": rounded(percentile(waits, 0.95), 1),
        "preemptions_per_1000_worker_hours": rounded(counts.preemptions / worker_h * 1000, 2)
        if worker_h
        else None,
        # the same without the draws' noise: what the arm exposed its workers to
        "preemption_exposure_per_1000_worker_hours": rounded(counts.exposure / worker_h * 1000, 2)
        if worker_h
        else None,
        "capacity_errors_per_100_creates": rounded(counts.capacity_errors / counts.creates * 100, 2)
        if counts.creates
        else None,
        "never_registered": counts.never_registered,
        "signal_api_calls_per_hour": rounded(counts.signal_calls / (sim.end / 3600), 2),
        # the sums the figures come from
        "cost_usd": rounded(cost, 2),
        "completed_task_hours": rounded(counts.completed_task_s / 3600, 1),
        "worker_hours": rounded(worker_h, 1),
        "creates": counts.creates,
        "capacity_errors": counts.capacity_errors,
        "preemptions": counts.preemptions,
        "tasks_timed_after_dry": len(waits),
    }


def control_deviation(result: dict[str, Any]) -> dict[str, float]:
    """Per arm, the largest |arm / worker-manager - 1| over the control's figures (two zeros
    or two nulls agree; a zero or null against a number is a full deviation)."""
    out = {}
    base = result[BASELINE]
    for arm in ARMS:
        if arm == BASELINE:
            continue
        out[arm] = largest_deviation(result[arm], base, CONTROL_FIGURES)
    return out


def mean_figures(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's mean over the seeds that have one (None where none has)."""
    out: dict[str, Any] = {}
    for name in runs[0]:
        values = [r[name] for r in runs if r[name] is not None]
        out[name] = round(statistics.fmean(values), 4) if values else None
    return out


def run_scenario(scenario: str, seeds: Sequence[int], hours: float | None) -> dict[str, Any]:
    """Every arm on every seed; the figures are the means over the seeds, the ratios those of
    the means, and `ratio_range` each ratio's lowest and highest over the seeds."""
    per_seed: dict[str, dict[str, Any]] = {}
    plan = load(scenario)
    # Dry spells that are all scripted (no random regimes): the waits they cause can be set
    # against the same tasks' waits with no dry spell at all, the floor of any launch choice.
    scripted = any(e.regime == "dry" for e in plan.events) and not plan.regimes.enabled
    for seed in seeds:
        runs: dict[str, Any] = {}
        for arm in ARMS:
            started = time.perf_counter()
            runs[arm] = run_arm(scenario, arm, seed, hours)
            took = time.perf_counter() - started
            print(f"  {scenario} seed {seed} {arm}: {took:.1f} s", file=sys.stderr, flush=True)
        runs["ratio"] = {a: ratios(runs[a], runs[BASELINE]) for a in ARMS if a != BASELINE}
        if scripted:
            full = run_arm(scenario, BASELINE, seed, hours, undisturbed=True)
            runs["undisturbed"] = {k: full[k] for k in UNDISTURBED_FIGURES}
        per_seed[str(seed)] = runs
    result: dict[str, Any] = {
        arm: mean_figures([per_seed[str(seed)][arm] for seed in seeds]) for arm in ARMS
    }
    result["ratio"] = {
        arm: ratios(result[arm], result[BASELINE]) for arm in ARMS if arm != BASELINE
    }
    result["ratio_range"] = {
        arm: {
            fig: _range([per_seed[str(seed)]["ratio"][arm][fig] for seed in seeds])
            for fig in FIGURES
        }
        for arm in ARMS
        if arm != BASELINE
    }
    if scripted:
        floor = mean_figures([per_seed[str(seed)]["undisturbed"] for seed in seeds])
        result["undisturbed"] = floor
        # worker-manager's figure over the floor: the highest ratio any arm could reach
        result["best_possible_ratio"] = ratios(floor, result[BASELINE])
    result["control_deviation"] = control_deviation(result)
    result["per_seed"] = per_seed
    return result


def _range(values: Sequence[float | None]) -> list[float] | None:
    known = [v for v in values if v is not None]
    return [min(known), max(known)] if known else None


def table(name: str, title: str, result: dict[str, Any]) -> str:
    others = [a for a in ARMS if a != BASELINE]
    rows = [("figure", *ARMS, *(f"{a} ratio" for a in others), "wm-cost ratio, seeds")]
    for fig in FIGURES:
        spread = result["ratio_range"]["wm-cost"][fig]
        rows.append(
            (
                fig,
                *(cell(result[arm][fig]) for arm in ARMS),
                *(cell(result["ratio"][arm][fig]) for arm in others),
                "-" if spread is None else f"{spread[0]:g} to {spread[1]:g}",
            )
        )
    deviation = ", ".join(f"{a} {v:g}" for a, v in result["control_deviation"].items())
    lines = [f"{name}: {title} (largest deviation from worker-manager: {deviation})"]
    lines += aligned(rows)
    if "undisturbed" in result:
        floor, best = result["undisturbed"], result["best_possible_ratio"]
        lines.append(
            "undisturbed (the same tasks, nothing dry: no launch choice does better): time to"
            f" capacity p50 {cell(floor['time_to_capacity_p50_s'])} s, p95"
            f" {cell(floor['time_to_capacity_p95_s'])} s; the best ratio any arm could reach:"
            f" p50 {cell(best['time_to_capacity_p50_s'])},"
            f" p95 {cell(best['time_to_capacity_p95_s'])}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--hours", type=float, help="simulated hours (default: the scenario's)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--beta", type=float, help="wm-cost's beta (default: wm's)")
    parser.add_argument("--spread", type=float, help="wm-cost's spread cap, 1: none")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    SETTINGS["beta"] = DEFAULT_BETA if args.beta is None else args.beta
    SETTINGS["spread"] = DEFAULT_SPREAD if args.spread is None else args.spread
    started = time.perf_counter()
    scenarios: dict[str, Any] = {}
    tables = []
    for name in args.scenarios:
        market = Market.from_scenario(name, args.seeds[0])
        scenarios[name] = run_scenario(name, args.seeds, args.hours)
        scenarios[name]["title"] = market.scenario.title
        tables.append(table(name, market.scenario.title, scenarios[name]))
    result = {
        "seeds": args.seeds,
        "wm_cost_settings": dict(SETTINGS),
        "hours": args.hours,
        "wall_s": round(time.perf_counter() - started, 1),
        "scenarios": scenarios,
    }
    emit(result, "\n\n".join(tables), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
