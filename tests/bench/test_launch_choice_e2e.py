"""Issue 40's end-to-end benchmark (bench/launch_choice_e2e.py) runs its three arms at a tiny
size and writes a result of the agreed shape. It asserts no figure's size (those are the
benchmark's output), only what holds by construction: each arm launched for the tasks it was
given, the two arms that read no signals made no signal call, and the ratios are worker-
manager's figure over each wm arm's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import launch_choice_e2e as e2e
from wmsim.postgres import PostgresServer


@pytest.fixture(autouse=True)
def shared_postgres(pg_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # The benchmark finds its server through DATABASE_URL: the tests' own, not a second one.
    monkeypatch.setenv("DATABASE_URL", pg_server.url)


def test_three_arms_run_the_same_tasks_through_wm_processes_and_report_every_figure(
    tmp_path: Path,
):
    output = tmp_path / "launch_choice_e2e.json"
    args = ["--scenarios", "S1", "--start-min", "118", "--minutes", "6", "--scale", "0.1"]

    assert e2e.main([*args, "--output", str(output)]) == 0

    result = json.loads(output.read_text())
    s1 = result["scenarios"]["S1"]
    assert result["params"] == {"seed": 1, "speed": 60.0, "scale": 0.1, "latency_ms": 5.0}
    assert s1["window_min"] == [118.0, 6.0]
    submitted = {s1[arm]["tasks_submitted"] for arm in e2e.ARMS}
    assert len(submitted) == 1 and submitted.pop() > 0  # the same seeded tasks in every arm
    for arm in e2e.ARMS:
        figures = s1[arm]
        assert set(e2e.FIGURES) <= set(figures), arm
        assert figures["creates"] > 0, arm
        assert figures["worker_hours"] > 0, arm
        assert figures["never_registered"] == 0, arm
    for arm in ("worker-manager", "wm-weights"):
        assert s1[arm]["signal_api_calls"] == 0, arm
    assert s1["wm-cost"]["signal_api_calls"] > 0
    for arm in ("wm-weights", "wm-cost"):
        assert set(s1["ratio"][arm]) == set(e2e.FIGURES)
        ours, theirs = s1[arm]["worker_hours"], s1["worker-manager"]["worker_hours"]
        assert ours > 0 and theirs > 0
        for fig in e2e.FIGURES:
            if s1[arm][fig] and s1["worker-manager"][fig] is not None:
                assert s1["ratio"][arm][fig] == pytest.approx(
                    s1["worker-manager"][fig] / s1[arm][fig], abs=1e-3
                )
    assert set(s1["control_deviation"]) == {"wm-weights", "wm-cost"}
