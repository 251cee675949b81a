"""bench.launch_choice runs a short scenario end to end and writes figures of the agreed shape
(their values are the benchmark's output, not a test's)."""

from __future__ import annotations

import json
from pathlib import Path

from bench import launch_arms, launch_choice
from bench.check import README, evaluate, parse_goals, read_results
from bench.launch_sim import Sim


def test_a_short_run_writes_every_arms_figures_and_their_ratios(tmp_path: Path):
    output = tmp_path / "launch_choice.json"

    assert (
        launch_choice.main(
            ["--scenarios", "S1", "--hours", "3", "--seeds", "1", "2", "--output", str(output)]
        )
        == 0
    )

    result = json.loads(output.read_text())
    s1 = result["scenarios"]["S1"]
    for arm in launch_choice.ARMS:
        assert set(launch_choice.FIGURES) <= set(s1[arm])
        assert s1[arm]["creates"] > 0
        assert s1[arm]["completed_task_hours"] > 0
        assert s1[arm]["tasks_timed_after_dry"] > 0  # the 2-hour dry spell is inside 3 hours
    assert set(s1["ratio"]) == {"wm-weights", "wm-cost", "oracle"}
    assert set(s1["ratio"]["wm-cost"]) >= set(launch_choice.FIGURES)
    assert set(s1["control_deviation"]) == {"wm-weights", "wm-cost", "oracle"}
    # S1's dry spells are all scripted: the same tasks' waits with none are the floor
    assert s1["undisturbed"]["tasks_timed_after_dry"] > 0
    assert s1["best_possible_ratio"]["time_to_capacity_p95_s"] is not None
    assert set(s1["per_seed"]) == {"1", "2"}
    assert set(s1["ratio_range"]["wm-cost"]) == set(launch_choice.FIGURES)
    assert s1["worker-manager"]["signal_api_calls_per_hour"] == 0
    assert s1["wm-cost"]["signal_api_calls_per_hour"] > 0


def test_the_same_seed_gives_the_same_figures():
    first = launch_choice.run_arm("S1", "worker-manager", 5, 1.0)
    again = launch_choice.run_arm("S1", "worker-manager", 5, 1.0)

    assert first == again


def test_the_goals_read_the_launch_choice_result_file(tmp_path: Path):
    goals = [g for g in parse_goals(README.read_text()) if g.benchmark == "launch_choice"]
    output = tmp_path / "launch_choice.json"
    launch_choice.main(["--scenarios", *launch_choice.SCENARIOS, "--hours", "0.5",
                        "--seeds", "1", "--output", str(output)])  # fmt: skip
    results = read_results(tmp_path, ["launch_choice"])

    assert goals
    for goal in goals:
        # every goal finds its path (a figure may be null on so short a run, never misnamed)
        outcome = evaluate(goal, results["launch_choice"])
        assert outcome.file_found
        node = results["launch_choice"]
        for key in goal.path:
            assert key in node, f"{goal.expression}: no {key!r}"
            node = node[key]


def test_the_cost_arm_scores_with_the_pools_median_task_and_worker_lifetime(monkeypatch):
    seen = []
    score = launch_arms.cost_choice.score

    def spy(views, facts, now, beta=3.0):  # type: ignore[no-untyped-def]
        seen.append(facts)
        return score(views, facts, now, beta)

    monkeypatch.setattr(launch_arms.cost_choice, "score", spy)
    launch_choice.run_arm("S3", "wm-cost", 1, 3.0)

    assert seen[-1].median_task_s is not None and seen[-1].median_task_s > 0
    assert seen[-1].mean_lifetime_s is not None and seen[-1].mean_lifetime_s > 0


def test_the_oracle_never_meets_a_refusal_and_shuns_the_hazardous_zone():
    # S3: us-east-1a is 15 % cheaper at 5x the hazard, dearer per useful hour with 45 min tasks
    sim = Sim("S3", 1, 3.0, launch_arms.OracleArm(1))
    sim.run()

    assert sim.counts.creates > 0
    assert sim.counts.capacity_errors == 0
    used = {entry.offering.key for entry in sim.market.ledger.entries.values()}
    assert "aws/us-east-1/us-east-1a/m5.2xlarge/spot" not in used
    assert "aws/us-east-1/us-east-1b/m5.2xlarge/spot" in used


def test_the_undisturbed_run_times_the_same_windows_with_nothing_dry():
    disturbed = Sim("S1", 1, 3.0, launch_arms.WorkerManagerArm(1))
    disturbed.run()
    undisturbed = Sim("S1", 1, 3.0, launch_arms.WorkerManagerArm(1), undisturbed=True)
    undisturbed.run()

    assert disturbed.market.dry_starts
    assert undisturbed.market.dry_starts == []
    assert undisturbed.counts.waits_after_dry  # timed from when the spell would have come
    assert undisturbed.counts.capacity_errors == 0


def test_the_control_counts_pre_emptions_by_their_expectation_not_the_draws():
    base = dict.fromkeys(launch_choice.FIGURES, 1.0)
    drawn_apart = {**base, "preemptions_per_1000_worker_hours": 1.25}
    expected_apart = {**base, "preemption_exposure_per_1000_worker_hours": 1.03}
    result = {"worker-manager": base, "wm-weights": drawn_apart, "wm-cost": expected_apart,
              "oracle": base}  # fmt: skip

    deviation = launch_choice.control_deviation(result)

    assert deviation["wm-weights"] == 0.0
    assert deviation["wm-cost"] == 0.03
