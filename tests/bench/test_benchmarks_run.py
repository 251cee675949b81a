"""Every benchmark runs end to end at a tiny size and writes a result of the agreed shape.

These guard the benchmarks from rotting; they assert no speed (figures of speed live in the
benchmarks' output). The relations checked hold by construction: call counts the designs fix,
VMs launched, and the one delay the single provisioning loop cannot avoid. Each test runs a
benchmark's `main` in this process, on the tests' Postgres server; the burst benchmark, most of
whose time is its two fixed 10 s windows, runs beside them as `python -m bench.burst`. They all
write to one results directory, which `bench.check` then reads (its output's form is checked,
not whether the tiny runs meet the goals).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import azure, check, isolation, registration, scale, scan
from bench.fleet import extrapolate, extrapolation_note
from bench.output import measured_on
from wmsim.postgres import PostgresServer

REPO = Path(__file__).resolve().parents[2]
SICK_S, WAVE_S = 1.5, 0.2
BURST_ARGS = ("--tasks", "12", "--boot-s", "0", "--interval-s", "0.5", "--baseline-scan-s", "4")
BURST_TIMEOUT_S = 180.0


@pytest.fixture(autouse=True)
def shared_postgres(pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The benchmarks find their server through DATABASE_URL: the tests' own, not a second one.
    monkeypatch.setenv("DATABASE_URL", pg_server.url)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where every benchmark of this module writes its result, as `make bench` does."""
    return tmp_path_factory.mktemp("results")


def run(module: Any, results_dir: Path, *args: str) -> dict[str, Any]:
    output = results_dir / f"{module.__name__.rsplit('.', 1)[-1]}.json"
    assert module.main([*args, "--output", str(output)]) == 0
    return json.loads(output.read_text())


@pytest.fixture(scope="module", autouse=True)
def burst_beside(
    pg_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory, results_dir: Path
) -> Iterator[Callable[[], dict[str, Any]]]:
    """Start the burst benchmark when the module starts; the returned call waits for it."""
    out = tmp_path_factory.mktemp("burst")
    env = {**os.environ, "DATABASE_URL": pg_server.url}
    env.pop("SENTRY_DSN", None)
    with open(out / "burst.log", "w") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.burst",
                *BURST_ARGS,
                "--output",
                str(results_dir / "burst.json"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            env=env,
            cwd=REPO,
        )

    def wait() -> dict[str, Any]:
        code = process.wait(BURST_TIMEOUT_S)
        assert code == 0, (out / "burst.log").read_text()[-4000:]
        return json.loads((results_dir / "burst.json").read_text())

    try:
        yield wait
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(BURST_TIMEOUT_S)


def assert_compared(wm: dict[str, Any], baseline: dict[str, Any], ratio: dict[str, Any]) -> None:
    """Same figures on both sides; ratio = baseline / wm where both are numbers."""
    assert wm.keys() == baseline.keys() == ratio.keys()
    for name, ours in wm.items():
        theirs = baseline[name]
        if isinstance(ours, int | float) and ours and isinstance(theirs, int | float):
            assert ratio[name] == pytest.approx(theirs / ours, abs=1e-3), name
        else:
            assert ratio[name] is None, name


def test_scan_counts_pages_and_missing_rows_against_one_call_per_worker(results_dir):
    result = run(
        scan, results_dir, "--workers", "80", "--latency-ms", "0", "--missing-share", "0.05"
    )

    assert result["wm"].keys() == result["baseline"].keys() == {"80"}
    wm, baseline = result["wm"]["80"], result["baseline"]["80"]
    assert_compared(wm, baseline, result["ratio"]["80"])
    # wm: a page per (provider, region) (fewer than 500 VMs in each; Azure's models and
    # statuses) plus the look-ups of the 4 rows whose VM is gone; the old scanner: one a worker.
    assert wm["api_calls"] == wm["api_calls_expected"] < baseline["api_calls"]
    assert baseline["api_calls"] == baseline["api_calls_expected"] == 80
    assert wm["rows_stopped"] == baseline["rows_stopped"] == 4
    assert wm["db_statements"] < baseline["db_statements"]
    fleet = result["fleet"]["80"]
    assert fleet["aws"] + fleet["azure"] + fleet["gcp"] + fleet["missing"] == 80
    assert result["extrapolated"] == {}


def test_extrapolation_scales_per_worker_costs_and_leaves_the_rest_unknown():
    measured = {"api_calls": 60, "wall_s": 1.5, "peak_mib": 12.0, "api_calls_expected": 60}

    at_150 = extrapolate(
        measured,
        2.5,
        ("api_calls", "wall_s"),
        unknown=("peak_mib",),
        exact={"api_calls_expected": 150},
    )

    assert at_150 == {"api_calls": 150, "wall_s": 3.75, "peak_mib": None, "api_calls_expected": 150}
    assert extrapolation_note(60, 150) == {"from_workers": 60, "factor": 2.5}


def test_azure_needs_one_put_or_deployment_per_vm_against_three_and_more_loops(results_dir):
    result = run(
        azure,
        results_dir,
        *("--vms", "4", "--scan-loop-s", "0.5", "--boot-s", "0.5"),
        "--latency-ms",
        "0",
    )

    wm, arm, baseline = result["wm"], result["arm"], result["baseline"]
    assert_compared(wm, baseline, result["ratio"])
    assert_compared(arm, baseline, result["arm_ratio"]["baseline_over_arm"])
    assert_compared(wm, arm, result["arm_ratio"]["arm_over_wm"])
    assert wm["vms_running"] == arm["vms_running"] == baseline["vms_running"] == 4
    calls = result["calls_by_operation"]
    assert calls.keys() == {"wm", "arm", "baseline"}
    assert {side: sum(calls[side].values()) for side in calls} == {
        side: figures["api_calls"]
        for side, figures in (("wm", wm), ("arm", arm), ("baseline", baseline))
    }
    assert wm["resource_puts"] == calls["wm"]["VirtualMachines_CreateOrUpdate"] == 4  # NIC inline
    # ARM: one deployment per worker, and the launch config's resource group made once.
    assert calls["arm"]["Deployments_CreateOrUpdate"] == 4
    assert calls["arm"]["ResourceGroups_CreateOrUpdate"] == 1
    assert arm["resource_puts"] == 5
    assert baseline["resource_puts"] == 12  # public IP, NIC, VM
    # IP, NIC and VM each in a loop of its own, then a loop that finds the VM.
    assert baseline["scan_loops"] >= 4
    assert wm["api_calls"] < baseline["api_calls"] and arm["api_calls"] < baseline["api_calls"]
    assert None not in (wm["all_running_s"], arm["all_running_s"], baseline["all_running_s"])


def test_isolation_a_sick_azure_holds_aws_back_in_the_single_loop(results_dir):
    result = run(
        isolation,
        results_dir,
        *("--waves", "2", "--wave-s", str(WAVE_S), "--aws-tasks", "2", "--azure-tasks", "1"),
        *("--interval-s", "1", "--latency-ms", "0", "--drain-s", "15"),
        *("--sick-latency-ms", str(SICK_S * 1000)),
    )

    for health in ("idle", "healthy", "sick"):
        wm, baseline = result["wm"][health], result["baseline"][health]
        assert_compared(wm, baseline, result["ratio"][health])
        assert wm["aws_tasks_uncovered"] == 0
        assert wm["aws_wave_p95_median_s"] is not None
    # The control run has no Azure demand: nothing is created there.
    assert result["wm"]["idle"]["azure_vms_created"] == 0
    assert result["baseline"]["idle"]["azure_vms_created"] == 0
    assert (
        result["sick_over_healthy"].keys()
        == result["healthy_over_idle"].keys()
        == {
            "wm",
            "baseline",
        }
    )
    # The second wave's AWS tasks arrive while the single loop is in an Azure pass, which
    # takes at least the sick latency: they wait for it.
    assert result["baseline"]["sick"]["aws_submit_to_create_max_s"] >= SICK_S - WAVE_S


def test_scale_grows_pools_and_workers(results_dir):
    scale_result = run(scale, results_dir, *("--pools", "3", "8", "--workers", "40"))

    assert_scale(scale_result)


def assert_scale(scale: dict[str, Any]) -> None:
    for axis, sizes in (("pools", {"3", "8"}), ("workers", {"40"})):
        assert scale["wm"][axis].keys() == scale["baseline"][axis].keys() == sizes
        for size in sizes:
            wm, baseline = scale["wm"][axis][size], scale["baseline"][axis][size]
            assert_compared(wm, baseline, scale["ratio"][axis][size])
    for size in ("3", "8"):
        wm, baseline = scale["wm"]["pools"][size], scale["baseline"]["pools"][size]
        # One task in every pool: one worker per pool, and the next pass launches nothing.
        assert wm["vms_created"] == baseline["vms_created"] == int(size)
        assert wm["launch_pass_api_calls"] == baseline["launch_pass_api_calls"] > 0
        assert wm["steady_pass_api_calls"] == baseline["steady_pass_api_calls"] == 0
    wm, baseline = scale["wm"]["workers"]["40"], scale["baseline"]["workers"]["40"]
    assert wm["scan_api_calls"] < baseline["scan_api_calls"] == 40
    assert wm["pass_api_calls"] == baseline["pass_api_calls"] == 0
    assert scale["extrapolated"] == {}
    assert wm["scan_rss_growth_mib"] is not None and baseline["scan_rss_growth_mib"] is not None


def test_registration_registers_and_reregisters_every_worker_of_the_storm_and_the_baseline(
    results_dir: Path,
):
    result = run(
        registration,
        results_dir,
        *("--workers", "20", "--baseline-workers", "4", "--concurrency", "8"),
    )

    wm, baseline = result["wm"], result["baseline"]
    assert_compared(wm, baseline, result["ratio"])
    for side, workers in ((wm, 20), (baseline, 4)):
        assert (side["workers"], side["registered"], side["failed"]) == (workers, workers, 0)
        assert side["answers_2xx"] == 2 * workers  # registerWorker and reregisterWorker each
        assert side["answers_5xx"] == side["answers_503"] == side["answers_4xx"] == 0
    assert baseline["answers_429"] == 0  # one call at a time is never shed


def test_burst_still_launches_exactly_the_demand_on_wm(
    burst_beside: Callable[[], dict[str, Any]],
):
    result = burst_beside()

    wm, baseline = result["wm"], result["baseline"]
    assert_compared(wm, baseline, result["ratio"])
    assert wm["vms_created"] == 12 and wm["tasks_uncovered"] == 0
    assert wm["peak_capacity_ratio"] == 1.0
    assert baseline["vms_created"] >= 12
    assert not math.isnan(wm["submit_to_create_max_s"])


def test_check_prints_every_goal_with_the_figure_and_commit_the_results_hold(
    results_dir: Path,
    burst_beside: Callable[[], dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
):
    burst_beside()  # the others ran before this test, or their goals show no result file
    goals = check.parse_goals((REPO / "bench" / "README.md").read_text())
    written = {path.stem: json.loads(path.read_text()) for path in results_dir.glob("*.json")}
    commit = measured_on()
    assert commit is not None
    assert {name: result["commit"] for name, result in written.items()} == dict.fromkeys(
        written, commit
    )

    code = check.main(["--results", str(results_dir)])

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["figure", "measured", "goal", "measured", "on", "from"]
    assert len(lines) == len(goals) + 2
    statuses = []
    for goal, line in zip(goals, lines[1:-1], strict=True):
        status = next(s for s in (check.MET, check.NOT_MET, check.NO_FIGURE) if line.startswith(s))
        statuses.append(status)
        assert goal.figure in line
        assert line.endswith(f"{goal.benchmark}: {goal.expression}")
        assert (commit if goal.benchmark in written else "no result file") in line
        measured = line.split(goal.figure, 1)[1].split()[0]
        assert (measured == "-") == (status == check.NO_FIGURE), line
    # The registration run wrote its result where the check reads it: its goals have figures
    # at any size (a ratio within the run, counts, a latency).
    registration_statuses = [
        s for g, s in zip(goals, statuses, strict=True) if g.benchmark == "registration"
    ]
    assert registration_statuses
    if "registration" in written:
        assert check.NO_FIGURE not in registration_statuses
    counts = [statuses.count(s) for s in (check.MET, check.NOT_MET, check.NO_FIGURE)]
    assert lines[-1] == (
        f"{counts[0]} met, {counts[1]} not met, {counts[2]} with no figure (of {len(goals)} goals)"
    )
    # The tiny runs hold no figure at the goals' sizes (1,000 pools, 100,000 workers), so the
    # check fails, as `make bench` must on a figure it lacks.
    assert counts[2] > 0 and code == 1
