"""bench.ci: holding each figure of a run to its bound, and the words of a miss."""

from __future__ import annotations

from pathlib import Path

from bench.ci import BOUNDS, Bound, Measured, bound_cell, judge, misses, verdict_table

README = Path(__file__).resolve().parents[2] / "bench" / "README.md"
CI_HEADING = "## CI figures"

TABLE = {
    "scan_api_calls": Bound("==", None, "expected_wm_calls of the fleet"),
    "scan_db_statements": Bound("<=", 46),
    "steady_pass_db_statements_100_pools": Bound("==", None, "steady_pass_db_statements_10_pools"),
    "burst_peak_capacity_over_demand": Bound("<=", 1),
}


def test_figures_within_their_bounds_miss_nothing():
    figures = [
        Measured("scan_api_calls", 18, 18),
        Measured("scan_db_statements", 46),
        Measured("steady_pass_db_statements_100_pools", 30, 30),
        Measured("burst_peak_capacity_over_demand", 1.0),
    ]

    verdicts = judge(figures, TABLE)

    assert [v.met for v in verdicts] == [True] * 4
    assert misses(verdicts) == []


def test_a_scan_with_more_calls_than_expected_is_named_with_its_value_and_bound():
    figures = [
        Measured("scan_api_calls", 21, 18),
        Measured("scan_db_statements", 47),
        Measured("steady_pass_db_statements_100_pools", 31, 30),
        Measured("burst_peak_capacity_over_demand", 1.2),
    ]

    lines = misses(judge(figures, TABLE))

    assert lines == [
        "bench.ci: scan_api_calls = 21, bound == 18 (expected_wm_calls of the fleet): "
        "missed its bound",
        "bench.ci: scan_db_statements = 47, bound <= 46: missed its bound",
        "bench.ci: steady_pass_db_statements_100_pools = 31, bound == 30 "
        "(steady_pass_db_statements_10_pools): missed its bound",
        "bench.ci: burst_peak_capacity_over_demand = 1.2, bound <= 1: missed its bound",
    ]


def test_fewer_than_the_bound_meets_a_ceiling_but_not_an_equality():
    figures = [
        Measured("scan_api_calls", 17, 18),
        Measured("scan_db_statements", 40),
        Measured("steady_pass_db_statements_100_pools", 30, 30),
        Measured("burst_peak_capacity_over_demand", 0.5),
    ]

    verdicts = judge(figures, TABLE)

    assert [(v.name, v.met) for v in verdicts] == [
        ("scan_api_calls", False),
        ("scan_db_statements", True),
        ("steady_pass_db_statements_100_pools", True),
        ("burst_peak_capacity_over_demand", True),
    ]


def test_a_figure_not_measured_or_without_a_bound_or_a_value_is_a_miss():
    figures = [
        Measured("scan_api_calls", 18, None),  # no same-run baseline to hold it to
        Measured("scan_db_statements", None),
        Measured("burst_peak_capacity_over_demand", 1.0),
        Measured("scan_rows_stopped", 30, 30),  # not in the table
    ]

    lines = misses(judge(figures, TABLE))

    assert lines == [
        "bench.ci: scan_api_calls = 18, bound == none (expected_wm_calls of the fleet): "
        "no value (18) or no bound (none)",
        "bench.ci: scan_db_statements = none, bound <= 46: no value (none) or no bound (46)",
        "bench.ci: steady_pass_db_statements_100_pools = none, bound == none "
        "(steady_pass_db_statements_10_pools): not measured",
        "bench.ci: scan_rows_stopped = 30, no bound: not in BOUNDS",
    ]


def test_the_table_shows_every_figure_with_its_bound_and_whether_met():
    verdicts = judge(
        [
            Measured("scan_api_calls", 21, 18),
            Measured("scan_db_statements", 46),
            Measured("steady_pass_db_statements_100_pools", 30, 30),
            Measured("burst_peak_capacity_over_demand", 1.0),
        ],
        TABLE,
    )

    lines = verdict_table(verdicts).splitlines()

    assert lines[0].split() == ["figure", "value", "bound", "met"]
    assert lines[1].split() == [
        "scan_api_calls",
        "21",
        "==",
        "18",
        "(expected_wm_calls",
        "of",
        "the",
        "fleet)",
        "NO",
    ]
    assert lines[2].split() == ["scan_db_statements", "46", "<=", "46", "yes"]


def test_every_bound_of_the_real_table_is_a_known_relation_with_a_limit_or_a_baseline():
    for name, bound in BOUNDS.items():
        assert bound.relation in ("<=", "=="), name
        assert (bound.limit is None) == bool(bound.against), name


def test_the_readme_table_of_ci_figures_says_what_the_bounds_table_says():
    lines = README.read_text().splitlines()
    start = lines.index(CI_HEADING)
    rows = {}
    for line in lines[start + 1 :]:
        if line.startswith("## "):
            break
        cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] not in ("figure", "---"):
            rows[cells[0]] = cells[1]

    assert rows == {name: bound_cell(bound) for name, bound in BOUNDS.items()}
