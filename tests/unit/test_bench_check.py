"""bench.check: reading the goals table and holding a result's figures to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.check import (
    MET,
    NO_FIGURE,
    NOT_MET,
    Goal,
    GoalTableError,
    all_met,
    evaluate,
    parse_goals,
    report,
)

HEAD = "## Goals\n\n| a | b | c | d |\n| - | - | - | - |\n"
README = Path(__file__).resolve().parents[2] / "bench" / "README.md"

TABLE = """\
# Benchmarks

## Goals

Some words.

| figure | benchmark | value | goal | note |
| --- | --- | --- | --- | --- |
| p95 | burst | `wm.submit_to_create_p95_s` | `<= 2` | |
| CPU a worker | `scan` | `wm.10000.cpu_s / 10000` | `<= 0.0003` | |
| flat | scale | `wm.pools.1000.n / wm.pools.10.n` | `<= 1` | O(1) |
| fewer calls | scan | `ratio.10000.api_calls` | `>= 500` | |
| memory | scale | `wm.workers.100000.rss` | `< 250` | |

Not in the table: the rest.

## Benchmarks

| figure | benchmark | value | goal |
| --- | --- | --- | --- |
| not a goal | x | `y` | `<= 1` |
"""


def test_the_goals_table_is_read_row_by_row_and_no_further():
    goals = parse_goals(TABLE)

    assert goals == [
        Goal("p95", "burst", ("wm", "submit_to_create_p95_s"), None, "<=", 2.0),
        Goal("CPU a worker", "scan", ("wm", "10000", "cpu_s"), 10000.0, "<=", 0.0003),
        Goal("flat", "scale", ("wm", "pools", "1000", "n"), ("wm", "pools", "10", "n"), "<=", 1),
        Goal("fewer calls", "scan", ("ratio", "10000", "api_calls"), None, ">=", 500.0),
        Goal("memory", "scale", ("wm", "workers", "100000", "rss"), None, "<", 250.0),
    ]
    assert goals[1].expression == "wm.10000.cpu_s / 10000"
    assert goals[2].expression == "wm.pools.1000.n / wm.pools.10.n"


@pytest.mark.parametrize(
    "markdown",
    [
        "# Benchmarks\n\nno goals here\n",
        "## Goals\n\nno table\n\n## Next\n",
        "## Goals\n\n| figure | benchmark | value | goal |\n| --- | --- | --- | --- |\n",
        HEAD + "| p95 | burst | `wm.p95` | `about 2` |\n",
        HEAD + "| p95 | burst | `wm..p95` | `<= 2` |\n",
        HEAD + "| p95 | burst | `wm.p95` |\n",
    ],
    ids=["no heading", "no table", "no rows", "bad goal", "bad path", "short row"],
)
def test_a_goals_table_that_cannot_be_read_is_an_error(markdown: str):
    with pytest.raises(GoalTableError):
        parse_goals(markdown)


def test_the_readme_holds_issue_28s_goals():
    goals = parse_goals(README.read_text())

    assert {goal.benchmark for goal in goals} == {
        "burst",
        "scan",
        "scale",
        "azure",
        "isolation",
        "registration",
        "launch_choice",
        "launch_choice_e2e",
    }
    assert len(goals) == len({goal.figure for goal in goals})


P95 = Goal("p95", "burst", ("wm", "p95"), None, "<=", 2.0)
PER_WORKER = Goal("a worker", "scan", ("wm", "10000", "cpu_s"), 10000.0, "<=", 0.0003)
FLAT = Goal("flat", "scale", ("wm", "1000", "n"), ("wm", "10", "n"), "<=", 1.0)
FEWER = Goal("fewer", "scan", ("ratio", "calls"), None, ">=", 500.0)
UNDER = Goal("under", "scale", ("wm", "rss"), None, "<", 250.0)


@pytest.mark.parametrize(
    ("goal", "result", "status", "value"),
    [
        (P95, {"wm": {"p95": 1.5}}, MET, 1.5),
        (P95, {"wm": {"p95": 2}}, MET, 2.0),
        (P95, {"wm": {"p95": 2.01}}, NOT_MET, 2.01),
        (P95, {"wm": {"p95": None}}, NO_FIGURE, None),  # a percentile on an uncovered task
        (P95, {"wm": {}}, NO_FIGURE, None),
        (P95, {"wm": {"p95": True}}, NO_FIGURE, None),
        (P95, None, NO_FIGURE, None),  # no result file
        (PER_WORKER, {"wm": {"10000": {"cpu_s": 2.5}}}, MET, 0.00025),
        (PER_WORKER, {"wm": {"10000": {"cpu_s": 3.75}}}, NOT_MET, 0.000375),
        (PER_WORKER, {"wm": {"1000": {"cpu_s": 0.1}}}, NO_FIGURE, None),  # size not run
        (FLAT, {"wm": {"1000": {"n": 39}, "10": {"n": 39}}}, MET, 1.0),
        (FLAT, {"wm": {"1000": {"n": 1033}, "10": {"n": 43}}}, NOT_MET, 1033 / 43),
        (FLAT, {"wm": {"1000": {"n": 39}, "10": {"n": 0}}}, NO_FIGURE, None),
        (FLAT, {"wm": {"1000": {"n": 39}}}, NO_FIGURE, None),
        (FEWER, {"ratio": {"calls": 555.6}}, MET, 555.6),
        (FEWER, {"ratio": {"calls": 499}}, NOT_MET, 499.0),
        (UNDER, {"wm": {"rss": 249.9}}, MET, 249.9),
        (UNDER, {"wm": {"rss": 250}}, NOT_MET, 250.0),
    ],
)
def test_a_goal_is_met_not_met_or_has_no_figure(
    goal: Goal, result: dict[str, Any] | None, status: str, value: float | None
):
    outcome = evaluate(goal, result)

    assert outcome.status == status
    assert outcome.value == (None if value is None else pytest.approx(value))
    assert outcome.file_found == (result is not None)


def test_the_report_shows_each_goal_with_its_value_and_commit():
    outcomes = [
        evaluate(P95, {"wm": {"p95": 1.5}, "commit": "abc1234"}),
        evaluate(FEWER, {"ratio": {"calls": 12}}),
        evaluate(UNDER, None),
    ]

    lines = report(outcomes).splitlines()

    assert lines[1].split()[:5] == ["met", "p95", "1.5", "<=", "2"]
    assert "abc1234" in lines[1] and "burst: wm.p95" in lines[1]
    assert lines[2].startswith("NOT MET") and "commit not recorded" in lines[2]
    assert lines[3].startswith("no figure") and "no result file" in lines[3]
    assert lines[4] == "1 met, 1 not met, 1 with no figure (of 3 goals)"
    assert not all_met(outcomes)
    assert all_met(outcomes[:1])
