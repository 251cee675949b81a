import pytest

from wm.provisioning.estimator import estimate, far_above_max, target_capacity

BASE = dict(
    pending=0,
    claimed=0,
    min_capacity=0,
    max_capacity=100,
    scaling_ratio=1.0,
    existing=0,
    requested=0,
    stopping=0,
)


@pytest.mark.parametrize(
    ("scenario", "changes", "to_add"),
    [
        ("no demand, no minimum: nothing", {}, 0),
        ("no demand, min capacity 3: launch the minimum", {"min_capacity": 3}, 3),
        ("min capacity already running", {"min_capacity": 3, "existing": 3, "claimed": 0}, 0),
        ("10 pending, nothing running", {"pending": 10}, 10),
        ("max capacity is a ceiling", {"pending": 500}, 100),
        ("max capacity counts what exists", {"pending": 500, "existing": 90, "claimed": 90}, 10),
        ("a 0.5 ratio launches half", {"pending": 10, "scaling_ratio": 0.5}, 5),
        ("a 0.5 ratio rounds up", {"pending": 5, "scaling_ratio": 0.5}, 3),
        ("idle capacity absorbs pending tasks", {"pending": 4, "existing": 4, "claimed": 0}, 0),
        ("idle absorbs part", {"pending": 10, "existing": 4, "claimed": 0}, 6),
        ("busy capacity absorbs nothing", {"pending": 4, "existing": 4, "claimed": 4}, 4),
        (
            "requested capacity covers demand (existing includes requested)",
            {"pending": 50, "existing": 50, "requested": 50},
            0,
        ),
        (
            # Requested capacity counts once as idle and once as requested (Taskcluster's
            # semantics): conservative, the rest follows once those workers claim tasks.
            "requested capacity is counted as idle and as requested",
            {"pending": 50, "existing": 20, "requested": 20},
            10,
        ),
        (
            "stopping capacity is counted against max",
            {"pending": 200, "existing": 60, "claimed": 60, "stopping": 40},
            0,
        ),
        (
            "stopping capacity is not launched for again, below max",
            {"pending": 5, "stopping": 2},
            5,
        ),
        (
            "ratio 0 launches only the minimum",
            {"pending": 100, "scaling_ratio": 0.0, "min_capacity": 2},
            2,
        ),
        ("max capacity 0 launches nothing", {"pending": 10, "max_capacity": 0}, 0),
    ],
)
def test_estimate(scenario, changes, to_add):
    assert estimate(**{**BASE, **changes}) == to_add, scenario


def test_a_second_pass_over_the_same_demand_launches_nothing():
    first = estimate(**{**BASE, "pending": 50})
    second = estimate(**{**BASE, "pending": 50, "existing": first, "requested": first})
    assert (first, second) == (50, 0)


@pytest.mark.parametrize(
    ("existing", "max_capacity", "far"),
    [
        (30, 20, True),  # above both the absolute and the relative margin
        (24, 20, False),  # within 25 % of max
        (25, 10, False),  # far in share, but too few to matter
        (26, 10, True),
        (30, 24, False),  # exactly 25 % above max is not yet far
        (31, 24, True),
        (0, 0, False),
    ],
)
def test_existing_capacity_far_above_max(existing: int, max_capacity: int, far: bool):
    assert far_above_max(existing=existing, max_capacity=max_capacity) is far


@pytest.mark.parametrize(
    ("pending", "claimed", "minimum", "maximum", "ratio", "target"),
    [
        (0, 0, 0, 10, 1.0, 0),
        (0, 0, 2, 10, 1.0, 2),
        (5, 3, 0, 10, 1.0, 8),
        (50, 3, 0, 10, 1.0, 10),
        (10, 10, 0, 100, 0.5, 10),
    ],
)
def test_target_capacity(pending, claimed, minimum, maximum, ratio, target):
    assert (
        target_capacity(
            pending=pending,
            claimed=claimed,
            min_capacity=minimum,
            max_capacity=maximum,
            scaling_ratio=ratio,
        )
        == target
    )
